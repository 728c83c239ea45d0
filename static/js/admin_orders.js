// The orders of one sale (/admin/sales/{id}/orders): GET /api/admin/sales/{id}/orders, 50 a page,
// newest first, filtered by status and shopper (a username, or #id for a shopper the shop has no
// account of); the filter is kept in the address (?username= or ?userId=), so a reload or a
// shared link shows the same list. The CSV link downloads every order of the sale.

import './i18n_zh_admin.js'; // first: the merchant's words before any module runs
import { byTestId, setText, show, el, enc, messenger } from './dom.js';
import { formatDate, parseTime } from './time.js';
import { api } from './api.js';
import { formatMoney } from './money.js';
import { merchantPage, SALE_NOT_FOUND, adminErrorText as errorText } from './admin_merchant.js';
import { t } from './i18n.js';
import { STATUS_WORDS } from './status.js'; // the words of every status, NOT_SELECTED and ENTERED included, in one place

function when(v) {
  var ms = parseTime(v);
  return isNaN(ms) ? '\u2013' : formatDate(ms);
}

// paymentCell says what became of the order's money: paid (the amount the provider took),
// awaiting the provider's confirmation, refunded (a payment that came after the order had expired
// or been cancelled) or its refund still being made, or nothing. The provider's ids are in its
// title, to find the payment at the provider.
function paymentCell(O, o) {
  var currency = O.sale ? O.sale.currency : 'CNY';
  var amount = typeof o.paidCents === 'number' ? formatMoney(o.paidCents, currency) : '';
  var text = '\u2013'; // as the page writes a time it does not have
  var state = 'none';
  switch (o.paymentStatus) {
    case 'paid':
      text = amount ? t('Paid {amount}', { amount: amount }) : t('Paid');
      state = 'paid';
      break;
    case 'free':
      text = t('Free');
      state = 'free';
      break;
    case 'awaiting':
      text = t('Awaiting confirmation');
      state = 'awaiting';
      break;
    case 'refunded':
      if (typeof o.refundFailure === 'string' && o.refundFailure) {
        state = 'refund-failed';
        text = amount ? t('Refund of {amount} refused', { amount: amount }) : t('Refund refused');
        break;
      }
      state = o.refunded ? 'refunded' : 'refunding';
      text = o.refunded ? (amount ? t('Refunded {amount}', { amount: amount }) : t('Refunded'))
        : (amount ? t('Refund of {amount} being made', { amount: amount }) : t('Refund being made'));
      break;
  }
  var td = el('td', { 'data-col': 'payment', 'data-label': t('Payment'), 'data-testid': 'order-payment', 'data-payment': state }, text);
  if (state === 'refund-failed') {
    // the provider's own words (not translated): what to look for in its dashboard
    td.appendChild(el('span', { class: 'refund-reason', 'data-testid': 'order-refund-reason' }, o.refundFailure));
  }
  var ids = [];
  if (o.paymentId) {
    ids.push(t('payment {id}', { id: o.paymentId }));
  }
  if (o.refundId) {
    ids.push(t('refund {id}', { id: o.refundId }));
  }
  if (ids.length) {
    td.title = ids.join(t(', '));
  }
  return td;
}

// loadSale reads the sale's name and items (the public sale: the orders route below is the
// one that checks it is the merchant's).
async function loadSale(O) {
  var r = await api('GET', '/api/flash-sales/' + enc(O.saleId), undefined, undefined, 'no-store');
  if (!r.ok || !r.data) {
    return r;
  }
  var s = r.data;
  O.sale = { name: s.name || t('sale {id}', { id: O.saleId }), currency: s.currency || 'CNY', items: {} };
  (Array.isArray(s.items) ? s.items : []).forEach(function (it) {
    O.sale.items[String(it.itemId)] = { name: it.name, priceCents: it.priceCents };
  });
  setText(byTestId('orders-sale-name', O.root), O.sale.name);
  document.title = t('Orders \u00b7 {name}', { name: O.sale.name }) + ' \u00b7 flashsale';
  return r;
}

// shopper is the shopper field read: {username} or {userId} (from "#42"), or {} when empty.
function shopper(O) {
  var v = O.userInput.value.trim();
  if (v === '') {
    return {};
  }
  return v.charAt(0) === '#' ? { userId: v.slice(1) } : { username: v };
}

// shopperText names the shopper of the filter as the rows do: the username, or #id.
function shopperText(O) {
  var who = shopper(O);
  return who.userId ? '#' + who.userId : who.username || '';
}

function query(O, cursor) {
  var q = new URLSearchParams();
  if (O.statusSelect.value) {
    q.set('status', O.statusSelect.value);
  }
  var who = shopper(O);
  if (who.username) {
    q.set('username', who.username);
  } else if (who.userId) {
    q.set('userId', who.userId);
  }
  if (cursor) {
    q.set('cursor', cursor);
  }
  return q.toString();
}

// shopperCell names the order's shopper by username; one the shop has no account of (the identity
// may be external) by #id, as before. Either links to that shopper's orders.
function shopperCell(O, o) {
  var name = typeof o.username === 'string' && o.username !== '' ? o.username : '';
  var td = el('td', { 'data-col': 'user', 'data-label': t('Shopper'), 'data-testid': 'order-user', 'data-user-id': String(o.userId) });
  var q = name ? 'username=' + encodeURIComponent(name) : 'userId=' + encodeURIComponent(String(o.userId));
  var a = el('a', { href: '?' + q + langParam(), 'data-testid': 'order-user-link', title: t('Only the orders of this shopper') }, name || '#' + o.userId);
  a.addEventListener('click', function (ev) {
    ev.preventDefault();
    O.userInput.value = name || '#' + o.userId;
    applyFilter(O);
  });
  td.appendChild(a);
  return td;
}

// langParam keeps a ?lang= of the address in the links the page writes.
function langParam() {
  var l = new URLSearchParams(window.location.search).get('lang');
  return l === 'zh' || l === 'en' ? '&lang=' + l : '';
}

function orderRow(O, o) {
  var tr = el('tr', { class: 'stack-row', 'data-testid': 'order-row', 'data-order-id': String(o.orderId), 'data-status': String(o.status) });
  var idCell = el('th', { scope: 'row', 'data-col': 'order' });
  idCell.appendChild(el('code', null, String(o.orderId)));
  tr.appendChild(idCell);
  var item = O.sale && O.sale.items[String(o.itemId)];
  var itemText = item ? item.name + ' \u00b7 ' + formatMoney(item.priceCents, O.sale.currency) : t('item #{id}', { id: o.itemId });
  tr.appendChild(el('td', { 'data-col': 'item', 'data-label': t('Item') }, itemText));
  tr.appendChild(shopperCell(O, o));
  var st = el('td', { 'data-col': 'status', 'data-label': t('Status'), 'data-testid': 'order-status' });
  st.appendChild(el('span', { class: 'badge order-badge', 'data-status': String(o.status) }, STATUS_WORDS[o.status] || String(o.status)));
  tr.appendChild(st);
  tr.appendChild(paymentCell(O, o));
  tr.appendChild(el('td', { 'data-col': 'created', 'data-label': t('Ordered') }, when(o.createdAt)));
  tr.appendChild(el('td', { 'data-col': 'payBy', 'data-label': t('Pay by') }, when(o.payBy)));
  tr.appendChild(el('td', { 'data-col': 'paidAt', 'data-label': t('Paid') }, when(o.paidAt)));
  return tr;
}

// summaryText says which orders the page shows.
function summaryText(O, orders, number) {
  var filters = [];
  if (O.statusSelect.value) {
    filters.push(STATUS_WORDS[O.statusSelect.value] || O.statusSelect.value);
  }
  if (shopperText(O)) {
    filters.push(t('shopper {name}', { name: shopperText(O) }));
  }
  var what = filters.length ? t(' ({filters})', { filters: filters.join(t(', ')) }) : '';
  if (orders.length === 0) {
    return number > 1 ? t('No more orders{filter}.', { filter: what }) : t('No orders{filter} yet.', { filter: what });
  }
  var from = (number - 1) * 50 + 1;
  var words = { from: from, to: from + orders.length - 1, filter: what, page: number };
  return O.page.next ? t('Orders {from}\u2013{to}{filter}, newest first, page {page}.', words)
    : t('Orders {from}\u2013{to}{filter}, newest first, page {page}, the last.', words);
}

function showPage(O, data, cursor, number) {
  O.page.cursor = cursor;
  O.page.number = number;
  O.page.next = typeof data.next === 'string' ? data.next : '';
  var orders = data.orders;
  var rows = byTestId('orders-rows', O.root);
  rows.replaceChildren.apply(rows, orders.map(function (o) {
    return orderRow(O, o);
  }));
  show(byTestId('orders-table', O.root), orders.length > 0);
  show(byTestId('orders-empty', O.root), orders.length === 0);
  setText(O.summary, summaryText(O, orders, number));
  O.first.disabled = number <= 1;
  O.next.disabled = !O.page.next;
  // shown with the first page: before it, it would sit where the rows come and move down with them
  show(byTestId('orders-pager', O.root), true);
}

// saleReady reads the sale once; false when it cannot (said).
async function saleReady(O, seq) {
  if (O.sale) {
    return true;
  }
  var s = await loadSale(O);
  if (seq !== O.page.seq) {
    return false;
  }
  if (!s.ok) {
    if (!O.gate.authProblem(s)) {
      show(O.panel, s.status !== 404);
      O.say(s.status === 404 ? SALE_NOT_FOUND : t('Could not load the sale: {why}', { why: errorText(s) }), 'error');
      setText(O.summary, '');
    }
    return false;
  }
  O.gate.admit();
  return true;
}

async function loadPage(O, cursor, number) {
  var seq = ++O.page.seq;
  setText(O.summary, t('Loading\u2026'));
  if (!(await saleReady(O, seq))) {
    return;
  }
  var r = await api('GET', '/api/admin/sales/' + enc(O.saleId) + '/orders?' + query(O, cursor), undefined, undefined, 'no-store');
  if (seq !== O.page.seq) {
    return;
  }
  if (r.ok && r.data && Array.isArray(r.data.orders)) {
    showPage(O, r.data, cursor, number);
  } else if (O.gate.authProblem(r)) {
    return;
  } else if (r.status === 404) {
    show(O.panel, false);
    O.say(SALE_NOT_FOUND, 'error');
  } else {
    setText(O.summary, t('Could not load the orders: {why}', { why: errorText(r) }));
  }
}

// userIdOK says whether the shopper field holds a username or #id (or nothing), and says so
// beside it. The field's pattern is the HTML's: the browser checks it.
function userIdOK(O) {
  var error = byTestId('filter-user-error', O.root);
  if (O.userInput.validity.patternMismatch) {
    setText(error, t('Type a username (3 to 32 letters, digits, _, - or .), or # and a user id, like #42.'));
    show(error, true);
    O.userInput.setAttribute('aria-invalid', 'true');
    return false;
  }
  setText(error, '');
  show(error, false);
  O.userInput.removeAttribute('aria-invalid');
  return true;
}

function applyFilter(O) {
  if (!userIdOK(O)) {
    O.userInput.focus();
    return;
  }
  var q = (query(O, '') + langParam()).replace(/^&/, '');
  history.replaceState(null, '', window.location.pathname + (q ? '?' + q : ''));
  loadPage(O, '', 1);
}

// bindFilter wires the filter, its Clear and the paging buttons, and fills the filter in from
// the address.
function bindFilter(O) {
  var params = new URLSearchParams(window.location.search);
  O.statusSelect.value = params.get('status') || '';
  if (O.statusSelect.value !== (params.get('status') || '')) {
    O.statusSelect.value = '';
  }
  O.userInput.value = params.get('username') || (params.get('userId') ? '#' + params.get('userId') : '');
  var apply = function () {
    applyFilter(O);
  };
  byTestId('orders-filter', O.root).addEventListener('submit', function (ev) {
    ev.preventDefault();
    apply();
  });
  O.statusSelect.addEventListener('change', apply);
  byTestId('filter-clear', O.root).addEventListener('click', function () {
    O.statusSelect.value = '';
    O.userInput.value = '';
    apply();
  });
  O.first.addEventListener('click', function () {
    loadPage(O, '', 1);
  });
  O.next.addEventListener('click', function () {
    if (O.page.next) {
      loadPage(O, O.page.next, O.page.number + 1);
    }
  });
}

export function initAdminOrdersPage(root) {
  var O = {
    root: root,
    saleId: root.getAttribute('data-sale-id') || '',
    say: messenger(byTestId('message', root)),
    panel: byTestId('orders-panel', root),
    statusSelect: byTestId('filter-status', root),
    userInput: byTestId('filter-user', root),
    summary: byTestId('orders-summary', root),
    first: byTestId('orders-first', root),
    next: byTestId('orders-next', root),
    sale: null, // {name, items: {id: {name, priceCents}}, currency}
    page: { cursor: '', next: '', number: 1, seq: 0 }
  };
  bindFilter(O);
  O.gate = merchantPage(root, {
    panel: O.panel,
    say: O.say,
    stop: function () {},
    signedOut: function () {
      O.say(t('Log in with a merchant account to see the orders of this sale.'), 'info');
    },
    start: function () {
      O.say('', 'info');
      if (!userIdOK(O)) {
        O.userInput.value = ''; // a shopper from the address that is not one: every order instead
      }
      loadPage(O, O.page.cursor, O.page.number);
    }
  });
  O.gate.watch();
}
