// The orders of one sale (/admin/sales/{id}/orders): GET /api/admin/sales/{id}/orders, 50 a page,
// newest first, filtered by status and shopper; the filter is kept in the address, so a reload
// or a shared link shows the same list. The CSV link downloads every order of the sale.

import { byTestId, setText, show, el, enc, messenger } from './dom.js';
import { formatDate, parseTime } from './time.js';
import { api, errorText } from './api.js';
import { formatMoney } from './money.js';
import { merchantPage, SALE_NOT_FOUND } from './admin_merchant.js';

const STATUS_WORDS = { QUEUED: 'Confirming', PENDING: 'Awaiting payment', PAID: 'Paid', EXPIRED: 'Expired', CANCELLED: 'Cancelled', FAILED: 'Failed' };

function when(v) {
  var ms = parseTime(v);
  return isNaN(ms) ? '\u2013' : formatDate(ms);
}

// loadSale reads the sale's name and items (the public sale: the orders route below is the
// one that checks it is the merchant's).
async function loadSale(O) {
  var r = await api('GET', '/api/flash-sales/' + enc(O.saleId), undefined, undefined, 'no-store');
  if (!r.ok || !r.data) {
    return r;
  }
  var s = r.data;
  O.sale = { name: s.name || 'sale ' + O.saleId, currency: s.currency || 'CNY', items: {} };
  (Array.isArray(s.items) ? s.items : []).forEach(function (it) {
    O.sale.items[String(it.itemId)] = { name: it.name, priceCents: it.priceCents };
  });
  setText(byTestId('orders-sale-name', O.root), O.sale.name);
  document.title = 'Orders \u00b7 ' + O.sale.name + ' \u00b7 flashsale';
  return r;
}

function userId(O) {
  return O.userInput.value.trim();
}

function query(O, cursor) {
  var q = new URLSearchParams();
  if (O.statusSelect.value) {
    q.set('status', O.statusSelect.value);
  }
  if (userId(O)) {
    q.set('userId', userId(O));
  }
  if (cursor) {
    q.set('cursor', cursor);
  }
  return q.toString();
}

function orderRow(O, o) {
  var tr = el('tr', { class: 'stack-row', 'data-testid': 'order-row', 'data-order-id': String(o.orderId), 'data-status': String(o.status) });
  var idCell = el('th', { scope: 'row', 'data-col': 'order' });
  idCell.appendChild(el('code', null, String(o.orderId)));
  tr.appendChild(idCell);
  var item = O.sale && O.sale.items[String(o.itemId)];
  var itemText = item ? item.name + ' \u00b7 ' + formatMoney(item.priceCents, O.sale.currency) : 'item #' + o.itemId;
  tr.appendChild(el('td', { 'data-col': 'item', 'data-label': 'Item' }, itemText));
  tr.appendChild(el('td', { 'data-col': 'user', 'data-label': 'Shopper', 'data-testid': 'order-user' }, '#' + o.userId));
  var st = el('td', { 'data-col': 'status', 'data-label': 'Status', 'data-testid': 'order-status' });
  st.appendChild(el('span', { class: 'badge order-badge', 'data-status': String(o.status) }, STATUS_WORDS[o.status] || String(o.status)));
  tr.appendChild(st);
  tr.appendChild(el('td', { 'data-col': 'created', 'data-label': 'Ordered' }, when(o.createdAt)));
  tr.appendChild(el('td', { 'data-col': 'payBy', 'data-label': 'Pay by' }, when(o.payBy)));
  tr.appendChild(el('td', { 'data-col': 'paidAt', 'data-label': 'Paid' }, when(o.paidAt)));
  return tr;
}

// summaryText says which orders the page shows.
function summaryText(O, orders, number) {
  var filters = [];
  if (O.statusSelect.value) {
    filters.push(STATUS_WORDS[O.statusSelect.value] || O.statusSelect.value);
  }
  if (userId(O)) {
    filters.push('shopper #' + userId(O));
  }
  var what = filters.length ? ' (' + filters.join(', ') + ')' : '';
  if (orders.length === 0) {
    return number > 1 ? 'No more orders' + what + '.' : 'No orders' + what + ' yet.';
  }
  var from = (number - 1) * 50 + 1;
  return 'Orders ' + from + '\u2013' + (from + orders.length - 1) + what + ', newest first, page ' + number + (O.page.next ? '.' : ', the last.');
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
      O.say(s.status === 404 ? SALE_NOT_FOUND : 'Could not load the sale: ' + errorText(s), 'error');
      setText(O.summary, '');
    }
    return false;
  }
  O.gate.admit();
  return true;
}

async function loadPage(O, cursor, number) {
  var seq = ++O.page.seq;
  setText(O.summary, 'Loading\u2026');
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
    setText(O.summary, 'Could not load the orders: ' + errorText(r));
  }
}

// userIdOK says whether the shopper field holds a user id (or nothing), and says so beside it.
// The field's pattern is the HTML's: the browser checks it.
function userIdOK(O) {
  var error = byTestId('filter-user-error', O.root);
  if (O.userInput.validity.patternMismatch) {
    setText(error, 'A shopper is named by their user id: a whole number like 42.');
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
  var q = query(O, '');
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
  O.userInput.value = params.get('userId') || '';
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
      O.say('Log in with a merchant account to see the orders of this sale.', 'info');
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
