// Editing a sale on /admin: the creation form, filled in from the sale. What a started sale can
// no longer change (its start, currency, purchase limit, fair start and list of items) is locked, with a
// word why; the form remembers the sale as filled in, to send only what changed.

import { byTestId, setText, show, enc } from './dom.js';
import { parseTime } from './time.js';
import { serverNow } from './clock.js';
import { api } from './api.js';
import { adminErrorText as errorText } from './admin_merchant.js';
import { itemRows, renumber, addRow, showSymbols, toLocalInput, priceInput, fairStartInput, fairStartMillis, showFairStartHint } from './admin_form_fields.js';
import { clearAllErrors } from './admin_form_errors.js';
import { t } from './i18n.js';

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

// lockFixed locks (or unlocks) what a started sale cannot change.
function lockFixed(F, locked) {
  setLocked(F.form.elements.startsAt, F.startsLocked, locked);
  setLocked(F.form.elements.currency, null, locked);
  setLocked(F.form.elements.fairStartSeconds, F.fairStartLocked, locked);
  Array.prototype.forEach.call(F.form.querySelectorAll('input[name="purchaseLimit"]'), function (r) {
    r.disabled = locked;
  });
  setLocked(F.addItem, F.addItemLocked, locked);
}

// prefillTimes proposes a start at the next five minutes but five, and an hour's sale.
export function prefillTimes(F) {
  if (!F.form) {
    return;
  }
  var start = Math.ceil((Date.now() + 5 * 60000) / (5 * 60000)) * 5 * 60000;
  if (!F.form.elements.startsAt.value) {
    F.form.elements.startsAt.value = toLocalInput(start);
  }
  if (!F.form.elements.endsAt.value) {
    F.form.elements.endsAt.value = toLocalInput(start + 3600000);
  }
}

// resetForm empties the form back to one blank item, in create mode.
export function resetForm(F) {
  F.form.reset();
  itemRows(F).forEach(function (row, i) {
    if (i > 0) {
      row.remove();
    } else {
      row.removeAttribute('data-item-id');
      show(byTestId('remove-item', row), true);
    }
  });
  renumber(F);
  showSymbols(F);
  showFairStartHint(F);
}

// fillItems writes the sale's items into rows of their own (no Remove: an item on sale stays)
// and returns them as filled in, by item id.
function fillItems(F, items, cur) {
  var initItems = {};
  items.forEach(function (it, i) {
    var row = i === 0 ? itemRows(F)[0] : addRow(F);
    var itemId = String(it.itemId);
    var image = typeof it.imageUrl === 'string' ? it.imageUrl : '';
    row.setAttribute('data-item-id', itemId);
    row.querySelector('[name="itemName"]').value = it.name || '';
    row.querySelector('[name="price"]').value = priceInput(it.priceCents, cur);
    row.querySelector('[name="quantity"]').value = String(it.quantity);
    row.querySelector('[name="imageUrl"]').value = image;
    show(byTestId('remove-item', row), false);
    initItems[itemId] = { name: (it.name || '').trim(), priceCents: Number(it.priceCents), quantity: Number(it.quantity), imageUrl: image };
  });
  return initItems;
}

// fill writes the sale into the form and returns what the form says of it, as filled in.
function fill(F, sale) {
  var el = F.form.elements;
  var starts = parseTime(sale.startsAt);
  var ends = parseTime(sale.endsAt);
  var cur = typeof sale.currency === 'string' && sale.currency ? sale.currency : 'CNY';
  el.name.value = sale.name || '';
  el.description.value = typeof sale.description === 'string' ? sale.description : '';
  el.startsAt.value = isNaN(starts) ? '' : toLocalInput(starts);
  el.endsAt.value = isNaN(ends) ? '' : toLocalInput(ends);
  el.currency.value = cur;
  el.paymentWindowMinutes.value = String(Math.max(1, Math.round((Number(sale.paymentWindowSeconds) || 600) / 60)));
  var limit = sale.purchaseLimit === 'per-item' ? 'per-item' : 'per-sale';
  Array.prototype.forEach.call(F.form.querySelectorAll('input[name="purchaseLimit"]'), function (r) {
    r.checked = r.value === limit;
  });
  if (el.fairStartSeconds) {
    el.fairStartSeconds.value = fairStartInput(sale.fairStartMillis);
  }
  var items = fillItems(F, Array.isArray(sale.items) ? sale.items : [], cur);
  showSymbols(F);
  showFairStartHint(F);
  return { name: (sale.name || '').trim(), description: el.description.value.trim(), startsAt: el.startsAt.value, endsAt: el.endsAt.value,
    currency: cur, minutes: el.paymentWindowMinutes.value, limit: limit, items: items,
    fairSeconds: el.fairStartSeconds ? el.fairStartSeconds.value : '0', fairMs: el.fairStartSeconds ? fairStartMillis(el.fairStartSeconds.value) : 0 };
}

// startEdit opens the form on a sale: the list's entry has no items, so the sale itself is read
// first (past every cache).
export async function startEdit(F, listed) {
  if (!F.form) {
    return;
  }
  var id = String(listed.saleId);
  var r = await api('GET', '/api/flash-sales/' + enc(id), undefined, undefined, 'no-store');
  if (!r.ok || !r.data || !Array.isArray(r.data.items)) {
    if (!F.page.gate.authProblem(r)) {
      F.page.say(t('Could not open the sale for editing: {why}', { why: errorText(r) }), 'error');
    }
    return;
  }
  var sale = Object.assign({}, r.data, { status: listed.status || r.data.status });
  clearAllErrors(F);
  F.clearBanners();
  resetForm(F);
  var starts = parseTime(sale.startsAt);
  var started = sale.status === 'live' || (!isNaN(starts) && starts <= serverNow());
  F.editing = { id: id, sale: sale, started: started, initial: fill(F, sale) };
  F.form.setAttribute('data-mode', 'edit');
  F.form.setAttribute('data-sale-id', id);
  setText(F.heading, t('Edit \u201c{name}\u201d', { name: sale.name || t('sale {id}', { id: id }) }));
  setText(F.editNote, started
    ? t('Only what you change is saved, all at once or not at all. The sale has started: its start, currency, purchase limit, fair start and items list are fixed; names, prices, quantities, the end and the payment window can still change.')
    : t('Only what you change is saved, all at once or not at all.'));
  show(F.editNote, true);
  setText(F.submit, t('Save changes'));
  show(F.editCancel, true);
  lockFixed(F, started);
  if (F.card && F.card.scrollIntoView) {
    F.card.scrollIntoView({ block: 'start' });
  }
  F.form.elements.name.focus({ preventScroll: true });
}

// lockStarted fixes what a started sale cannot change: the start, the currency, the purchase
// limit, the fair start (each back to the sale's value) and the list of items (new rows go).
export function lockStarted(F) {
  var init = F.editing.initial;
  F.editing.started = true;
  F.form.elements.startsAt.value = init.startsAt;
  F.form.elements.currency.value = init.currency;
  if (F.form.elements.fairStartSeconds) {
    F.form.elements.fairStartSeconds.value = init.fairSeconds;
    showFairStartHint(F);
  }
  Array.prototype.forEach.call(F.form.querySelectorAll('input[name="purchaseLimit"]'), function (r) {
    r.checked = r.value === init.limit;
  });
  itemRows(F).forEach(function (row) {
    if (!row.hasAttribute('data-item-id')) {
      row.remove();
    }
  });
  renumber(F);
  showSymbols(F);
  lockFixed(F, true);
}

// stopEdit puts the form back in create mode; it returns the id of the sale it was editing.
export function stopEdit(F) {
  if (!F.editing) {
    return undefined;
  }
  var id = F.editing.id;
  F.editing = null;
  clearAllErrors(F);
  resetForm(F);
  F.form.setAttribute('data-mode', 'create');
  F.form.removeAttribute('data-sale-id');
  setText(F.heading, t('Create a sale'));
  show(F.editNote, false);
  setText(F.submit, t('Create sale'));
  show(F.editCancel, false);
  lockFixed(F, false);
  prefillTimes(F);
  return id;
}
