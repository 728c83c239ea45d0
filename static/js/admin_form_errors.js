// The sale form's errors (/admin): each one beside its field, in the merchant's words, tied to
// its control for screen readers; and the server's refusals turned into such errors.

import { byTestId, setText, show } from './dom.js';
import { sentence } from './api.js';
import { t, lang, locale } from './i18n.js';
import { formatMoney } from './money.js';

// ADMIN_MESSAGES turns the server's refusals of a new sale (services/sales.go and the JSON
// decoding) into the merchant's words, next to the field they are about. A field of an item
// carries its index in the request ($1); other numbers of the message fill in $2.
const ADMIN_MESSAGES = [
  [/^name must not be empty/, 'name', t('Give the sale a name.')],
  [/^name must be at most (\d+)/, 'name', t('The name is too long: at most $1 characters.')],
  [/^name must/, 'name', t('The name has characters that cannot be used.')],
  [/^startsAt and endsAt are required/, 'startsAt', t('Give the start and the end as a date and a time.')],
  [/^startsAt must be an RFC 3339/, 'startsAt', t('Give the start as a date and a time.')],
  [/^endsAt must be an RFC 3339/, 'endsAt', t('Give the end as a date and a time.')],
  [/^endsAt must be after startsAt/, 'endsAt', t('The end must be after the start.')],
  [/^endsAt must be in the future/, 'endsAt', t('The end must be in the future.')],
  [/^a sale lasts at most (\d+) days/, 'endsAt', t('A sale lasts at most $1 days: bring the end closer to the start.')],
  [/^startsAt is out of range/, 'startsAt', t('The start must be a date between the years 2000 and 9999.')],
  [/^a sale needs at least one item/, 'items', t('Add at least one item.')],
  [/^a sale has at most (\d+) items/, 'items', t('A sale has at most $1 items: remove some.')],
  [/^paymentWindowSeconds must/, 'paymentWindow', t('The payment window is 1 to 1440 minutes (a day).')],
  [/^currency must/, 'currency', t('Choose CNY, USD or EUR.')],
  [/^purchaseLimit must/, 'purchaseLimit', t('Choose one of the two purchase limits.')],
  [/^fairStartMillis must/, 'fairStart', t('The fair start is 0 (off) to 10 seconds.')],
  [/^items\[(\d+)\]\.name must not be empty/, 'itemName', t('Give the item a name.')],
  [/^items\[(\d+)\]\.name must be at most (\d+)/, 'itemName', t('The item name is too long: at most $2 characters.')],
  [/^items\[(\d+)\]\.name must/, 'itemName', t('The item name has characters that cannot be used.')],
  [/^items\[(\d+)\]\.priceCents must/, 'price', t('The price must be between 0 and 100,000,000.')],
  [/^items\[(\d+)\]\.quantity must be between 1 and (\d+)/, 'quantity', t('Quantity must be at least 1 and at most $2.')],
  [/^items\[(\d+)\]\.quantity cannot go below the (\d+) units/, 'quantity', t('Quantity cannot go below the $2 units already sold.')],
  [/^items\[(\d+)\]\.quantity/, 'quantity', t('Quantity must be at least 1.')],
  [/^items\[(\d+)\]\.imageUrl/, 'imageUrl', t('The image address must start with https:// (at most 2,000 characters).')],
  [/^items\[(\d+)\]: a new item needs/, 'itemName', t('A new item needs a name, a price and a quantity.')],
  [/^description must be at most (\d+)/, 'description', t('The description is too long: at most $1 characters.')],
  [/^description must/, 'description', t('The description has characters that cannot be used.')],
  [/^the sale has started: its start cannot move/, 'startsAt', t('The sale has started: its start can no longer move.')],
  [/^the sale has started: its purchase limit/, 'purchaseLimit', t('The sale has started: its purchase limit can no longer change.')],
  [/^the sale has started: its fair start/, 'fairStart', t('The sale has started: its fair start can no longer change.')],
  [/^the sale has started: its currency/, 'currency', t('The sale has started: its currency can no longer change.')],
  [/^the sale has started: items cannot be added/, 'items', t('The sale has started: items can no longer be added.')]
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
      return m[Number(n)] === undefined ? '' : Number(m[Number(n)]).toLocaleString(locale);
    });
    return { field: ADMIN_MESSAGES[i][1], index: item ? Number(m[1]) : -1, text: text };
  }
  return null;
}

// FIELD_ERRORS: the error place of each field of the sale itself (an item's is in its row).
const FIELD_ERRORS = {
  name: 'error-name',
  startsAt: 'error-starts-at',
  endsAt: 'error-ends-at',
  currency: 'error-currency',
  paymentWindow: 'error-payment-window',
  description: 'error-description',
  purchaseLimit: 'error-purchase-limit',
  fairStart: 'error-fair-start',
  items: 'error-items'
};

// fieldParts finds a field's error element, its control and its [data-field] wrapper.
function fieldParts(F, field, row) {
  var wrap = (row || F.form).querySelector('[data-field="' + field + '"]');
  var err = row ? (wrap && wrap.querySelector('.field-error')) : byTestId(FIELD_ERRORS[field], F.form);
  var control = wrap ? wrap.querySelector('input, select, textarea') : null;
  if (field === 'items') {
    control = F.addItem;
  }
  return { wrap: wrap, err: err, control: control };
}

// setFieldError shows text beside the field (of the item row, if given) and returns its
// control, to be focused; without a place for it, the form's status says it.
export function setFieldError(F, field, row, text) {
  var p = fieldParts(F, field, row);
  if (!p.err) {
    F.formStatus(text, 'error');
    return null;
  }
  if (!p.err.id) {
    p.err.id = 'field-error-' + (++F.errorSeq);
  }
  setText(p.err, text);
  show(p.err, true);
  if (p.wrap) {
    p.wrap.classList.add('has-error');
  }
  if (p.control && p.control !== F.addItem) {
    p.control.setAttribute('aria-invalid', 'true');
    var ids = (p.control.getAttribute('aria-describedby') || '').split(/\s+/).filter(Boolean);
    if (ids.indexOf(p.err.id) < 0) {
      ids.push(p.err.id);
      p.control.setAttribute('aria-describedby', ids.join(' '));
    }
  }
  return p.control;
}

export function clearError(F, wrap) {
  if (!wrap) {
    return;
  }
  wrap.classList.remove('has-error');
  if (wrap.getAttribute('data-field') === 'items') {
    var itemsErr = byTestId('error-items', F.form); // not the errors of the rows inside
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

export function clearAllErrors(F) {
  Array.prototype.forEach.call(F.form.querySelectorAll('[data-field]'), function (wrap) {
    clearError(F, wrap);
  });
}

// refusalOf finds the field a refusal is about: {field, index, text}, or {row, text} for a
// quantity the server names by item id, or null.
function refusalOf(F, r) {
  var known = null;
  if (r.code === 'INVALID_INPUT' || r.code === 'SALE_STARTED' || r.code === 'QUANTITY_TOO_LOW') {
    known = adminMessage(r.message);
  }
  if (!known && r.code === 'QUANTITY_TOO_LOW') {
    // "item 7: 3 units are neither sold nor held…": the row of that item
    var m = /^item (\d+): (\d+) units/.exec(String(r.message || ''));
    var row = m ? F.rows.querySelector('[data-item-id="' + m[1] + '"]') : null;
    if (row) {
      return { row: row, text: t('Too low: units are sold or held by shoppers. It can go down by at most {n} from the quantity on sale.',
        { n: Number(m[2]).toLocaleString(locale) }) };
    }
    known = { field: 'items', index: -1, text: t('A quantity cannot go below what is sold or held.') };
  }
  if (!known && r.code === 'PRICE_NOT_PAYABLE') {
    // "items[2].priceCents 100 is below …": the item's price in a new sale (its position in the
    // sale); an edit's rows are only the changed ones, so the error goes to the items' list there
    var pm = /^items\[(\d+)\]\.priceCents/.exec(String(r.message || ''));
    var d = r.data || {};
    known = { field: pm && !F.editing ? 'price' : 'items', index: pm && !F.editing ? Number(pm[1]) : -1,
      text: t('Below what the payment provider can charge in {currency}: at least {amount}, or 0 for a free item.',
        { currency: d.currency || '', amount: formatMoney(Number(d.minimumCents) || 0, d.currency || 'CNY') }) };
  }
  if (!known && r.code === 'SALE_STARTED') {
    known = { field: 'startsAt', index: -1, text: (lang === 'en' && sentence(r.message)) || t('The sale has started.') };
  }
  return known;
}

// showRefusal puts a refusal of the server next to its field; false when it names none.
// onStarted is called when the sale started while the form was open.
export function showRefusal(F, r, req, onStarted) {
  if (r.network) {
    return false;
  }
  var known = refusalOf(F, r);
  if (!known) {
    return false;
  }
  if (known.row) {
    var control = setFieldError(F, 'quantity', known.row, known.text);
    if (control && control.focus) {
      control.focus();
    }
    return true;
  }
  if (r.code === 'SALE_STARTED' && F.editing) {
    // The sale started while the form was open: what can no longer change goes back to the
    // sale's own values and is locked, so that saving again keeps the other changes.
    onStarted();
    if (known.field === 'startsAt') {
      known.text = t('The sale has started meanwhile: its start can no longer move, and is back as it was. Save again to keep your other changes.');
    }
  }
  var target = known.index >= 0 ? req.rows[known.index] || null : null;
  var c = setFieldError(F, known.field, target, known.text);
  if (c && c.focus) {
    c.focus();
  }
  return true;
}
