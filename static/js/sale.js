// The sale page: countdown, buy buttons, stock badges, captcha, the purchase and the shopper's
// orders in the sale.

import { byTestId, allByTestId, setText, show, enc, messenger } from './dom.js';
import { parseTime, formatDuration, saleState } from './time.js';
import { clock, serverNow, onClock, startClock, syncClock } from './clock.js';
import { api, errorText, isUnauthenticated } from './api.js';
import { makePoller } from './poll.js';
import { loggedIn, sessionExpired, onSession, initSession } from './session.js';
import { LIVE_STATUSES } from './status.js';
import { orderController } from './order.js';

export function initSalePage(section) {
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
    if (r.code === 'PAUSED') {
      // The merchant paused the sale: nothing was reserved; Buy waits as long as the shop asks.
      say('The sale is paused by the merchant for a moment: nothing was reserved. Try again when it resumes.', 'notice');
      hold(r.retryAfter === null ? 1 : r.retryAfter);
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
        // a paused sale may have spent the captcha already: a fresh one for the next try
        newCaptcha = tok.code === 'CAPTCHA_FAILED' || tok.code === 'PAUSED';
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
      if (p.code === 'INVALID_PURCHASE_TOKEN' || p.code === 'PAUSED') {
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

  onSession(sessionUpdate);

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
