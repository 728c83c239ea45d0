// The draw of a sale with a fair start, in its live view (/admin/sales/{id}): the window, the
// entries so far, the units drawn and when it closed ("open", "deciding" before), from the live
// answer's draw; its commitment and, once decided, its seed; and its record (GET
// /api/admin/sales/{id}/draw, once decided: every entry's rank in its item, best first, the
// shopper, the item, when it entered and what it became), a page at a time. The record is asked again only when
// the draw's numbers change, and only while its first page is shown.

import { byTestId, setText, show, el, enc } from './dom.js';
import { formatClock, formatDate, parseTime } from './time.js';
import { api } from './api.js';
import { adminErrorText as errorText } from './admin_merchant.js';
import { t, locale } from './i18n.js';

function count(v) {
  var n = Number(v);
  return (isFinite(n) ? n : 0).toLocaleString(locale);
}

// secondsText writes a window of milliseconds as seconds, with tenths when it has any: "3 s", "2.5 s".
function secondsText(ms) {
  return t('{n} s', { n: (Number(ms) / 1000).toLocaleString(locale, { maximumFractionDigits: 1 }) });
}

// enteredText writes when an entry came in: "10:00:01" (the answer says it to the second).
function enteredText(s) {
  var at = parseTime(s);
  return isNaN(at) ? '' : formatClock(at);
}

// phase says where the draw stands by the live answer's clock: before (the sale has not
// started), open (in the window), deciding (the window passed, not decided yet) or closed.
function phase(sale, draw, asOf) {
  if (draw.closedAt) {
    return 'closed';
  }
  var starts = parseTime(sale.startsAt);
  if (isNaN(starts) || isNaN(asOf)) {
    return 'open';
  }
  if (asOf < starts) {
    return 'before';
  }
  return asOf < starts + Number(draw.windowMillis) ? 'open' : 'deciding';
}

function closedText(p, draw) {
  switch (p) {
    case 'before':
      return t('opens at the start');
    case 'open':
      return t('open');
    case 'deciding':
      return t('deciding\u2026');
  }
  var at = parseTime(draw.closedAt);
  return isNaN(at) ? '' : formatClock(at);
}

// outcomeText says what became of an entry.
function outcomeText(e) {
  switch (e.status) {
    case 'ENTERED':
      return t('waiting for the draw');
    case 'NOT_SELECTED':
      return t('not drawn');
    case 'PENDING':
      return t('drawn, awaiting payment');
    case 'PAID':
      return t('drawn, paid');
    case 'EXPIRED':
      return t('drawn, not paid in time');
    case 'CANCELLED':
      return t('drawn, cancelled');
  }
  return e.won ? t('drawn') : String(e.status || '');
}

function shopperText(e) {
  return typeof e.username === 'string' && e.username ? e.username : t('shopper #{id}', { id: e.userId });
}

function row(D, e, place) {
  var tr = el('tr', { class: 'stack-row', 'data-testid': 'draw-row', 'data-order-id': String(e.orderId), 'data-status': String(e.status),
    'data-won': e.won ? 'true' : 'false' });
  tr.appendChild(el('th', { scope: 'row', 'data-col': 'place' }, '#' + count(place)));
  var rank = el('td', { 'data-col': 'rank', 'data-label': t('Rank') });
  rank.appendChild(el('code', null, typeof e.rank === 'number' ? count(e.rank) : '\u2013'));
  tr.appendChild(rank);
  tr.appendChild(el('td', { 'data-col': 'shopper', 'data-label': t('Shopper') }, shopperText(e)));
  tr.appendChild(el('td', { 'data-col': 'item', 'data-label': t('Item') }, D.itemNames[String(e.itemId)] || t('item #{id}', { id: e.itemId })));
  var at = el('td', { 'data-col': 'entered', 'data-label': t('Entered at') }, enteredText(e.enteredAt));
  var when = parseTime(e.enteredAt);
  if (!isNaN(when)) {
    at.setAttribute('title', formatDate(when));
  }
  tr.appendChild(at);
  var out = el('td', { 'data-col': 'outcome', 'data-label': t('Outcome') });
  out.appendChild(el('span', { class: 'badge draw-outcome', 'data-outcome': e.won ? 'won' : e.status === 'ENTERED' ? 'waiting' : 'lost' }, outcomeText(e)));
  tr.appendChild(out);
  return tr;
}

function renderRecord(D) {
  var trs = D.record.map(function (e, i) {
    return row(D, e, D.offset + i + 1);
  });
  D.rows.replaceChildren.apply(D.rows, trs);
  show(D.undecided, D.decided === false);
  show(D.empty, D.decided !== false && D.record.length === 0 && D.offset === 0);
  D.first.disabled = D.busy || D.offset === 0;
  D.next.disabled = D.busy || !D.nextCursor;
  // one page only: no pager
  show(D.pager, D.offset > 0 || !!D.nextCursor);
}

// proof shows the draw's commitment, its seed once revealed, and the pauses while undecided.
function proof(D, d) {
  var commitment = typeof d.commitment === 'string' ? d.commitment : '';
  var seed = typeof d.seed === 'string' ? d.seed : '';
  setText(byTestId('draw-commitment', D.section), commitment);
  setText(byTestId('draw-seed', D.section), seed);
  show(byTestId('draw-seed-row', D.section), !!seed);
  show(byTestId('draw-proof', D.section), !!commitment);
  var pauses = Number(d.pauses) || 0;
  var p = byTestId('draw-pauses', D.section);
  setText(p, pauses > 0 ? t('Paused {n} time(s) while the draw was undecided.', { n: count(pauses) }) : '');
  show(p, pauses > 0);
}

// loadRecord asks for a page of the record (cursor '' is the first).
async function loadRecord(D, cursor, offset) {
  D.busy = true;
  D.asked = Date.now();
  renderRecord(D);
  var r = await api('GET', '/api/admin/sales/' + enc(D.saleId) + '/draw' + (cursor ? '?cursor=' + encodeURIComponent(cursor) : ''), undefined, undefined, 'no-store');
  D.busy = false;
  if (r.ok && r.data && Array.isArray(r.data.record)) {
    D.record = r.data.record;
    D.decided = r.data.decided === true;
    proof(D, r.data);
    D.offset = offset;
    D.cursor = cursor;
    D.nextCursor = typeof r.data.next === 'string' ? r.data.next : '';
    setText(D.status, '');
  } else {
    setText(D.status, t('Could not load the draw\u2019s record: {why}', { why: errorText(r) }));
    D.key = ''; // ask again at the next refresh
  }
  renderRecord(D);
}

// update draws the live answer's draw; the record's first page is asked again when the draw's
// numbers moved (at most every two seconds while entries come in).
function update(D, data) {
  var draw = data.draw;
  show(D.section, !!draw);
  if (!draw) {
    return;
  }
  (Array.isArray(data.items) ? data.items : []).forEach(function (it) {
    D.itemNames[String(it.itemId)] = it.name;
  });
  var sale = data.sale || {};
  var p = phase(sale, draw, parseTime(data.asOf));
  D.section.setAttribute('data-phase', p);
  setText(byTestId('draw-window', D.section), secondsText(draw.windowMillis));
  setText(byTestId('draw-entries', D.section), count(draw.entries));
  setText(byTestId('draw-winners', D.section), p === 'closed' ? count(draw.winners) : '\u2013');
  setText(byTestId('draw-closed', D.section), closedText(p, draw));
  var key = [draw.entries, draw.winners, draw.closedAt || ''].join('|');
  if (D.offset === 0 && !D.busy && key !== D.key && Date.now() - D.asked >= 2000) {
    D.key = key;
    loadRecord(D, '', 0);
  }
}

// initDraw binds the draw panel of a live view and returns update(liveAnswer).
export function initDraw(root, saleId) {
  var section = byTestId('live-draw', root);
  if (!section) {
    return { update: function () {} };
  }
  var D = {
    saleId: saleId,
    section: section,
    rows: byTestId('draw-rows', section),
    empty: byTestId('draw-empty', section),
    undecided: byTestId('draw-undecided', section),
    decided: null, // the record's answer: false until the draw is decided
    status: byTestId('draw-status', section),
    first: byTestId('draw-first', section),
    next: byTestId('draw-next', section),
    pager: byTestId('draw-pager', section),
    itemNames: {},
    record: [],
    offset: 0, // the place of the page's first entry, less one
    cursor: '',
    nextCursor: '',
    key: '', // the draw's numbers the record was last asked for
    asked: 0,
    busy: false
  };
  D.next.addEventListener('click', function () {
    if (D.nextCursor) {
      loadRecord(D, D.nextCursor, D.offset + D.record.length);
    }
  });
  D.first.addEventListener('click', function () {
    D.key = '';
    D.asked = 0;
    loadRecord(D, '', 0);
  });
  return {
    update: function (data) {
      update(D, data);
    }
  };
}
