// The sale form on /admin: it creates a sale, or edits one (admin_form_edit.js). Its fields are
// read and checked in admin_form_fields.js, its errors shown beside them by admin_form_errors.js;
// this module wires it: the item rows' Add and Remove, a change clearing its stale error, and
// the submit.

import { byTestId, setText, enc, messenger } from './dom.js';
import { api, sentence } from './api.js';
import { adminErrorText as errorText } from './admin_merchant.js';
import { readForm, createRequest, editRequest, itemRows, renumber, addRow, showSymbols, showFairStartHint, zoneName } from './admin_form_fields.js';
import { clearError, clearAllErrors, showRefusal } from './admin_form_errors.js';
import { startEdit, stopEdit, lockStarted, resetForm, prefillTimes } from './admin_form_edit.js';
import { t, lang } from './i18n.js';

// saleForm finds the form's parts: F, what the form's modules share.
function saleForm(page) {
  var root = page.root;
  var form = byTestId('create-sale-form', root);
  var F = {
    page: page,
    form: form,
    card: form ? form.closest('section') : null,
    formStatus: messenger(byTestId('form-status', root)),
    rows: byTestId('item-rows', root),
    template: byTestId('item-row-template', root),
    addItem: byTestId('add-item', root),
    heading: byTestId('form-heading', root),
    editNote: byTestId('edit-note', root),
    editCancel: byTestId('edit-cancel', root),
    submit: byTestId('create-sale-button', root),
    startsLocked: byTestId('starts-at-locked', root),
    addItemLocked: byTestId('add-item-locked', root),
    fairStartLocked: byTestId('fair-start-locked', root),
    fairStartHint: byTestId('fair-start-hint', root),
    fairStartText: '', // the page's own line under the fair start (for 0: off)
    editing: null, // {id, sale, started, initial: the fields as filled in}
    banner: false, // the page's message area holds a sentence about the form
    errorSeq: 0
  };
  // clearBanners drops the sentences about an earlier attempt: they are stale once the form changes.
  F.fairStartText = F.fairStartHint ? F.fairStartHint.textContent : '';
  F.clearBanners = function () {
    F.formStatus('', 'info');
    if (F.banner) {
      F.banner = false;
      page.say('', 'info');
    }
  };
  return F;
}

// removeRow removes a new item's row (one left alone is emptied instead); an item already on
// sale stays.
function removeRow(F, btn) {
  var row = btn.closest('[data-testid="item-row"]');
  if (!row || row.hasAttribute('data-item-id')) {
    return;
  }
  F.clearBanners();
  if (itemRows(F).length > 1) {
    var next = row.nextElementSibling || row.previousElementSibling;
    row.remove();
    renumber(F);
    var focus = next && next.querySelector('input');
    if (focus) {
      focus.focus();
    }
  } else {
    Array.prototype.forEach.call(row.querySelectorAll('input'), function (i) {
      i.value = '';
    });
    Array.prototype.forEach.call(row.querySelectorAll('[data-field]'), function (wrap) {
      clearError(F, wrap);
    });
  }
}

function bindRows(F) {
  if (F.addItem) {
    F.addItem.addEventListener('click', function () {
      var row = addRow(F);
      clearError(F, F.form.querySelector('[data-field="items"]'));
      var first = row && row.querySelector('input');
      if (first) {
        first.focus();
      }
    });
  }
  if (F.rows) {
    F.rows.addEventListener('click', function (ev) {
      var btn = ev.target.closest ? ev.target.closest('[data-testid="remove-item"]') : null;
      if (btn) {
        removeRow(F, btn);
      }
    });
  }
}

// onChange: a change to a field clears its error (both times together: one is judged by the
// other) and the banners of the last attempt.
function onChange(F, ev) {
  var wrap = ev.target.closest ? ev.target.closest('[data-field]') : null;
  if (!wrap) {
    return;
  }
  var f = wrap.getAttribute('data-field');
  clearError(F, wrap);
  if (f === 'startsAt' || f === 'endsAt') {
    clearError(F, F.form.querySelector('[data-field="startsAt"]'));
    clearError(F, F.form.querySelector('[data-field="endsAt"]'));
  }
  if (f === 'currency') {
    showSymbols(F);
    Array.prototype.forEach.call(F.form.querySelectorAll('[data-field="price"]'), function (w) {
      clearError(F, w);
    });
  }
  if (f === 'fairStart') {
    showFairStartHint(F);
  }
  if (wrap.closest('[data-testid="item-row"]')) {
    clearError(F, F.form.querySelector('[data-field="items"]'));
  }
  F.clearBanners();
}

// saved: the edit went through; back where the merchant came from, the sale's entry, with the
// word there too.
async function saved(F, saleId, name, req) {
  var page = F.page;
  stopEdit(F);
  var text = t('Saved \u201c{name}\u201d: {what} changed.', { name: name, what: req.changed.join(t(', ')) });
  page.say(text, 'ok');
  F.banner = true;
  page.stock.pricesChanged(saleId);
  await page.sales.refresh(saleId);
  var entry = page.sales.entry(saleId);
  if (entry) {
    if (entry.controls) {
      entry.controls.say(text, 'ok');
    }
    if (entry.li.scrollIntoView) {
      entry.li.scrollIntoView({ block: 'nearest' });
    }
    entry.edit.focus({ preventScroll: true });
  }
}

// created: the new sale is listed and its live stock opened.
async function created(F, saleId, name, req) {
  var n = req.body.items.length;
  resetForm(F);
  prefillTimes(F);
  F.page.say(n === 1 ? t('Created \u201c{name}\u201d (sale {id}) with 1 item.', { name: name, id: saleId })
    : t('Created \u201c{name}\u201d (sale {id}) with {n} items.', { name: name, id: saleId, n: n }), 'ok');
  F.banner = true;
  await F.page.sales.load();
  F.page.stock.select(saleId, name, null);
}

// refused says why the server did not take the form, beside the fields where it can.
function refused(F, edit, r, req) {
  if (F.page.gate.authProblem(r)) {
    F.formStatus('', 'info');
    return;
  }
  if (showRefusal(F, r, req, function () {
    lockStarted(F);
  })) {
    F.formStatus(edit ? t('Nothing was saved. Check the fields marked in red.') : t('Check the fields marked in red.'), 'error');
    return;
  }
  if (edit && r.status === 404) {
    F.formStatus(t('This sale was not found: it may have been removed.'), 'error');
    return;
  }
  F.formStatus(r.network || lang !== 'en' ? errorText(r) : r.message ? sentence(r.message) : errorText(r), 'error');
}

async function submit(F) {
  clearAllErrors(F);
  F.clearBanners();
  var v = readForm(F);
  if (!v) {
    F.formStatus(t('Check the fields marked in red.'), 'error');
    return;
  }
  var edit = F.editing;
  var req = edit ? editRequest(edit.initial, v) : createRequest(v);
  if (edit && req.changed.length === 0) {
    F.formStatus(t('Nothing changed: there is nothing to save.'), 'info');
    return;
  }
  F.submit.disabled = true;
  F.formStatus(edit ? t('Saving\u2026') : t('Creating the sale\u2026'), 'info');
  var r = edit ? await api('PATCH', '/api/admin/sales/' + enc(edit.id), req.body) : await api('POST', '/api/admin/sales', req.body);
  F.submit.disabled = false;
  if (edit && F.editing !== edit) {
    return; // the merchant stopped editing meanwhile
  }
  if (!(r.ok && r.data && r.data.saleId !== undefined && r.data.saleId !== null)) {
    refused(F, edit, r, req);
    return;
  }
  (Array.isArray(r.data.items) ? r.data.items : []).forEach(function (it) {
    F.page.itemNames[String(it.itemId)] = it.name;
  });
  F.formStatus('', 'info');
  await (edit ? saved : created)(F, String(r.data.saleId), v.name, req);
}

// opening hides the form's fields (keeping their room) while the sale it opens on is read, and
// says so in its heading.
function opening(F, on) {
  if (!F.card) {
    return;
  }
  if (on) {
    F.card.setAttribute('data-opening', '');
    setText(F.heading, t('Opening the sale for editing\u2026'));
  } else if (F.card.hasAttribute('data-opening')) {
    F.card.removeAttribute('data-opening');
    if (!F.editing) {
      setText(F.heading, t('Create a sale'));
    } else if (F.form) {
      // startEdit's focus found the field out of sight; now it is not
      F.form.elements.name.focus({ preventScroll: true });
    }
  }
}

// initSaleForm wires the form and returns startEdit(sale), stopEdit() (the id of the sale it
// was editing), editing() (that id, or null) and prefillTimes().
export function initSaleForm(page) {
  var F = saleForm(page);
  bindRows(F);
  if (F.editCancel) {
    F.editCancel.addEventListener('click', function () {
      var id = stopEdit(F);
      F.clearBanners();
      var entry = id ? page.sales.entry(id) : null;
      if (entry) {
        entry.edit.focus();
      }
    });
  }
  if (F.form) {
    F.form.addEventListener('input', function (ev) {
      onChange(F, ev);
    });
    F.form.addEventListener('change', function (ev) {
      onChange(F, ev);
    });
    showSymbols(F);
    setText(byTestId('zone-hint', page.root), t('Times are in your time zone, {zone}.', { zone: zoneName() }));
    F.form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      submit(F);
    });
    // Opened on a sale by its address (/admin?edit=ID, the live view's Edit link): the form keeps
    // its room but shows nothing until the sale is in it (its items, its locked fields), so that
    // nothing moves when it comes (layout shift).
    if (page.sales.pendingEdit()) {
      opening(F, true);
    }
  }
  return {
    startEdit: function (sale) {
      return startEdit(F, sale);
    },
    // opened: the sale the address named was opened, or cannot be (the page says why)
    opened: function () {
      opening(F, false);
    },
    stopEdit: function () {
      return stopEdit(F);
    },
    editing: function () {
      return F.editing ? F.editing.id : null;
    },
    prefillTimes: function () {
      prefillTimes(F);
    }
  };
}
