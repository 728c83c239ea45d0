// The numbers of a sale's live view (/admin/sales/{id}), drawn from one answer of
// GET /api/admin/sales/{id}/live: the headline tiles, the stock per item, the funnel, the
// reconciliation and the chart of requests per second (admin_chart.js).

import { byTestId, setText, el, show } from './dom.js';
import { formatClock, formatDeadline, parseTime } from './time.js';
import { drawChart } from './admin_chart.js';
import { formatMoney } from './money.js';
import { t, locale } from './i18n.js';

// The reconciliation's state for a person.
// Functions, so that each word is looked up in the page's language (i18n.js).
const BOOKS = {
  ok: function () {
    return { word: t('Balanced'), explain: t('Every unit sold is accounted for: the fast stock counter and the recorded orders agree.') };
  },
  settling: function () {
    return { word: t('Settling'), explain: t('Some orders are still being recorded; the books balance once they are.') };
  },
  violation: function () {
    return { word: t('Not balanced'), explain: t('The stock counter and the recorded orders disagree with nothing on its way: see the failed checks below. Purchases are refused until the stock is rebuilt.') };
  },
  // Before the stock is loaded there is nothing to balance: not green, not red (booksExplain
  // says when it loads).
  waiting: function () {
    return { word: t('Not loaded yet'), explain: '' };
  }
};

// booksState is the state the books are shown in: the server's, except before the stock is
// first loaded (not lost, not being rebuilt), when its checks can only say Redis holds nothing.
function booksState(rec) {
  if (!rec.loaded && !rec.lost && typeof rec.rebuildWaitsFor !== 'number') {
    return 'waiting';
  }
  return BOOKS[rec.state] ? rec.state : 'violation';
}

function reasonText(k) {
  switch (k) {
    case 'soldOut': return t('sold out');
    case 'duplicate': return t('already bought');
    case 'rateLimited': return t('rate limited');
    case 'badToken': return t('bad purchase token');
    case 'captcha': return t('captcha failed');
    case 'paused': return t('sale paused');
    case 'other': return t('other');
  }
  return k;
}

const REASONS = ['soldOut', 'duplicate', 'rateLimited', 'badToken', 'captcha', 'paused', 'other'];

function num(v) {
  var n = Number(v);
  return isFinite(n) ? n : 0;
}

function count(v) {
  return num(v).toLocaleString(locale);
}

function sum(items, key) {
  return items.reduce(function (a, it) {
    return a + num(it[key]);
  }, 0);
}

// lagText writes the writer's lag: "0 s", "1.4 s", "2 min 5 s".
function lagText(s) {
  var v = num(s);
  if (v < 0.05) {
    return t('{n} s', { n: 0 });
  }
  if (v < 60) {
    return t('{n} s', { n: v < 10 ? v.toFixed(1) : String(Math.round(v)) });
  }
  return t('{m} min {s} s', { m: Math.floor(v / 60), s: Math.round(v % 60) });
}

// WARM_AHEAD is how long before its start the keeper loads a sale's stock into Redis
// (FLASHSALE_WARM_AHEAD's default, which the books' explanation states too).
const WARM_AHEAD = 10 * 60 * 1000;

// unheldStock says what the units left for shoppers wait for while Redis does not hold the sale
// (the API answers an item's displayed as -1 then): { word } for an item's cell and { note } for
// the tile; null while Redis holds every item. Before the warm-up the stock is not loaded yet; a
// sale whose stock Redis lost is rebuilt from the recorded orders (the books say when); otherwise
// it is being loaded now; an ended sale's units left are not known.
export function unheldStock(d, items) {
  var missing = items.some(function (it) {
    return num(it.displayed) < 0;
  });
  if (!missing) {
    return null;
  }
  var sale = d.sale || {};
  var rec = d.reconciliation || {};
  var now = parseTime(d.asOf);
  if (!isFinite(now)) {
    now = Date.now();
  }
  var loadsAt = parseTime(sale.startsAt) - WARM_AHEAD;
  if (sale.status === 'ended') {
    return { word: t('unknown'), note: t('unknown: the fast stock counter no longer holds this ended sale, so the units left are not known here') };
  }
  if (sale.status === 'scheduled' && now < loadsAt) {
    return { word: t('not loaded yet'), note: t('not loaded yet: it loads 10 minutes before the start, at {time}, or now with Warm up now', { time: formatDeadline(loadsAt, now) }) };
  }
  if (typeof rec.rebuildWaitsFor === 'number' || rec.lost) {
    return { word: t('being rebuilt'), note: t('being rebuilt: the fast stock counter lost this sale\u2019s stock, which is rebuilt from the recorded orders (purchases are refused meanwhile)') };
  }
  return { word: t('being loaded'), note: t('being loaded for the sale now') };
}

function renderItems(root, items, currency, unheld) {
  var itemRows = byTestId('live-item-rows', root);
  var trs = items.map(function (it) {
    var tr = el('tr', { class: 'stack-row', 'data-testid': 'live-item-row', 'data-item-id': String(it.itemId) });
    if (it.soldOut) {
      tr.classList.add('sold-out');
    }
    tr.appendChild(el('th', { scope: 'row', 'data-col': 'name' }, it.name || t('item #{id}', { id: it.itemId })));
    [['quantity', t('Quantity')], ['displayed', t('Displayed')], ['frozen', t('Frozen')], ['real', t('Real')], ['paid', t('Paid')], ['expired', t('Expired')]].forEach(function (c) {
      var notHeld = c[0] === 'displayed' && unheld && num(it.displayed) < 0;
      var td = el('td', { 'data-col': c[0], 'data-label': c[1] }, notHeld ? unheld.word : count(it[c[0]]));
      if (notHeld) {
        td.classList.add('not-held');
        td.title = unheld.note;
      } else if (num(it[c[0]]) === 0) {
        td.classList.add('zero');
      }
      if (c[0] === 'frozen') {
        td.title = t('{n} being recorded, {m} awaiting payment', { n: count(it.inFlight), m: count(it.pending) });
      }
      tr.appendChild(td);
      if (c[0] === 'paid') {
        var amount = el('td', { 'data-col': 'paidCents', 'data-label': t('Paid amount') }, formatMoney(num(it.paidCents), currency));
        if (num(it.paidCents) === 0) {
          amount.classList.add('zero');
        }
        tr.appendChild(amount);
      }
    });
    tr.appendChild(el('td', { 'data-col': 'soldOut', 'data-label': t('Sold out'), class: it.soldOut ? 'sold-out-yes' : '' }, it.soldOut ? t('sold out') : t('no')));
    return tr;
  });
  itemRows.replaceChildren.apply(itemRows, trs);
}

function renderFunnel(root, f) {
  var requests = Math.max(1, num(f.requests));
  var refused = f.refused && typeof f.refused === 'object' ? f.refused : {};
  var refusedTotal = Object.keys(refused).reduce(function (a, k) {
    return a + num(refused[k]);
  }, 0);
  var values = { requests: num(f.requests), refused: refusedTotal, accepted: num(f.accepted), written: num(f.written),
    paid: num(f.paid), expired: num(f.expired), cancelled: num(f.cancelled) };
  REASONS.forEach(function (k) {
    values['refused-' + k] = num(refused[k]);
  });
  Object.keys(values).forEach(function (k) {
    var step = byTestId('funnel-' + k, root);
    if (!step) {
      return;
    }
    setText(byTestId('funnel-' + k + '-value', root), count(values[k]));
    step.classList.toggle('funnel-zero', values[k] === 0);
    var fill = step.querySelector('.funnel-fill');
    if (fill) {
      fill.style.width = (values[k] > 0 ? Math.max(0.5, Math.min(100, values[k] / requests * 100)) : 0).toFixed(1) + '%';
    }
  });
  return { refused: refusedTotal, refusedBy: refused };
}

// booksExplain says in a sentence what the state of the books means.
function booksExplain(rec, b, started) {
  var explain = b.explain;
  if (!started && rec.state === 'ok') {
    explain = t('Nothing is sold yet: the books open at the start.');
  }
  if (!rec.loaded) {
    explain = t('The stock is not loaded for the sale yet: it is loaded ten minutes before the start, or now with Warm up now.');
  }
  if (typeof rec.rebuildWaitsFor === 'number') {
    explain = rec.rebuildWaitsFor > 0
      ? t('The fast stock counter lost data for this sale: purchases are refused. It is rebuilt from the recorded orders by itself once the {n} orders still waiting are recorded; Warm up now cannot skip that wait (their units would be sold twice).', { n: count(rec.rebuildWaitsFor) })
      : t('The fast stock counter lost data for this sale: purchases are refused. Every order is recorded; the stock is being rebuilt from them now.');
  } else if (rec.loaded && rec.lost) {
    explain = t('The fast stock counter lost data for this sale: purchases are refused until the stock is rebuilt from the recorded orders.');
  }
  return explain;
}

// checkItems lists the reconciliation's failed checks, by item, and how many hold.
function checkItems(rec, items) {
  var names = {};
  items.forEach(function (it) {
    names[String(it.itemId)] = it.name;
  });
  var list = Array.isArray(rec.checks) ? rec.checks : [];
  var failed = list.filter(function (c) {
    return !c.ok;
  });
  var lis = failed.map(function (c) {
    var where = c.itemId ? (names[String(c.itemId)] || t('item #{id}', { id: c.itemId })) : t('whole sale');
    var li = el('li', { class: 'recon-check recon-failed', 'data-testid': 'recon-failed' });
    li.appendChild(el('strong', null, '\u2717 ' + c.name));
    li.appendChild(document.createTextNode(t(' ({where})', { where: where }) + (c.detail ? ': ' + c.detail : '')));
    return li;
  });
  var held = list.length - failed.length;
  if (held > 0) {
    var holds = held === 1 ? t('1 check holds') : t('{n} checks hold', { n: held });
    lis.push(el('li', { class: 'recon-check recon-ok', 'data-testid': 'recon-held' }, '\u2713 ' + (failed.length === 0 ? t('{checks} (every one)', { checks: holds }) : holds)));
  }
  return lis;
}

// renderBooks draws the reconciliation. Before the start nothing is sold: the raw counters (whose
// starting values mean nothing to a merchant) stay hidden; after it they are under "Technical
// details".
function renderBooks(root, rec, items, started) {
  var state = booksState(rec);
  var b = BOOKS[state]();
  var stateEl = byTestId('recon-state', root);
  stateEl.setAttribute('data-state', state);
  setText(stateEl, b.word);
  setText(byTestId('recon-explain', root), booksExplain(rec, b, started));
  setText(byTestId('recon-redis-counter', root), count(rec.redisCounter));
  setText(byTestId('recon-pg-seq', root), count(rec.postgresMaxSeq));
  setText(byTestId('recon-loaded', root), rec.loaded ? (rec.lost ? t('loaded, data lost') : t('loaded')) : t('not loaded yet'));
  var details = byTestId('recon-details', root);
  if (details) {
    details.hidden = !started;
  }
  var checks = byTestId('recon-checks', root);
  checks.replaceChildren.apply(checks, state === 'waiting' ? [] : checkItems(rec, items));
  return b;
}

export function renderChart(root, d) {
  var chartBox = byTestId('live-chart', root);
  var chartNote = byTestId('chart-note', root);
  var now = Math.floor(parseTime(d.asOf) / 1000);
  var start = Math.floor(parseTime(d.sale.startsAt) / 1000);
  var end = Math.floor(parseTime(d.sale.endsAt) / 1000);
  if (!isFinite(now) || !isFinite(start)) {
    return;
  }
  var from = Math.max(start, now - 3600);
  var to = Math.min(now, isFinite(end) ? end : now);
  if (now < start) {
    drawChart(chartBox, [], start, start + 60);
    setText(chartNote, t('The chart fills in from the start, {time}.', { time: formatClock(start * 1000) }));
    return;
  }
  var tc = drawChart(chartBox, d.series, from, to);
  var words = { bars: tc.bucket === 1 ? t('Each bar is one second') : t('Each bar is {n} seconds (their mean per second)', { n: tc.bucket }),
    accepted: count(tc.accepted), refused: count(tc.refused) };
  setText(chartNote, from > start ? t('The last hour. {bars}; {accepted} accepted and {refused} refused drawn.', words)
    : t('Since the start. {bars}; {accepted} accepted and {refused} refused drawn.', words));
}


// tile writes one headline number and its note.
function tile(root, key, value, note) {
  var v = byTestId('live-' + key, root);
  setText(v, value);
  v.classList.toggle('zero', value === '0');
  if (note !== undefined) {
    setText(byTestId('live-' + key + '-note', root), note);
  }
}

// flowTiles are the requests' tiles and the funnel they come from.
function flowTiles(root, f) {
  var fr = renderFunnel(root, f);
  tile(root, 'accepted', count(f.accepted), num(f.requests) === 1 ? t('of 1 request') : t('of {n} requests', { n: count(f.requests) }));
  var top = Object.keys(fr.refusedBy).sort(function (a, b) {
    return num(fr.refusedBy[b]) - num(fr.refusedBy[a]);
  })[0];
  tile(root, 'refused', count(fr.refused), fr.refused > 0 && top ? t('mostly {reason}', { reason: reasonText(top) }) : t('none so far'));
}

// label sets a tile's label.
function label(root, key, text) {
  var l = byTestId('live-' + key + '-label', root);
  if (l) {
    setText(l, text);
  }
}

// stockTiles are the units' tiles. Once the sale has ended, what is left is what went unsold.
// While Redis does not hold the sale, the units left are not known: the tile says what they wait for.
function stockTiles(root, items, status, unheld) {
  var quantity = sum(items, 'quantity');
  var frozen = sum(items, 'frozen');
  var left = sum(items, 'displayed');
  tile(root, 'paid', count(sum(items, 'paid')), t('units paid, of {n}', { n: count(quantity) }));
  tile(root, 'frozen', count(frozen), t('{n} being recorded \u00b7 {m} awaiting payment', { n: count(sum(items, 'inFlight')), m: count(sum(items, 'pending')) }));
  byTestId('tile-displayed', root).setAttribute('data-ended', String(status === 'ended'));
  byTestId('tile-displayed', root).setAttribute('data-held', String(!unheld));
  if (unheld) {
    label(root, 'displayed', status === 'ended' ? t('Unsold') : t('Displayed'));
    tile(root, 'displayed', '\u2013', unheld.note);
    return;
  }
  if (status === 'ended') {
    label(root, 'displayed', t('Unsold'));
    tile(root, 'displayed', count(left), frozen > 0
      ? (left === 1 ? t('1 unit went unsold; {m} still awaiting payment', { m: count(frozen) }) : t('{n} units went unsold; {m} still awaiting payment', { n: count(left), m: count(frozen) }))
      : (left === 1 ? t('1 unit went unsold') : t('{n} units went unsold', { n: count(left) })));
    return;
  }
  label(root, 'displayed', t('Displayed'));
  tile(root, 'displayed', count(left), t('left for shoppers, real {n}', { n: count(sum(items, 'real')) }));
}

// booksTile says whether the books balance; before the start nothing is sold yet.
function booksTile(root, rec, b, started) {
  var note = t('sold units against recorded orders');
  if (typeof rec.rebuildWaitsFor === 'number') {
    note = t('stock lost: the rebuild waits for the orders still being recorded');
  } else if (!rec.loaded) {
    note = t('stock not loaded for the sale yet');
  } else if (!started) {
    note = t('nothing sold yet');
  }
  tile(root, 'books', b.word, note);
  byTestId('tile-books', root).setAttribute('data-state', booksState(rec));
}

// remindersLine says how many shoppers asked to be reminded of the start: an early estimate of the
// crowd (each browser once; a reminder undone stays counted, which the line's title says).
function remindersLine(root, n, started) {
  var line = byTestId('live-reminders', root);
  if (!line) {
    return;
  }
  n = num(n);
  line.setAttribute('data-count', String(n));
  if (n === 0) {
    setText(line, started ? t('No shopper asked to be reminded of the start.') : t('No shopper has asked to be reminded of the start yet.'));
  } else if (n === 1) {
    setText(line, t('1 shopper asked to be reminded of the start (an estimate).'));
  } else {
    setText(line, t('{n} shoppers asked to be reminded of the start (an estimate).', { n: count(n) }));
  }
}

// moneyFigure writes one amount of the money area and what it counts.
function moneyFigure(root, key, cents, currency, note) {
  var amount = byTestId('money-' + key + '-amount', root);
  setText(amount, formatMoney(cents, currency));
  amount.classList.toggle('zero', cents === 0);
  setText(byTestId('money-' + key + '-note', root), note);
}

// renderMoney draws the sale's money: paid, awaiting the provider's confirmation, refunded. Before
// the start nothing is sold: one sentence says so instead of a row of zeros.
function renderMoney(root, m, items, started) {
  var area = byTestId('live-money', root);
  if (!area) {
    return;
  }
  var currency = typeof m.currency === 'string' && m.currency ? m.currency : 'CNY';
  show(byTestId('money-before', root), !started);
  show(byTestId('money-figures', root), started);
  var refunds = num(m.refunds);
  var pending = num(m.refundsPending);
  show(byTestId('money-refund-note', root), started && refunds > 0);
  area.setAttribute('data-refunds-pending', String(pending));
  if (!started) {
    return;
  }
  var paidOrders = sum(items, 'paid');
  moneyFigure(root, 'paid', num(m.paidCents), currency, paidOrders === 0 ? t('no payment yet')
    : paidOrders === 1 ? t('from 1 paid order') : t('from {n} paid orders', { n: count(paidOrders) }));
  var awaiting = num(m.awaitingPayment);
  // Payments sent from the provider's page, not confirmed yet: not the orders awaiting payment
  // (the frozen tile's), so its zero says what it counts rather than a bare "none".
  moneyFigure(root, 'awaiting', num(m.awaitingCents), currency, awaiting === 0 ? t('no payment waiting for the provider')
    : awaiting === 1 ? t('1 order') : t('{n} orders', { n: count(awaiting) }));
  var made = refunds - pending;
  var note = refunds === 0 ? t('none') : made === 1 ? t('1 refund made') : t('{n} refunds made', { n: count(made) });
  if (pending > 0) {
    note = pending === 1 ? t('1 refund still being made') : t('{n} refunds still being made', { n: count(pending) });
    if (made > 0) {
      note += ' \u00b7 ' + (made === 1 ? t('1 refund made') : t('{n} refunds made', { n: count(made) }));
    }
  }
  moneyFigure(root, 'refunded', num(m.refundedCents), currency, note);
  byTestId('money-refunded', root).setAttribute('data-pending', String(pending > 0));
  moneyIssues(root, m, currency);
}

// moneyIssues says what the merchant should know of the sale's money beyond the figures: payments
// that named an order but were not its own (refunded by themselves), and refunds the provider
// refused for good (the merchant settles those at the provider).
function moneyIssues(root, m, currency) {
  var line = byTestId('money-issues', root);
  if (!line) {
    return;
  }
  var c = m.conflicts || {};
  var conflicts = num(c.count);
  var failed = num(m.refundsFailed);
  var parts = [];
  if (conflicts > 0) {
    parts.push(conflicts === 1
      ? t('1 payment that was not its order\u2019s own ({amount}) paid nothing and is refunded by itself.', { amount: formatMoney(num(c.amountCents), currency) })
      : t('{n} payments that were not their order\u2019s own ({amount}) paid nothing and are refunded by themselves.', { n: count(conflicts), amount: formatMoney(num(c.amountCents), currency) }));
  }
  if (failed > 0) {
    parts.push(failed === 1
      ? t('1 refund was refused by the payment provider: settle it there (the reason is in the orders list).')
      : t('{n} refunds were refused by the payment provider: settle them there (the reasons are in the orders list).', { n: count(failed) }));
  }
  setText(line, parts.join(' '));
  line.setAttribute('data-kind', failed > 0 ? 'error' : 'info');
  show(line, parts.length > 0);
}

// renderLive draws one answer of the live view but the sale's name, status and controls.
export function renderLive(root, d) {
  var items = Array.isArray(d.items) ? d.items : [];
  var status = d.sale && d.sale.status;
  var started = status !== undefined && status !== 'scheduled';
  var unheld = unheldStock(d, items);
  stockTiles(root, items, status, unheld);
  flowTiles(root, d.funnel || {});
  var rec = d.reconciliation || {};
  booksTile(root, rec, renderBooks(root, rec, items, started), started);
  var w = d.writer || {};
  var unknown = w.queueDepth === null || w.queueDepth === undefined;
  tile(root, 'lag', lagText(w.lagSeconds), t('oldest order not yet recorded'));
  tile(root, 'queue', unknown ? t('unknown') : count(w.queueDepth), unknown ? t('the order queue did not answer') : t('orders waiting to be recorded'));
  remindersLine(root, d.reminders, started);
  var money = d.money && typeof d.money === 'object' ? d.money : {};
  renderMoney(root, money, items, started);
  renderItems(root, items, money.currency, unheld);
  renderChart(root, d);
}
