// The sale page: countdown, buy buttons, stock badges, captcha, the purchase and the shopper's
// orders in the sale.

import { byTestId, allByTestId, setText, show, enc, messenger } from './dom.js';
import { parseTime, formatClock, formatDuration, saleState } from './time.js';
import { clock, serverNow, onClock, startClock, syncClock } from './clock.js';
import { api, errorText, isUnauthenticated } from './api.js';
import { makePoller, failed, backoff, sleep } from './poll.js';
import { isOnline, onNetwork } from './network.js';
import { loggedIn, sessionExpired, onSession, initSession } from './session.js';
import { LIVE_STATUSES } from './status.js';
import { orderController } from './order.js';
import { t, href } from './i18n.js';

// A purchase whose answer does not come back is sent again (the same attempt, the same token) at
// most this many times in all, each waiting at most PURCHASE_TIMEOUT_MS for its answer.
const PURCHASE_TRIES = 3;
const PURCHASE_TIMEOUT_MS = 15000;
// Answers to a resend that say nothing of what became of the first send, whose answer was lost:
// this instance's sold-out flag or clock answers before the attempt is looked up, the token may
// have expired in the meantime, or the first send's outcome is not settled yet. The page then
// says the answer was lost and looks for the order, as when no answer came back at all.
const UNCERTAIN_AFTER_LOSS = ['SOLD_OUT', 'SALE_ENDED', 'INVALID_PURCHASE_TOKEN', 'UNAVAILABLE', 'RATE_LIMITED'];
// After a lost answer the orders are looked at this many times, this far apart.
const LOST_CHECKS = 10;
const LOST_CHECK_MS = 3000;

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
    // lostFor is the item of a purchase whose answer was lost, sent at lostSince (the shop's
    // clock): the order box looks for its order a few times (lostChecks), and the message says so
    // when it turns up.
    lostFor: null,
    lostSince: 0,
    lostChecks: 0,
    lostTimer: null,
    // stockAt is when the stock was last refreshed (Date.now()); stockFailing, that the last
    // refresh failed.
    stockAt: 0,
    stockFailing: false,
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
    retry: null, // the timer of the next try after a failed load
    failures: 0 // failed loads in a row
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
      var name = e.itemName || itemNames[e.itemId] || t('your item');
      if (status === 'PENDING') {
        say(t('Your order of {name} is confirmed: pay before the deadline below, or the unit goes back on sale.', { name: name }), 'ok');
      } else if (status === 'FAILED') {
        say(t('Your order of {name} could not be completed; nothing was charged.', { name: name }), 'error');
      }
    }
    render();
  }

  // addOrder shows an order (from the list, or just bought) and follows its status.
  function addOrder(o) {
    var id = String(o.orderId);
    var e = box.entries[id];
    if (e) {
      // Listed before the purchase's answer was found lost (my orders lists a QUEUED order at
      // once): it may be that purchase's all the same.
      foundLost(e, o.status);
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
    foundLost(e, o.status);
    e.ctl.follow(o);
    return e;
  }

  // foundLost: a live order of the item, reserved since the lost purchase was sent (a few
  // seconds of slack for the clocks), is that purchase's, which went through after all.
  function foundLost(e, status) {
    if (state.lostFor !== null && state.lostFor === e.itemId && LIVE_STATUSES[status] && e.createdAt >= state.lostSince - 5000) {
      state.lostFor = null;
      state.queuedFor = status === 'QUEUED' ? e.id : state.queuedFor;
      say(t('Your purchase of {name} went through after all: the order is below.', { name: e.itemName || itemNames[e.itemId] || t('the item') }), 'ok');
    }
  }

  function clearOrders() {
    box.gen++;
    window.clearTimeout(box.retry);
    Object.keys(box.entries).forEach(function (id) {
      box.entries[id].ctl.stop();
    });
    box.entries = {};
    state.queuedFor = null;
    state.lostFor = null;
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
    if (!isOnline()) {
      return; // loaded when the network is back (onNetwork below)
    }
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
      box.failures = 0;
      render();
      return;
    }
    if (isUnauthenticated(r)) {
      sessionExpired();
      return;
    }
    box.retry = window.setTimeout(loadOrders, Math.max(backoff(box.failures++, 2000, 30000), (r.retryAfter || 0) * 1000));
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
      }, Math.max(backoff(attempt, 2000, 30000), (r.retryAfter || 0) * 1000));
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
        setText(s, t('Ended'));
        s.classList.remove('stock-out', 'stock-low');
        return;
      }
      var n = soldOut(id) ? 0 : state.stock[id];
      if (typeof n !== 'number' || isNaN(n)) {
        return;
      }
      setText(s, n <= 0 ? t('sold out') : t('{n} left', { n: n }));
      s.setAttribute('data-stock', String(Math.max(0, n)));
      s.classList.toggle('stock-out', n <= 0);
      s.classList.toggle('stock-low', n > 0 && n <= 10);
      // A count the shop could not refresh is shown faded, with when it was last known.
      var stale = state.stockAt > 0 && (!isOnline() || state.stockFailing);
      s.classList.toggle('stock-stale', stale);
      if (stale) {
        s.title = t('Last known at {time}; the shop cannot be reached just now.', { time: formatClock(state.stockAt) });
      } else {
        s.removeAttribute('title');
      }
    });
  }

  function render() {
    var now = serverNow();
    var phase = phaseNow();
    if (countdown) {
      countdown.setAttribute('data-phase', phase);
    }
    if (phase === 'unknown') {
      setText(countdown, t('Syncing with the shop\u2019s clock\u2026'));
      setText(detail, '');
    } else if (phase === 'upcoming') {
      setText(countdown, t('Starts in {d}', { d: formatDuration(startsAt - now) }));
      setText(detail, t('Log in and solve the captcha now, so you are ready when the Buy buttons light up.'));
    } else if (phase === 'live') {
      setText(countdown, t('Live now'));
      setText(detail, t('Ends in {d}', { d: formatDuration(endsAt - now) }));
    } else {
      setText(countdown, t('Ended'));
      setText(detail, t('This sale is over.'));
    }
    var held = Date.now() < state.holdUntil;
    var h = holdings();
    var limitReached = state.limit === 'per-sale' && h.any !== null;
    buttons.forEach(function (b) {
      var id = b.getAttribute('data-item-id');
      var gone = soldOut(id);
      var mine = h.byItem[id];
      b.disabled = !(phase === 'live' && !gone && !state.inFlight && !held && !mine && !limitReached && isOnline());
      var label = t('Buy');
      if (state.inFlight && state.buyingItem === id) {
        label = t('Buying\u2026');
      } else if (mine) {
        label = mine === 'PAID' ? t('Bought') : t('Ordered');
      } else if (phase === 'ended') {
        label = t('Ended');
      } else if (gone) {
        label = t('Sold out');
      }
      setText(b, label);
      b.classList.toggle('button-held', !!mine);
    });
    itemNotes.forEach(function (n) {
      var id = n.getAttribute('data-item-id');
      var text = '';
      var mine = h.byItem[id];
      if (mine === 'PAID') {
        text = t('You bought this item.');
      } else if (mine === 'PENDING') {
        text = t('You ordered this item: pay for it in your orders below.');
      } else if (mine) {
        text = t('You ordered this item; it is being confirmed.');
      } else if (limitReached && phase !== 'ended') {
        text = t('One per shopper in this sale: you already have {name}.', { name: h.any.itemName || itemNames[h.any.itemId] || t('an item') });
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
      ? t('Solve this now, before the sale starts; then press Buy the moment it opens.')
      : t('Type the characters you see, then press Buy.');
  }

  async function loadCaptcha() {
    if (state.captchaLoading || !wantCaptcha()) {
      return;
    }
    state.captchaId = null;
    if (captchaAnswer) {
      captchaAnswer.value = '';
    }
    if (!isOnline()) {
      setText(captchaHint, t('You are offline: a captcha loads once the connection is back.'));
      return;
    }
    state.captchaLoading = true;
    setText(captchaHint, t('Loading a captcha\u2026'));
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
    setText(captchaHint, t('Could not load a captcha: {why} Use \u201cNew challenge\u201d to retry.', { why: r.ok ? t('the answer was not understood.') : errorText(r) }));
    if ((r.network || r.status >= 500 || r.code === 'RATE_LIMITED') && state.captchaRetries < 3) {
      window.setTimeout(loadCaptcha, Math.max(backoff(state.captchaRetries++, 3000, 30000), (r.retryAfter || 0) * 1000));
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
        say(t('Type the captcha answer first.'), 'error');
        return;
      }
      var open = buttons.filter(function (b) {
        return !b.disabled;
      });
      if (open.length === 1) {
        buy(open[0].getAttribute('data-item-id'));
      } else if (open.length > 1) {
        say(t('Answer ready: now press Buy on the item you want.'), 'info');
        focusOnKeyUp = open[0];
      } else if (state.phase === 'upcoming') {
        say(t('Answer ready: press Buy the moment the sale opens.'), 'info');
      } else {
        say(t('There is nothing to buy here right now.'), 'info');
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
      state.stockAt = Date.now();
      state.stockFailing = false;
      renderStock();
      render();
    } else if (state.phase !== 'ended') {
      state.stockFailing = true;
      renderStock();
      return failed((r.retryAfter || 0) * 1000); // back off while the shop cannot answer
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
        say(t('You already hold an order in this sale: '), 'notice', { text: t('view it'), href: href('/orders/' + enc(held)), testid: 'held-order-link', after: t('.') });
      } else {
        say(t('You already hold an order in this sale (one per shopper): '), 'notice', { text: t('see your orders'), href: href('/orders'), testid: 'held-order-link', after: t('.') });
      }
      loadOrders();
      return;
    }
    if (r.code === 'PAUSED') {
      // The merchant paused the sale: nothing was reserved; Buy waits as long as the shop asks.
      say(t('The sale is paused by the merchant for a moment: nothing was reserved. Try again when it resumes.'), 'notice');
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

  // sendPurchase sends the purchase of itemId with its purchase token. When no answer comes back
  // (the request failed, or its answer was lost or late) it sends the SAME attempt again, with
  // the same token to the same item, a few times with backoff while the browser is online: the
  // server answers the same attempt as it answered it the first time (202 with the same order
  // id), so this never makes a second purchase. It returns the last result: r.network set means
  // no answer ever came back; r.lost that an answer after a lost one cannot say what became of
  // the first (UNCERTAIN_AFTER_LOSS).
  async function sendPurchase(itemId, token) {
    var r = null;
    for (var i = 0; i < PURCHASE_TRIES; i++) {
      if (i > 0) {
        if (!isOnline()) {
          break;
        }
        say(t('No answer from the shop yet; asking again about the same purchase\u2026'), 'info');
        await sleep(backoff(i - 1, 1000, 4000));
        if (!isOnline()) {
          break;
        }
      }
      r = await api('POST', '/api/flash-sales/items/' + enc(itemId) + '/purchase', {}, {
        'X-Purchase-Token': token
      }, undefined, PURCHASE_TIMEOUT_MS);
      if (!r.network) {
        break;
      }
    }
    if (i > 0 && !r.network && !r.ok && UNCERTAIN_AFTER_LOSS.indexOf(r.code) >= 0) {
      r.lost = true;
    }
    return r;
  }

  // answerLost tells the shopper that the purchase was sent but no answer came back, so the page
  // cannot know whether it went through, and leads them to their orders; the order box catches
  // up by itself once the shop answers again.
  function answerLost(itemId, sentAt) {
    var name = itemNames[itemId] || t('the item');
    say(t('The shop\u2019s answer was lost (the network dropped), so this page cannot tell whether you bought {name}. Before buying again, check ', { name: name }),
      'error', { text: t('My orders'), href: href('/orders'), testid: 'lost-order-link', after: t(' to see whether it went through.') });
    state.lostFor = itemId;
    state.lostSince = sentAt;
    state.lostChecks = 0;
    window.clearTimeout(state.lostTimer);
    lookForLost();
  }

  // lookForLost loads the shopper's orders in the sale until the lost purchase's order turns up
  // (addOrder), ten times at most, a few seconds apart: an order still being recorded is not
  // listed yet.
  async function lookForLost() {
    await loadOrders();
    if (state.lostFor !== null && ++state.lostChecks < LOST_CHECKS) {
      state.lostTimer = window.setTimeout(lookForLost, LOST_CHECK_MS);
    }
  }

  async function buy(itemId) {
    if (state.inFlight) {
      return;
    }
    if (!isOnline()) {
      say(t('You are offline: nothing was sent. Buy once the connection is back.'), 'error');
      return;
    }
    if (!loggedIn()) {
      say(t('Please log in first.'), 'error');
      var user = byTestId('username', section);
      if (user) {
        user.focus();
      }
      return;
    }
    if (!state.captchaId) {
      say(state.captchaLoading ? t('The captcha is still loading; one moment.') : t('A captcha is needed first; a new one is on its way.'), 'error');
      loadCaptcha();
      return;
    }
    var answer = captchaAnswer ? captchaAnswer.value.trim() : '';
    if (!answer) {
      say(t('Type the captcha answer first.'), 'error');
      if (captchaAnswer) {
        captchaAnswer.focus();
      }
      return;
    }
    state.inFlight = true;
    state.buyingItem = itemId;
    state.lostFor = null; // a new attempt: its own answer tells
    render();
    say(t('Reserving your unit\u2026'), 'info');
    var newCaptcha = false;
    try {
      var tok = await api('POST', '/api/flash-sales/' + enc(saleId) + '/purchase-token', {
        captchaId: state.captchaId,
        answer: answer
      });
      if (!tok.ok || !tok.data || !tok.data.purchaseToken) {
        if (tok.ok) {
          say(t('The shop sent an answer this page does not understand; try again.'), 'error');
          return;
        }
        if (tok.network) {
          // No purchase was sent. The captcha may have been used up on the way: a new one.
          newCaptcha = true;
          say(t('No answer from the shop: nothing was bought (the purchase was not sent). Check your connection, then solve the new captcha and try again.'), 'error');
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
      var sentAt = serverNow();
      var p = await sendPurchase(itemId, String(tok.data.purchaseToken));
      if (p.network || p.lost) {
        answerLost(itemId, sentAt);
        return;
      }
      if (p.ok && p.data && p.data.orderId !== undefined && p.data.orderId !== null) {
        var orderId = String(p.data.orderId);
        // The unit is ours: the badge counts it at once, not a second later.
        state.ownBuys.push({ itemId: itemId, at: serverNow(), local: Date.now() });
        if (typeof state.stock[itemId] === 'number') {
          state.stock[itemId] = Math.max(0, state.stock[itemId] - 1);
        }
        renderStock();
        state.queuedFor = orderId;
        say(t('Got it! Your unit is reserved and the order is queued.'), 'ok');
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
        say(t('The shop sent an answer this page does not understand; check your order before trying again.'), 'error');
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

  // The network: offline, the Buy buttons wait (render); back online, the clock, the captcha and
  // the orders catch up (the stock and the orders' pollers resume by themselves).
  onNetwork(function (online) {
    renderStock();
    render();
    if (!online) {
      return;
    }
    syncClock().then(function (ok) {
      if (ok) {
        schedule();
        render();
      }
    });
    loadOrders();
    if (wantCaptcha() && !state.captchaId && !state.captchaLoading) {
      state.captchaRetries = 0;
      loadCaptcha();
    }
  });

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
