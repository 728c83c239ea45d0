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

export function initAdminOrdersPage(root) {
  var saleId = root.getAttribute('data-sale-id') || '';
  var say = messenger(byTestId('message', root));
  var panel = byTestId('orders-panel', root);
  var filter = byTestId('orders-filter', root);
  var statusSelect = byTestId('filter-status', root);
  var userInput = byTestId('filter-user', root);
  var userError = byTestId('filter-user-error', root);
  var clear = byTestId('filter-clear', root);
  var rowsEl = byTestId('orders-rows', root);
  var table = byTestId('orders-table', root);
  var empty = byTestId('orders-empty', root);
  var summary = byTestId('orders-summary', root);
  var first = byTestId('orders-first', root);
  var next = byTestId('orders-next', root);
  var nameEl = byTestId('orders-sale-name', root);
  var sale = null; // {name, items: {id: {name, priceCents}}, currency}
  var page = { cursor: '', next: '', number: 1, seq: 0 };

  var params = new URLSearchParams(window.location.search);
  statusSelect.value = params.get('status') || '';
  if (statusSelect.value !== (params.get('status') || '')) {
    statusSelect.value = '';
  }
  userInput.value = params.get('userId') || '';

  var gate = merchantPage(root, {
    panel: panel,
    say: say,
    stop: function () {},
    signedOut: function () {
      say('Log in with a merchant account to see the orders of this sale.', 'info');
    },
    start: function () {
      say('', 'info');
      if (!userIdOK()) {
        userInput.value = ''; // a shopper from the address that is not one: every order instead
      }
      loadPage(page.cursor, page.number);
    }
  });

  // loadSale reads the sale's name and items (the public sale: the orders route below is the
  // one that checks it is the merchant's).
  async function loadSale() {
    var r = await api('GET', '/api/flash-sales/' + enc(saleId), undefined, undefined, 'no-store');
    if (!r.ok || !r.data) {
      return r;
    }
    var s = r.data;
    sale = { name: s.name || 'sale ' + saleId, currency: s.currency || 'CNY', items: {} };
    (Array.isArray(s.items) ? s.items : []).forEach(function (it) {
      sale.items[String(it.itemId)] = { name: it.name, priceCents: it.priceCents };
    });
    setText(nameEl, sale.name);
    document.title = 'Orders \u00b7 ' + sale.name + ' \u00b7 flashsale';
    return r;
  }

  function userId() {
    return userInput.value.trim();
  }

  function query(cursor) {
    var q = new URLSearchParams();
    if (statusSelect.value) {
      q.set('status', statusSelect.value);
    }
    if (userId()) {
      q.set('userId', userId());
    }
    if (cursor) {
      q.set('cursor', cursor);
    }
    return q.toString();
  }

  function renderRows(orders) {
    var trs = orders.map(function (o) {
      var tr = el('tr', { class: 'stack-row', 'data-testid': 'order-row', 'data-order-id': String(o.orderId), 'data-status': String(o.status) });
      var idCell = el('th', { scope: 'row', 'data-col': 'order' });
      idCell.appendChild(el('code', null, String(o.orderId)));
      tr.appendChild(idCell);
      var item = sale && sale.items[String(o.itemId)];
      var itemText = item ? item.name + ' \u00b7 ' + formatMoney(item.priceCents, sale.currency) : 'item #' + o.itemId;
      tr.appendChild(el('td', { 'data-col': 'item', 'data-label': 'Item' }, itemText));
      tr.appendChild(el('td', { 'data-col': 'user', 'data-label': 'Shopper', 'data-testid': 'order-user' }, '#' + o.userId));
      var st = el('td', { 'data-col': 'status', 'data-label': 'Status', 'data-testid': 'order-status' });
      st.appendChild(el('span', { class: 'badge order-badge', 'data-status': String(o.status) }, STATUS_WORDS[o.status] || String(o.status)));
      tr.appendChild(st);
      tr.appendChild(el('td', { 'data-col': 'created', 'data-label': 'Ordered' }, when(o.createdAt)));
      tr.appendChild(el('td', { 'data-col': 'payBy', 'data-label': 'Pay by' }, when(o.payBy)));
      tr.appendChild(el('td', { 'data-col': 'paidAt', 'data-label': 'Paid' }, when(o.paidAt)));
      return tr;
    });
    rowsEl.replaceChildren.apply(rowsEl, trs);
  }

  async function loadPage(cursor, number) {
    var seq = ++page.seq;
    setText(summary, 'Loading\u2026');
    if (!sale) {
      var s = await loadSale();
      if (seq !== page.seq) {
        return;
      }
      if (!s.ok) {
        if (gate.authProblem(s)) {
          return;
        }
        show(panel, s.status !== 404);
        say(s.status === 404 ? SALE_NOT_FOUND : 'Could not load the sale: ' + errorText(s), 'error');
        setText(summary, '');
        return;
      }
      gate.admit();
    }
    var r = await api('GET', '/api/admin/sales/' + enc(saleId) + '/orders?' + query(cursor), undefined, undefined, 'no-store');
    if (seq !== page.seq) {
      return;
    }
    if (!(r.ok && r.data && Array.isArray(r.data.orders))) {
      if (gate.authProblem(r)) {
        return;
      }
      if (r.status === 404) {
        show(panel, false);
        say(SALE_NOT_FOUND, 'error');
        return;
      }
      setText(summary, 'Could not load the orders: ' + errorText(r));
      return;
    }
    page.cursor = cursor;
    page.number = number;
    page.next = typeof r.data.next === 'string' ? r.data.next : '';
    var orders = r.data.orders;
    renderRows(orders);
    show(table, orders.length > 0);
    show(empty, orders.length === 0);
    var filters = [];
    if (statusSelect.value) {
      filters.push(STATUS_WORDS[statusSelect.value] || statusSelect.value);
    }
    if (userId()) {
      filters.push('shopper #' + userId());
    }
    var what = filters.length ? ' (' + filters.join(', ') + ')' : '';
    if (orders.length === 0) {
      setText(summary, number > 1 ? 'No more orders' + what + '.' : 'No orders' + what + ' yet.');
    } else {
      var from = (number - 1) * 50 + 1;
      setText(summary, 'Orders ' + from + '\u2013' + (from + orders.length - 1) + what + ', newest first, page ' + number + (page.next ? '.' : ', the last.'));
    }
    first.disabled = number <= 1;
    next.disabled = !page.next;
  }

  // userIdOK says whether the shopper field holds a user id (or nothing), and says so beside it.
  // The field's pattern is the HTML's: the browser checks it.
  function userIdOK() {
    if (userInput.validity.patternMismatch) {
      setText(userError, 'A shopper is named by their user id: a whole number like 42.');
      show(userError, true);
      userInput.setAttribute('aria-invalid', 'true');
      return false;
    }
    setText(userError, '');
    show(userError, false);
    userInput.removeAttribute('aria-invalid');
    return true;
  }

  function applyFilter() {
    if (!userIdOK()) {
      userInput.focus();
      return;
    }
    var q = query('');
    history.replaceState(null, '', window.location.pathname + (q ? '?' + q : ''));
    loadPage('', 1);
  }

  filter.addEventListener('submit', function (ev) {
    ev.preventDefault();
    applyFilter();
  });
  statusSelect.addEventListener('change', applyFilter);
  clear.addEventListener('click', function () {
    statusSelect.value = '';
    userInput.value = '';
    applyFilter();
  });
  first.addEventListener('click', function () {
    loadPage('', 1);
  });
  next.addEventListener('click', function () {
    if (page.next) {
      loadPage(page.next, page.number + 1);
    }
  });

  gate.watch();
}
