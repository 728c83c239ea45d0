// The "My orders" page.

import { byTestId, setText, show, enc, messenger } from './dom.js';
import { parseTime, formatDeadline, formatDuration, timeElement } from './time.js';
import { serverNow, onClock, startClock } from './clock.js';
import { formatMoney } from './money.js';
import { api, errorText, isUnauthenticated } from './api.js';
import { loggedIn, sessionExpired, onSession, initSession, loginPrompt } from './session.js';
import { STATUS_WORDS, queueOf, queueText } from './status.js';
import { backoff } from './poll.js';
import { isOnline, onNetwork } from './network.js';
import { t, href, lang } from './i18n.js';

export function initMyOrdersPage(page) {
  var say = messenger(byTestId('message', page));
  var prompt = loginPrompt(page);
  var loading = byTestId('orders-loading', page);
  var empty = byTestId('orders-empty', page);
  var list = byTestId('order-list', page);
  var template = byTestId('order-row-template', page);
  var more = byTestId('load-more', page);
  var rows = {}; // order id -> { li, order, checkedAt, checks, notBefore, failures, asking }
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
    var item = o.itemName ? String(o.itemName) : t('Item {id}', { id: o.itemId === undefined ? '' : o.itemId });
    li.setAttribute('data-order-id', id);
    li.setAttribute('data-status', st);
    setText(part(li, 'order-row-item'), item);
    var badge = part(li, 'order-row-status');
    badge.setAttribute('data-status', st);
    setText(badge, STATUS_WORDS[st] || st || t('unknown'));
    setText(part(li, 'order-row-price'), formatMoney(o.priceCents, o.currency));
    var sale = part(li, 'order-row-sale');
    setText(sale, o.saleName ? String(o.saleName) : t('Sale {id}', { id: o.saleId === undefined ? '' : o.saleId }));
    if (o.saleId !== undefined && o.saleId !== null && o.saleId !== '') {
      sale.setAttribute('href', href('/sales/' + enc(o.saleId)));
    }
    var deadline = parseTime(o.payBy);
    var pending = st === 'PENDING' && !isNaN(deadline);
    show(part(li, 'order-row-deadline'), pending);
    if (pending) {
      var now = serverNow();
      var left = deadline - now;
      setText(part(li, 'order-row-pay-by'), t('Pay by {time}', { time: formatDeadline(deadline, now) }));
      setText(part(li, 'order-row-pay-left'), left > 0 ? t('({d} left)', { d: formatDuration(left) }) : t('(time is up)'));
    }
    var notes = {
      QUEUED: t('Your unit is reserved; the order is being recorded.'),
      EXPIRED: t('Not paid in time; the unit went back on sale.'),
      CANCELLED: t('Cancelled; the unit went back on sale.'),
      FAILED: t('Could not be completed; nothing was charged.')
    };
    // A QUEUED order fetched on its own carries its place in the queue.
    var queue = queueOf(o);
    // Two sentences: a space between them in English, none after Chinese's full stop.
    setText(part(li, 'order-row-note'), (notes[st] || '') + (queue ? (lang === 'zh' ? '' : ' ') + queueText(queue.position, queue.waitSeconds) : ''));
    var created = part(li, 'order-row-created');
    var at = parseTime(o.createdAt);
    created.replaceChildren();
    if (!isNaN(at)) {
      // "Ordered {time}": the words around the <time> element, in the page's order.
      var words = t('Ordered {time}').split('{time}');
      created.appendChild(document.createTextNode(words[0]));
      created.appendChild(timeElement(o.createdAt));
      if (words[1]) {
        created.appendChild(document.createTextNode(words[1]));
      }
    }
    var link = part(li, 'order-row-link');
    link.setAttribute('href', href('/orders/' + enc(id)));
    setText(link, st === 'PENDING' ? t('Pay or cancel') : t('View order'));
    link.setAttribute('aria-label', t(st === 'PENDING' ? 'Pay or cancel: {item}' : 'View order: {item}', { item: item }));
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
      entry = rows[id] = { li: li, order: o, checkedAt: 0, checks: 0, notBefore: 0, failures: 0, asking: false };
      list.appendChild(frag);
    }
    renderRow(entry);
  }

  function renderMore() {
    var label = retry !== null ? t('Try again') : t('Load more');
    show(more, retry !== null || next !== '');
    if (more) {
      more.disabled = busy;
      setText(more, busy && list.children.length > 0 ? t('Loading…') : label);
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
    say(t('Could not load your orders: {why}', { why: errorText(r) }), 'error');
  }

  // restart throws the list away and loads the first page (or shows the login sentence).
  function restart() {
    gen++;
    busy = false;
    asking = 0;
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

  // Every second: the countdowns of the pending orders, and the orders whose status is due to
  // change are asked about again: a QUEUED one (listed before the writer has recorded it) until
  // it is recorded, however long a backlog takes, so that it turns PENDING by itself; a PENDING
  // one past its deadline (the server expires it within seconds) a few times. Each no sooner
  // than 3 s after its last answer nor the server's Retry-After, backing off while the shop
  // cannot answer, a few at a time (a shopper may have many queued), and not while the tab is
  // hidden or the browser offline.
  var CHECK_GAP = 3000;
  var CHECKS_AT_ONCE = 3;
  var asking = 0; // status requests under way

  async function recheck(entry) {
    entry.asking = true;
    asking++;
    entry.checks++;
    var g = gen;
    var r = await api('GET', '/api/flash-sales/orders/' + enc(entry.order.orderId), undefined, undefined, 'no-store');
    if (g !== gen) {
      return; // the list was thrown away meanwhile (asking restarted with it)
    }
    asking--;
    entry.asking = false;
    entry.checkedAt = Date.now();
    var wait = (r.retryAfter || 0) * 1000;
    if (r.ok && r.data) {
      if (r.data.status !== entry.order.status) {
        entry.checks = 0; // a new status: its own few checks (a QUEUED one had many)
      }
      entry.order = r.data;
      entry.failures = 0;
      renderRow(entry);
    } else if (r.status === 404 && entry.order.status === 'QUEUED') {
      // A reservation whose purchase did not go through (its publish failed and the unit went
      // back: the purchase was answered with an error): it never became an order.
      dropRow(entry);
      return;
    } else if (r.network || r.status >= 500) {
      wait = Math.max(wait, backoff(entry.failures++, CHECK_GAP, 30000));
    }
    entry.notBefore = Date.now() + wait;
  }

  function dropRow(entry) {
    var id = String(entry.order.orderId);
    if (entry.li.parentNode) {
      entry.li.parentNode.removeChild(entry.li);
    }
    delete rows[id];
    show(empty, list.children.length === 0 && next === '');
  }

  function tick() {
    var now = serverNow();
    var due = [];
    Object.keys(rows).forEach(function (id) {
      var entry = rows[id];
      var st = entry.order.status;
      if (st === 'PENDING') {
        renderRow(entry);
      }
      var changing = st === 'QUEUED' || (st === 'PENDING' && parseTime(entry.order.payBy) <= now && entry.checks < 20);
      if (changing && !entry.asking && Date.now() - entry.checkedAt >= CHECK_GAP && Date.now() >= entry.notBefore) {
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
    due.slice(0, Math.max(0, CHECKS_AT_ONCE - asking)).forEach(recheck);
  }

  onClock(tick);
  startClock();
  window.setInterval(tick, 1000);

  // Back online after a failed load: load it again.
  onNetwork(function (online) {
    if (online && retry !== null && !busy) {
      loadPage(retry);
    }
  });

  // Back to this page from the browser's cache: the orders may have changed meanwhile.
  window.addEventListener('pageshow', function (ev) {
    if (ev.persisted) {
      restart();
    }
  });

  var wasSignedIn = null;
  onSession(function () {
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
