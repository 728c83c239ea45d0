// The "My orders" page: the signed-in shopper's orders, newest first, a page at a time (each row
// written by orders_row.js); the rows whose status is due to change are asked about again.

import { byTestId, setText, show, enc, messenger } from './dom.js';
import { parseTime } from './time.js';
import { serverNow, onClock, startClock } from './clock.js';
import { api, errorText, isUnauthenticated } from './api.js';
import { loggedIn, sessionExpired, onSession, initSession, loginPrompt } from './session.js';
import { backoff } from './poll.js';
import { isOnline, onNetwork } from './network.js';
import { t } from './i18n.js';
import { renderRow } from './orders_row.js';
import { refundUnderWay } from './status.js';

// Every second: the countdowns of the pending orders, and the orders whose status is due to
// change are asked about again: a QUEUED one (listed before the writer has recorded it) until
// it is recorded, however long a backlog takes, so that it turns PENDING by itself; a PENDING
// one past its deadline (the server expires it within seconds) a few times; a PENDING one
// before its deadline every 10 s, and at once when the tab comes back into view (paid or
// cancelled in another tab, the row says so without a reload); an ended one whose late payment
// is being refunded, every 10 s until the refund is made. Each no sooner than 3 s after its last
// answer nor the server's Retry-After, backing off while the shop cannot answer, a few at a time
// (a shopper may have many queued), and not while the tab is hidden or the browser offline.
const CHECK_GAP = 3000;
const SLOW_GAP = 10000;
const REFUND_CHECKS = 60; // ten minutes of a refund's checks; the order page follows it further
const CHECKS_AT_ONCE = 3;

function addRow(L, o) {
  if (!o || o.orderId === undefined || o.orderId === null) {
    return;
  }
  var id = String(o.orderId);
  var entry = L.rows[id];
  if (entry) {
    entry.order = o;
  } else {
    var frag = L.template.content.cloneNode(true);
    var li = frag.querySelector('[data-testid="order-row"]');
    entry = L.rows[id] = { li: li, order: o, checkedAt: 0, checks: 0, notBefore: 0, failures: 0, asking: false };
    L.list.appendChild(frag);
  }
  entry.listedAt = Date.now(); // what the list said is as fresh as an answer of its own
  renderRow(entry.li, entry.order);
}

function renderMore(L) {
  var label = L.retry !== null ? t('Try again') : t('Load more');
  show(L.more, L.retry !== null || L.next !== '');
  if (L.more) {
    L.more.disabled = L.busy;
    setText(L.more, L.busy && L.list.children.length > 0 ? t('Loading…') : label);
  }
}

async function loadPage(L, cursor) {
  if (L.busy || !loggedIn()) {
    return;
  }
  L.busy = true;
  var g = L.gen;
  L.retry = null;
  show(L.loading, L.list.children.length === 0);
  renderMore(L);
  var r = await api('GET', '/api/flash-sales/orders' + (cursor ? '?cursor=' + encodeURIComponent(cursor) : ''), undefined, undefined, 'no-store');
  if (g !== L.gen) {
    return; // thrown away meanwhile; whoever did it started afresh
  }
  L.busy = false;
  show(L.loading, false);
  if (r.ok && r.data && Array.isArray(r.data.orders)) {
    r.data.orders.forEach(function (o) {
      addRow(L, o);
    });
    L.next = typeof r.data.next === 'string' ? r.data.next : '';
    show(L.empty, L.list.children.length === 0);
    L.say('', 'info');
    renderMore(L);
    return;
  }
  renderMore(L);
  if (isUnauthenticated(r)) {
    sessionExpired();
    return;
  }
  L.retry = cursor;
  renderMore(L);
  L.say(t('Could not load your orders: {why}', { why: errorText(r) }), 'error');
}

// restart throws the list away and loads the first page (or shows the login sentence).
function restart(L) {
  L.gen++;
  L.busy = false;
  L.asking = 0;
  L.rows = {};
  L.next = '';
  L.retry = null;
  L.list.replaceChildren();
  show(L.empty, false);
  show(L.loading, false);
  L.say('', 'info');
  var signedIn = loggedIn();
  L.prompt(signedIn);
  renderMore(L);
  if (signedIn) {
    loadPage(L, '');
  }
}

function dropRow(L, entry) {
  var id = String(entry.order.orderId);
  if (entry.li.parentNode) {
    entry.li.parentNode.removeChild(entry.li);
  }
  delete L.rows[id];
  show(L.empty, L.list.children.length === 0 && L.next === '');
}

async function recheck(L, entry) {
  entry.asking = true;
  L.asking++;
  // counted: the quick checks of a pending order past its deadline (a few), and the checks of a
  // refund (the provider may refuse it for good: the row stops asking after a while)
  if (entry.order.status === 'PENDING' ? parseTime(entry.order.payBy) <= serverNow() : refundUnderWay(entry.order.paymentStatus, entry.order.refunded)) {
    entry.checks++;
  }
  var g = L.gen;
  var r = await api('GET', '/api/flash-sales/orders/' + enc(entry.order.orderId), undefined, undefined, 'no-store');
  if (g !== L.gen) {
    return; // the list was thrown away meanwhile (asking restarted with it)
  }
  L.asking--;
  entry.asking = false;
  entry.checkedAt = Date.now();
  var wait = (r.retryAfter || 0) * 1000;
  if (r.ok && r.data) {
    if (r.data.status !== entry.order.status) {
      entry.checks = 0; // a new status: its own few checks (a QUEUED one had many)
    }
    // an entry of a fair start's draw stays one (the list said so; an answer may leave it out)
    entry.order = Object.assign({}, r.data, { draw: r.data.draw === true || entry.order.draw === true });
    entry.failures = 0;
    renderRow(entry.li, entry.order);
  } else if (r.status === 404 && entry.order.status === 'QUEUED') {
    // A reservation whose purchase did not go through (its publish failed and the unit went
    // back: the purchase was answered with an error): it never became an order.
    dropRow(L, entry);
    return;
  } else if (r.network || r.status >= 500) {
    wait = Math.max(wait, backoff(entry.failures++, CHECK_GAP, 30000));
  }
  entry.notBefore = Date.now() + wait;
}

// dueAt is when a row is next asked about (Date.now() time; Infinity: not again).
function dueAt(entry, now) {
  var o = entry.order;
  var st = o.status;
  if (st === 'QUEUED' || (st === 'PENDING' && parseTime(o.payBy) <= now && entry.checks < 20)) {
    return entry.checkedAt + CHECK_GAP;
  }
  if (st === 'PENDING' || (refundUnderWay(o.paymentStatus, o.refunded) && entry.checks < REFUND_CHECKS)) {
    return Math.max(entry.checkedAt, entry.listedAt || 0) + SLOW_GAP;
  }
  return Infinity;
}

function tick(L) {
  var now = serverNow();
  var due = [];
  Object.keys(L.rows).forEach(function (id) {
    var entry = L.rows[id];
    var st = entry.order.status;
    if (st === 'PENDING') {
      renderRow(entry.li, entry.order);
    }
    if (!entry.asking && Date.now() >= entry.notBefore && Date.now() >= dueAt(entry, now)) {
      due.push(entry);
    }
  });
  if (document.hidden || !isOnline()) {
    return;
  }
  // The longest unasked first, so that every row gets its turn.
  due.sort(function (a, b) {
    return a.checkedAt - b.checkedAt;
  });
  due.slice(0, Math.max(0, CHECKS_AT_ONCE - L.asking)).forEach(function (entry) {
    recheck(L, entry);
  });
}

// follow keeps the list up to date: the clock's ticks, the network coming back after a failed
// load, the page coming back from the browser's cache and who is signed in.
function follow(L, page) {
  var onTick = function () {
    tick(L);
  };
  onClock(onTick);
  startClock();
  window.setInterval(onTick, 1000);
  // Back online after a failed load: load it again.
  onNetwork(function (online) {
    if (online && L.retry !== null && !L.busy) {
      loadPage(L, L.retry);
    }
  });
  // Back into view (paid or cancelled in another tab, maybe): the rows that can still change
  // (dueAt) are asked about at once.
  document.addEventListener('visibilitychange', function () {
    if (document.hidden) {
      return;
    }
    var now = serverNow();
    Object.keys(L.rows).forEach(function (id) {
      var entry = L.rows[id];
      var last = Math.max(entry.checkedAt, entry.listedAt || 0);
      if (dueAt(entry, now) !== Infinity && Date.now() - last >= CHECK_GAP) {
        entry.checkedAt = entry.listedAt = 0;
      }
    });
    tick(L);
  });
  // Back to this page from the browser's cache: the orders may have changed meanwhile.
  window.addEventListener('pageshow', function (ev) {
    if (ev.persisted) {
      restart(L);
    }
  });
  var wasSignedIn = null;
  onSession(function () {
    var signedIn = loggedIn();
    if (signedIn !== wasSignedIn) {
      wasSignedIn = signedIn;
      restart(L);
    }
  });
  initSession(byTestId('session', page), L.say);
  wasSignedIn = loggedIn();
}

export function initMyOrdersPage(page) {
  var L = {
    say: messenger(byTestId('message', page)),
    prompt: loginPrompt(page),
    loading: byTestId('orders-loading', page),
    empty: byTestId('orders-empty', page),
    list: byTestId('order-list', page),
    template: byTestId('order-row-template', page),
    more: byTestId('load-more', page),
    rows: {}, // order id -> { li, order, checkedAt, checks, notBefore, failures, asking }
    next: '', // the cursor of the next page; '' on the last
    retry: null, // the cursor to fetch again after a failure
    gen: 0, // bumped when the list is thrown away (logout, back from the cache)
    busy: false,
    asking: 0 // status requests under way
  };
  if (!L.list || !L.template) {
    return;
  }
  if (L.more) {
    L.more.addEventListener('click', function () {
      loadPage(L, L.retry !== null ? L.retry : L.next);
    });
  }
  follow(L, page);
  restart(L);
}
