// The merchant's page: their sales, the live stock of one, and the form that creates a sale.

import { byTestId, allByTestId, setText, show, el, enc, messenger } from './dom.js';
import { pad2, formatClock, timeElement } from './time.js';
import { serverNow } from './clock.js';
import { CURRENCIES, formatMoney, parseMoney } from './money.js';
import { api, errorText, sentence } from './api.js';
import { makePoller, failed } from './poll.js';
import { currentUser, sessionExpired, onSession, initSession } from './session.js';

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
const ADMIN_MESSAGES = [
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

export function initAdminPage(admin) {
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
    return failed((r.retryAfter || 0) * 1000);
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
    return failed((r.retryAfter || 0) * 1000);
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

  onSession(sessionUpdate);
  initSession(byTestId('session', admin), say);
  sessionUpdate();
}
