// The live stock of one sale on /admin: a table refreshed every second, opened inside the
// selected sale's entry (where the merchant clicked), with each item's price, counts and
// whether the reconciliation holds, and its failed checks when it does not.

import { byTestId, setText, show, el, enc } from './dom.js';
import { formatClock, parseTime } from './time.js';
import { formatMoney } from './money.js';
import { api } from './api.js';
import { makePoller, failed } from './poll.js';
import { SALE_NOT_FOUND, adminErrorText as errorText } from './admin_merchant.js';
import { t } from './i18n.js';

const STOCK_COLUMNS = [
  ['quantity', t('Quantity')],
  ['displayed', t('Displayed')],
  ['frozen', t('Frozen')],
  ['real', t('Real')],
  ['paid', t('Paid')]
];

function numberText(v) {
  return v === undefined || v === null ? '\u2013' : String(v);
}

// unheldWord is what an item's displayed units wait for while Redis does not hold the sale (the
// API's -1): before the start, the load (10 minutes before it, or Warm up now); after it, the
// rebuild from the recorded orders (the sale's live view says more).
function unheldWord(sel) {
  var starts = sel.sale ? parseTime(sel.sale.startsAt) : NaN;
  return isFinite(starts) && Date.now() < starts ? t('not loaded yet') : t('being rebuilt');
}

// cssId escapes an id for a selector.
function cssId(id) {
  return window.CSS && CSS.escape ? CSS.escape(id) : id;
}

// loadedOf reads whether Redis holds a sale's stock from its stock view: the time it was
// loaded, null if it is not.
export function loadedOf(data) {
  var items = data && Array.isArray(data.items) ? data.items : [];
  for (var i = 0; i < items.length; i++) {
    if (items[i] && typeof items[i].loadedAt === 'string') {
      return items[i].loadedAt;
    }
  }
  return null;
}

// place puts the open panel in the selected sale's entry (or above the list while the entry is
// not there yet) and marks the entry and its button; it returns the entry.
function place(P) {
  if (!P.panel) {
    return null;
  }
  var list = P.page.sales.list;
  var li = P.selected ? list.querySelector('[data-testid="admin-sale"][data-sale-id="' + cssId(P.selected.id) + '"]') : null;
  if (li) {
    if (P.panel.parentNode !== li) {
      li.appendChild(P.panel);
    }
  } else if (P.selected) {
    list.parentNode.insertBefore(P.panel, list);
  } else if (P.panel.parentNode !== P.home) {
    P.home.appendChild(P.panel);
  }
  Array.prototype.forEach.call(list.querySelectorAll('[data-testid="admin-sale"]'), function (entry) {
    var on = P.selected !== null && entry.getAttribute('data-sale-id') === P.selected.id;
    entry.classList.toggle('selected', on);
    var b = entry.querySelector('[data-testid="show-stock"]');
    if (b) {
      b.setAttribute('aria-pressed', on ? 'true' : 'false');
      setText(b, on ? t('Hide live stock') : t('Live stock'));
    }
  });
  return li;
}

function select(P, id, name, sale) {
  P.selected = { id: id, name: name, sale: sale || null, prices: null };
  setText(P.saleName, name);
  show(P.panel, true);
  P.rows.replaceChildren();
  setText(P.updated, t('Loading\u2026'));
  var li = place(P);
  // Open where the merchant is looking: the top of the sale's entry in view, focus on the panel.
  var target = li || P.panel;
  if (target.scrollIntoView) {
    target.scrollIntoView({ block: 'start' });
  }
  try {
    P.panel.focus({ preventScroll: true });
  } catch (e) {
    P.panel.focus();
  }
  P.poller.restart();
}

function close(P) {
  var id = P.selected ? P.selected.id : null;
  P.selected = null;
  P.poller.stop();
  show(P.panel, false);
  place(P);
  var b = id ? P.page.sales.list.querySelector('[data-testid="show-stock"][data-sale-id="' + cssId(id) + '"]') : null;
  if (b) {
    b.focus();
  }
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

// driftRow is the reconciliation's numbers of an item, so the merchant sees what disagrees: a
// row of its own under the item's, across the whole table, so that it neither squeezes the
// number columns nor hides in the last column, off screen on a phone.
function driftRow(itemId, mismatch, cell) {
  var detailId = 'stock-mismatch-' + itemId;
  cell.setAttribute('aria-describedby', detailId);
  var detail = el('small', { class: 'drift-detail', id: detailId, 'data-testid': 'stock-mismatch' });
  // one failed check a line ("name: numbers"; the buyers check's own "; missing …" stays with
  // it), the separators kept so the text reads as the server wrote it
  var checks = String(mismatch).split(/; (?=[a-z][a-z ()]*: )/);
  checks.forEach(function (c, i) {
    if (i > 0) {
      detail.appendChild(document.createTextNode(' '));
    }
    detail.appendChild(el('span', { class: 'drift-check' }, c + (i < checks.length - 1 ? ';' : '')));
  });
  var note = el('div', { class: 'drift-note' });
  note.appendChild(el('strong', { class: 'drift-label' }, t('Not reconciled:')));
  note.appendChild(document.createTextNode(' '));
  note.appendChild(detail);
  var td = el('td', { colspan: String(STOCK_COLUMNS.length + 3) });
  td.appendChild(note);
  var row = el('tr', { class: 'drift-row', 'data-testid': 'stock-drift-row', 'data-item-id': itemId });
  row.appendChild(td);
  return row;
}

// stockRows are an item's row of the table, and its drift row when it does not reconcile.
function stockRows(P, sel, it) {
  var itemId = String(it.itemId);
  var tr = el('tr', { 'data-testid': 'stock-row', 'data-item-id': itemId });
  tr.appendChild(el('th', { scope: 'row', 'data-col': 'name' }, it.name || P.page.itemNames[itemId] || t('item #{id}', { id: itemId })));
  var price = sel.prices && Object.prototype.hasOwnProperty.call(sel.prices, itemId) ? formatMoney(sel.prices[itemId], sel.currency) : '';
  tr.appendChild(el('td', { 'data-col': 'price', 'data-label': t('Price'), 'data-testid': 'stock-price' }, price || '\u2013'));
  STOCK_COLUMNS.forEach(function (c) {
    var notHeld = c[0] === 'displayed' && typeof it.displayed === 'number' && it.displayed < 0;
    var td = el('td', { 'data-col': c[0], 'data-label': c[1] }, notHeld ? unheldWord(sel) : numberText(it[c[0]]));
    if (notHeld) {
      td.classList.add('not-held');
    }
    tr.appendChild(td);
  });
  var ok = it.reconciled === true;
  var cell = el('td', { 'data-col': 'reconciled', 'data-label': t('Reconciled'), class: ok ? 'reconciled' : 'drift' }, ok ? '\u2713' : t('drift'));
  tr.appendChild(cell);
  if (ok || !it.mismatch) {
    return [tr];
  }
  tr.classList.add('has-drift');
  return [tr, driftRow(itemId, it.mismatch, cell)];
}

async function loadStock(P) {
  if (!P.selected) {
    return false;
  }
  var sel = P.selected;
  if (!sel.prices) {
    await loadPrices(sel);
  }
  var r = await api('GET', '/api/admin/sales/' + enc(sel.id) + '/stock', undefined, undefined, 'no-store');
  if (P.selected !== sel) {
    return false;
  }
  if (r.ok && r.data && Array.isArray(r.data.items)) {
    var trs = [];
    r.data.items.forEach(function (it) {
      trs.push.apply(trs, stockRows(P, sel, it));
    });
    P.rows.replaceChildren.apply(P.rows, trs);
    var entry = P.page.sales.entry(sel.id);
    if (entry && entry.controls) {
      entry.controls.update({ loadedAt: loadedOf(r.data), paused: r.data.paused === true });
    }
    setText(P.updated, t('Updated {time}.', { time: formatClock(Date.now()) }));
    return true;
  }
  if (r.status === 404) {
    setText(P.updated, SALE_NOT_FOUND);
    return false;
  }
  if (P.page.gate.authProblem(r)) {
    return false;
  }
  setText(P.updated, t('Could not refresh: {why} Retrying\u2026', { why: errorText(r) }));
  return failed((r.retryAfter || 0) * 1000);
}

// initStock returns selected() (the open sale's {id, name, sale}, or null), select(id, name,
// sale), close(), place(), stop() (the poller), forget() (nobody is signed in), saleListed(s)
// and pricesChanged(id).
export function initStock(page) {
  var panel = byTestId('stock-panel', page.root);
  var P = {
    page: page,
    panel: panel,
    home: panel ? panel.parentNode : null,
    rows: byTestId('stock-rows', page.root),
    saleName: byTestId('stock-sale-name', page.root),
    updated: byTestId('stock-updated', page.root),
    selected: null,
    poller: null
  };
  P.poller = makePoller(function () {
    return loadStock(P);
  }, 1000);
  var closeButton = byTestId('stock-close', page.root);
  if (closeButton) {
    closeButton.addEventListener('click', function () {
      close(P);
    });
  }
  return {
    selected: function () {
      return P.selected;
    },
    select: function (id, name, sale) {
      select(P, id, name, sale);
    },
    close: function () {
      close(P);
    },
    place: function () {
      place(P);
    },
    stop: function () {
      P.poller.stop();
    },
    forget: function () {
      P.selected = null;
      show(P.panel, false);
      place(P);
    },
    // saleListed keeps the open sale's listing as the list last had it.
    saleListed: function (s) {
      if (P.selected && P.selected.id === String(s.saleId)) {
        P.selected.sale = s;
      }
    },
    pricesChanged: function (id) {
      if (P.selected && P.selected.id === id) {
        P.selected.prices = null;
      }
    }
  };
}
