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
  // not the id, role and username (a login made elsewhere, cleared storage, or a login whose
  // username was typed in another case). force asks even when they are known. Best effort only.
  async function learnUser(force) {
    if (!loggedIn()) {
      return;
    }
    var known = currentUser();
    if (!force && known && typeof known.username === 'string') {
      return;
    }
    var r = await api('GET', '/api/auth/me', undefined, undefined, 'no-store');
    if (r.ok && r.data) {
      var u = {
        id: r.data.userId !== undefined && r.data.userId !== null ? String(r.data.userId) : '',
        role: typeof r.data.role === 'string' ? r.data.role : '',
        username: typeof r.data.username === 'string' ? r.data.username : ''
      };
      var before = store.get('fs_user');
      store.set('fs_user', JSON.stringify(u));
      if (before !== store.get('fs_user')) {
        sessionChanged();
      }
    } else if (r.status === 401) {
      sessionExpired();
    }
  }

  // userName is how the session area names a user: the username, or "shopper #2" for an
  // identity the shop has no username for.
  function userName(u) {
    if (u && u.username) {
      return String(u.username);
    }
    var who = u && u.role ? String(u.role) : 'user';
    return u && u.id ? who + ' #' + u.id : who;
  }

  // initSession wires the login/register form and the "signed in as" line of a session area.
  function initSession(area, say) {
    if (!area) {
      return;
    }
    var form = byTestId('login-form', area);
    var userLine = byTestId('session-user', area);
    var nameEl = byTestId('session-name', area);
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
        setText(nameEl, userName(u));
        if (userLine) {
          userLine.setAttribute('data-user-id', u.id ? String(u.id) : '');
          userLine.setAttribute('data-role', u.role ? String(u.role) : '');
        }
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
        // The name as typed until the server says how the account spells it (usernames are
        // case-insensitive).
        var user = { id: uid, role: role, username: typeof r.data.username === 'string' ? r.data.username : username };
        store.set('fs_user', JSON.stringify(user));
        form.elements.password.value = '';
        captchaId = '';
        if (regBox) {
          regAnswer.value = '';
          show(regBox, false);
        }
        say((action === 'register' ? 'Account created; signed in as ' : 'Signed in as ') + userName(user) + '.', 'ok');
        sessionChanged();
        if (action === 'login') {
          learnUser(true);
        }
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
    var notified = null; // the status hooks.onStatus was last told

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
      var s = status ? (hooks.words ? STATUS_WORDS[status] || status : status) : (hooks.words ? 'Checking…' : 'checking…');
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
        setText(payByEl, (hooks.words ? 'Pay by ' : 'pay by ') + formatDeadline(payBy, now));
        var left = payBy - now;
        setText(payLeftEl, left > 0 ? '(' + formatDuration(left) + ' left)' : '(time is up)');
        show(payByRow, true);
      } else {
        show(payByRow, false);
      }
      if (hooks.onStatus && orderId && status !== notified) {
        notified = status;
        hooks.onStatus(orderId, status, detail);
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
      // follow shows an order already fetched (an entry of the orders list), and keeps polling
      // it while it is not final.
      follow: function (data) {
        orderId = String(data.orderId);
        panel.setAttribute('data-order-id', orderId);
        setText(idEl, orderId);
        if (link) {
          link.setAttribute('href', '/orders/' + enc(orderId));
        }
        show(panel, true);
        learn(data);
        if (FINAL_STATUSES[status]) {
          poller.stop();
        } else if (!poller.isRunning()) {
          poller.start();
        }
      },
      stop: function () {
        poller.stop();
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

  // LIVE_STATUSES are the orders that hold a unit: they count against the purchase limit.
  var LIVE_STATUSES = { QUEUED: true, PENDING: true, PAID: true };

  function initSalePage(section) {
    var saleId = section.getAttribute('data-sale-id') || '';
    var startsAt = parseTime(section.getAttribute('data-starts-at'));
    var endsAt = parseTime(section.getAttribute('data-ends-at'));
    var countdown = byTestId('countdown', section);
    var detail = byTestId('countdown-detail', section);
    var buttons = allByTestId('buy-button', section);
    var stockEls = allByTestId('stock', section);
    var itemNotes = allByTestId('item-note', section);
    var say = messenger(byTestId('message', section));
    var captchaBox = byTestId('captcha', section);
    var captchaImg = byTestId('captcha-image', section);
    var captchaAnswer = byTestId('captcha-answer', section);
    var captchaHint = byTestId('captcha-hint', section);
    var captchaRefresh = byTestId('captcha-refresh', section);
    var orderBox = byTestId('sale-orders', section);
    var orderList = byTestId('sale-order-list', section);
    var orderTemplate = byTestId('sale-order-template', section);
    var itemNames = {};
    allByTestId('item', section).forEach(function (li) {
      var name = byTestId('item-name', li);
      itemNames[li.getAttribute('data-item-id')] = name ? name.textContent.trim() : '';
    });

    var state = {
      phase: null,
      stock: {},
      // refusedAt[itemId] is the displayed stock when a purchase came back SOLD_OUT: the item
      // stays sold out until the displayed stock reaches 0 or rises above that figure.
      refusedAt: {},
      // ownBuys are this page's purchases of the last seconds: a stock snapshot taken before
      // one (the endpoint is cached for a second) still counts its unit, so it is taken off.
      ownBuys: [],
      inFlight: false,
      buyingItem: null,
      holdUntil: 0,
      endedByServer: false,
      captchaId: null,
      captchaLoading: false,
      captchaRetries: 0,
      // From GET /api/flash-sales/{saleId}: "per-sale" or "per-item" (null until known), the
      // currency and the prices in minor units, for the order box.
      limit: null,
      currency: null,
      prices: {},
      // queuedFor is the order the "…the order is queued." message is about; it gives way
      // when that order is no longer queued.
      queuedFor: null,
      captchaWanted: null
    };
    var startTimer = null;
    var endTimer = null;

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

    // ---- the order box: every order of the signed-in shopper in this sale, newest first.

    var box = {
      entries: {}, // order id -> { id, li, ctl, status, itemId, itemName, createdAt }
      gen: 0, // bumped when the list is thrown away (logout)
      signedIn: null,
      retry: null
    };

    function orderEntries() {
      return Object.keys(box.entries).map(function (id) {
        return box.entries[id];
      }).sort(function (a, b) {
        return b.createdAt - a.createdAt;
      });
    }

    // holdings says which items the shopper holds a live order for, and one such order.
    function holdings() {
      var byItem = {};
      var any = null;
      if (!loggedIn()) {
        return { byItem: byItem, any: any };
      }
      orderEntries().forEach(function (e) {
        if (LIVE_STATUSES[e.status] && e.itemId) {
          if (byItem[e.itemId] !== 'PAID') {
            byItem[e.itemId] = e.status;
          }
          if (any === null || e.status === 'PAID') {
            any = e;
          }
        }
      });
      return { byItem: byItem, any: any };
    }

    function layoutOrders() {
      var list = orderEntries();
      var current = Array.prototype.slice.call(orderList.children);
      var same = current.length === list.length && list.every(function (e, i) {
        return current[i] === e.li;
      });
      if (!same) {
        list.forEach(function (e) {
          orderList.appendChild(e.li);
        });
      }
      show(orderBox, list.length > 0);
    }

    function dropOrder(id) {
      var e = box.entries[id];
      if (!e) {
        return;
      }
      e.ctl.stop();
      if (e.li.parentNode) {
        e.li.parentNode.removeChild(e.li);
      }
      delete box.entries[id];
      layoutOrders();
      render();
    }

    function orderStatusChanged(e, status, d) {
      e.status = status;
      if (d && d.itemName) {
        e.itemName = d.itemName;
      }
      if (state.queuedFor === e.id && status !== 'QUEUED') {
        state.queuedFor = null;
        var name = e.itemName || itemNames[e.itemId] || 'your item';
        if (status === 'PENDING') {
          say('Your order of ' + name + ' is confirmed: pay before the deadline below, or the unit goes back on sale.', 'ok');
        } else if (status === 'FAILED') {
          say('Your order of ' + name + ' could not be completed; nothing was charged.', 'error');
        }
      }
      render();
    }

    // addOrder shows an order (from the list, or just bought) and follows its status.
    function addOrder(o) {
      var id = String(o.orderId);
      var e = box.entries[id];
      if (e) {
        return e;
      }
      var frag = orderTemplate.content.cloneNode(true);
      var li = frag.querySelector('[data-testid="order"]');
      e = {
        id: id,
        li: li,
        status: null,
        itemId: o.itemId !== undefined && o.itemId !== null ? String(o.itemId) : '',
        itemName: typeof o.itemName === 'string' ? o.itemName : '',
        createdAt: parseTime(o.createdAt)
      };
      if (isNaN(e.createdAt)) {
        e.createdAt = serverNow();
      }
      box.entries[id] = e;
      e.ctl = orderController(li, say, {
        words: true,
        onStatus: function (oid, status, d) {
          orderStatusChanged(e, status, d);
        },
        onMissing: function () {
          dropOrder(id);
        }
      });
      layoutOrders();
      e.ctl.follow(o);
      return e;
    }

    function clearOrders() {
      box.gen++;
      window.clearTimeout(box.retry);
      Object.keys(box.entries).forEach(function (id) {
        box.entries[id].ctl.stop();
      });
      box.entries = {};
      state.queuedFor = null;
      if (orderList) {
        orderList.replaceChildren();
      }
      show(orderBox, false);
    }

    // loadOrders fetches the shopper's orders in this sale and shows those not shown yet (the
    // shown ones follow their own status).
    async function loadOrders() {
      if (!loggedIn() || !orderList || !orderTemplate) {
        return;
      }
      window.clearTimeout(box.retry);
      var g = box.gen;
      var r = await api('GET', '/api/flash-sales/orders?saleId=' + encodeURIComponent(saleId), undefined, undefined, 'no-store');
      if (g !== box.gen || !loggedIn()) {
        return;
      }
      if (r.ok && r.data && Array.isArray(r.data.orders)) {
        r.data.orders.forEach(function (o) {
          if (o && o.orderId !== undefined && o.orderId !== null &&
            (o.saleId === undefined || o.saleId === null || String(o.saleId) === saleId)) {
            addOrder(o);
          }
        });
        render();
        return;
      }
      if (isUnauthenticated(r)) {
        sessionExpired();
        return;
      }
      box.retry = window.setTimeout(loadOrders, 5000);
    }

    // loadSaleInfo learns the purchase limit, the currency and the prices.
    async function loadSaleInfo(attempt) {
      var r = await api('GET', '/api/flash-sales/' + enc(saleId));
      if (r.ok && r.data) {
        state.limit = r.data.purchaseLimit === 'per-item' ? 'per-item' : 'per-sale';
        state.currency = typeof r.data.currency === 'string' ? r.data.currency : null;
        (Array.isArray(r.data.items) ? r.data.items : []).forEach(function (it) {
          if (it && it.itemId !== undefined && it.itemId !== null) {
            state.prices[String(it.itemId)] = it.priceCents;
          }
        });
        render();
        return;
      }
      if (attempt < 5 && r.status !== 404) {
        window.setTimeout(function () {
          loadSaleInfo(attempt + 1);
        }, 3000);
      }
    }

    // ---- rendering

    function renderStock() {
      var ended = state.phase === 'ended';
      stockEls.forEach(function (s) {
        var id = s.getAttribute('data-item-id');
        s.classList.toggle('stock-ended', ended);
        if (ended) {
          // An ended sale offers nothing: no "N left" in green.
          setText(s, 'Ended');
          s.classList.remove('stock-out', 'stock-low');
          return;
        }
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
        setText(countdown, 'Starts in ' + formatDuration(startsAt - now));
        setText(detail, 'Log in and solve the captcha now, so you are ready when the Buy buttons light up.');
      } else if (phase === 'live') {
        setText(countdown, 'Live now');
        setText(detail, 'Ends in ' + formatDuration(endsAt - now));
      } else {
        setText(countdown, 'Ended');
        setText(detail, 'This sale is over.');
      }
      var held = Date.now() < state.holdUntil;
      var h = holdings();
      var limitReached = state.limit === 'per-sale' && h.any !== null;
      buttons.forEach(function (b) {
        var id = b.getAttribute('data-item-id');
        var gone = soldOut(id);
        var mine = h.byItem[id];
        b.disabled = !(phase === 'live' && !gone && !state.inFlight && !held && !mine && !limitReached);
        var label = 'Buy';
        if (state.inFlight && state.buyingItem === id) {
          label = 'Buying\u2026';
        } else if (mine) {
          label = mine === 'PAID' ? 'Bought' : 'Ordered';
        } else if (phase === 'ended') {
          label = 'Ended';
        } else if (gone) {
          label = 'Sold out';
        }
        setText(b, label);
        b.classList.toggle('button-held', !!mine);
      });
      itemNotes.forEach(function (n) {
        var id = n.getAttribute('data-item-id');
        var text = '';
        var mine = h.byItem[id];
        if (mine === 'PAID') {
          text = 'You bought this item.';
        } else if (mine === 'PENDING') {
          text = 'You ordered this item: pay for it in your orders below.';
        } else if (mine) {
          text = 'You ordered this item; it is being confirmed.';
        } else if (limitReached && phase !== 'ended') {
          text = 'One per shopper in this sale: you already have ' + (h.any.itemName || itemNames[h.any.itemId] || 'an item') + '.';
        }
        setText(n, text);
        n.setAttribute('data-kind', mine ? 'held' : 'limit');
        show(n, text !== '');
      });
      if (phase !== state.phase) {
        state.phase = phase;
        phaseChanged();
      }
      // The captcha box shows while there is something to buy (checked on every change).
      var want = wantCaptcha();
      if (want !== state.captchaWanted) {
        state.captchaWanted = want;
        refreshCaptchaArea();
      }
      Object.keys(box.entries).forEach(function (id) {
        box.entries[id].ctl.tick();
      });
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
    // so that it is solved during the countdown, not after the start; not shown to a shopper
    // who can buy nothing more here (the limit reached).

    function wantCaptcha() {
      if (!loggedIn() || !(state.phase === 'upcoming' || state.phase === 'live')) {
        return false;
      }
      var h = holdings();
      if (state.limit === 'per-sale' && h.any !== null) {
        return false;
      }
      return buttons.some(function (b) {
        var id = b.getAttribute('data-item-id');
        return !h.byItem[id] && !soldOut(id);
      });
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

    // Enter in the answer field submits it: it buys the one item there is to buy, or leads to
    // the Buy buttons when there are several (or says to wait for the start). The focus moves
    // to the first Buy button once the key is released, so that the same press does not click it.
    var focusOnKeyUp = null;
    if (captchaAnswer) {
      captchaAnswer.addEventListener('keyup', function (ev) {
        if (ev.key === 'Enter' && focusOnKeyUp) {
          var target = focusOnKeyUp;
          focusOnKeyUp = null;
          target.focus();
        }
      });
      captchaAnswer.addEventListener('keydown', function (ev) {
        if (ev.key !== 'Enter' || ev.isComposing) {
          return;
        }
        ev.preventDefault();
        if (!captchaAnswer.value.trim()) {
          say('Type the captcha answer first.', 'error');
          return;
        }
        var open = buttons.filter(function (b) {
          return !b.disabled;
        });
        if (open.length === 1) {
          buy(open[0].getAttribute('data-item-id'));
        } else if (open.length > 1) {
          say('Answer ready: now press Buy on the item you want.', 'info');
          focusOnKeyUp = open[0];
        } else if (state.phase === 'upcoming') {
          say('Answer ready: press Buy the moment the sale opens.', 'info');
        } else {
          say('There is nothing to buy here right now.', 'info');
        }
      });
    }

    // ---- stock badges, polled every second from the micro-cached endpoint.

    var stockPoller = makePoller(async function () {
      var r = await api('GET', '/api/flash-sales/' + enc(saleId) + '/stock');
      if (r.ok && r.data && Array.isArray(r.data.items)) {
        var asOf = parseTime(r.data.asOf);
        var recent = Date.now() - 10000;
        state.ownBuys = state.ownBuys.filter(function (b) {
          return b.local > recent;
        });
        r.data.items.forEach(function (it) {
          if (it && it.itemId !== undefined && it.itemId !== null) {
            var id = String(it.itemId);
            var n = Number(it.stock);
            state.ownBuys.forEach(function (b) {
              if (b.itemId === id && (isNaN(asOf) ? Date.now() - b.local < 2000 : asOf < b.at)) {
                n--;
              }
            });
            n = Math.max(0, n);
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
      renderStock();
      if (state.phase === 'ended') {
        stockPoller.stop();
      }
    }

    // ---- buying

    function handleBuyError(r, itemId) {
      if (r.code === 'ALREADY_PURCHASED') {
        // The limit: lead to the order already held, and show it in the order box.
        var held = r.data && r.data.orderId !== undefined && r.data.orderId !== null ? String(r.data.orderId) : '';
        if (held) {
          say('You already hold an order in this sale: ', 'notice', { text: 'view it', href: '/orders/' + enc(held), testid: 'held-order-link', after: '.' });
        } else {
          say('You already hold an order in this sale (one per shopper): ', 'notice', { text: 'see your orders', href: '/orders', testid: 'held-order-link', after: '.' });
        }
        loadOrders();
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
          // The unit is ours: the badge counts it at once, not a second later.
          state.ownBuys.push({ itemId: itemId, at: serverNow(), local: Date.now() });
          if (typeof state.stock[itemId] === 'number') {
            state.stock[itemId] = Math.max(0, state.stock[itemId] - 1);
          }
          renderStock();
          state.queuedFor = orderId;
          say('Got it! Your unit is reserved and the order is queued.', 'ok');
          if (orderList && orderTemplate) {
            addOrder({
              orderId: orderId,
              itemId: itemId,
              saleId: saleId,
              status: typeof p.data.status === 'string' ? p.data.status : 'QUEUED',
              payBy: null,
              itemName: itemNames[itemId] || '',
              priceCents: state.prices[itemId],
              currency: state.currency
            });
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
        if (newCaptcha) {
          state.captchaId = null;
        }
        render();
        if (newCaptcha) {
          loadCaptcha();
        }
      }
    }

    buttons.forEach(function (b) {
      b.addEventListener('click', function () {
        buy(b.getAttribute('data-item-id'));
      });
    });

    // ---- session changes: the order box follows who is signed in.

    function sessionUpdate() {
      var on = loggedIn();
      if (on !== box.signedIn) {
        box.signedIn = on;
        clearOrders();
        if (on) {
          loadOrders();
        }
      }
      render();
    }

    sessionListeners.push(sessionUpdate);

    // Back to the tab, or to the page from the browser's cache: orders may have changed
    // elsewhere (another tab, "My orders").
    document.addEventListener('visibilitychange', function () {
      if (!document.hidden) {
        loadOrders();
      }
    });
    window.addEventListener('pageshow', function (ev) {
      if (ev.persisted) {
        loadOrders();
      }
    });

    initSession(byTestId('session', section), say);

    onClock(function () {
      schedule();
      render();
    });
    startClock();
    loadSaleInfo(0);
    sessionUpdate();
    window.setInterval(render, 250);
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

  // initHomePage keeps each sale card's badge and countdown ("Starts in 1:12", "Ends in 12:03")
  // in step with the shop's clock, as the sale page does, and hides a sale once it has ended
  // (the page is cached for a few seconds, so a sale may end while it is shown).
  function initHomePage(home) {
    var cards = allByTestId('sale-card', home);
    if (cards.length === 0) {
      return;
    }
    var allEnded = byTestId('all-ended', home);
    function render() {
      if (!clock.synced) {
        return;
      }
      var now = serverNow();
      var shown = 0;
      cards.forEach(function (card) {
        var s = parseTime(card.getAttribute('data-starts-at'));
        var e = parseTime(card.getAttribute('data-ends-at'));
        var badge = byTestId('sale-status', card);
        var countdown = byTestId('card-countdown', card);
        if (isNaN(s) || isNaN(e) || !badge) {
          shown++;
          return;
        }
        var st = saleState(now, s, e);
        card.setAttribute('data-status', st);
        badge.setAttribute('data-status', st);
        badge.className = 'badge badge-' + st;
        setText(badge, STATUS_LABELS[st]);
        if (countdown) {
          countdown.setAttribute('data-phase', st);
          setText(countdown, st === 'upcoming' ? 'Starts in ' + formatDuration(s - now)
            : st === 'live' ? 'Ends in ' + formatDuration(e - now) : 'Ended');
          show(countdown, true);
        }
        show(card, st !== 'ended');
        if (st !== 'ended') {
          shown++;
        }
      });
      show(allEnded, shown === 0);
    }
    // Tick just after each second of the shop's clock, when the countdowns change.
    function tick() {
      render();
      window.setTimeout(tick, 1000 - (serverNow() % 1000) + 10);
    }
    onClock(render);
    startClock();
    tick();
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

  // ---- admin: prices and the merchant's words

  // The most a price may be, in minor units (the server's limit: 100,000,000.00).
  var MAX_PRICE_MINOR = 10000000000;

  // parseMoney reads a price typed in a currency's major unit ("19.99", "19,99", "¥1,999.5")
  // and returns {minor: integer minor units} or {error: why not}.
  function parseMoney(text, currency) {
    var c = Object.prototype.hasOwnProperty.call(CURRENCIES, currency) ? CURRENCIES[currency] : { digits: 2 };
    var t = String(text || '').replace(/[\s\u00a0]/g, '').replace(/^(?:[\u00a5$\u20ac]|CNY|USD|EUR)/i, '');
    if (t === '') {
      return { error: 'empty' };
    }
    if (t.indexOf('.') < 0 && /^\d+,\d{1,2}$/.test(t)) {
      t = t.replace(',', '.'); // a decimal comma: 19,99
    } else if (/^\d{1,3}(,\d{3})+(\.\d*)?$/.test(t)) {
      t = t.replace(/,/g, ''); // thousands: 1,999.00
    }
    var m = /^(\d+)(?:\.(\d*))?$/.exec(t);
    if (!m) {
      return { error: 'format' };
    }
    var frac = m[2] || '';
    if (frac.length > c.digits) {
      return { error: 'digits' };
    }
    while (frac.length < c.digits) {
      frac += '0';
    }
    var minor = Number(m[1] + frac);
    if (!isFinite(minor) || minor > MAX_PRICE_MINOR) {
      return { error: 'range' };
    }
    return { minor: minor };
  }

  function priceProblem(why) {
    switch (why) {
      case 'empty':
        return 'Give the item a price, like 19.99.';
      case 'digits':
        return 'Use at most two decimals, like 19.99.';
      case 'range':
        return 'The price must be at most 100,000,000.';
      default:
        return 'Type the price as a number, like 19.99.';
    }
  }

  // formatWindow writes a payment window given in seconds: "10 min", "1 h 30 min", "45 s".
  function formatWindow(seconds) {
    var s = Number(seconds);
    if (!isFinite(s) || s <= 0) {
      return '';
    }
    if (s % 60 !== 0) {
      return s < 60 ? s + ' s' : Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
    }
    var min = s / 60;
    if (min < 60) {
      return min + ' min';
    }
    return Math.floor(min / 60) + ' h' + (min % 60 ? ' ' + (min % 60) + ' min' : '');
  }

  // ADMIN_MESSAGES turns the server's refusals of a new sale (services/sales.go and the JSON
  // decoding) into the merchant's words, next to the field they are about. A field of an item
  // carries its index in the request ($1); other numbers of the message fill in $2.
  var ADMIN_MESSAGES = [
    [/^name must not be empty/, 'name', 'Give the sale a name.'],
    [/^name must be at most (\d+)/, 'name', 'The name is too long: at most $1 characters.'],
    [/^name must/, 'name', 'The name has characters that cannot be used.'],
    [/^startsAt and endsAt are required/, 'startsAt', 'Give the start and the end as a date and a time.'],
    [/^startsAt must be an RFC 3339/, 'startsAt', 'Give the start as a date and a time.'],
    [/^endsAt must be an RFC 3339/, 'endsAt', 'Give the end as a date and a time.'],
    [/^endsAt must be after startsAt/, 'endsAt', 'The end must be after the start.'],
    [/^endsAt must be in the future/, 'endsAt', 'The end must be in the future.'],
    [/^a sale lasts at most (\d+) days/, 'endsAt', 'A sale lasts at most $1 days: bring the end closer to the start.'],
    [/^startsAt is out of range/, 'startsAt', 'The start must be a date between the years 2000 and 9999.'],
    [/^a sale needs at least one item/, 'items', 'Add at least one item.'],
    [/^a sale has at most (\d+) items/, 'items', 'A sale has at most $1 items: remove some.'],
    [/^paymentWindowSeconds must/, 'paymentWindow', 'The payment window is 1 to 1440 minutes (a day).'],
    [/^currency must/, 'currency', 'Choose CNY, USD or EUR.'],
    [/^purchaseLimit must/, 'purchaseLimit', 'Choose one of the two purchase limits.'],
    [/^items\[(\d+)\]\.name must not be empty/, 'itemName', 'Give the item a name.'],
    [/^items\[(\d+)\]\.name must be at most (\d+)/, 'itemName', 'The item name is too long: at most $2 characters.'],
    [/^items\[(\d+)\]\.name must/, 'itemName', 'The item name has characters that cannot be used.'],
    [/^items\[(\d+)\]\.priceCents must/, 'price', 'The price must be between 0 and 100,000,000.'],
    [/^items\[(\d+)\]\.quantity must be between 1 and (\d+)/, 'quantity', 'Quantity must be at least 1 and at most $2.'],
    [/^items\[(\d+)\]\.quantity/, 'quantity', 'Quantity must be at least 1.']
  ];

  // adminMessage finds the field of a server message: {field, index (of the item or -1), text}.
  function adminMessage(message) {
    var msg = String(message || '');
    for (var i = 0; i < ADMIN_MESSAGES.length; i++) {
      var m = ADMIN_MESSAGES[i][0].exec(msg);
      if (!m) {
        continue;
      }
      var item = /^items\[/.test(msg);
      var text = ADMIN_MESSAGES[i][2].replace(/\$(\d)/g, function (_, n) {
        return m[Number(n)] === undefined ? '' : Number(m[Number(n)]).toLocaleString('en-US');
      });
      return { field: ADMIN_MESSAGES[i][1], index: item ? Number(m[1]) : -1, text: text };
    }
    return null;
  }

  function initAdminPage(admin) {
    var say = messenger(byTestId('message', admin));
    var panel = byTestId('admin-panel', admin);
    var form = byTestId('create-sale-form', admin);
    var formStatus = messenger(byTestId('form-status', admin));
    var rows = byTestId('item-rows', admin);
    var template = byTestId('item-row-template', admin);
    var addItem = byTestId('add-item', admin);
    var salesList = byTestId('admin-sales', admin);
    var salesEmpty = byTestId('admin-sales-empty', admin);
    var stockPanel = byTestId('stock-panel', admin);
    var stockRows = byTestId('stock-rows', admin);
    var stockSaleName = byTestId('stock-sale-name', admin);
    var stockUpdated = byTestId('stock-updated', admin);
    var stockClose = byTestId('stock-close', admin);
    var stockHome = stockPanel ? stockPanel.parentNode : null;
    var itemNames = {};
    var selected = null;
    var merchant = false;
    var formBanner = false; // the message area holds a sentence about the form
    var errorSeq = 0;

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

    function limitText(limit) {
      return limit === 'per-item' ? 'one unit per shopper of each item' : 'one unit per shopper in the sale';
    }

    function renderSales(sales) {
      if (stockPanel && salesList.contains(stockPanel)) {
        stockHome.appendChild(stockPanel); // keep it while the entries are rebuilt
      }
      salesList.replaceChildren();
      show(salesEmpty, sales.length === 0);
      sales.forEach(function (s) {
        var id = String(s.saleId);
        var name = s.name || 'sale ' + id;
        var li = el('li', { class: 'admin-sale', 'data-testid': 'admin-sale', 'data-sale-id': id });
        if (selected && selected.id === id) {
          li.classList.add('selected');
          selected.sale = s;
        }
        var head = el('div', { class: 'admin-sale-head' });
        head.appendChild(el('strong', { 'data-testid': 'admin-sale-name' }, name));
        var status = typeof s.status === 'string' ? s.status : '';
        head.appendChild(el('span', { class: 'badge badge-' + status.replace(/[^a-z]/gi, ''), 'data-testid': 'admin-sale-status' }, status || '?'));
        li.appendChild(head);
        var times = el('p', { class: 'admin-sale-times' });
        times.appendChild(document.createTextNode('Starts '));
        times.appendChild(timeElement(s.startsAt));
        times.appendChild(document.createTextNode(' \u00b7 Ends '));
        times.appendChild(timeElement(s.endsAt));
        li.appendChild(times);
        var terms = [];
        if (s.currency) {
          terms.push('Prices in ' + s.currency);
        }
        if (s.paymentWindowSeconds) {
          terms.push('pay within ' + formatWindow(s.paymentWindowSeconds));
        }
        terms.push(limitText(s.purchaseLimit));
        li.appendChild(el('p', { class: 'admin-sale-terms', 'data-testid': 'admin-sale-terms' }, terms.join(' \u00b7 ')));
        var actions = el('div', { class: 'admin-sale-actions' });
        var on = selected !== null && selected.id === id;
        var pick = el('button', { type: 'button', class: 'button button-small', 'data-testid': 'show-stock', 'data-sale-id': id }, on ? 'Hide live stock' : 'Live stock');
        pick.setAttribute('aria-pressed', on ? 'true' : 'false');
        pick.setAttribute('aria-controls', 'stock-panel');
        pick.addEventListener('click', function () {
          if (selected && selected.id === id) {
            closeStock();
            return;
          }
          selectSale(id, name, s);
        });
        actions.appendChild(pick);
        actions.appendChild(el('a', { href: '/sales/' + enc(id), class: 'button button-small button-secondary', 'data-testid': 'open-sale' }, 'Open sale page'));
        li.appendChild(actions);
        salesList.appendChild(li);
      });
      placeStock();
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

    // ---- the live stock table of the selected sale, inside that sale's entry

    function saleEntry(id) {
      return salesList.querySelector('[data-testid="admin-sale"][data-sale-id="' + (window.CSS && CSS.escape ? CSS.escape(id) : id) + '"]');
    }

    // placeStock puts the open panel in the selected sale's entry (or above the list while
    // the entry is not there yet) and marks the entry and its button.
    function placeStock() {
      if (!stockPanel) {
        return null;
      }
      var li = selected ? saleEntry(selected.id) : null;
      if (li) {
        if (stockPanel.parentNode !== li) {
          li.appendChild(stockPanel);
        }
      } else if (selected) {
        salesList.parentNode.insertBefore(stockPanel, salesList);
      } else if (stockPanel.parentNode !== stockHome) {
        stockHome.appendChild(stockPanel);
      }
      Array.prototype.forEach.call(salesList.querySelectorAll('[data-testid="admin-sale"]'), function (entry) {
        var on = selected !== null && entry.getAttribute('data-sale-id') === selected.id;
        entry.classList.toggle('selected', on);
        var b = entry.querySelector('[data-testid="show-stock"]');
        if (b) {
          b.setAttribute('aria-pressed', on ? 'true' : 'false');
          setText(b, on ? 'Hide live stock' : 'Live stock');
        }
      });
      return li;
    }

    function selectSale(id, name, sale) {
      selected = { id: id, name: name, sale: sale || null, prices: null };
      setText(stockSaleName, name);
      show(stockPanel, true);
      stockRows.replaceChildren();
      setText(stockUpdated, 'Loading\u2026');
      var li = placeStock();
      // Open where the merchant is looking: the top of the sale's entry in view, focus on the panel.
      var target = li || stockPanel;
      if (target.scrollIntoView) {
        target.scrollIntoView({ block: 'start' });
      }
      try {
        stockPanel.focus({ preventScroll: true });
      } catch (e) {
        stockPanel.focus();
      }
      stockPoller.restart();
    }

    function closeStock() {
      var id = selected ? selected.id : null;
      selected = null;
      stockPoller.stop();
      show(stockPanel, false);
      placeStock();
      var b = id ? salesList.querySelector('[data-testid="show-stock"][data-sale-id="' + (window.CSS && CSS.escape ? CSS.escape(id) : id) + '"]') : null;
      if (b) {
        b.focus();
      }
    }

    if (stockClose) {
      stockClose.addEventListener('click', closeStock);
    }

    function numberText(v) {
      return v === undefined || v === null ? '\u2013' : String(v);
    }

    // loadPrices reads the prices of the selected sale's items (the public sale), once.
    async function loadPrices(sel) {
      var r = await api('GET', '/api/flash-sales/' + enc(sel.id), undefined, undefined, 'no-store');
      if (r.ok && r.data && Array.isArray(r.data.items)) {
        var prices = {};
        r.data.items.forEach(function (it) {
          prices[String(it.itemId)] = it.priceCents;
        });
        sel.prices = prices;
        sel.currency = r.data.currency || (sel.sale && sel.sale.currency) || 'CNY';
      }
    }

    var STOCK_COLUMNS = [
      ['quantity', 'Quantity'],
      ['displayed', 'Displayed'],
      ['frozen', 'Frozen'],
      ['real', 'Real'],
      ['paid', 'Paid']
    ];

    async function loadStock() {
      if (!selected) {
        return false;
      }
      var sel = selected;
      var id = sel.id;
      if (!sel.prices) {
        await loadPrices(sel);
      }
      var r = await api('GET', '/api/admin/sales/' + enc(id) + '/stock', undefined, undefined, 'no-store');
      if (selected !== sel) {
        return false;
      }
      if (r.ok && r.data && Array.isArray(r.data.items)) {
        var trs = [];
        r.data.items.forEach(function (it) {
          var itemId = String(it.itemId);
          var tr = el('tr', { 'data-testid': 'stock-row', 'data-item-id': itemId });
          tr.appendChild(el('th', { scope: 'row', 'data-col': 'name' }, it.name || itemNames[itemId] || 'item #' + itemId));
          var price = sel.prices && Object.prototype.hasOwnProperty.call(sel.prices, itemId) ? formatMoney(sel.prices[itemId], sel.currency) : '';
          tr.appendChild(el('td', { 'data-col': 'price', 'data-label': 'Price', 'data-testid': 'stock-price' }, price || '\u2013'));
          STOCK_COLUMNS.forEach(function (c) {
            tr.appendChild(el('td', { 'data-col': c[0], 'data-label': c[1] }, numberText(it[c[0]])));
          });
          var ok = it.reconciled === true;
          var cell = el('td', { 'data-col': 'reconciled', 'data-label': 'Reconciled', class: ok ? 'reconciled' : 'drift' }, ok ? '\u2713' : 'drift');
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
            var td = el('td', { colspan: String(STOCK_COLUMNS.length + 3) });
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

    function currency() {
      return form && form.elements.currency ? form.elements.currency.value || 'CNY' : 'CNY';
    }

    // showSymbols writes the chosen currency's symbol before every price field.
    function showSymbols() {
      var c = currency();
      var symbol = Object.prototype.hasOwnProperty.call(CURRENCIES, c) ? CURRENCIES[c].symbol : c;
      allByTestId('item-price-symbol', form).forEach(function (s) {
        setText(s, symbol);
      });
      if (template && template.content) {
        allByTestId('item-price-symbol', template.content).forEach(function (s) {
          setText(s, symbol);
        });
      }
    }

    function itemRows() {
      return rows ? allByTestId('item-row', rows) : [];
    }

    // renumber keeps "Item 1", "Item 2"… and the Remove buttons' names in order.
    function renumber() {
      itemRows().forEach(function (row, i) {
        setText(byTestId('item-number', row), String(i + 1));
        var b = byTestId('remove-item', row);
        if (b) {
          b.setAttribute('aria-label', 'Remove item ' + (i + 1));
        }
      });
    }

    function addRow() {
      if (!template || !rows) {
        return null;
      }
      var frag = template.content.cloneNode(true);
      var row = frag.querySelector('[data-testid="item-row"]');
      rows.appendChild(frag);
      renumber();
      showSymbols();
      return row;
    }

    // ---- the form's errors, next to their fields

    var FIELD_ERRORS = {
      name: 'error-name',
      startsAt: 'error-starts-at',
      endsAt: 'error-ends-at',
      currency: 'error-currency',
      paymentWindow: 'error-payment-window',
      purchaseLimit: 'error-purchase-limit',
      items: 'error-items'
    };

    // fieldParts finds a field's error element, its control and its [data-field] wrapper.
    function fieldParts(field, row) {
      var wrap = (row || form).querySelector('[data-field="' + field + '"]');
      var err = row ? (wrap && wrap.querySelector('.field-error')) : byTestId(FIELD_ERRORS[field], form);
      var control = wrap ? wrap.querySelector('input, select') : null;
      if (field === 'items') {
        control = addItem;
      }
      return { wrap: wrap, err: err, control: control };
    }

    function setFieldError(field, row, text) {
      var p = fieldParts(field, row);
      if (!p.err) {
        formStatus(text, 'error');
        return null;
      }
      if (!p.err.id) {
        p.err.id = 'field-error-' + (++errorSeq);
      }
      setText(p.err, text);
      show(p.err, true);
      if (p.wrap) {
        p.wrap.classList.add('has-error');
      }
      if (p.control && p.control !== addItem) {
        p.control.setAttribute('aria-invalid', 'true');
        var ids = (p.control.getAttribute('aria-describedby') || '').split(/\s+/).filter(Boolean);
        if (ids.indexOf(p.err.id) < 0) {
          ids.push(p.err.id);
          p.control.setAttribute('aria-describedby', ids.join(' '));
        }
      }
      return p.control;
    }

    function clearError(wrap) {
      if (!wrap) {
        return;
      }
      wrap.classList.remove('has-error');
      if (wrap.getAttribute('data-field') === 'items') {
        var itemsErr = byTestId('error-items', form); // not the errors of the rows inside
        setText(itemsErr, '');
        show(itemsErr, false);
        return;
      }
      var err = wrap.querySelector('.field-error');
      if (err) {
        setText(err, '');
        show(err, false);
      }
      Array.prototype.forEach.call(wrap.querySelectorAll('[aria-invalid]'), function (c) {
        c.removeAttribute('aria-invalid');
      });
    }

    function clearAllErrors() {
      Array.prototype.forEach.call(form.querySelectorAll('[data-field]'), clearError);
    }

    // clearBanners drops the sentences about an earlier attempt: they are stale once the form changes.
    function clearBanners() {
      formStatus('', 'info');
      if (formBanner) {
        formBanner = false;
        say('', 'info');
      }
    }

    // ---- reading the form

    // readForm checks what can be checked here and returns the request, or null after
    // showing each problem next to its field (the first focused).
    function readForm() {
      var first = null;
      function problem(field, row, text) {
        var c = setFieldError(field, row, text);
        if (!first) {
          first = c || true;
        }
      }
      var name = form.elements.name.value.trim();
      if (!name) {
        problem('name', null, 'Give the sale a name.');
      }
      var startsAt = localInputToRFC3339(form.elements.startsAt.value);
      var endsAt = localInputToRFC3339(form.elements.endsAt.value);
      if (!startsAt) {
        problem('startsAt', null, 'Give the start as a date and a time.');
      }
      if (!endsAt) {
        problem('endsAt', null, 'Give the end as a date and a time.');
      }
      if (startsAt && endsAt) {
        var s = Date.parse(startsAt);
        var e = Date.parse(endsAt);
        if (e <= s) {
          problem('endsAt', null, 'The end must be after the start.');
        } else if (e <= serverNow()) {
          problem('endsAt', null, 'The end must be in the future.');
        } else if (e - s > 30 * 86400000) {
          problem('endsAt', null, 'A sale lasts at most 30 days: bring the end closer to the start.');
        }
      }
      var cur = currency();
      var windowText = String(form.elements.paymentWindowMinutes.value || '').trim();
      var minutes = Number(windowText);
      if (!/^\d+$/.test(windowText) || minutes < 1 || minutes > 1440) {
        problem('paymentWindow', null, 'The payment window is 1 to 1440 minutes (a day), in whole minutes.');
      }
      var limitInput = form.querySelector('input[name="purchaseLimit"]:checked');
      var limit = limitInput ? limitInput.value : 'per-sale';
      var items = [];
      var sent = [];
      itemRows().forEach(function (row) {
        var itemName = row.querySelector('[name="itemName"]').value.trim();
        var priceText = row.querySelector('[name="price"]').value.trim();
        var qtyText = row.querySelector('[name="quantity"]').value.trim();
        if (!itemName && !priceText && !qtyText) {
          return; // an empty row is left out
        }
        var ok = true;
        if (!itemName) {
          problem('itemName', row, 'Give the item a name.');
          ok = false;
        }
        var price = parseMoney(priceText, cur);
        if (price.error) {
          problem('price', row, priceProblem(price.error));
          ok = false;
        }
        var qty = Number(qtyText);
        if (!/^-?\d+$/.test(qtyText)) {
          problem('quantity', row, qtyText === '' ? 'Quantity must be at least 1.' : 'Quantity is a whole number, like 100.');
          ok = false;
        } else if (qty < 1) {
          problem('quantity', row, 'Quantity must be at least 1.');
          ok = false;
        } else if (qty > 1000000) {
          problem('quantity', row, 'Quantity must be at most 1,000,000.');
          ok = false;
        }
        if (ok) {
          items.push({ name: itemName, priceCents: price.minor, quantity: qty });
          sent.push(row);
        }
      });
      if (items.length === 0 && !first) {
        problem('items', null, 'Add at least one item.');
      }
      if (first) {
        if (first !== true && first.focus) {
          first.focus();
        }
        return null;
      }
      return {
        body: { name: name, startsAt: startsAt, endsAt: endsAt, currency: cur, paymentWindowSeconds: minutes * 60,
          purchaseLimit: limit, items: items },
        rows: sent
      };
    }

    if (addItem) {
      addItem.addEventListener('click', function () {
        var row = addRow();
        clearError(form.querySelector('[data-field="items"]'));
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
        clearBanners();
        if (itemRows().length > 1) {
          var next = row.nextElementSibling || row.previousElementSibling;
          row.remove();
          renumber();
          var focus = next && next.querySelector('input');
          if (focus) {
            focus.focus();
          }
        } else {
          Array.prototype.forEach.call(row.querySelectorAll('input'), function (i) {
            i.value = '';
          });
          Array.prototype.forEach.call(row.querySelectorAll('[data-field]'), clearError);
        }
      });
    }

    if (form) {
      // A change to a field clears its error (both times together: one is judged by the other)
      // and the banners of the last attempt.
      var onChange = function (ev) {
        var wrap = ev.target.closest ? ev.target.closest('[data-field]') : null;
        if (!wrap) {
          return;
        }
        var f = wrap.getAttribute('data-field');
        clearError(wrap);
        if (f === 'startsAt' || f === 'endsAt') {
          clearError(form.querySelector('[data-field="startsAt"]'));
          clearError(form.querySelector('[data-field="endsAt"]'));
        }
        if (f === 'currency') {
          showSymbols();
          Array.prototype.forEach.call(form.querySelectorAll('[data-field="price"]'), clearError);
        }
        if (wrap.closest('[data-testid="item-row"]')) {
          clearError(form.querySelector('[data-field="items"]'));
        }
        clearBanners();
      };
      form.addEventListener('input', onChange);
      form.addEventListener('change', onChange);
      showSymbols();

      form.addEventListener('submit', async function (ev) {
        ev.preventDefault();
        clearAllErrors();
        clearBanners();
        var req = readForm();
        if (!req) {
          formStatus('Check the fields marked in red.', 'error');
          return;
        }
        var submit = form.querySelector('button[type="submit"]');
        if (submit) {
          submit.disabled = true;
        }
        formStatus('Creating the sale\u2026', 'info');
        var r = await api('POST', '/api/admin/sales', req.body);
        if (submit) {
          submit.disabled = false;
        }
        if (r.ok && r.data && r.data.saleId !== undefined && r.data.saleId !== null) {
          var saleId = String(r.data.saleId);
          var name = req.body.name;
          var n = req.body.items.length;
          (Array.isArray(r.data.items) ? r.data.items : []).forEach(function (it) {
            itemNames[String(it.itemId)] = it.name;
          });
          form.reset();
          itemRows().slice(1).forEach(function (row) {
            row.remove();
          });
          renumber();
          showSymbols();
          prefillTimes();
          formStatus('', 'info');
          say('Created \u201c' + name + '\u201d (sale ' + saleId + ') with ' + n + (n === 1 ? ' item.' : ' items.'), 'ok');
          formBanner = true;
          await loadSales();
          selectSale(saleId, name, null);
          return;
        }
        if (authProblem(r)) {
          formStatus('', 'info');
          return;
        }
        var known = !r.network && r.code === 'INVALID_INPUT' ? adminMessage(r.message) : null;
        if (known) {
          var row = known.index >= 0 ? req.rows[known.index] || null : null;
          var control = setFieldError(known.field, row, known.text);
          formStatus('Check the fields marked in red.', 'error');
          if (control && control.focus) {
            control.focus();
          }
          return;
        }
        formStatus(r.network ? errorText(r) : r.message ? sentence(r.message) : errorText(r), 'error');
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
        placeStock();
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
