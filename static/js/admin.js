// The merchant's page: their sales (each with its controls, its live stock and links to its
// live view and orders), and the form that creates a sale or edits one.

import { byTestId, allByTestId, setText, show, el, enc, messenger } from './dom.js';
import { pad2, formatClock, timeElement, parseTime } from './time.js';
import { serverNow } from './clock.js';
import { CURRENCIES, formatMoney, parseMoney } from './money.js';
import { api, errorText, sentence } from './api.js';
import { makePoller, failed } from './poll.js';
import { currentUser, sessionExpired, onSession, initSession } from './session.js';
import { bindControls } from './admin_controls.js';

// localInputToRFC3339 reads a datetime-local value in the browser's zone (the merchant's) and
// writes it as RFC 3339 in UTC, e.g. 2026-05-01T02:00:00Z for 10:00 in Shanghai.
function localInputToRFC3339(v) {
  var m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?/.exec(v || '');
  if (!m) {
    return null;
  }
  var d = new Date(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], m[6] ? +m[6] : 0);
  if (isNaN(d.getTime())) {
    return null;
  }
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

// zoneName names the browser's time zone ("Asia/Shanghai"), or its offset ("UTC+08:00").
function zoneName() {
  try {
    var z = Intl.DateTimeFormat().resolvedOptions().timeZone;
    if (z) {
      return z;
    }
  } catch (e) {
    // fall through
  }
  var off = -new Date().getTimezoneOffset();
  var a = Math.abs(off);
  return 'UTC' + (off >= 0 ? '+' : '-') + pad2(Math.floor(a / 60)) + ':' + pad2(a % 60);
}

// priceInput writes minor units as the decimal a merchant types: 1999 CNY is "19.99".
function priceInput(minor, currency) {
  var c = Object.prototype.hasOwnProperty.call(CURRENCIES, currency) ? CURRENCIES[currency] : { digits: 2 };
  var n = Math.round(Number(minor) || 0);
  if (c.digits === 0) {
    return String(n);
  }
  var scale = Math.pow(10, c.digits);
  var frac = String(n % scale);
  while (frac.length < c.digits) {
    frac = '0' + frac;
  }
  return Math.floor(n / scale) + '.' + frac;
}

// MAX_ITEMS is the most items a sale has (the server's limit).
const MAX_ITEMS = 50;

// toLocalInput writes a time as a datetime-local value in the browser's zone, with its seconds
// when it has any (a sale edited through the API may start at 10:00:30).
function toLocalInput(ms) {
  var d = new Date(ms);
  return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) +
    'T' + pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + (d.getSeconds() ? ':' + pad2(d.getSeconds()) : '');
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
  [/^items\[(\d+)\]\.quantity cannot go below the (\d+) units/, 'quantity', 'Quantity cannot go below the $2 units already sold.'],
  [/^items\[(\d+)\]\.quantity/, 'quantity', 'Quantity must be at least 1.'],
  [/^items\[(\d+)\]\.imageUrl/, 'imageUrl', 'The image address must start with https:// (at most 2,000 characters).'],
  [/^items\[(\d+)\]: a new item needs/, 'itemName', 'A new item needs a name, a price and a quantity.'],
  [/^description must be at most (\d+)/, 'description', 'The description is too long: at most $1 characters.'],
  [/^description must/, 'description', 'The description has characters that cannot be used.'],
  [/^the sale has started: its start cannot move/, 'startsAt', 'The sale has started: its start can no longer move.'],
  [/^the sale has started: its purchase limit/, 'purchaseLimit', 'The sale has started: its purchase limit can no longer change.'],
  [/^the sale has started: its currency/, 'currency', 'The sale has started: its currency can no longer change.'],
  [/^the sale has started: items cannot be added/, 'items', 'The sale has started: items can no longer be added.']
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
  var controlsTemplate = byTestId('sale-controls-template', admin);
  var formCard = form ? form.closest('section') : null;
  var formHeading = byTestId('form-heading', admin);
  var editNote = byTestId('edit-note', admin);
  var editCancel = byTestId('edit-cancel', admin);
  var submitButton = byTestId('create-sale-button', admin);
  var startsLocked = byTestId('starts-at-locked', admin);
  var addItemLocked = byTestId('add-item-locked', admin);
  var zoneHint = byTestId('zone-hint', admin);
  var editing = null; // {id, sale, started, initial: the fields as filled in}
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

  // Each sale's entry is built once and then updated in place, so that a poll never takes the
  // focus, an open confirm step or a sentence away from the merchant.
  var entries = {}; // sale id -> {li, parts…, controls}
  var salesById = {};
  var pendingEdit = new URLSearchParams(window.location.search).get('edit');

  function buildEntry(id) {
    var li = el('li', { class: 'admin-sale', 'data-testid': 'admin-sale', 'data-sale-id': id });
    var head = el('div', { class: 'admin-sale-head' });
    var nameEl = el('strong', { 'data-testid': 'admin-sale-name' });
    var badges = el('span', { class: 'admin-sale-badges' });
    var statusEl = el('span', { 'data-testid': 'admin-sale-status' });
    var pausedEl = el('span', { class: 'badge badge-paused', 'data-testid': 'admin-sale-paused' }, 'paused');
    badges.appendChild(pausedEl);
    badges.appendChild(statusEl);
    head.appendChild(nameEl);
    head.appendChild(badges);
    li.appendChild(head);
    var times = el('p', { class: 'admin-sale-times' });
    var terms = el('p', { class: 'admin-sale-terms', 'data-testid': 'admin-sale-terms' });
    li.appendChild(times);
    li.appendChild(terms);
    var controlsRoot = null;
    if (controlsTemplate && controlsTemplate.content) {
      li.appendChild(controlsTemplate.content.cloneNode(true));
      controlsRoot = byTestId('sale-controls', li);
    }
    var actions = el('div', { class: 'admin-sale-actions' });
    var pick = el('button', { type: 'button', class: 'button button-small', 'data-testid': 'show-stock', 'data-sale-id': id }, 'Live stock');
    pick.setAttribute('aria-pressed', 'false');
    pick.setAttribute('aria-controls', 'stock-panel');
    pick.addEventListener('click', function () {
      if (selected && selected.id === id) {
        closeStock();
        return;
      }
      var s = salesById[id];
      selectSale(id, s && s.name ? s.name : 'sale ' + id, s || null);
    });
    actions.appendChild(pick);
    actions.appendChild(el('a', { href: '/admin/sales/' + enc(id), class: 'button button-small button-secondary', 'data-testid': 'open-live' }, 'Live view'));
    actions.appendChild(el('a', { href: '/admin/sales/' + enc(id) + '/orders', class: 'button button-small button-secondary', 'data-testid': 'open-orders' }, 'Orders'));
    var edit = el('button', { type: 'button', class: 'button button-small button-secondary', 'data-testid': 'edit-sale', 'data-sale-id': id }, 'Edit');
    edit.addEventListener('click', function () {
      if (salesById[id]) {
        startEdit(salesById[id]);
      }
    });
    actions.appendChild(edit);
    actions.appendChild(el('a', { href: '/sales/' + enc(id), class: 'button button-small button-secondary', 'data-testid': 'open-sale' }, 'Open sale page'));
    li.appendChild(actions);
    var entry = { li: li, nameEl: nameEl, statusEl: statusEl, pausedEl: pausedEl, times: times, terms: terms, edit: edit, key: '' };
    entry.controls = controlsRoot ? bindControls(controlsRoot, {
      saleId: id,
      authProblem: authProblem,
      after: function (action) {
        if (action === 'end' && editing && editing.id === id) {
          stopEdit();
        }
        return refreshSale(id);
      }
    }) : null;
    return entry;
  }

  function updateEntry(entry, s) {
    var id = String(s.saleId);
    var name = s.name || 'sale ' + id;
    var status = typeof s.status === 'string' ? s.status : '';
    setText(entry.nameEl, name);
    entry.statusEl.className = 'badge badge-' + status.replace(/[^a-z]/gi, '');
    setText(entry.statusEl, status || '?');
    show(entry.pausedEl, s.paused === true && status !== 'ended');
    var key = String(s.startsAt) + '|' + String(s.endsAt);
    if (entry.key !== key) {
      entry.key = key;
      entry.times.replaceChildren(document.createTextNode('Starts '), timeElement(s.startsAt),
        document.createTextNode(' \u00b7 Ends '), timeElement(s.endsAt));
    }
    var terms = [];
    if (s.currency) {
      terms.push('Prices in ' + s.currency);
    }
    if (s.paymentWindowSeconds) {
      terms.push('pay within ' + formatWindow(s.paymentWindowSeconds));
    }
    terms.push(limitText(s.purchaseLimit));
    setText(entry.terms, terms.join(' \u00b7 '));
    entry.edit.disabled = status === 'ended';
    entry.edit.title = status === 'ended' ? 'The sale has ended' : '';
    if (entry.controls) {
      entry.controls.update({ status: status, paused: s.paused === true });
    }
  }

  function renderSales(sales) {
    show(salesEmpty, sales.length === 0);
    var ids = [];
    salesById = {};
    sales.forEach(function (s) {
      var id = String(s.saleId);
      ids.push(id);
      salesById[id] = s;
      if (!entries[id]) {
        entries[id] = buildEntry(id);
      }
      updateEntry(entries[id], s);
      if (selected && selected.id === id) {
        selected.sale = s;
      }
    });
    Object.keys(entries).forEach(function (id) {
      if (!salesById[id]) {
        entries[id].li.remove();
        delete entries[id];
      }
    });
    // Re-append only when the order changed (moving an entry would drop the focus inside it).
    var current = Array.prototype.map.call(salesList.children, function (li) {
      return li.getAttribute('data-sale-id');
    });
    if (current.join(',') !== ids.join(',')) {
      ids.forEach(function (id) {
        salesList.appendChild(entries[id].li);
      });
    }
    placeStock();
    if (pendingEdit) {
      // /admin?edit=ID, the live view's Edit link: open that sale's form once, if it can change
      var s = salesById[pendingEdit];
      if (!s) {
        say('Sale ' + pendingEdit + ' is not one of your sales: there is nothing to edit.', 'error');
      } else if (s.status === 'ended') {
        say('\u201c' + (s.name || 'Sale ' + pendingEdit) + '\u201d has ended: it can no longer be edited.', 'info');
      } else {
        startEdit(s);
      }
      pendingEdit = null;
    }
  }

  // loadedOf reads whether Redis holds a sale's stock from its stock view: the time it was
  // loaded, null if it is not.
  function loadedOf(data) {
    var items = data && Array.isArray(data.items) ? data.items : [];
    for (var i = 0; i < items.length; i++) {
      if (items[i] && typeof items[i].loadedAt === 'string') {
        return items[i].loadedAt;
      }
    }
    return null;
  }

  // refreshLoaded asks whether Redis holds each sale's stock (sales not ended, the first 20).
  async function refreshLoaded(ids) {
    await Promise.all(ids.slice(0, 20).map(async function (id) {
      var r = await api('GET', '/api/admin/sales/' + enc(id) + '/stock', undefined, undefined, 'no-store');
      if (r.ok && r.data && entries[id] && entries[id].controls) {
        entries[id].controls.update({ loadedAt: loadedOf(r.data), paused: r.data.paused === true });
      }
    }));
  }

  // refreshSale reloads the list and the stock state of one sale, after an action on it.
  async function refreshSale(id) {
    await loadSales(true);
    await refreshLoaded([id]);
  }

  async function loadSales(skipLoaded) {
    var r = await api('GET', '/api/admin/sales', undefined, undefined, 'no-store');
    if (r.ok && r.data) {
      if (!merchant) {
        merchant = true;
        show(panel, true);
        prefillTimes();
      }
      var sales = Array.isArray(r.data.sales) ? r.data.sales : [];
      renderSales(sales);
      if (skipLoaded !== true) {
        await refreshLoaded(sales.filter(function (s) {
          return s.status !== 'ended';
        }).map(function (s) {
          return String(s.saleId);
        }));
      }
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
      if (entries[id] && entries[id].controls) {
        entries[id].controls.update({ loadedAt: loadedOf(r.data), paused: r.data.paused === true });
      }
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
    description: 'error-description',
    purchaseLimit: 'error-purchase-limit',
    items: 'error-items'
  };

  // fieldParts finds a field's error element, its control and its [data-field] wrapper.
  function fieldParts(field, row) {
    var wrap = (row || form).querySelector('[data-field="' + field + '"]');
    var err = row ? (wrap && wrap.querySelector('.field-error')) : byTestId(FIELD_ERRORS[field], form);
    var control = wrap ? wrap.querySelector('input, select, textarea') : null;
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

  // readForm checks what can be checked here and returns what the form says, or null after
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
    var description = form.elements.description ? form.elements.description.value.trim() : '';
    if (description.length > 2000) {
      problem('description', null, 'The description is too long: at most 2,000 characters.');
    }
    var startsRaw = form.elements.startsAt.value;
    var endsRaw = form.elements.endsAt.value;
    var startsAt = localInputToRFC3339(startsRaw);
    var endsAt = localInputToRFC3339(endsRaw);
    var startMoved = !editing || startsRaw !== editing.initial.startsAt;
    var endMoved = !editing || endsRaw !== editing.initial.endsAt;
    if (!startsAt) {
      problem('startsAt', null, 'Give the start as a date and a time.');
    }
    if (!endsAt) {
      problem('endsAt', null, 'Give the end as a date and a time.');
    }
    if (startsAt && endsAt) {
      var s = Date.parse(startsAt);
      var e = Date.parse(endsAt);
      if (editing && startMoved && editing.started) {
        problem('startsAt', null, 'The sale has started: its start can no longer move.');
      } else if (editing && startMoved && s < serverNow() - 60000) {
        problem('startsAt', null, 'The start is in the past: choose a time from now on.');
      }
      if (e <= s) {
        problem('endsAt', null, 'The end must be after the start.');
      } else if (endMoved && e <= serverNow()) {
        problem('endsAt', null, editing ? 'The end must be in the future (to end the sale now, use End early).' : 'The end must be in the future.');
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
    var all = itemRows();
    all.forEach(function (row) {
      var itemId = row.getAttribute('data-item-id') || '';
      var itemName = row.querySelector('[name="itemName"]').value.trim();
      var priceText = row.querySelector('[name="price"]').value.trim();
      var qtyText = row.querySelector('[name="quantity"]').value.trim();
      var imageInput = row.querySelector('[name="imageUrl"]');
      var imageUrl = imageInput ? imageInput.value.trim() : '';
      if (!itemId && !itemName && !priceText && !qtyText && !imageUrl) {
        return; // an empty new row is left out
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
      if (imageUrl && !/^https:\/\/[^\s/]+/i.test(imageUrl)) {
        problem('imageUrl', row, 'The image address must start with https://.');
        ok = false;
      }
      if (ok) {
        items.push({ row: row, itemId: itemId, name: itemName, priceCents: price.minor, quantity: qty, imageUrl: imageUrl });
      }
    });
    if (all.length > MAX_ITEMS) {
      problem('items', null, 'A sale has at most ' + MAX_ITEMS + ' items: remove some.');
    } else if (items.length === 0 && !first) {
      problem('items', null, 'Add at least one item.');
    }
    if (first) {
      if (first !== true && first.focus) {
        first.focus();
      }
      return null;
    }
    return { name: name, description: description, startsAt: startsAt, endsAt: endsAt, startsRaw: startsRaw, endsRaw: endsRaw,
      currency: cur, minutes: minutes, limit: limit, items: items };
  }

  // createRequest is the body of a new sale, and the rows of its items in order.
  function createRequest(v) {
    var body = { name: v.name, startsAt: v.startsAt, endsAt: v.endsAt, currency: v.currency, paymentWindowSeconds: v.minutes * 60,
      purchaseLimit: v.limit, items: [] };
    if (v.description) {
      body.description = v.description;
    }
    v.items.forEach(function (it) {
      var item = { name: it.name, priceCents: it.priceCents, quantity: it.quantity };
      if (it.imageUrl) {
        item.imageUrl = it.imageUrl;
      }
      body.items.push(item);
    });
    return { body: body, rows: v.items.map(function (it) { return it.row; }) };
  }

  // editRequest is the PATCH of the sale being edited: only what changed (items by itemId, new
  // items without one), the rows of its items in order, and the names of what changed.
  function editRequest(v) {
    var init = editing.initial;
    var body = {};
    var changed = [];
    if (v.name !== init.name) {
      body.name = v.name;
      changed.push('name');
    }
    if (v.description !== init.description) {
      body.description = v.description;
      changed.push('description');
    }
    if (v.startsRaw !== init.startsAt) {
      body.startsAt = v.startsAt;
      changed.push('start');
    }
    if (v.endsRaw !== init.endsAt) {
      body.endsAt = v.endsAt;
      changed.push('end');
    }
    if (v.currency !== init.currency) {
      body.currency = v.currency;
      changed.push('currency');
    }
    if (String(v.minutes) !== init.minutes) {
      body.paymentWindowSeconds = v.minutes * 60;
      changed.push('payment window');
    }
    if (v.limit !== init.limit) {
      body.purchaseLimit = v.limit;
      changed.push('purchase limit');
    }
    var items = [];
    var rowsSent = [];
    v.items.forEach(function (it) {
      if (!it.itemId) {
        var added = { name: it.name, priceCents: it.priceCents, quantity: it.quantity };
        if (it.imageUrl) {
          added.imageUrl = it.imageUrl;
        }
        items.push(added);
        rowsSent.push(it.row);
        changed.push('new item \u201c' + it.name + '\u201d');
        return;
      }
      var was = init.items[it.itemId];
      if (!was) {
        return;
      }
      var patch = { itemId: it.itemId };
      var n = 0;
      if (it.name !== was.name) {
        patch.name = it.name;
        n++;
      }
      // a price retyped with another currency is sent again in the new one
      if (it.priceCents !== was.priceCents || body.currency !== undefined) {
        patch.priceCents = it.priceCents;
        n++;
      }
      if (it.quantity !== was.quantity) {
        patch.quantity = it.quantity;
        n++;
      }
      if (it.imageUrl !== was.imageUrl) {
        patch.imageUrl = it.imageUrl;
        n++;
      }
      if (n > 0) {
        items.push(patch);
        rowsSent.push(it.row);
        changed.push('\u201c' + it.name + '\u201d');
      }
    });
    if (items.length > 0) {
      body.items = items;
    }
    return { body: body, rows: rowsSent, changed: changed };
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
      if (!row || row.hasAttribute('data-item-id')) {
        return; // an item already on sale stays
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

  // ---- editing a sale: the same form, filled in from the sale

  function setLocked(control, hint, locked) {
    if (!control) {
      return;
    }
    control.disabled = locked;
    show(hint, locked);
    if (hint && hint.id) {
      var ids = (control.getAttribute('aria-describedby') || '').split(/\s+/).filter(function (x) {
        return x && x !== hint.id;
      });
      if (locked) {
        ids.push(hint.id);
      }
      control.setAttribute('aria-describedby', ids.join(' '));
    }
  }

  // resetForm empties the form back to one blank item, in create mode.
  function resetForm() {
    form.reset();
    itemRows().forEach(function (row, i) {
      if (i > 0) {
        row.remove();
      } else {
        row.removeAttribute('data-item-id');
        show(byTestId('remove-item', row), true);
      }
    });
    renumber();
    showSymbols();
  }

  // startEdit opens the form on a sale: the list's entry has no items, so the sale itself is read
  // first (past every cache).
  async function startEdit(listed) {
    if (!form) {
      return;
    }
    var id = String(listed.saleId);
    var r = await api('GET', '/api/flash-sales/' + enc(id), undefined, undefined, 'no-store');
    if (!r.ok || !r.data || !Array.isArray(r.data.items)) {
      if (!authProblem(r)) {
        say('Could not open the sale for editing: ' + errorText(r), 'error');
      }
      return;
    }
    var sale = Object.assign({}, r.data, { status: listed.status || r.data.status });
    clearAllErrors();
    clearBanners();
    resetForm();
    var starts = parseTime(sale.startsAt);
    var ends = parseTime(sale.endsAt);
    var started = sale.status === 'live' || (!isNaN(starts) && starts <= serverNow());
    var cur = typeof sale.currency === 'string' && sale.currency ? sale.currency : 'CNY';
    form.elements.name.value = sale.name || '';
    form.elements.description.value = typeof sale.description === 'string' ? sale.description : '';
    form.elements.startsAt.value = isNaN(starts) ? '' : toLocalInput(starts);
    form.elements.endsAt.value = isNaN(ends) ? '' : toLocalInput(ends);
    form.elements.currency.value = cur;
    var w = Number(sale.paymentWindowSeconds) || 600;
    form.elements.paymentWindowMinutes.value = String(Math.max(1, Math.round(w / 60)));
    var limit = sale.purchaseLimit === 'per-item' ? 'per-item' : 'per-sale';
    Array.prototype.forEach.call(form.querySelectorAll('input[name="purchaseLimit"]'), function (r) {
      r.checked = r.value === limit;
    });
    var initItems = {};
    var items = Array.isArray(sale.items) ? sale.items : [];
    items.forEach(function (it, i) {
      var row = i === 0 ? itemRows()[0] : addRow();
      var itemId = String(it.itemId);
      row.setAttribute('data-item-id', itemId);
      row.querySelector('[name="itemName"]').value = it.name || '';
      row.querySelector('[name="price"]').value = priceInput(it.priceCents, cur);
      row.querySelector('[name="quantity"]').value = String(it.quantity);
      row.querySelector('[name="imageUrl"]').value = typeof it.imageUrl === 'string' ? it.imageUrl : '';
      show(byTestId('remove-item', row), false);
      initItems[itemId] = { name: (it.name || '').trim(), priceCents: Number(it.priceCents), quantity: Number(it.quantity),
        imageUrl: typeof it.imageUrl === 'string' ? it.imageUrl : '' };
    });
    showSymbols();
    editing = { id: id, sale: sale, started: started, initial: {
      name: (sale.name || '').trim(), description: form.elements.description.value.trim(),
      startsAt: form.elements.startsAt.value, endsAt: form.elements.endsAt.value, currency: cur,
      minutes: form.elements.paymentWindowMinutes.value, limit: limit, items: initItems } };
    form.setAttribute('data-mode', 'edit');
    form.setAttribute('data-sale-id', id);
    setText(formHeading, 'Edit \u201c' + (sale.name || 'sale ' + id) + '\u201d');
    setText(editNote, 'Only what you change is saved, all at once or not at all.' +
      (started ? ' The sale has started: its start, currency, purchase limit and items list are fixed; names, prices, quantities, the end and the payment window can still change.' : ''));
    show(editNote, true);
    setText(submitButton, 'Save changes');
    show(editCancel, true);
    setLocked(form.elements.startsAt, startsLocked, started);
    setLocked(form.elements.currency, null, started);
    Array.prototype.forEach.call(form.querySelectorAll('input[name="purchaseLimit"]'), function (r) {
      r.disabled = started;
    });
    setLocked(addItem, addItemLocked, started);
    if (formCard && formCard.scrollIntoView) {
      formCard.scrollIntoView({ block: 'start' });
    }
    form.elements.name.focus({ preventScroll: true });
  }

  // lockStarted fixes what a started sale cannot change: the start, the currency, the purchase
  // limit (each back to the sale's value) and the list of items (new rows go).
  function lockStarted() {
    var init = editing.initial;
    editing.started = true;
    form.elements.startsAt.value = init.startsAt;
    form.elements.currency.value = init.currency;
    Array.prototype.forEach.call(form.querySelectorAll('input[name="purchaseLimit"]'), function (r) {
      r.checked = r.value === init.limit;
      r.disabled = true;
    });
    itemRows().forEach(function (row) {
      if (!row.hasAttribute('data-item-id')) {
        row.remove();
      }
    });
    renumber();
    showSymbols();
    setLocked(form.elements.startsAt, startsLocked, true);
    setLocked(form.elements.currency, null, true);
    setLocked(addItem, addItemLocked, true);
  }

  function stopEdit() {
    if (!editing) {
      return;
    }
    var id = editing.id;
    editing = null;
    clearAllErrors();
    resetForm();
    form.setAttribute('data-mode', 'create');
    form.removeAttribute('data-sale-id');
    setText(formHeading, 'Create a sale');
    show(editNote, false);
    setText(submitButton, 'Create sale');
    show(editCancel, false);
    setLocked(form.elements.startsAt, startsLocked, false);
    setLocked(form.elements.currency, null, false);
    Array.prototype.forEach.call(form.querySelectorAll('input[name="purchaseLimit"]'), function (r) {
      r.disabled = false;
    });
    setLocked(addItem, addItemLocked, false);
    prefillTimes();
    return id;
  }

  if (editCancel) {
    editCancel.addEventListener('click', function () {
      var id = stopEdit();
      clearBanners();
      var b = id && entries[id] ? entries[id].edit : null;
      if (b) {
        b.focus();
      }
    });
  }

  // showRefusal puts a refusal of the server next to its field; false when it names none.
  function showRefusal(r, req) {
    if (r.network) {
      return false;
    }
    var known = null;
    if (r.code === 'INVALID_INPUT' || r.code === 'SALE_STARTED' || r.code === 'QUANTITY_TOO_LOW') {
      known = adminMessage(r.message);
    }
    if (!known && r.code === 'QUANTITY_TOO_LOW') {
      // "item 7: 3 units are neither sold nor held…": the row of that item
      var m = /^item (\d+): (\d+) units/.exec(String(r.message || ''));
      var row = m ? rows.querySelector('[data-item-id="' + m[1] + '"]') : null;
      if (row) {
        var control = setFieldError('quantity', row, 'Too low: units are sold or held by shoppers. It can go down by at most ' +
          Number(m[2]).toLocaleString('en-US') + ' from the quantity on sale.');
        if (control && control.focus) {
          control.focus();
        }
        return true;
      }
      known = { field: 'items', index: -1, text: 'A quantity cannot go below what is sold or held.' };
    }
    if (!known && r.code === 'SALE_STARTED') {
      known = { field: 'startsAt', index: -1, text: sentence(r.message) || 'The sale has started.' };
    }
    if (!known) {
      return false;
    }
    if (r.code === 'SALE_STARTED' && editing) {
      // The sale started while the form was open: what can no longer change goes back to the
      // sale's own values and is locked, so that saving again keeps the other changes.
      lockStarted();
      if (known.field === 'startsAt') {
        known.text = 'The sale has started meanwhile: its start can no longer move, and is back as it was. Save again to keep your other changes.';
      }
    }
    var target = known.index >= 0 ? req.rows[known.index] || null : null;
    var c = setFieldError(known.field, target, known.text);
    if (c && c.focus) {
      c.focus();
    }
    return true;
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
    setText(zoneHint, 'Times are in your time zone, ' + zoneName() + '.');

    form.addEventListener('submit', async function (ev) {
      ev.preventDefault();
      clearAllErrors();
      clearBanners();
      var v = readForm();
      if (!v) {
        formStatus('Check the fields marked in red.', 'error');
        return;
      }
      var edit = editing;
      var req = edit ? editRequest(v) : createRequest(v);
      if (edit && req.changed.length === 0) {
        formStatus('Nothing changed: there is nothing to save.', 'info');
        return;
      }
      submitButton.disabled = true;
      formStatus(edit ? 'Saving\u2026' : 'Creating the sale\u2026', 'info');
      var r = edit ? await api('PATCH', '/api/admin/sales/' + enc(edit.id), req.body) : await api('POST', '/api/admin/sales', req.body);
      submitButton.disabled = false;
      if (edit && editing !== edit) {
        return; // the merchant stopped editing meanwhile
      }
      if (r.ok && r.data && r.data.saleId !== undefined && r.data.saleId !== null) {
        var saleId = String(r.data.saleId);
        var name = v.name;
        (Array.isArray(r.data.items) ? r.data.items : []).forEach(function (it) {
          itemNames[String(it.itemId)] = it.name;
        });
        formStatus('', 'info');
        if (edit) {
          stopEdit();
          var saved = 'Saved \u201c' + name + '\u201d: ' + req.changed.join(', ') + ' changed.';
          say(saved, 'ok');
          formBanner = true;
          if (selected && selected.id === saleId) {
            selected.prices = null;
          }
          await refreshSale(saleId);
          // Back where the merchant came from: the sale's entry, with the word there too.
          var entry = entries[saleId];
          if (entry) {
            if (entry.controls) {
              entry.controls.say(saved, 'ok');
            }
            if (entry.li.scrollIntoView) {
              entry.li.scrollIntoView({ block: 'nearest' });
            }
            entry.edit.focus({ preventScroll: true });
          }
          return;
        }
        var n = req.body.items.length;
        resetForm();
        prefillTimes();
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
      if (showRefusal(r, req)) {
        formStatus(edit ? 'Nothing was saved. Check the fields marked in red.' : 'Check the fields marked in red.', 'error');
        return;
      }
      if (edit && r.status === 404) {
        formStatus('This sale was not found: it may have been removed.', 'error');
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
