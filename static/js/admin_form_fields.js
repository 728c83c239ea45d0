// The sale form's fields (/admin): the item rows, the times and prices as the merchant types
// them, and reading the form into a request. The limits the HTML states (required, min, max,
// step, maxlength, pattern) are the browser's to check: readForm asks each control's validity
// (the constraint validation API) and words what it found beside the field. The form keeps
// novalidate, so the browser's own bubbles, in the browser's words and language, never show.

import { allByTestId, byTestId, setText } from './dom.js';
import { pad2 } from './time.js';
import { serverNow } from './clock.js';
import { CURRENCIES, parseMoney } from './money.js';
import { setFieldError } from './admin_form_errors.js';
import { t, locale } from './i18n.js';

// maxItems is the most items a sale has: the server's limit, which the form carries
// (data-max-items, from shop.MaxItemsPerSale).
function maxItems(F) {
  var n = F.form ? Number(F.form.getAttribute('data-max-items')) : NaN;
  return n > 0 ? n : Infinity;
}

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

// toLocalInput writes a time as a datetime-local value in the browser's zone, with its seconds
// when it has any (a sale edited through the API may start at 10:00:30).
export function toLocalInput(ms) {
  var d = new Date(ms);
  return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) +
    'T' + pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + (d.getSeconds() ? ':' + pad2(d.getSeconds()) : '');
}

// zoneName names the browser's time zone ("Asia/Shanghai"), or its offset ("UTC+08:00").
export function zoneName() {
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
export function priceInput(minor, currency) {
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

function priceProblem(why) {
  switch (why) {
    case 'empty':
      return t('Give the item a price, like 19.99.');
    case 'digits':
      return t('Use at most two decimals, like 19.99.');
    case 'range':
      return t('The price must be at most 100,000,000.');
    default:
      return t('Type the price as a number, like 19.99.');
  }
}

// quantityProblem words what the browser found wrong with a quantity (min, max and step are
// the HTML's), or returns ''.
function quantityProblem(input) {
  var v = input.validity;
  if (v.valueMissing || v.badInput) {
    return t('Quantity must be at least 1.');
  }
  if (v.stepMismatch) {
    return t('Quantity is a whole number, like 100.');
  }
  if (v.rangeUnderflow) {
    return t('Quantity must be at least {n}.', { n: Number(input.min).toLocaleString(locale) });
  }
  if (v.rangeOverflow) {
    return t('Quantity must be at most {n}.', { n: Number(input.max).toLocaleString(locale) });
  }
  return '';
}

export function currency(F) {
  return F.form && F.form.elements.currency ? F.form.elements.currency.value || 'CNY' : 'CNY';
}

// showSymbols writes the chosen currency's symbol before every price field.
export function showSymbols(F) {
  var c = currency(F);
  var symbol = Object.prototype.hasOwnProperty.call(CURRENCIES, c) ? CURRENCIES[c].symbol : c;
  allByTestId('item-price-symbol', F.form).forEach(function (s) {
    setText(s, symbol);
  });
  if (F.template && F.template.content) {
    allByTestId('item-price-symbol', F.template.content).forEach(function (s) {
      setText(s, symbol);
    });
  }
}

export function itemRows(F) {
  return F.rows ? allByTestId('item-row', F.rows) : [];
}

// renumber keeps "Item 1", "Item 2"… and the Remove buttons' names in order.
export function renumber(F) {
  itemRows(F).forEach(function (row, i) {
    setText(byTestId('item-number', row), String(i + 1));
    var b = byTestId('remove-item', row);
    if (b) {
      b.setAttribute('aria-label', t('Remove item {n}', { n: i + 1 }));
    }
  });
}

export function addRow(F) {
  if (!F.template || !F.rows) {
    return null;
  }
  var frag = F.template.content.cloneNode(true);
  var row = frag.querySelector('[data-testid="item-row"]');
  F.rows.appendChild(frag);
  renumber(F);
  showSymbols(F);
  return row;
}

function given(input) {
  return !input.validity.valueMissing && !input.validity.badInput;
}

// readTimes reads the start and the end, and checks them against each other and the clock.
function readTimes(F, problem) {
  var el = F.form.elements;
  var tm = { startsRaw: el.startsAt.value, endsRaw: el.endsAt.value };
  // Missing or half typed is the browser's to tell; a time with seconds is one too, though the
  // field's step (a minute, so that the picker shows no seconds) calls it a mismatch.
  tm.startsAt = given(el.startsAt) ? localInputToRFC3339(tm.startsRaw) : null;
  tm.endsAt = given(el.endsAt) ? localInputToRFC3339(tm.endsRaw) : null;
  var editing = F.editing;
  var startMoved = !editing || tm.startsRaw !== editing.initial.startsAt;
  var endMoved = !editing || tm.endsRaw !== editing.initial.endsAt;
  if (!tm.startsAt) {
    problem('startsAt', null, t('Give the start as a date and a time.'));
  }
  if (!tm.endsAt) {
    problem('endsAt', null, t('Give the end as a date and a time.'));
  }
  if (!tm.startsAt || !tm.endsAt) {
    return tm;
  }
  var s = Date.parse(tm.startsAt);
  var e = Date.parse(tm.endsAt);
  if (editing && startMoved && editing.started) {
    problem('startsAt', null, t('The sale has started: its start can no longer move.'));
  } else if (editing && startMoved && s < serverNow() - 60000) {
    problem('startsAt', null, t('The start is in the past: choose a time from now on.'));
  }
  if (e <= s) {
    problem('endsAt', null, t('The end must be after the start.'));
  } else if (endMoved && e <= serverNow()) {
    problem('endsAt', null, editing ? t('The end must be in the future (to end the sale now, use End early).') : t('The end must be in the future.'));
  } else if (e - s > 30 * 86400000) {
    problem('endsAt', null, t('A sale lasts at most 30 days: bring the end closer to the start.'));
  }
  return tm;
}

// readItem reads one item row: null when it is a new row left empty, or has a problem (said).
function readItem(row, cur, problem) {
  var name = row.querySelector('[name="itemName"]');
  var priceEl = row.querySelector('[name="price"]');
  var qtyEl = row.querySelector('[name="quantity"]');
  var imageEl = row.querySelector('[name="imageUrl"]');
  var it = { row: row, itemId: row.getAttribute('data-item-id') || '', name: name.value.trim(),
    imageUrl: imageEl ? imageEl.value.trim() : '' };
  var priceText = priceEl.value.trim();
  if (!it.itemId && !it.name && !priceText && !qtyEl.value.trim() && !it.imageUrl) {
    return { empty: true }; // an empty new row is left out
  }
  var ok = true;
  if (!name.validity.valid || !it.name) {
    ok = problem('itemName', row, t('Give the item a name.'));
  }
  var price = parseMoney(priceText, cur);
  if (price.error) {
    ok = problem('price', row, priceProblem(price.error));
  }
  var qty = quantityProblem(qtyEl);
  if (qty) {
    ok = problem('quantity', row, qty);
  }
  // type=url would take http:// and more: a sale's images are https only.
  if (it.imageUrl && !/^https:\/\/[^\s/]+/i.test(it.imageUrl)) {
    ok = problem('imageUrl', row, t('The image address must start with https://.'));
  }
  it.priceCents = price.minor;
  it.quantity = Number(qtyEl.value);
  return ok ? it : null;
}

// readItems reads every item row; a sale has one item at least and maxItems at most.
function readItems(F, cur, problem, hadProblem) {
  var items = [];
  var all = itemRows(F);
  all.forEach(function (row) {
    var it = readItem(row, cur, problem);
    if (it && !it.empty) {
      items.push(it);
    }
  });
  if (all.length > maxItems(F)) {
    problem('items', null, t('A sale has at most {n} items: remove some.', { n: maxItems(F) }));
  } else if (items.length === 0 && !hadProblem()) {
    problem('items', null, t('Add at least one item.'));
  }
  return items;
}

// fairStartMillis reads the fair start's seconds (tenths allowed) as the milliseconds the API
// takes: "2.5" is 2500; empty is 0 (no draw).
export function fairStartMillis(v) {
  var n = Number(String(v || '').trim() || '0');
  return isFinite(n) ? Math.round(n * 1000) : NaN;
}

// fairStartInput writes milliseconds as the form's seconds: 2500 is "2.5", 0 is "0".
export function fairStartInput(ms) {
  var n = Math.max(0, Math.round(Number(ms) || 0));
  return String(Math.round(n / 100) / 10);
}

// readFairStart reads the fair start (min, max and step are the HTML's, from the server's
// limit: views/formlimits.go) and returns its milliseconds.
function readFairStart(F, problem) {
  var input = F.form.elements.fairStartSeconds;
  if (!input) {
    return 0;
  }
  var v = input.validity;
  var max = Number(input.max);
  if (v.badInput || v.rangeUnderflow || v.rangeOverflow) {
    problem('fairStart', null, t('The fair start is 0 (off) to {n} seconds.', { n: max.toLocaleString(locale) }));
    return 0;
  }
  if (v.stepMismatch) {
    problem('fairStart', null, t('Give the fair start in seconds with at most one decimal, like 2.5.'));
    return 0;
  }
  return fairStartMillis(input.value);
}

// fairStartHint words the fair start's line for the seconds typed; '' for none (0: off), where
// the page's own line stays.
export function fairStartHint(ms) {
  if (!(ms > 0)) {
    return '';
  }
  return t('Purchases in the first {n} seconds are drawn at random instead of first come, first served.',
    { n: (ms / 1000).toLocaleString(locale, { maximumFractionDigits: 1 }) });
}

// showFairStartHint writes the fair start's line for the seconds in the field (the page's own
// line, kept in F.fairStartText, for 0 or a value that is not one).
export function showFairStartHint(F) {
  var input = F.form && F.form.elements.fairStartSeconds;
  if (!input || !F.fairStartHint) {
    return;
  }
  var ms = input.validity.valid ? fairStartMillis(input.value) : 0;
  setText(F.fairStartHint, fairStartHint(ms) || F.fairStartText);
}

// readForm checks what can be checked here and returns what the form says, or null after
// showing each problem next to its field (the first focused).
export function readForm(F) {
  var first = null;
  function problem(field, row, text) {
    var c = setFieldError(F, field, row, text);
    if (!first) {
      first = c || true;
    }
    return false;
  }
  var el = F.form.elements;
  var name = el.name.value.trim();
  if (!el.name.validity.valid || !name) {
    problem('name', null, t('Give the sale a name.'));
  }
  var description = el.description ? el.description.value.trim() : '';
  if (el.description && el.description.validity.tooLong) {
    problem('description', null, t('The description is too long: at most {n} characters.', { n: Number(el.description.maxLength).toLocaleString(locale) }));
  }
  var times = readTimes(F, problem);
  var cur = currency(F);
  if (!el.paymentWindowMinutes.validity.valid) {
    problem('paymentWindow', null, t('The payment window is 1 to 1440 minutes (a day), in whole minutes.'));
  }
  var fairMs = readFairStart(F, problem);
  var limitInput = F.form.querySelector('input[name="purchaseLimit"]:checked');
  var items = readItems(F, cur, problem, function () {
    return first !== null;
  });
  if (first) {
    if (first !== true && first.focus) {
      first.focus();
    }
    return null;
  }
  return { name: name, description: description, startsAt: times.startsAt, endsAt: times.endsAt, startsRaw: times.startsRaw, endsRaw: times.endsRaw,
    currency: cur, minutes: Number(el.paymentWindowMinutes.value), fairMs: fairMs, limit: limitInput ? limitInput.value : 'per-sale', items: items };
}

function newItem(it) {
  var item = { name: it.name, priceCents: it.priceCents, quantity: it.quantity };
  if (it.imageUrl) {
    item.imageUrl = it.imageUrl;
  }
  return item;
}

// createRequest is the body of a new sale, and the rows of its items in order.
export function createRequest(v) {
  var body = { name: v.name, startsAt: v.startsAt, endsAt: v.endsAt, currency: v.currency, paymentWindowSeconds: v.minutes * 60,
    purchaseLimit: v.limit, items: v.items.map(newItem) };
  if (v.description) {
    body.description = v.description;
  }
  if (v.fairMs > 0) {
    body.fairStartMillis = v.fairMs;
  }
  return { body: body, rows: v.items.map(function (it) { return it.row; }) };
}

// saleChanges writes into body what changed of the sale itself, and names it in changed.
function saleChanges(init, v, body, changed) {
  var fields = [
    ['name', v.name !== init.name, t('name'), v.name],
    ['description', v.description !== init.description, t('description'), v.description],
    ['startsAt', v.startsRaw !== init.startsAt, t('start'), v.startsAt],
    ['endsAt', v.endsRaw !== init.endsAt, t('end'), v.endsAt],
    ['currency', v.currency !== init.currency, t('currency'), v.currency],
    ['paymentWindowSeconds', String(v.minutes) !== init.minutes, t('payment window'), v.minutes * 60],
    ['purchaseLimit', v.limit !== init.limit, t('purchase limit'), v.limit],
    ['fairStartMillis', v.fairMs !== init.fairMs, t('fair start'), v.fairMs]
  ];
  fields.forEach(function (f) {
    if (f[1]) {
      body[f[0]] = f[3];
      changed.push(f[2]);
    }
  });
}

// itemPatch is what changed of an item on sale (a price retyped with another currency is sent
// again in the new one), or null.
function itemPatch(it, was, currencyChanged) {
  var patch = { itemId: it.itemId };
  var n = 0;
  [['name', it.name !== was.name], ['priceCents', it.priceCents !== was.priceCents || currencyChanged],
    ['quantity', it.quantity !== was.quantity], ['imageUrl', it.imageUrl !== was.imageUrl]].forEach(function (f) {
    if (f[1]) {
      patch[f[0]] = it[f[0]];
      n++;
    }
  });
  return n > 0 ? patch : null;
}

// editRequest is the PATCH of the sale being edited: only what changed (items by itemId, new
// items without one), the rows of its items in order, and the names of what changed.
export function editRequest(init, v) {
  var body = {};
  var changed = [];
  saleChanges(init, v, body, changed);
  var items = [];
  var rowsSent = [];
  v.items.forEach(function (it) {
    if (!it.itemId) {
      items.push(newItem(it));
      rowsSent.push(it.row);
      changed.push(t('new item \u201c{name}\u201d', { name: it.name }));
      return;
    }
    var was = init.items[it.itemId];
    var patch = was ? itemPatch(it, was, body.currency !== undefined) : null;
    if (patch) {
      items.push(patch);
      rowsSent.push(it.row);
      changed.push(t('\u201c{name}\u201d', { name: it.name }));
    }
  });
  if (items.length > 0) {
    body.items = items;
  }
  return { body: body, rows: rowsSent, changed: changed };
}
