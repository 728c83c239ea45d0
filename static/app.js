// flashsale browser script.
//
// The pages are rendered identically for every visitor (a CDN may cache them), so everything that
// depends on the shopper or on the current time happens here: the clock synced to the server,
// the countdown, the buy buttons, the stock badges, the captcha, the purchase and the order status.
// Server data only ever reaches the page through textContent, never innerHTML, and nothing here
// is inline, so a strict Content-Security-Policy (script-src 'self') works.
(function () {
  'use strict';

  // ---------------------------------------------------------------- DOM helpers

  function byTestId(id, root) {
    return (root || document).querySelector('[data-testid="' + id + '"]');
  }

  function allByTestId(id, root) {
    return Array.prototype.slice.call((root || document).querySelectorAll('[data-testid="' + id + '"]'));
  }

  function setText(el, text) {
    if (el && el.textContent !== text) {
      el.textContent = text;
    }
  }

  function show(el, visible) {
    if (el) {
      el.hidden = !visible;
    }
  }

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        node.setAttribute(k, attrs[k]);
      });
    }
    if (text !== undefined && text !== null) {
      node.textContent = String(text);
    }
    return node;
  }

  function pad2(n) {
    return (n < 10 ? '0' : '') + n;
  }

  function enc(id) {
    return encodeURIComponent(String(id));
  }

  // messenger writes a sentence into a page's role="status" message area. link, if given
  // ({text, href, testid, after}), follows the sentence as a real link.
  function messenger(area) {
    return function say(text, kind, link) {
      if (!area) {
        return;
      }
      area.textContent = text || '';
      if (link && link.href) {
        area.appendChild(el('a', { href: link.href, 'data-testid': link.testid || 'message-link' }, link.text));
        if (link.after) {
          area.appendChild(document.createTextNode(link.after));
        }
      }
      area.setAttribute('data-kind', kind || 'info');
    };
  }

  // ---------------------------------------------------------------- storage and cookies

  var store = {
    get: function (key) {
      try {
        return window.localStorage.getItem(key);
      } catch (e) {
        return null;
      }
    },
    set: function (key, value) {
      try {
        window.localStorage.setItem(key, value);
      } catch (e) {
        // Storage may be disabled (private mode); the page still works without it.
      }
    },
    remove: function (key) {
      try {
        window.localStorage.removeItem(key);
      } catch (e) {
        // See set.
      }
    },
    removePrefix: function (prefix) {
      try {
        var doomed = [];
        for (var i = 0; i < window.localStorage.length; i++) {
          var k = window.localStorage.key(i);
          if (k && k.indexOf(prefix) === 0) {
            doomed.push(k);
          }
        }
        doomed.forEach(function (k) {
          window.localStorage.removeItem(k);
        });
      } catch (e) {
        // See set.
      }
    }
  };

  function getCookie(name) {
    var parts = document.cookie ? document.cookie.split(';') : [];
    for (var i = 0; i < parts.length; i++) {
      var p = parts[i];
      var eq = p.indexOf('=');
      if (eq < 0) {
        continue;
      }
      if (p.slice(0, eq).trim() === name) {
        return p.slice(eq + 1).trim();
      }
    }
    return null;
  }

  // ---------------------------------------------------------------- time

  // parseTime reads an RFC 3339 time into epoch milliseconds (NaN when it is not one).
  // Fractions finer than a millisecond are cut, since not every engine parses them.
  function parseTime(s) {
    if (typeof s !== 'string' || s === '') {
      return NaN;
    }
    return Date.parse(s.replace(/(\.\d{3})\d+/, '$1').replace(/\.(\d{1,2})(?=[Z+-])/i, function (m, d) {
      return '.' + (d + '00').slice(0, 3);
    }));
  }

  // parseRetryAfter reads a Retry-After header as whole seconds (null when absent).
  function parseRetryAfter(v) {
    if (v === null || v === undefined || v === '') {
      return null;
    }
    if (/^\s*\d+\s*$/.test(v)) {
      return parseInt(v, 10);
    }
    var at = Date.parse(v);
    if (isNaN(at)) {
      return null;
    }
    return Math.max(0, Math.ceil((at - Date.now()) / 1000));
  }

  // formatDuration renders a positive span as "1:59", "1:02:03" or "2 d 3:04:05", rounding up
  // so that "0:00" never shows while the moment has not come.
  function formatDuration(ms) {
    var total = Math.max(0, Math.ceil(ms / 1000));
    var d = Math.floor(total / 86400);
    var h = Math.floor((total % 86400) / 3600);
    var m = Math.floor((total % 3600) / 60);
    var s = total % 60;
    if (d > 0) {
      return d + ' d ' + h + ':' + pad2(m) + ':' + pad2(s);
    }
    if (h > 0) {
      return h + ':' + pad2(m) + ':' + pad2(s);
    }
    return m + ':' + pad2(s);
  }

  // formatClock renders epoch milliseconds as the local "HH:MM:SS".
  function formatClock(ms) {
    var d = new Date(ms);
    return pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
  }

  // formatDeadline renders a deadline as the local "HH:MM:SS" when it is less than 12 hours
  // away, else with its date.
  function formatDeadline(ms, now) {
    return Math.abs(ms - now) < 12 * 3600000 ? formatClock(ms) : formatDate(ms);
  }

  var dateFormat = (function () {
    try {
      return new Intl.DateTimeFormat(undefined, {
        year: 'numeric', month: 'short', day: 'numeric',
        hour: '2-digit', minute: '2-digit', timeZoneName: 'short'
      });
    } catch (e) {
      return null;
    }
  }());

  function formatDate(ms) {
    var d = new Date(ms);
    return dateFormat ? dateFormat.format(d) : d.toString();
  }

  // ---------------------------------------------------------------- money

  // Prices come in minor units (cents, fen) with an ISO 4217 currency. The known currencies get
  // their symbol, like the sale page's "¥12.34"; any other is written "12.34 XYZ".
  var CURRENCIES = {
    CNY: { symbol: '\u00a5', digits: 2 },
    JPY: { symbol: '\u00a5', digits: 0 },
    USD: { symbol: '$', digits: 2 },
    EUR: { symbol: '\u20ac', digits: 2 },
    GBP: { symbol: '\u00a3', digits: 2 },
    HKD: { symbol: 'HK$', digits: 2 },
    KRW: { symbol: '\u20a9', digits: 0 }
  };

  function formatMoney(minor, currency) {
    var n = Number(minor);
    if (minor === null || minor === undefined || minor === '' || !isFinite(n)) {
      return '';
    }
    var code = typeof currency === 'string' && currency ? currency.toUpperCase() : 'CNY';
    var c = Object.prototype.hasOwnProperty.call(CURRENCIES, code) ? CURRENCIES[code] : null;
    var digits = c ? c.digits : 2;
    var neg = n < 0;
    n = Math.round(Math.abs(n));
    var scale = Math.pow(10, digits);
    var text = String(Math.floor(n / scale));
    if (digits > 0) {
      var frac = String(n % scale);
      while (frac.length < digits) {
        frac = '0' + frac;
      }
      text += '.' + frac;
    }
    return (neg ? '-' : '') + (c ? c.symbol + text : text + ' ' + code);
  }

  // localizeTimes rewrites every <time datetime> in the viewer's zone, keeping UTC as a tooltip.
  function localizeTimes(root) {
    Array.prototype.forEach.call((root || document).querySelectorAll('time[datetime]'), function (t) {
      var ms = parseTime(t.getAttribute('datetime'));
      if (isNaN(ms)) {
        return;
      }
      if (!t.title) {
        t.title = t.textContent;
      }
      setText(t, formatDate(ms));
    });
  }

  // timeElement builds a localised <time> for a time the API sent.
  function timeElement(rfc3339) {
    var t = el('time', { datetime: String(rfc3339 || '') });
    var ms = parseTime(rfc3339);
    t.textContent = isNaN(ms) ? String(rfc3339 || '') : formatDate(ms);
    return t;
  }

  // saleState says where a sale stands at a given server time.
  function saleState(now, startsAt, endsAt) {
    if (now < startsAt) {
      return 'upcoming';
    }
    if (now >= endsAt) {
      return 'ended';
    }
    return 'live';
  }

  // ---------------------------------------------------------------- clock synced to the server

  // The countdown and the buy buttons follow the server's clock, never the bare browser clock:
  // offset = serverNow - (t0 + t1) / 2 from the quickest of three round trips, redone every minute.
  var clock = {
    offset: 0,
    synced: false,
    rtt: null,
    started: false,
    syncing: null,
    listeners: []
  };

  function serverNow() {
    return Date.now() + clock.offset;
  }

  function onClock(fn) {
    clock.listeners.push(fn);
  }

  async function clockSample() {
    var t0 = Date.now();
    var res = await fetch('/api/time', {
      cache: 'no-store',
      credentials: 'same-origin',
      headers: { Accept: 'application/json' }
    });
    var t1 = Date.now();
    if (!res.ok) {
      throw new Error('GET /api/time: HTTP ' + res.status);
    }
    var body = await res.json();
    var server = parseTime(body && body.now);
    if (isNaN(server)) {
      throw new Error('GET /api/time: no time in the answer');
    }
    return { rtt: t1 - t0, offset: server - (t0 + t1) / 2 };
  }

  function syncClock() {
    if (clock.syncing) {
      return clock.syncing;
    }
    clock.syncing = (async function () {
      var best = null;
      for (var i = 0; i < 3; i++) {
        try {
          var s = await clockSample();
          if (best === null || s.rtt < best.rtt) {
            best = s;
          }
        } catch (e) {
          // One failed sample is not fatal; the others may do.
        }
      }
      clock.syncing = null;
      if (best === null) {
        return false;
      }
      clock.offset = best.offset;
      clock.rtt = best.rtt;
      clock.synced = true;
      clock.listeners.forEach(function (fn) {
        fn();
      });
      return true;
    }());
    return clock.syncing;
  }

  function startClock() {
    if (clock.started) {
      return;
    }
    clock.started = true;
    var loop = async function () {
      var ok = await syncClock();
      // Until the first sync succeeds, retry soon; afterwards, once a minute.
      window.setTimeout(loop, ok || clock.synced ? 60000 : 3000);
    };
    loop();
  }

  // ---------------------------------------------------------------- API

  // api calls the JSON API. It never throws: a network failure comes back as status 0.
  // Every POST carries the CSRF double-submit header and a JSON body.
  async function api(method, path, body, extraHeaders, cacheMode) {
    var headers = { Accept: 'application/json' };
    var init = { method: method, headers: headers, credentials: 'same-origin' };
    if (method !== 'GET') {
      headers['Content-Type'] = 'application/json';
      headers['X-CSRF-Token'] = csrfCookie() || '';
      init.body = JSON.stringify(body === undefined ? {} : body);
    }
    if (extraHeaders) {
      Object.keys(extraHeaders).forEach(function (k) {
        headers[k] = extraHeaders[k];
      });
    }
    if (cacheMode) {
      init.cache = cacheMode;
    }
    var res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      return { ok: false, status: 0, network: true, code: 'NETWORK', message: '', data: null, retryAfter: null };
    }
    var data = null;
    if (res.status !== 204) {
      var text = '';
      try {
        text = await res.text();
      } catch (e) {
        text = '';
      }
      if (text) {
        try {
          data = JSON.parse(text);
        } catch (e) {
          data = null;
        }
      }
    }
    var out = {
      ok: res.ok,
      status: res.status,
      network: false,
      code: null,
      message: '',
      data: data,
      retryAfter: parseRetryAfter(res.headers.get('Retry-After'))
    };
    if (!res.ok) {
      out.code = data && typeof data.error === 'string' ? data.error : 'HTTP_' + res.status;
      out.message = data && typeof data.message === 'string' ? data.message : '';
    }
    return out;
  }

  // sentence turns a server message ("the order is PAID and cannot be cancelled") into one.
  function sentence(text) {
    var t = String(text || '').trim();
    if (!t) {
      return '';
    }
    t = t.charAt(0).toUpperCase() + t.slice(1);
    return /[.!?]$/.test(t) ? t : t + '.';
  }

  // errorText says in words what went wrong, by the contract's error code.
  function errorText(r) {
    if (r.network) {
      return 'Network problem: the shop could not be reached. Check your connection and try again.';
    }
    switch (r.code) {
      case 'SOLD_OUT':
        return 'Sold out: every unit has been taken.';
      case 'ALREADY_PURCHASED':
        return 'You already hold an order in this sale (one per shopper).';
      case 'NOT_STARTED':
        return 'The sale has not started yet.';
      case 'SALE_ENDED':
        return 'The sale has ended.';
      case 'RATE_LIMITED':
        return 'Too many attempts; try again in ' + (r.retryAfter === null ? 1 : r.retryAfter) + ' s';
      case 'CAPTCHA_FAILED':
        return 'The captcha answer was wrong or expired; a new one is shown.';
      case 'INVALID_PURCHASE_TOKEN':
        return 'Your purchase pass was refused (used or expired); solve the new captcha and try again.';
      case 'UNAUTHENTICATED':
        return 'Please log in first.';
      case 'CSRF':
        return 'Your session could not be verified; please log in again.';
      case 'UNAVAILABLE':
        return 'The shop is busy; nothing was reserved, try again.';
      case 'EXPIRED':
        return 'Too late: the payment window closed and the order expired.';
      case 'NOT_PAYABLE':
        return 'This order cannot be paid: it is still being confirmed, or it was cancelled.';
      case 'NOT_CANCELLABLE':
        return r.message ? sentence(r.message) : 'This order can no longer be cancelled.';
      default:
        return r.message || 'Something went wrong (HTTP ' + r.status + ').';
    }
  }

  // ---------------------------------------------------------------- polling

  // makePoller runs fn every ms milliseconds, one call at a time, pausing while the tab is
  // hidden. fn returning false stops it.
  function makePoller(fn, ms) {
    var gen = 0;
    var timer = null;
    var running = false;
    var waitingVisible = false;

    async function tick(g) {
      timer = null;
      if (g !== gen) {
        return;
      }
      if (document.hidden) {
        waitingVisible = true;
        return;
      }
      var again = true;
      try {
        again = (await fn()) !== false;
      } catch (e) {
        again = true;
      }
      if (g !== gen) {
        return;
      }
      if (again) {
        timer = window.setTimeout(function () {
          tick(g);
        }, ms);
      } else {
        running = false;
      }
    }

    document.addEventListener('visibilitychange', function () {
      if (!document.hidden && running && waitingVisible) {
        waitingVisible = false;
        tick(gen);
      }
    });

    var poller = {
      start: function () {
        if (running) {
          return;
        }
        running = true;
        waitingVisible = false;
        gen++;
        tick(gen);
      },
      stop: function () {
        running = false;
        waitingVisible = false;
        gen++;
        if (timer !== null) {
          window.clearTimeout(timer);
          timer = null;
        }
      },
      restart: function () {
        poller.stop();
        poller.start();
      },
      isRunning: function () {
        return running;
      }
    };
    return poller;
  }

  // ---------------------------------------------------------------- session

  // The session cookie is HttpOnly; the readable fs_csrf cookie tells that one exists (named
  // __Host-fs_csrf in production). Who is signed in (id and role, from the login's answer) is
  // kept for display only.
  function csrfCookie() {
    return getCookie('__Host-fs_csrf') || getCookie('fs_csrf');
  }

  function loggedIn() {
    var v = csrfCookie();
    return v !== null && v !== '';
  }

  function dropCsrfCookie() {
    document.cookie = 'fs_csrf=; Max-Age=0; Path=/; SameSite=Lax';
    document.cookie = '__Host-fs_csrf=; Max-Age=0; Path=/; Secure; SameSite=Lax';
  }

  function currentUser() {
    if (!loggedIn()) {
      return null;
    }
    try {
      var u = JSON.parse(store.get('fs_user') || 'null');
      return u && typeof u === 'object' ? u : {};
    } catch (e) {
      return {};
    }
  }

  function tokenClaims(token) {
    try {
      var part = String(token).split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
      while (part.length % 4) {
        part += '=';
      }
      return JSON.parse(window.atob(part)) || {};
    } catch (e) {
      return {};
    }
  }

  var sessionListeners = [];

  function sessionChanged() {
    sessionListeners.forEach(function (fn) {
      fn();
    });
  }

  // forgetSession drops what this browser knows about the signed-in user.
  function forgetSession() {
    store.remove('fs_user');
    store.removePrefix('fs_order_');
    dropCsrfCookie();
  }

  // sessionExpired is called when the server says the session is gone (401 or CSRF refusal).
  function sessionExpired() {
    store.remove('fs_user');
    dropCsrfCookie();
    sessionChanged();
  }

  // learnUser asks the server who is signed in when the browser has the session cookie but
  // not the id and role (a login made elsewhere, or cleared storage). Best effort only.
  async function learnUser() {
    if (!loggedIn() || store.get('fs_user')) {
      return;
    }
    var r = await api('GET', '/api/auth/me', undefined, undefined, 'no-store');
    if (r.ok && r.data) {
      store.set('fs_user', JSON.stringify({
        id: r.data.userId !== undefined && r.data.userId !== null ? String(r.data.userId) : '',
        role: typeof r.data.role === 'string' ? r.data.role : ''
      }));
      sessionChanged();
    } else if (r.status === 401) {
      sessionExpired();
    }
  }

  // initSession wires the login/register form and the "signed in as" line of a session area.
  function initSession(area, say) {
    if (!area) {
      return;
    }
    var form = byTestId('login-form', area);
    var userLine = byTestId('session-user', area);
    var roleEl = byTestId('session-role', area);
    var idEl = byTestId('session-id', area);
    var logout = byTestId('logout-button', area);
    var regBox = byTestId('register-captcha', area);
    var regImage = byTestId('register-captcha-image', area);
    var regAnswer = byTestId('register-captcha-answer', area);
    var regRefresh = byTestId('register-captcha-refresh', area);
    var regButton = byTestId('register-button', area);
    var note = byTestId('login-note', area);
    var captchaId = '';
    // Errors of the form also show in the form itself: on a phone the page's message area is
    // below the items, out of sight.
    var pageSay = say;
    say = function (text, kind) {
      pageSay(text, kind);
      if (note) {
        setText(note, kind === 'error' ? text : '');
        show(note, kind === 'error' && !!text);
      }
    };
    var lastAction = 'login';
    var busy = false;

    // loadCaptcha shows a fresh registration challenge (each one takes a single answer).
    async function loadCaptcha() {
      captchaId = '';
      if (regAnswer) {
        regAnswer.value = '';
      }
      var r = await api('POST', '/api/auth/captcha', {}, undefined, 'no-store');
      if (!r.ok || !r.data || typeof r.data.captchaId !== 'string') {
        say(errorText(r), 'error');
        return false;
      }
      captchaId = r.data.captchaId;
      regImage.src = typeof r.data.image === 'string' ? r.data.image : '';
      show(regBox, true);
      return true;
    }

    if (regRefresh) {
      regRefresh.addEventListener('click', function () {
        loadCaptcha().then(function (ok) {
          if (ok) {
            regAnswer.focus();
          }
        });
      });
    }
    // Enter while the registration captcha is shown registers (the default button logs in).
    if (form && regBox) {
      form.addEventListener('keydown', function (ev) {
        if (ev.key !== 'Enter' || regBox.hidden || ev.target.tagName !== 'INPUT') {
          return;
        }
        ev.preventDefault();
        lastAction = 'register';
        if (form.requestSubmit) {
          form.requestSubmit(regButton);
        } else {
          regButton.click();
        }
      });
    }

    function render() {
      var u = currentUser();
      show(form, u === null);
      show(userLine, u !== null);
      if (u !== null) {
        setText(roleEl, u.role ? String(u.role) : 'user');
        setText(idEl, u.id ? '#' + u.id : '');
      }
    }

    if (form) {
      Array.prototype.forEach.call(form.querySelectorAll('button[type="submit"]'), function (b) {
        b.addEventListener('click', function () {
          lastAction = b.value || 'login';
        });
      });
      form.addEventListener('submit', async function (ev) {
        ev.preventDefault();
        if (busy) {
          return;
        }
        var action = ev.submitter && ev.submitter.value ? ev.submitter.value : lastAction;
        if (action !== 'register') {
          action = 'login';
        }
        var username = form.elements.username.value.trim();
        var password = form.elements.password.value;
        if (!username || !password) {
          say('Type a username and a password.', 'error');
          return;
        }
        var body = { username: username, password: password };
        if (action === 'register') {
          // Registration takes a captcha: show one first, then send its answer.
          if (!captchaId) {
            busy = true;
            var shown = await loadCaptcha();
            busy = false;
            if (shown) {
              say('Type what the picture shows, then press Register.', 'info');
              regAnswer.focus();
            }
            return;
          }
          var answer = regAnswer.value.trim();
          if (!answer) {
            say('Type what the picture shows, then press Register.', 'error');
            regAnswer.focus();
            return;
          }
          body.captchaId = captchaId;
          body.answer = answer;
        }
        busy = true;
        Array.prototype.forEach.call(form.querySelectorAll('button'), function (b) {
          b.disabled = true;
        });
        say(action === 'register' ? 'Creating your account…' : 'Logging in…', 'info');
        var r = await api('POST', '/api/auth/' + action, body);
        busy = false;
        Array.prototype.forEach.call(form.querySelectorAll('button'), function (b) {
          b.disabled = false;
        });
        if (!r.ok || !r.data) {
          if (action === 'register' && !r.network) {
            // The challenge was used up (one answer each): show a fresh one.
            await loadCaptcha();
          }
          var text = r.network || r.code === 'RATE_LIMITED' ? errorText(r) : r.message ? sentence(r.message) : errorText(r);
          if (r.code === 'CAPTCHA_FAILED') {
            text = 'The captcha answer was wrong or expired; try the new picture.';
          } else if (r.code === 'UNAVAILABLE') {
            text = 'The shop is busy; try again in a moment.';
          }
          say(text, 'error');
          return;
        }
        var claims = tokenClaims(r.data.token);
        var role = typeof r.data.role === 'string' ? r.data.role : String(claims.role || '');
        var uid = r.data.userId !== undefined && r.data.userId !== null ? String(r.data.userId) : claims.sub ? String(claims.sub) : '';
        show(note, false);
        store.set('fs_user', JSON.stringify({ id: uid, role: role }));
        form.elements.password.value = '';
        captchaId = '';
        if (regBox) {
          regAnswer.value = '';
          show(regBox, false);
        }
        say((action === 'register' ? 'Account created; signed in as ' : 'Signed in as ') + (role || 'user') + '.', 'ok');
        sessionChanged();
      });
    }

    if (logout) {
      logout.addEventListener('click', async function () {
        logout.disabled = true;
        var r = await api('POST', '/api/auth/logout', {});
        logout.disabled = false;
        if (r.ok || r.status === 401) {
          forgetSession();
          say('Logged out.', 'info');
          sessionChanged();
        } else {
          say(errorText(r), 'error');
        }
      });
    }

    sessionListeners.push(render);
    render();
  }

  // ---------------------------------------------------------------- order panel

  var FINAL_STATUSES = { PAID: true, EXPIRED: true, CANCELLED: true, FAILED: true };

  var ORDER_NOTES = {
    QUEUED: 'Your unit is reserved; the order is being recorded. This takes a moment.',
    PENDING: 'Reserved for you. Pay before the deadline or the unit goes back on sale.',
    PAID: 'Paid. Thank you for your order!',
    EXPIRED: 'The payment window closed; the unit went back on sale.',
    CANCELLED: 'This order was cancelled; its unit went back on sale.',
    FAILED: 'The order could not be completed; nothing was charged.'
  };

  // STATUS_WORDS names an order status for people (the list of orders).
  var STATUS_WORDS = {
    QUEUED: 'Confirming',
    PENDING: 'Awaiting payment',
    PAID: 'Paid',
    EXPIRED: 'Expired',
    CANCELLED: 'Cancelled',
    FAILED: 'Failed'
  };

  function isUnauthenticated(r) {
    return r.status === 401 || r.code === 'UNAUTHENTICATED' || r.code === 'CSRF';
  }

  // orderController shows one order in an order panel, polls it every second until it reaches
  // a final state, and pays or cancels it while it is pending. After every action it fetches the
  // order again, so that what the panel says is what the server holds.
  function orderController(panel, say, hooks) {
    hooks = hooks || {};
    var statusEl = byTestId('order-status', panel);
    var payByRow = byTestId('pay-by-row', panel);
    var payByEl = byTestId('pay-by', panel);
    var payLeftEl = byTestId('pay-left', panel);
    var payBtn = byTestId('pay-button', panel);
    var cancelBtn = byTestId('cancel-button', panel);
    var actions = byTestId('order-actions', panel);
    var confirmBox = byTestId('cancel-confirm', panel);
    var confirmYes = byTestId('cancel-confirm-button', panel);
    var confirmNo = byTestId('cancel-keep-button', panel);
    var note = byTestId('order-note', panel);
    var link = byTestId('order-link', panel);
    var idEl = byTestId('order-id', panel);
    var itemRow = byTestId('order-item-row', panel);
    var itemEl = byTestId('order-item', panel);
    var priceRow = byTestId('order-price-row', panel);
    var priceEl = byTestId('order-price', panel);
    var saleRow = byTestId('order-sale-row', panel);
    var saleEl = byTestId('order-sale', panel);
    var orderId = null;
    var status = null;
    var payBy = NaN;
    var detail = null; // item, price and sale, once the API has told them
    var paying = false;
    var cancelling = false;
    var confirming = false;
    // epoch changes when an action starts and ends: a status fetched before is stale.
    var epoch = 0;

    function renderDetail() {
      var d = detail || {};
      setText(itemEl, d.itemName || '');
      show(itemRow, !!d.itemName);
      setText(priceEl, d.price || '');
      show(priceRow, !!d.price);
      setText(saleEl, d.saleName || '');
      if (saleEl) {
        if (d.saleId) {
          saleEl.setAttribute('href', '/sales/' + enc(d.saleId));
        } else {
          saleEl.removeAttribute('href');
        }
      }
      show(saleRow, !!d.saleName);
    }

    function renderStatus() {
      var s = status || 'checking…';
      setText(statusEl, s);
      if (statusEl) {
        statusEl.setAttribute('data-status', status || '');
      }
      setText(note, status ? ORDER_NOTES[status] || '' : '');
      var pending = status === 'PENDING';
      if (!pending) {
        confirming = false;
      }
      var busy = paying || cancelling;
      show(actions, pending && !confirming);
      show(payBtn, pending && !confirming);
      show(cancelBtn, pending && !confirming);
      show(confirmBox, pending && confirming);
      if (payBtn) {
        payBtn.disabled = busy;
        setText(payBtn, paying ? 'Paying…' : detail && detail.price ? 'Pay now · ' + detail.price : 'Pay now');
      }
      if (cancelBtn) {
        cancelBtn.disabled = busy;
      }
      if (confirmYes) {
        confirmYes.disabled = busy;
        setText(confirmYes, cancelling ? 'Cancelling…' : 'Yes, cancel the order');
      }
      if (confirmNo) {
        confirmNo.disabled = busy;
      }
      if (pending && !isNaN(payBy)) {
        var now = serverNow();
        setText(payByEl, 'pay by ' + formatDeadline(payBy, now));
        var left = payBy - now;
        setText(payLeftEl, left > 0 ? '(' + formatDuration(left) + ' left)' : '(time is up)');
        show(payByRow, true);
      } else {
        show(payByRow, false);
      }
    }

    function learn(data) {
      status = typeof data.status === 'string' ? data.status : status;
      payBy = parseTime(data.payBy);
      if (typeof data.itemName === 'string' || data.priceCents !== undefined) {
        detail = {
          itemName: typeof data.itemName === 'string' ? data.itemName : '',
          price: formatMoney(data.priceCents, data.currency),
          saleName: typeof data.saleName === 'string' && data.saleName
            ? data.saleName
            : data.saleId !== undefined && data.saleId !== null && data.saleId !== '' ? 'Sale ' + data.saleId : '',
          saleId: data.saleId !== undefined && data.saleId !== null ? String(data.saleId) : ''
        };
      }
      renderDetail();
      renderStatus();
    }

    async function pollOnce() {
      if (!orderId) {
        return false;
      }
      var id = orderId;
      var asked = epoch;
      var r = await api('GET', '/api/flash-sales/orders/' + enc(id), undefined, undefined, 'no-store');
      if (id !== orderId) {
        return false;
      }
      if (asked !== epoch || paying || cancelling) {
        return true; // an action ran meanwhile: this answer may predate it, ask again
      }
      if (r.ok && r.data) {
        learn(r.data);
        return !FINAL_STATUSES[status];
      }
      if (r.status === 404) {
        status = null;
        detail = null;
        renderDetail();
        setText(statusEl, 'not found');
        setText(note, 'This order does not exist, or it belongs to another account.');
        show(actions, false);
        show(payBtn, false);
        show(cancelBtn, false);
        show(confirmBox, false);
        show(payByRow, false);
        if (hooks.onMissing) {
          hooks.onMissing(id);
        }
        return false;
      }
      if (isUnauthenticated(r)) {
        setText(note, 'Please log in first to see this order.');
        show(actions, false);
        show(payBtn, false);
        show(cancelBtn, false);
        show(confirmBox, false);
        sessionExpired();
        return false;
      }
      setText(note, r.network ? 'Network problem; retrying…' : 'Could not refresh the status (' + errorText(r) + '); retrying…');
      return true;
    }

    var poller = makePoller(pollOnce, 1000);

    // refresh fetches the order now, and keeps polling while it is not final.
    function refresh() {
      if (orderId) {
        poller.restart();
      }
    }

    if (payBtn) {
      payBtn.addEventListener('click', async function () {
        if (paying || cancelling || !orderId) {
          return;
        }
        paying = true;
        epoch++;
        renderStatus();
        say('Paying…', 'info');
        var r = await api('POST', '/api/flash-sales/orders/' + enc(orderId) + '/pay', {});
        paying = false;
        epoch++;
        if (r.ok) {
          status = r.data && typeof r.data.status === 'string' ? r.data.status : 'PAID';
          renderStatus();
          say('Payment received: the order is paid.', 'ok');
          refresh();
          return;
        }
        say(errorText(r), 'error');
        if (r.code === 'EXPIRED') {
          // The server expired the order there and then: no Pay button, and ask what it holds.
          status = 'EXPIRED';
          renderStatus();
          refresh();
          return;
        }
        if (isUnauthenticated(r)) {
          renderStatus();
          sessionExpired();
          return;
        }
        renderStatus();
        if (!r.network) {
          refresh();
        }
      });
    }

    if (cancelBtn) {
      cancelBtn.addEventListener('click', function () {
        if (paying || cancelling || status !== 'PENDING') {
          return;
        }
        confirming = true;
        renderStatus();
        if (confirmNo) {
          confirmNo.focus();
        }
      });
    }

    if (confirmNo) {
      confirmNo.addEventListener('click', function () {
        confirming = false;
        renderStatus();
        if (cancelBtn) {
          cancelBtn.focus();
        }
      });
    }

    if (confirmYes) {
      confirmYes.addEventListener('click', async function () {
        if (paying || cancelling || !orderId) {
          return;
        }
        cancelling = true;
        epoch++;
        renderStatus();
        say('Cancelling the order…', 'info');
        var r = await api('POST', '/api/flash-sales/orders/' + enc(orderId) + '/cancel', {});
        cancelling = false;
        confirming = false;
        epoch++;
        if (r.ok) {
          status = r.data && typeof r.data.status === 'string' ? r.data.status : 'CANCELLED';
          renderStatus();
          say('Order cancelled. Its unit went back on sale; nothing was charged.', 'ok');
          if (hooks.onCancelled) {
            hooks.onCancelled(orderId);
          }
          refresh();
          return;
        }
        say(errorText(r), 'error');
        renderStatus();
        if (isUnauthenticated(r)) {
          sessionExpired();
          return;
        }
        if (!r.network) {
          refresh();
        }
      });
    }

    return {
      track: function (id, initialStatus) {
        var same = orderId === String(id);
        orderId = String(id);
        status = initialStatus || (same ? status : null);
        payBy = same ? payBy : NaN;
        detail = same ? detail : null;
        confirming = false;
        panel.setAttribute('data-order-id', orderId);
        setText(idEl, orderId);
        if (link) {
          link.setAttribute('href', '/orders/' + enc(orderId));
        }
        show(panel, true);
        renderDetail();
        renderStatus();
        poller.restart();
      },
      clear: function () {
        orderId = null;
        status = null;
        detail = null;
        confirming = false;
        poller.stop();
        show(panel, false);
      },
      tick: function () {
        if (orderId && status === 'PENDING') {
          renderStatus();
        }
      }
    };
  }

  // ---------------------------------------------------------------- sale page

  function initSalePage(section) {
    var saleId = section.getAttribute('data-sale-id') || '';
    var startsAt = parseTime(section.getAttribute('data-starts-at'));
    var endsAt = parseTime(section.getAttribute('data-ends-at'));
    var countdown = byTestId('countdown', section);
    var detail = byTestId('countdown-detail', section);
    var buttons = allByTestId('buy-button', section);
    var stockEls = allByTestId('stock', section);
    var say = messenger(byTestId('message', section));
    var captchaBox = byTestId('captcha', section);
    var captchaImg = byTestId('captcha-image', section);
    var captchaAnswer = byTestId('captcha-answer', section);
    var captchaHint = byTestId('captcha-hint', section);
    var captchaRefresh = byTestId('captcha-refresh', section);
    var orderPanel = byTestId('order', section);
    var orderKey = 'fs_order_' + saleId;

    var state = {
      phase: null,
      stock: {},
      // refusedAt[itemId] is the displayed stock when a purchase came back SOLD_OUT: the item
      // stays sold out until the displayed stock reaches 0 or rises above that figure.
      refusedAt: {},
      inFlight: false,
      buyingItem: null,
      holdUntil: 0,
      endedByServer: false,
      captchaId: null,
      captchaLoading: false,
      captchaRetries: 0
    };
    var startTimer = null;
    var endTimer = null;

    var orders = orderPanel ? orderController(orderPanel, say, {
      onMissing: function () {
        store.remove(orderKey);
        orders.clear();
      }
    }) : null;

    function phaseNow() {
      if (!clock.synced || isNaN(startsAt) || isNaN(endsAt)) {
        return 'unknown';
      }
      if (state.endedByServer) {
        return 'ended';
      }
      return saleState(serverNow(), startsAt, endsAt);
    }

    function soldOut(id) {
      return state.stock[id] === 0 || Object.prototype.hasOwnProperty.call(state.refusedAt, id);
    }

    function renderStock() {
      stockEls.forEach(function (s) {
        var id = s.getAttribute('data-item-id');
        var n = soldOut(id) ? 0 : state.stock[id];
        if (typeof n !== 'number' || isNaN(n)) {
          return;
        }
        setText(s, n <= 0 ? 'sold out' : n + ' left');
        s.setAttribute('data-stock', String(Math.max(0, n)));
        s.classList.toggle('stock-out', n <= 0);
        s.classList.toggle('stock-low', n > 0 && n <= 10);
      });
    }

    function render() {
      var now = serverNow();
      var phase = phaseNow();
      if (countdown) {
        countdown.setAttribute('data-phase', phase);
      }
      if (phase === 'unknown') {
        setText(countdown, 'Syncing with the shop\u2019s clock\u2026');
        setText(detail, '');
      } else if (phase === 'upcoming') {
        setText(countdown, 'starts in ' + formatDuration(startsAt - now));
        setText(detail, 'Log in and solve the captcha now, so you are ready when the Buy buttons light up.');
      } else if (phase === 'live') {
        setText(countdown, 'live now');
        setText(detail, 'ends in ' + formatDuration(endsAt - now));
      } else {
        setText(countdown, 'ended');
        setText(detail, 'This sale is over.');
      }
      var held = Date.now() < state.holdUntil;
      buttons.forEach(function (b) {
        var id = b.getAttribute('data-item-id');
        var gone = soldOut(id);
        b.disabled = !(phase === 'live' && !gone && !state.inFlight && !held);
        var label = 'Buy';
        if (state.inFlight && state.buyingItem === id) {
          label = 'Buying\u2026';
        } else if (phase === 'ended') {
          label = 'Ended';
        } else if (gone) {
          label = 'Sold out';
        }
        setText(b, label);
      });
      if (phase !== state.phase) {
        state.phase = phase;
        phaseChanged();
      }
      if (orders) {
        orders.tick();
      }
    }

    // atMoment re-renders at the exact millisecond of a start or end, re-arming itself if a
    // timer fires early.
    function atMoment(at, setTimer) {
      var left = at - serverNow();
      if (left > 0) {
        setTimer(window.setTimeout(function () {
          atMoment(at, setTimer);
        }, Math.min(Math.ceil(left), 2147483647)));
        return;
      }
      render();
    }

    function schedule() {
      window.clearTimeout(startTimer);
      window.clearTimeout(endTimer);
      if (!clock.synced) {
        return;
      }
      atMoment(startsAt, function (t) {
        startTimer = t;
      });
      atMoment(endsAt, function (t) {
        endTimer = t;
      });
    }

    function hold(seconds) {
      var ms = Math.max(1, seconds) * 1000;
      state.holdUntil = Date.now() + ms;
      window.setTimeout(render, ms + 5);
      render();
    }

    // ---- captcha: fetched as soon as a logged-in shopper is on a live or upcoming sale,
    // so that it is solved during the countdown, not after the start.

    function wantCaptcha() {
      return loggedIn() && (state.phase === 'upcoming' || state.phase === 'live');
    }

    function captchaHintText() {
      return state.phase === 'upcoming'
        ? 'Solve this now, before the sale starts; then press Buy the moment it opens.'
        : 'Type the characters you see, then press Buy.';
    }

    async function loadCaptcha() {
      if (state.captchaLoading || !wantCaptcha()) {
        return;
      }
      state.captchaLoading = true;
      state.captchaId = null;
      if (captchaAnswer) {
        captchaAnswer.value = '';
      }
      setText(captchaHint, 'Loading a captcha\u2026');
      var r = await api('POST', '/api/flash-sales/' + enc(saleId) + '/captcha', {});
      state.captchaLoading = false;
      var img = r.ok && r.data && typeof r.data.image === 'string' ? r.data.image : '';
      if (r.ok && r.data && r.data.captchaId !== undefined && r.data.captchaId !== null && img.indexOf('data:image/') === 0) {
        state.captchaId = String(r.data.captchaId);
        state.captchaRetries = 0;
        if (captchaImg) {
          captchaImg.src = img;
          captchaImg.hidden = false;
        }
        setText(captchaHint, captchaHintText());
        return;
      }
      if (r.status === 401 || r.code === 'UNAUTHENTICATED' || r.code === 'CSRF') {
        say(errorText(r), 'error');
        sessionExpired();
        return;
      }
      setText(captchaHint, 'Could not load a captcha: ' + (r.ok ? 'the answer was not understood.' : errorText(r)) + ' Use \u201cNew challenge\u201d to retry.');
      if ((r.network || r.status >= 500 || r.code === 'RATE_LIMITED') && state.captchaRetries < 3) {
        state.captchaRetries++;
        window.setTimeout(loadCaptcha, 1000 * Math.max(3, r.retryAfter || 0));
      }
    }

    function refreshCaptchaArea() {
      var want = wantCaptcha();
      show(captchaBox, want);
      if (want && !state.captchaId && !state.captchaLoading) {
        loadCaptcha();
      } else if (want && state.captchaId) {
        setText(captchaHint, captchaHintText());
      }
      if (!want) {
        state.captchaId = null;
      }
    }

    if (captchaRefresh) {
      captchaRefresh.addEventListener('click', function (ev) {
        ev.preventDefault();
        state.captchaRetries = 0;
        loadCaptcha();
      });
    }

    // ---- stock badges, polled every second from the micro-cached endpoint.

    var stockPoller = makePoller(async function () {
      var r = await api('GET', '/api/flash-sales/' + enc(saleId) + '/stock');
      if (r.ok && r.data && Array.isArray(r.data.items)) {
        r.data.items.forEach(function (it) {
          if (it && it.itemId !== undefined && it.itemId !== null) {
            var id = String(it.itemId);
            var n = Number(it.stock);
            state.stock[id] = n;
            if (Object.prototype.hasOwnProperty.call(state.refusedAt, id) && (n <= 0 || n > state.refusedAt[id])) {
              delete state.refusedAt[id];
            }
          }
        });
        renderStock();
        render();
      }
      // After the end, one last refresh is enough.
      return state.phase !== 'ended';
    }, 1000);

    function phaseChanged() {
      refreshCaptchaArea();
      if (state.phase === 'ended') {
        stockPoller.stop();
      }
    }

    // ---- buying

    function handleBuyError(r, itemId) {
      if (r.code === 'ALREADY_PURCHASED') {
        // One per shopper in the sale: lead to the order already held, and show it below.
        var held = r.data && r.data.orderId !== undefined && r.data.orderId !== null ? String(r.data.orderId) : '';
        if (held) {
          say('You already hold an order in this sale: ', 'notice', { text: 'view it', href: '/orders/' + enc(held), testid: 'held-order-link', after: '.' });
          store.set(orderKey, held);
          if (orders) {
            orders.track(held, null);
          }
        } else {
          say('You already hold an order in this sale (one per shopper): ', 'notice', { text: 'see your orders', href: '/orders', testid: 'held-order-link', after: '.' });
        }
        return;
      }
      say(errorText(r), 'error');
      switch (r.code) {
        case 'SOLD_OUT':
          state.refusedAt[itemId] = typeof state.stock[itemId] === 'number' ? state.stock[itemId] : 0;
          renderStock();
          break;
        case 'NOT_STARTED':
          // The server's clock says not yet: wait as long as it asks, and re-check ours.
          hold(r.retryAfter === null ? 1 : r.retryAfter);
          syncClock().then(function (ok) {
            if (ok) {
              schedule();
              render();
            }
          });
          break;
        case 'RATE_LIMITED':
          hold(r.retryAfter === null ? 1 : r.retryAfter);
          break;
        case 'SALE_ENDED':
          state.endedByServer = true;
          break;
        case 'UNAUTHENTICATED':
        case 'CSRF':
          sessionExpired();
          break;
      }
    }

    async function buy(itemId) {
      if (state.inFlight) {
        return;
      }
      if (!loggedIn()) {
        say('Please log in first.', 'error');
        var user = byTestId('username', section);
        if (user) {
          user.focus();
        }
        return;
      }
      if (!state.captchaId) {
        say(state.captchaLoading ? 'The captcha is still loading; one moment.' : 'A captcha is needed first; a new one is on its way.', 'error');
        loadCaptcha();
        return;
      }
      var answer = captchaAnswer ? captchaAnswer.value.trim() : '';
      if (!answer) {
        say('Type the captcha answer first.', 'error');
        if (captchaAnswer) {
          captchaAnswer.focus();
        }
        return;
      }
      state.inFlight = true;
      state.buyingItem = itemId;
      render();
      say('Reserving your unit\u2026', 'info');
      var newCaptcha = false;
      try {
        var tok = await api('POST', '/api/flash-sales/' + enc(saleId) + '/purchase-token', {
          captchaId: state.captchaId,
          answer: answer
        });
        if (!tok.ok || !tok.data || !tok.data.purchaseToken) {
          if (tok.ok) {
            say('The shop sent an answer this page does not understand; try again.', 'error');
            return;
          }
          newCaptcha = tok.code === 'CAPTCHA_FAILED';
          handleBuyError(tok, itemId);
          return;
        }
        // The captcha is spent once it has bought a purchase token.
        newCaptcha = true;
        state.captchaId = null;
        var p = await api('POST', '/api/flash-sales/items/' + enc(itemId) + '/purchase', {}, {
          'X-Purchase-Token': String(tok.data.purchaseToken)
        });
        if (p.ok && p.data && p.data.orderId !== undefined && p.data.orderId !== null) {
          var orderId = String(p.data.orderId);
          store.set(orderKey, orderId);
          say('Got it! Your unit is reserved and the order is queued.', 'ok');
          if (orders) {
            orders.track(orderId, typeof p.data.status === 'string' ? p.data.status : 'QUEUED');
          }
          return;
        }
        if (p.ok) {
          say('The shop sent an answer this page does not understand; check your order before trying again.', 'error');
          return;
        }
        if (p.code === 'INVALID_PURCHASE_TOKEN') {
          newCaptcha = true;
        }
        handleBuyError(p, itemId);
      } finally {
        state.inFlight = false;
        state.buyingItem = null;
        render();
        if (newCaptcha) {
          state.captchaId = null;
          loadCaptcha();
        }
      }
    }

    buttons.forEach(function (b) {
      b.addEventListener('click', function () {
        buy(b.getAttribute('data-item-id'));
      });
    });

    // ---- session changes

    function restoreOrder() {
      if (!orders) {
        return;
      }
      var saved = loggedIn() ? store.get(orderKey) : null;
      if (saved) {
        orders.track(saved, null);
      } else {
        orders.clear();
      }
    }

    sessionListeners.push(function () {
      refreshCaptchaArea();
      restoreOrder();
    });

    initSession(byTestId('session', section), say);

    onClock(function () {
      schedule();
      render();
    });
    startClock();
    render();
    window.setInterval(render, 250);
    restoreOrder();
    stockPoller.start();
  }

  // ---------------------------------------------------------------- logged-out pages

  // loginPrompt shows a page's "You are not signed in. Log in …" sentence while nobody is, and
  // makes its link focus the login form's username field.
  function loginPrompt(page) {
    var note = byTestId('logged-out', page);
    var link = byTestId('login-link', page);
    if (link) {
      link.addEventListener('click', function (ev) {
        var user = byTestId('username', page);
        if (user) {
          ev.preventDefault();
          user.scrollIntoView({ block: 'center' });
          user.focus();
        }
      });
    }
    return function render(signedIn) {
      show(note, !signedIn);
    };
  }

  // ---------------------------------------------------------------- order page

  function initOrderPage(page) {
    var panel = byTestId('order', page);
    var say = messenger(byTestId('message', page));
    if (!panel) {
      return;
    }
    var id = panel.getAttribute('data-order-id');
    if (!id) {
      return;
    }
    var prompt = loginPrompt(page);
    var orders = orderController(panel, say, {});
    var tracking = false;

    // Logged out, the page shows the sentence and the login form, not a status it cannot know.
    function sessionUpdate() {
      var signedIn = loggedIn();
      prompt(signedIn);
      if (signedIn && !tracking) {
        tracking = true;
        orders.track(id, null);
      } else if (!signedIn) {
        tracking = false;
        orders.clear();
      }
    }

    onClock(function () {
      orders.tick();
    });
    startClock();
    window.setInterval(orders.tick, 1000);
    sessionListeners.push(sessionUpdate);
    initSession(byTestId('session', page), say);
    sessionUpdate();
  }

  // ---------------------------------------------------------------- my orders page

  function initMyOrdersPage(page) {
    var say = messenger(byTestId('message', page));
    var prompt = loginPrompt(page);
    var loading = byTestId('orders-loading', page);
    var empty = byTestId('orders-empty', page);
    var list = byTestId('order-list', page);
    var template = byTestId('order-row-template', page);
    var more = byTestId('load-more', page);
    var rows = {}; // order id -> { li, order, checkedAt, checks }
    var next = ''; // the cursor of the next page; '' on the last
    var retry = null; // the cursor to fetch again after a failure
    var gen = 0; // bumped when the list is thrown away (logout, back from the cache)
    var busy = false;
    if (!list || !template) {
      return;
    }

    function part(li, id) {
      return li.querySelector('[data-testid="' + id + '"]');
    }

    function renderRow(entry) {
      var o = entry.order;
      var li = entry.li;
      var st = typeof o.status === 'string' ? o.status : '';
      var id = String(o.orderId);
      var item = o.itemName ? String(o.itemName) : 'Item ' + (o.itemId === undefined ? '' : o.itemId);
      li.setAttribute('data-order-id', id);
      li.setAttribute('data-status', st);
      setText(part(li, 'order-row-item'), item);
      var badge = part(li, 'order-row-status');
      badge.setAttribute('data-status', st);
      setText(badge, STATUS_WORDS[st] || st || 'unknown');
      setText(part(li, 'order-row-price'), formatMoney(o.priceCents, o.currency));
      var sale = part(li, 'order-row-sale');
      setText(sale, o.saleName ? String(o.saleName) : 'Sale ' + (o.saleId === undefined ? '' : o.saleId));
      if (o.saleId !== undefined && o.saleId !== null && o.saleId !== '') {
        sale.setAttribute('href', '/sales/' + enc(o.saleId));
      }
      var deadline = parseTime(o.payBy);
      var pending = st === 'PENDING' && !isNaN(deadline);
      show(part(li, 'order-row-deadline'), pending);
      if (pending) {
        var now = serverNow();
        var left = deadline - now;
        setText(part(li, 'order-row-pay-by'), 'Pay by ' + formatDeadline(deadline, now));
        setText(part(li, 'order-row-pay-left'), left > 0 ? '(' + formatDuration(left) + ' left)' : '(time is up)');
      }
      var notes = {
        QUEUED: 'Your unit is reserved; the order is being recorded.',
        EXPIRED: 'Not paid in time; the unit went back on sale.',
        CANCELLED: 'Cancelled; the unit went back on sale.',
        FAILED: 'Could not be completed; nothing was charged.'
      };
      setText(part(li, 'order-row-note'), notes[st] || '');
      var created = part(li, 'order-row-created');
      var at = parseTime(o.createdAt);
      created.replaceChildren();
      if (!isNaN(at)) {
        created.appendChild(document.createTextNode('Ordered '));
        created.appendChild(timeElement(o.createdAt));
      }
      var link = part(li, 'order-row-link');
      link.setAttribute('href', '/orders/' + enc(id));
      setText(link, st === 'PENDING' ? 'Pay or cancel' : 'View order');
      link.setAttribute('aria-label', (st === 'PENDING' ? 'Pay or cancel: ' : 'View order: ') + item);
    }

    function addRow(o) {
      if (!o || o.orderId === undefined || o.orderId === null) {
        return;
      }
      var id = String(o.orderId);
      var entry = rows[id];
      if (entry) {
        entry.order = o;
      } else {
        var frag = template.content.cloneNode(true);
        var li = frag.querySelector('[data-testid="order-row"]');
        entry = rows[id] = { li: li, order: o, checkedAt: 0, checks: 0 };
        list.appendChild(frag);
      }
      renderRow(entry);
    }

    function renderMore() {
      var label = retry !== null ? 'Try again' : 'Load more';
      show(more, retry !== null || next !== '');
      if (more) {
        more.disabled = busy;
        setText(more, busy && list.children.length > 0 ? 'Loading…' : label);
      }
    }

    async function loadPage(cursor) {
      if (busy || !loggedIn()) {
        return;
      }
      busy = true;
      var g = gen;
      retry = null;
      show(loading, list.children.length === 0);
      renderMore();
      var r = await api('GET', '/api/flash-sales/orders' + (cursor ? '?cursor=' + encodeURIComponent(cursor) : ''), undefined, undefined, 'no-store');
      if (g !== gen) {
        return; // thrown away meanwhile; whoever did it started afresh
      }
      busy = false;
      show(loading, false);
      if (r.ok && r.data && Array.isArray(r.data.orders)) {
        r.data.orders.forEach(addRow);
        next = typeof r.data.next === 'string' ? r.data.next : '';
        show(empty, list.children.length === 0);
        say('', 'info');
        renderMore();
        return;
      }
      renderMore();
      if (isUnauthenticated(r)) {
        sessionExpired();
        return;
      }
      retry = cursor;
      renderMore();
      say('Could not load your orders: ' + errorText(r), 'error');
    }

    // restart throws the list away and loads the first page (or shows the login sentence).
    function restart() {
      gen++;
      busy = false;
      rows = {};
      next = '';
      retry = null;
      list.replaceChildren();
      show(empty, false);
      show(loading, false);
      say('', 'info');
      var signedIn = loggedIn();
      prompt(signedIn);
      renderMore();
      if (signedIn) {
        loadPage('');
      }
    }

    if (more) {
      more.addEventListener('click', function () {
        loadPage(retry !== null ? retry : next);
      });
    }

    // Every second: the countdowns of the pending orders. A pending order past its deadline (the
    // server expires it within seconds) or a queued one is fetched again, a few times at most.
    async function recheck(entry) {
      entry.checkedAt = Date.now();
      entry.checks++;
      var g = gen;
      var r = await api('GET', '/api/flash-sales/orders/' + enc(entry.order.orderId), undefined, undefined, 'no-store');
      if (g === gen && r.ok && r.data) {
        entry.order = r.data;
        renderRow(entry);
      }
    }

    function tick() {
      var now = serverNow();
      Object.keys(rows).forEach(function (id) {
        var entry = rows[id];
        var st = entry.order.status;
        if (st === 'PENDING') {
          renderRow(entry);
        }
        var due = (st === 'PENDING' && parseTime(entry.order.payBy) <= now) || st === 'QUEUED';
        if (due && entry.checks < 20 && Date.now() - entry.checkedAt >= 3000) {
          recheck(entry);
        }
      });
    }

    onClock(tick);
    startClock();
    window.setInterval(tick, 1000);

    // Back to this page from the browser's cache: the orders may have changed meanwhile.
    window.addEventListener('pageshow', function (ev) {
      if (ev.persisted) {
        restart();
      }
    });

    var wasSignedIn = null;
    sessionListeners.push(function () {
      var signedIn = loggedIn();
      if (signedIn !== wasSignedIn) {
        wasSignedIn = signedIn;
        restart();
      }
    });
    initSession(byTestId('session', page), say);
    wasSignedIn = loggedIn();
    restart();
  }

  // ---------------------------------------------------------------- home page

  var STATUS_LABELS = { upcoming: 'Upcoming', live: 'Live now', ended: 'Ended' };

  function initHomePage(home) {
    var cards = allByTestId('sale-card', home);
    if (cards.length === 0) {
      return;
    }
    function render() {
      if (!clock.synced) {
        return;
      }
      var now = serverNow();
      cards.forEach(function (card) {
        var s = parseTime(card.getAttribute('data-starts-at'));
        var e = parseTime(card.getAttribute('data-ends-at'));
        var badge = byTestId('sale-status', card);
        if (isNaN(s) || isNaN(e) || !badge) {
          return;
        }
        var st = saleState(now, s, e);
        badge.setAttribute('data-status', st);
        badge.className = 'badge badge-' + st;
        setText(badge, STATUS_LABELS[st]);
      });
    }
    onClock(render);
    startClock();
    window.setInterval(render, 1000);
  }

  // ---------------------------------------------------------------- admin page

  // localInputToRFC3339 reads a datetime-local value in the browser's zone and writes it as
  // RFC 3339 with that zone's offset, e.g. 2026-05-01T10:00:00+08:00.
  function localInputToRFC3339(v) {
    var m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?/.exec(v || '');
    if (!m) {
      return null;
    }
    var d = new Date(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], m[6] ? +m[6] : 0);
    if (isNaN(d.getTime())) {
      return null;
    }
    var off = -d.getTimezoneOffset();
    var sign = off >= 0 ? '+' : '-';
    var a = Math.abs(off);
    return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) +
      'T' + pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds()) +
      sign + pad2(Math.floor(a / 60)) + ':' + pad2(a % 60);
  }

  function toLocalInput(ms) {
    var d = new Date(ms);
    return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) +
      'T' + pad2(d.getHours()) + ':' + pad2(d.getMinutes());
  }

  function initAdminPage(admin) {
    var say = messenger(byTestId('message', admin));
    var panel = byTestId('admin-panel', admin);
    var form = byTestId('create-sale-form', admin);
    var rows = byTestId('item-rows', admin);
    var template = byTestId('item-row-template', admin);
    var addItem = byTestId('add-item', admin);
    var salesList = byTestId('admin-sales', admin);
    var salesEmpty = byTestId('admin-sales-empty', admin);
    var stockPanel = byTestId('stock-panel', admin);
    var stockRows = byTestId('stock-rows', admin);
    var stockSaleName = byTestId('stock-sale-name', admin);
    var stockUpdated = byTestId('stock-updated', admin);
    var itemNames = {};
    var selected = null;
    var merchant = false;

    function notMerchant() {
      merchant = false;
      show(panel, false);
      salesPoller.stop();
      stockPoller.stop();
      say('Signed in, but this account is not a merchant. Log out and log in with a merchant account.', 'error');
    }

    // Refusals that mean "log in again" or "not a merchant"; true when handled.
    function authProblem(r) {
      if (r.status === 401 || r.code === 'UNAUTHENTICATED' || r.code === 'CSRF') {
        say(errorText(r), 'error');
        sessionExpired();
        return true;
      }
      if (r.status === 403 && r.code !== 'CSRF') {
        notMerchant();
        return true;
      }
      return false;
    }

    // ---- the merchant's sales

    function renderSales(sales) {
      salesList.replaceChildren();
      show(salesEmpty, sales.length === 0);
      sales.forEach(function (s) {
        var id = String(s.saleId);
        var li = el('li', { class: 'admin-sale', 'data-testid': 'admin-sale', 'data-sale-id': id });
        if (selected && selected.id === id) {
          li.classList.add('selected');
        }
        var head = el('div', { class: 'admin-sale-head' });
        head.appendChild(el('strong', { 'data-testid': 'admin-sale-name' }, s.name || 'sale ' + id));
        var status = typeof s.status === 'string' ? s.status : '';
        head.appendChild(el('span', { class: 'badge badge-' + status.replace(/[^a-z]/gi, ''), 'data-testid': 'admin-sale-status' }, status || '?'));
        li.appendChild(head);
        var times = el('p', { class: 'admin-sale-times' });
        times.appendChild(document.createTextNode('Starts '));
        times.appendChild(timeElement(s.startsAt));
        times.appendChild(document.createTextNode(' \u00b7 Ends '));
        times.appendChild(timeElement(s.endsAt));
        li.appendChild(times);
        var actions = el('div', { class: 'admin-sale-actions' });
        var pick = el('button', { type: 'button', class: 'button button-small', 'data-testid': 'show-stock', 'data-sale-id': id }, 'Live stock');
        pick.setAttribute('aria-pressed', selected && selected.id === id ? 'true' : 'false');
        pick.addEventListener('click', function () {
          selectSale(id, s.name || 'sale ' + id);
        });
        actions.appendChild(pick);
        actions.appendChild(el('a', { href: '/sales/' + enc(id), class: 'button button-small button-secondary', 'data-testid': 'open-sale' }, 'Open sale page'));
        li.appendChild(actions);
        salesList.appendChild(li);
      });
    }

    async function loadSales() {
      var r = await api('GET', '/api/admin/sales', undefined, undefined, 'no-store');
      if (r.ok && r.data) {
        if (!merchant) {
          merchant = true;
          show(panel, true);
          prefillTimes();
        }
        renderSales(Array.isArray(r.data.sales) ? r.data.sales : []);
        return true;
      }
      if (authProblem(r)) {
        return false;
      }
      say('Could not load your sales: ' + errorText(r), 'error');
      return true;
    }

    var salesPoller = makePoller(loadSales, 15000);

    // ---- the live stock table of the selected sale

    function selectSale(id, name) {
      selected = { id: id, name: name };
      setText(stockSaleName, name);
      show(stockPanel, true);
      stockRows.replaceChildren();
      setText(stockUpdated, 'Loading\u2026');
      Array.prototype.forEach.call(salesList.querySelectorAll('[data-testid="admin-sale"]'), function (li) {
        var on = li.getAttribute('data-sale-id') === id;
        li.classList.toggle('selected', on);
        var b = li.querySelector('[data-testid="show-stock"]');
        if (b) {
          b.setAttribute('aria-pressed', on ? 'true' : 'false');
        }
      });
      stockPoller.restart();
    }

    function numberText(v) {
      return v === undefined || v === null ? '\u2013' : String(v);
    }

    async function loadStock() {
      if (!selected) {
        return false;
      }
      var id = selected.id;
      var r = await api('GET', '/api/admin/sales/' + enc(id) + '/stock', undefined, undefined, 'no-store');
      if (!selected || selected.id !== id) {
        return false;
      }
      if (r.ok && r.data && Array.isArray(r.data.items)) {
        var trs = [];
        r.data.items.forEach(function (it) {
          var itemId = String(it.itemId);
          var tr = el('tr', { 'data-testid': 'stock-row', 'data-item-id': itemId });
          tr.appendChild(el('th', { scope: 'row' }, it.name || itemNames[itemId] || 'item #' + itemId));
          ['quantity', 'displayed', 'frozen', 'real', 'paid'].forEach(function (k) {
            tr.appendChild(el('td', { 'data-col': k }, numberText(it[k])));
          });
          var ok = it.reconciled === true;
          var cell = el('td', { 'data-col': 'reconciled', class: ok ? 'reconciled' : 'drift' }, ok ? '\u2713' : 'drift');
          tr.appendChild(cell);
          trs.push(tr);
          if (!ok && it.mismatch) {
            // The reconciliation's numbers, so the merchant sees what disagrees: a row of its own
            // under the item's, across the whole table, so that it neither squeezes the number
            // columns nor hides in the last column, off screen on a phone.
            tr.classList.add('has-drift');
            var detailId = 'stock-mismatch-' + itemId;
            cell.setAttribute('aria-describedby', detailId);
            var detail = el('small', { class: 'drift-detail', id: detailId, 'data-testid': 'stock-mismatch' });
            // one failed check a line ("name: numbers"; the buyers check's own "; missing …"
            // stays with it), the separators kept so the text reads as the server wrote it
            var checks = String(it.mismatch).split(/; (?=[a-z][a-z ()]*: )/);
            checks.forEach(function (c, i) {
              if (i > 0) {
                detail.appendChild(document.createTextNode(' '));
              }
              detail.appendChild(el('span', { class: 'drift-check' }, c + (i < checks.length - 1 ? ';' : '')));
            });
            var note = el('div', { class: 'drift-note' });
            note.appendChild(el('strong', { class: 'drift-label' }, 'Not reconciled:'));
            note.appendChild(document.createTextNode(' '));
            note.appendChild(detail);
            var td = el('td', { colspan: '7' });
            td.appendChild(note);
            var detailRow = el('tr', { class: 'drift-row', 'data-testid': 'stock-drift-row', 'data-item-id': itemId });
            detailRow.appendChild(td);
            trs.push(detailRow);
          }
        });
        stockRows.replaceChildren.apply(stockRows, trs);
        setText(stockUpdated, 'Updated ' + formatClock(Date.now()) + '.');
        return true;
      }
      if (r.status === 404) {
        setText(stockUpdated, 'This sale was not found (it may belong to another merchant).');
        return false;
      }
      if (authProblem(r)) {
        return false;
      }
      setText(stockUpdated, 'Could not refresh: ' + errorText(r) + ' Retrying\u2026');
      return true;
    }

    var stockPoller = makePoller(loadStock, 1000);

    // ---- create a sale

    function prefillTimes() {
      if (!form) {
        return;
      }
      var start = Math.ceil((Date.now() + 5 * 60000) / (5 * 60000)) * 5 * 60000;
      if (!form.elements.startsAt.value) {
        form.elements.startsAt.value = toLocalInput(start);
      }
      if (!form.elements.endsAt.value) {
        form.elements.endsAt.value = toLocalInput(start + 3600000);
      }
    }

    function addRow() {
      if (!template || !rows) {
        return null;
      }
      var frag = template.content.cloneNode(true);
      var row = frag.querySelector('[data-testid="item-row"]');
      rows.appendChild(frag);
      return row;
    }

    if (addItem) {
      addItem.addEventListener('click', function () {
        var row = addRow();
        var first = row && row.querySelector('input');
        if (first) {
          first.focus();
        }
      });
    }

    if (rows) {
      rows.addEventListener('click', function (ev) {
        var btn = ev.target.closest ? ev.target.closest('[data-testid="remove-item"]') : null;
        if (!btn) {
          return;
        }
        var row = btn.closest('[data-testid="item-row"]');
        if (!row) {
          return;
        }
        if (rows.querySelectorAll('[data-testid="item-row"]').length > 1) {
          row.remove();
        } else {
          Array.prototype.forEach.call(row.querySelectorAll('input'), function (i) {
            i.value = '';
          });
        }
      });
    }

    if (form) {
      form.addEventListener('submit', async function (ev) {
        ev.preventDefault();
        var name = form.elements.name.value.trim();
        var startsAt = localInputToRFC3339(form.elements.startsAt.value);
        var endsAt = localInputToRFC3339(form.elements.endsAt.value);
        if (!startsAt || !endsAt) {
          say('Give the start and the end as a date and a time.', 'error');
          return;
        }
        if (Date.parse(endsAt) <= Date.parse(startsAt)) {
          say('The sale must end after it starts.', 'error');
          return;
        }
        var items = [];
        var bad = false;
        Array.prototype.forEach.call(rows.querySelectorAll('[data-testid="item-row"]'), function (row) {
          var itemName = row.querySelector('[name="itemName"]').value.trim();
          var price = row.querySelector('[name="priceCents"]').value.trim();
          var qty = row.querySelector('[name="quantity"]').value.trim();
          if (!itemName && !price && !qty) {
            return;
          }
          if (!/^\d+$/.test(price) || !/^\d+$/.test(qty)) {
            bad = true;
            return;
          }
          items.push({ name: itemName, priceCents: Number(price), quantity: Number(qty) });
        });
        if (bad) {
          say('Prices (in cents) and quantities are whole numbers.', 'error');
          return;
        }
        if (items.length === 0) {
          say('Add at least one item.', 'error');
          return;
        }
        var submit = form.querySelector('button[type="submit"]');
        if (submit) {
          submit.disabled = true;
        }
        say('Creating the sale\u2026', 'info');
        var r = await api('POST', '/api/admin/sales', { name: name, startsAt: startsAt, endsAt: endsAt, items: items });
        if (submit) {
          submit.disabled = false;
        }
        if (r.ok && r.data && r.data.saleId !== undefined && r.data.saleId !== null) {
          var saleId = String(r.data.saleId);
          (Array.isArray(r.data.items) ? r.data.items : []).forEach(function (it) {
            itemNames[String(it.itemId)] = it.name;
          });
          say('Created \u201c' + name + '\u201d (sale ' + saleId + ') with ' + items.length + (items.length === 1 ? ' item.' : ' items.'), 'ok');
          form.reset();
          Array.prototype.slice.call(rows.querySelectorAll('[data-testid="item-row"]'), 1).forEach(function (row) {
            row.remove();
          });
          prefillTimes();
          await loadSales();
          selectSale(saleId, name);
          return;
        }
        if (authProblem(r)) {
          return;
        }
        say(r.network ? errorText(r) : r.message || errorText(r), 'error');
      });
    }

    // ---- session

    function sessionUpdate() {
      var u = currentUser();
      if (u === null) {
        merchant = false;
        show(panel, false);
        salesPoller.stop();
        stockPoller.stop();
        selected = null;
        show(stockPanel, false);
        return;
      }
      if (u.role && u.role !== 'merchant') {
        notMerchant();
        return;
      }
      if (u.role === 'merchant' && !merchant) {
        merchant = true;
        show(panel, true);
        prefillTimes();
      }
      salesPoller.restart();
    }

    sessionListeners.push(sessionUpdate);
    initSession(byTestId('session', admin), say);
    sessionUpdate();
  }

  // ---------------------------------------------------------------- header

  // initNav shows "My orders" to a signed-in shopper and marks the link of the current page.
  function initNav() {
    var nav = document.querySelector('.site-nav');
    if (!nav) {
      return;
    }
    Array.prototype.forEach.call(nav.querySelectorAll('a[href]'), function (a) {
      if (a.getAttribute('href') === window.location.pathname) {
        a.setAttribute('aria-current', 'page');
      }
    });
    var orders = byTestId('nav-orders', nav);
    function render() {
      var u = currentUser();
      show(orders, u !== null && u.role !== 'merchant');
    }
    sessionListeners.push(render);
    render();
  }

  // ---------------------------------------------------------------- start

  function main() {
    localizeTimes(document);
    var sale = byTestId('sale');
    if (sale) {
      initSalePage(sale);
    }
    var orderPage = byTestId('order-page');
    if (orderPage) {
      initOrderPage(orderPage);
    }
    var myOrders = byTestId('my-orders');
    if (myOrders) {
      initMyOrdersPage(myOrders);
    }
    var admin = byTestId('admin');
    if (admin) {
      initAdminPage(admin);
    }
    var home = byTestId('home');
    if (home) {
      initHomePage(home);
    }
    initNav();
    if (sale || orderPage || admin || myOrders) {
      learnUser();
    }
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', main);
  } else {
    main();
  }
}());
