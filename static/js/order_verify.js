// Checking a fair start's draw from the shopper's own order (order.js), in the browser: once the
// draw is decided, the "Verify the draw" button reads the sale's public record
// (GET /api/flash-sales/{saleId}/draw, every page), checks that the revealed seed's SHA-256 is
// the commitment published before the window, recomputes every ranked entry's draw key of the
// order's item (HMAC-SHA256 under the seed of its order id: smallest first) and says where the
// shopper's own entry stands and whether its outcome follows. The whole draw, of any size, is
// checked by `flashsale verify-draw SALE_ID`.

import { byTestId, setText, show, enc } from './dom.js';
import { api, errorText } from './api.js';
import { t, locale } from './i18n.js';

// MAX_PAGES bounds what a browser reads (100 entries a page).
const MAX_PAGES = 300;

function bytesOf(hex) {
  if (typeof hex !== 'string' || hex.length % 2 !== 0 || !/^[0-9a-f]*$/i.test(hex)) {
    return null;
  }
  var out = new Uint8Array(hex.length / 2);
  for (var i = 0; i < out.length; i++) {
    out[i] = parseInt(hex.substr(i * 2, 2), 16);
  }
  return out;
}

function hexOf(buf) {
  return Array.prototype.map.call(new Uint8Array(buf), function (b) {
    return ('0' + b.toString(16)).slice(-2);
  }).join('');
}

function compare(a, b) {
  for (var i = 0; i < a.length && i < b.length; i++) {
    if (a[i] !== b[i]) {
      return a[i] - b[i];
    }
  }
  return a.length - b.length;
}

function n(v) {
  return Number(v).toLocaleString(locale);
}

// readRecord reads every page of the public record: {draw, entries} or {error}.
async function readRecord(saleId) {
  var entries = [];
  var first = null;
  var cursor = '';
  for (var page = 0; page < MAX_PAGES; page++) {
    var r = await api('GET', '/api/flash-sales/' + enc(saleId) + '/draw' + (cursor ? '?cursor=' + encodeURIComponent(cursor) : ''), undefined, undefined, 'no-store');
    if (!r.ok || !r.data) {
      return { error: t('Could not read the draw\u2019s record: {why}', { why: errorText(r) }) };
    }
    if (r.data.decided !== true) {
      return { error: t('The draw is not decided yet: it can be checked once its seed is revealed.') };
    }
    first = first || r.data;
    entries = entries.concat(Array.isArray(r.data.entries) ? r.data.entries : []);
    cursor = typeof r.data.next === 'string' ? r.data.next : '';
    if (!cursor) {
      return { draw: first, entries: entries };
    }
  }
  return { error: t('The draw is too large to check in a browser: run flashsale verify-draw {sale}.', { sale: saleId }) };
}

// check recomputes the draw for the order's item: {ok, text}.
export async function checkDraw(saleId, itemId, orderId) {
  var subtle = window.crypto && window.crypto.subtle;
  if (!subtle) {
    return { ok: false, text: t('This browser can check the draw only on a secure (https) page: run flashsale verify-draw {sale} instead.', { sale: saleId }) };
  }
  var rec = await readRecord(saleId);
  if (rec.error) {
    return { ok: false, text: rec.error };
  }
  var d = rec.draw;
  var seed = bytesOf(d.seed);
  if (!seed || seed.length !== 32) {
    return { ok: false, text: t('The draw\u2019s seed is not 32 bytes: the draw cannot be checked.') };
  }
  var digest = hexOf(await subtle.digest('SHA-256', seed));
  if (digest !== String(d.commitment || '').toLowerCase()) {
    return { ok: false, text: t('The revealed seed is not the one committed to before the draw: the draw does not check out.') };
  }
  var key = await subtle.importKey('raw', seed, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  var enc8 = new TextEncoder();
  var ranked = [];
  var mine = null;
  for (var i = 0; i < rec.entries.length; i++) {
    var e = rec.entries[i];
    if (String(e.orderId) === orderId) {
      mine = e;
    }
    if (String(e.itemId) === String(itemId) && typeof e.rank === 'number') {
      ranked.push({ e: e, k: new Uint8Array(await subtle.sign('HMAC', key, enc8.encode(String(e.orderId)))) });
    }
  }
  if (!mine) {
    return { ok: false, text: t('Your entry is not in the draw\u2019s record: the draw does not check out.') };
  }
  var units = 0;
  (Array.isArray(d.items) ? d.items : []).forEach(function (it) {
    if (String(it.itemId) === String(itemId)) {
      units = Number(it.units) || 0;
    }
  });
  ranked.sort(function (a, b) {
    return compare(a.k, b.k);
  });
  var place = 0;
  for (var j = 0; j < ranked.length; j++) {
    var x = ranked[j].e;
    if (x.rank !== j + 1 || (x.outcome === 'WON') !== (j < units)) {
      return { ok: false, text: t('Entry {id} is not where its draw key places it: the draw does not check out.', { id: x.orderId }) };
    }
    if (String(x.orderId) === orderId) {
      place = j + 1;
    }
  }
  if (!place) {
    return { ok: true, text: t('Checked in your browser: the seed is the one committed to before the draw. Your entry was not ranked (a second entry of the same shopper, or one that reached the shop after the draw).') };
  }
  return {
    ok: true,
    text: t('Checked in your browser: the seed is the one committed to before the draw, and from it your entry ranks {place} of {count} for this item, which had {units} unit(s) to draw: {outcome}', {
      place: n(place), count: n(ranked.length), units: n(units),
      outcome: place <= units ? t('you were drawn.') : t('you were not drawn.')
    })
  };
}

// bindVerify wires the order panel's "Verify the draw" box: shown for a decided entry of a draw.
export function bindVerify(panel) {
  var box = byTestId('draw-verify-box', panel);
  var button = byTestId('draw-verify', panel);
  var result = byTestId('draw-verify-result', panel);
  var current = { saleId: '', itemId: '', orderId: '' };
  if (!box || !button) {
    return function () {};
  }
  button.addEventListener('click', async function () {
    button.disabled = true;
    setText(result, t('Checking the draw\u2026'));
    result.removeAttribute('data-ok');
    var c = current;
    var out = await checkDraw(c.saleId, c.itemId, c.orderId);
    if (c === current) {
      setText(result, out.text);
      result.setAttribute('data-ok', out.ok ? 'true' : 'false');
    }
    button.disabled = false;
  });
  // update(order): show the box for an entry whose draw is decided
  return function (o) {
    var decided = o.draw && o.orderId && o.saleId && o.itemId && o.status && o.status !== 'QUEUED' && o.status !== 'ENTERED';
    if (decided && (o.orderId !== current.orderId)) {
      current = { saleId: o.saleId, itemId: o.itemId, orderId: o.orderId };
      setText(result, '');
    }
    show(box, !!decided);
  };
}
