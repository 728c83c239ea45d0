// The merchant's sales on /admin, refreshed every 15 s: each one an entry with its status, times
// and terms, its controls (admin_controls.js), and links to its live stock, live view, orders,
// edit form and sale page. An entry is built once and then updated in place, so that a poll
// never takes the focus, an open confirm step or a sentence away from the merchant.

import { byTestId, setText, show, el, enc } from './dom.js';
import { timeElement } from './time.js';
import { api } from './api.js';
import { adminErrorText as errorText } from './admin_merchant.js';
import { makePoller, failed } from './poll.js';
import { bindControls } from './admin_controls.js';
import { loadedOf } from './admin_stock.js';
import { t, href } from './i18n.js';

function limitText(limit) {
  return limit === 'per-item' ? t('one unit per shopper of each item') : t('one unit per shopper in the sale');
}

// statusText is a sale's status in words.
function statusText(status) {
  switch (status) {
    case 'upcoming':
      return t('upcoming');
    case 'live':
      return t('live');
    case 'ended':
      return t('ended');
  }
  return status || '?';
}

// formatWindow writes a payment window given in seconds: "10 min", "1 h 30 min", "45 s".
function formatWindow(seconds) {
  var s = Number(seconds);
  if (!isFinite(s) || s <= 0) {
    return '';
  }
  if (s % 60 !== 0) {
    return s < 60 ? t('{n} s', { n: s }) : t('{m} min {s} s', { m: Math.floor(s / 60), s: s % 60 });
  }
  var min = s / 60;
  if (min < 60) {
    return t('{n} min', { n: min });
  }
  return min % 60 ? t('{h} h {m} min', { h: Math.floor(min / 60), m: min % 60 }) : t('{n} h', { n: Math.floor(min / 60) });
}

// entryActions are an entry's buttons and links; it returns the Edit button.
function entryActions(L, id, li) {
  var page = L.page;
  var actions = el('div', { class: 'admin-sale-actions' });
  var pick = el('button', { type: 'button', class: 'button button-small', 'data-testid': 'show-stock', 'data-sale-id': id }, t('Live stock'));
  pick.setAttribute('aria-pressed', 'false');
  pick.setAttribute('aria-controls', 'stock-panel');
  pick.addEventListener('click', function () {
    var selected = page.stock.selected();
    if (selected && selected.id === id) {
      page.stock.close();
      return;
    }
    var s = L.byId[id];
    page.stock.select(id, s && s.name ? s.name : t('sale {id}', { id: id }), s || null);
  });
  actions.appendChild(pick);
  actions.appendChild(el('a', { href: href('/admin/sales/' + enc(id)), class: 'button button-small button-secondary', 'data-testid': 'open-live' }, t('Live view')));
  actions.appendChild(el('a', { href: href('/admin/sales/' + enc(id) + '/orders'), class: 'button button-small button-secondary', 'data-testid': 'open-orders' }, t('Orders')));
  var edit = el('button', { type: 'button', class: 'button button-small button-secondary', 'data-testid': 'edit-sale', 'data-sale-id': id }, t('Edit'));
  edit.addEventListener('click', function () {
    if (L.byId[id]) {
      page.form.startEdit(L.byId[id]);
    }
  });
  actions.appendChild(edit);
  actions.appendChild(el('a', { href: href('/sales/' + enc(id)), class: 'button button-small button-secondary', 'data-testid': 'open-sale' }, t('Open sale page')));
  li.appendChild(actions);
  return edit;
}

function buildEntry(L, id) {
  var li = el('li', { class: 'admin-sale', 'data-testid': 'admin-sale', 'data-sale-id': id });
  var head = el('div', { class: 'admin-sale-head' });
  var entry = {
    li: li,
    nameEl: el('strong', { 'data-testid': 'admin-sale-name' }),
    statusEl: el('span', { 'data-testid': 'admin-sale-status' }),
    pausedEl: el('span', { class: 'badge badge-paused', 'data-testid': 'admin-sale-paused' }, t('paused')),
    times: el('p', { class: 'admin-sale-times' }),
    terms: el('p', { class: 'admin-sale-terms', 'data-testid': 'admin-sale-terms' }),
    key: '',
    controls: null
  };
  var badges = el('span', { class: 'admin-sale-badges' });
  badges.appendChild(entry.pausedEl);
  badges.appendChild(entry.statusEl);
  head.appendChild(entry.nameEl);
  head.appendChild(badges);
  li.appendChild(head);
  li.appendChild(entry.times);
  li.appendChild(entry.terms);
  var controlsRoot = null;
  if (L.controlsTemplate && L.controlsTemplate.content) {
    li.appendChild(L.controlsTemplate.content.cloneNode(true));
    controlsRoot = byTestId('sale-controls', li);
  }
  entry.edit = entryActions(L, id, li);
  entry.controls = controlsRoot ? bindControls(controlsRoot, {
    saleId: id,
    authProblem: L.page.gate.authProblem,
    after: function (action) {
      if (action === 'end' && L.page.form.editing() === id) {
        L.page.form.stopEdit();
      }
      return refreshSale(L, id);
    }
  }) : null;
  return entry;
}

function updateEntry(entry, s) {
  var id = String(s.saleId);
  var status = typeof s.status === 'string' ? s.status : '';
  setText(entry.nameEl, s.name || t('sale {id}', { id: id }));
  entry.statusEl.className = 'badge badge-' + status.replace(/[^a-z]/gi, '');
  setText(entry.statusEl, statusText(status));
  show(entry.pausedEl, s.paused === true && status !== 'ended');
  var key = String(s.startsAt) + '|' + String(s.endsAt);
  if (entry.key !== key) {
    entry.key = key;
    entry.times.replaceChildren(document.createTextNode(t('Starts ')), timeElement(s.startsAt),
      document.createTextNode(' \u00b7 ' + t('Ends ')), timeElement(s.endsAt));
  }
  var terms = [];
  if (s.currency) {
    terms.push(t('Prices in {currency}', { currency: s.currency }));
  }
  if (s.paymentWindowSeconds) {
    terms.push(t('pay within {d}', { d: formatWindow(s.paymentWindowSeconds) }));
  }
  terms.push(limitText(s.purchaseLimit));
  setText(entry.terms, terms.join(' \u00b7 '));
  entry.edit.disabled = status === 'ended';
  entry.edit.title = status === 'ended' ? t('The sale has ended') : '';
  if (entry.controls) {
    entry.controls.update({ status: status, paused: s.paused === true });
  }
}

// openPendingEdit: /admin?edit=ID, the live view's Edit link, opens that sale's form once, if
// it can change.
function openPendingEdit(L) {
  var id = L.pendingEdit;
  var s = L.byId[id];
  if (!s) {
    L.page.say(t('Sale {id} is not one of your sales: there is nothing to edit.', { id: id }), 'error');
  } else if (s.status === 'ended') {
    L.page.say(t('\u201c{name}\u201d has ended: it can no longer be edited.', { name: s.name || t('Sale {id}', { id: id }) }), 'info');
  } else {
    L.pendingEdit = null;
    L.page.form.startEdit(s).then(L.page.form.opened);
    return;
  }
  L.pendingEdit = null;
  L.page.form.opened();
}

function renderSales(L, sales) {
  show(L.empty, sales.length === 0);
  var ids = [];
  L.byId = {};
  sales.forEach(function (s) {
    var id = String(s.saleId);
    ids.push(id);
    L.byId[id] = s;
    if (!L.entries[id]) {
      L.entries[id] = buildEntry(L, id);
      // a sale new since the list was drawn (made here or in another tab) comes on top: the
      // page grows by one rather than push one the merchant sees out of sight
      L.shown += L.listed ? 1 : 0;
    }
    updateEntry(L.entries[id], s);
    L.page.stock.saleListed(s);
  });
  Object.keys(L.entries).forEach(function (id) {
    if (!L.byId[id]) {
      L.entries[id].li.remove();
      delete L.entries[id];
    }
  });
  // Re-append only when the order changed (moving an entry would drop the focus inside it).
  var current = Array.prototype.map.call(L.list.children, function (li) {
    return li.getAttribute('data-sale-id');
  });
  if (current.join(',') !== ids.join(',')) {
    ids.forEach(function (id) {
      L.list.appendChild(L.entries[id].li);
    });
  }
  L.listed = true;
  L.ids = ids;
  pageSales(L, ids);
  L.page.stock.place();
  if (L.pendingEdit) {
    openPendingEdit(L);
  }
}

// SALES_PAGE is how many sales the list shows at first, and how many more each press of "Show
// more sales" adds (newest first): a merchant with many sales does not scroll through all of them.
const SALES_PAGE = 10;

// pageSales shows the first L.shown entries, and any the merchant has worked on (edited, its
// stock opened: what the page says or focuses there stays in sight); it says how many of how
// many, and offers the rest.
function pageSales(L, ids) {
  var editing = L.page.form ? L.page.form.editing() : null;
  var selected = L.page.stock ? L.page.stock.selected() : null;
  if (editing) {
    L.revealed[editing] = true;
  }
  if (selected) {
    L.revealed[selected.id] = true;
  }
  var shown = 0;
  ids.forEach(function (id, i) {
    var on = i < L.shown || L.revealed[id] === true;
    show(L.entries[id].li, on);
    shown += on ? 1 : 0;
  });
  setText(L.count, ids.length > SALES_PAGE ? t('{shown} of {total} sales', { shown: shown, total: ids.length }) : '');
  show(L.more, shown < ids.length);
}

// refreshLoaded asks whether Redis holds each sale's stock (sales not ended, the first 20).
async function refreshLoaded(L, ids) {
  await Promise.all(ids.slice(0, 20).map(async function (id) {
    var r = await api('GET', '/api/admin/sales/' + enc(id) + '/stock', undefined, undefined, 'no-store');
    if (r.ok && r.data && L.entries[id] && L.entries[id].controls) {
      L.entries[id].controls.update({ loadedAt: loadedOf(r.data), paused: r.data.paused === true });
    }
  }));
}

// refreshSale reloads the list and the stock state of one sale, after an action on it.
async function refreshSale(L, id) {
  await loadSales(L, true);
  await refreshLoaded(L, [id]);
}

async function loadSales(L, skipLoaded) {
  var page = L.page;
  var r = await api('GET', '/api/admin/sales', undefined, undefined, 'no-store');
  if (r.ok && r.data) {
    if (page.gate.admit()) {
      page.form.prefillTimes();
    }
    var sales = Array.isArray(r.data.sales) ? r.data.sales : [];
    renderSales(L, sales);
    if (skipLoaded !== true) {
      await refreshLoaded(L, sales.filter(function (s) {
        return s.status !== 'ended';
      }).map(function (s) {
        return String(s.saleId);
      }));
    }
    return true;
  }
  if (page.gate.authProblem(r)) {
    return false;
  }
  page.say(t('Could not load your sales: {why}', { why: errorText(r) }), 'error');
  return failed((r.retryAfter || 0) * 1000);
}

// initSales returns list (the element), entry(id), load() (the list now), refresh(id) (after
// an action on the sale) and its poller (start, stop, restart).
export function initSales(page) {
  var L = {
    page: page,
    list: byTestId('admin-sales', page.root),
    empty: byTestId('admin-sales-empty', page.root),
    controlsTemplate: byTestId('sale-controls-template', page.root),
    entries: {}, // sale id -> {li, parts…, controls}
    byId: {}, // sale id -> the sale as last listed
    pendingEdit: new URLSearchParams(window.location.search).get('edit'),
    count: byTestId('admin-sales-count', page.root),
    more: byTestId('admin-sales-more', page.root),
    shown: SALES_PAGE,
    listed: false, // the list has been drawn once
    ids: [], // the listed sales' ids, in the list's order
    revealed: {} // sale id -> true: shown whatever its place (the merchant worked on it)
  };
  if (L.more) {
    L.more.addEventListener('click', function () {
      var first = L.shown; // the first entry the press brings: the focus goes to it
      L.shown += SALES_PAGE;
      pageSales(L, L.ids);
      var next = L.list.children[first];
      var link = next && next.querySelector('a[href], button:not([disabled])');
      if (link) {
        link.focus();
      }
    });
  }
  return {
    list: L.list,
    // pendingEdit: the sale /admin?edit=ID names, until the list has opened it (or said why not)
    pendingEdit: function () {
      return L.pendingEdit;
    },
    entry: function (id) {
      return L.entries[id] || null;
    },
    load: function () {
      return loadSales(L);
    },
    refresh: function (id) {
      return refreshSale(L, id);
    },
    poller: makePoller(function () {
      return loadSales(L);
    }, 15000)
  };
}
