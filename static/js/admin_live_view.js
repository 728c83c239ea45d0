// The numbers of a sale's live view (/admin/sales/{id}), drawn from one answer of
// GET /api/admin/sales/{id}/live: the headline tiles, the stock per item, the funnel, the
// reconciliation and the chart of requests per second (admin_chart.js).

import { byTestId, setText, el } from './dom.js';
import { formatClock, parseTime } from './time.js';
import { drawChart } from './admin_chart.js';

// The reconciliation's state for a person.
const BOOKS = {
  ok: { word: 'Balanced', explain: 'Redis and Postgres agree on every unit.' },
  settling: { word: 'Settling', explain: 'Units are on their way between Redis and Postgres; the two sides meet once the queue has drained.' },
  violation: { word: 'Not balanced', explain: 'Redis and Postgres disagree with nothing on its way: see the failed checks below. Purchases fail closed while Redis is rebuilt.' }
};

const REASONS = { soldOut: 'sold out', duplicate: 'already bought', rateLimited: 'rate limited', badToken: 'bad purchase token',
  captcha: 'captcha failed', paused: 'sale paused', other: 'other' };

function num(v) {
  var n = Number(v);
  return isFinite(n) ? n : 0;
}

function count(v) {
  return num(v).toLocaleString('en-US');
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
    return '0 s';
  }
  if (v < 60) {
    return (v < 10 ? v.toFixed(1) : String(Math.round(v))) + ' s';
  }
  return Math.floor(v / 60) + ' min ' + Math.round(v % 60) + ' s';
}

function renderItems(root, items) {
  var itemRows = byTestId('live-item-rows', root);
  var trs = items.map(function (it) {
    var tr = el('tr', { class: 'stack-row', 'data-testid': 'live-item-row', 'data-item-id': String(it.itemId) });
    if (it.soldOut) {
      tr.classList.add('sold-out');
    }
    tr.appendChild(el('th', { scope: 'row', 'data-col': 'name' }, it.name || 'item #' + it.itemId));
    [['quantity', 'Quantity'], ['displayed', 'Displayed'], ['frozen', 'Frozen'], ['real', 'Real'], ['paid', 'Paid'], ['expired', 'Expired']].forEach(function (c) {
      var td = el('td', { 'data-col': c[0], 'data-label': c[1] }, count(it[c[0]]));
      if (num(it[c[0]]) === 0) {
        td.classList.add('zero');
      }
      if (c[0] === 'frozen') {
        td.title = count(it.inFlight) + ' on the way to Postgres, ' + count(it.pending) + ' awaiting payment';
      }
      tr.appendChild(td);
    });
    tr.appendChild(el('td', { 'data-col': 'soldOut', 'data-label': 'Sold out', class: it.soldOut ? 'sold-out-yes' : '' }, it.soldOut ? 'sold out' : 'no'));
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
  Object.keys(REASONS).forEach(function (k) {
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
function booksExplain(rec, b) {
  var explain = b.explain;
  if (!rec.loaded) {
    explain = 'Redis does not hold the sale yet: it is loaded ten minutes before the start, or now with Warm up now.';
  }
  if (typeof rec.rebuildWaitsFor === 'number') {
    explain = rec.rebuildWaitsFor > 0
      ? 'Redis lost data for this sale: purchases fail closed. It is rebuilt from Postgres by itself once the ' +
        count(rec.rebuildWaitsFor) + ' queued messages still waiting for the writer are written; Warm up now cannot skip that wait (their units would be sold twice).'
      : 'Redis lost data for this sale: purchases fail closed. The queue has drained; it is being rebuilt from Postgres now.';
  } else if (rec.loaded && rec.lost) {
    explain = 'Redis lost data for this sale: purchases fail closed until it is rebuilt from Postgres.';
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
    var where = c.itemId ? (names[String(c.itemId)] || 'item #' + c.itemId) : 'whole sale';
    var li = el('li', { class: 'recon-check recon-failed', 'data-testid': 'recon-failed' });
    li.appendChild(el('strong', null, '\u2717 ' + c.name));
    li.appendChild(document.createTextNode(' (' + where + ')' + (c.detail ? ': ' + c.detail : '')));
    return li;
  });
  var held = list.length - failed.length;
  if (held > 0) {
    lis.push(el('li', { class: 'recon-check recon-ok', 'data-testid': 'recon-held' }, '\u2713 ' + held + (held === 1 ? ' check holds' : ' checks hold') +
      (failed.length === 0 ? ' (every one)' : '')));
  }
  return lis;
}

function renderBooks(root, rec, items) {
  var state = BOOKS[rec.state] ? rec.state : 'violation';
  var b = BOOKS[state];
  var stateEl = byTestId('recon-state', root);
  stateEl.setAttribute('data-state', state);
  setText(stateEl, b.word);
  setText(byTestId('recon-explain', root), booksExplain(rec, b));
  setText(byTestId('recon-redis-counter', root), count(rec.redisCounter));
  setText(byTestId('recon-pg-seq', root), count(rec.postgresMaxSeq));
  setText(byTestId('recon-loaded', root), rec.loaded ? (rec.lost ? 'loaded, lost data' : 'loaded') : 'not loaded');
  var checks = byTestId('recon-checks', root);
  checks.replaceChildren.apply(checks, checkItems(rec, items));
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
    setText(chartNote, 'The chart fills in from the start, ' + formatClock(start * 1000) + '.');
    return;
  }
  var t = drawChart(chartBox, d.series, from, to);
  setText(chartNote, (from > start ? 'The last hour. ' : 'Since the start. ') + 'Each bar is ' +
    (t.bucket === 1 ? 'one second' : t.bucket + ' seconds (their mean per second)') + '; ' +
    count(t.accepted) + ' accepted and ' + count(t.refused) + ' refused drawn.');
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
  tile(root, 'accepted', count(f.accepted), 'of ' + count(f.requests) + (num(f.requests) === 1 ? ' request' : ' requests'));
  var top = Object.keys(fr.refusedBy).sort(function (a, b) {
    return num(fr.refusedBy[b]) - num(fr.refusedBy[a]);
  })[0];
  tile(root, 'refused', count(fr.refused), fr.refused > 0 && top ? 'mostly ' + (REASONS[top] || top) : 'none so far');
}

// renderLive draws one answer of the live view but the sale's name, status and controls.
export function renderLive(root, d) {
  var items = Array.isArray(d.items) ? d.items : [];
  var quantity = sum(items, 'quantity');
  tile(root, 'paid', count(sum(items, 'paid')), 'units paid, of ' + count(quantity));
  tile(root, 'frozen', count(sum(items, 'frozen')), count(sum(items, 'inFlight')) + ' on the way \u00b7 ' + count(sum(items, 'pending')) + ' awaiting payment');
  tile(root, 'displayed', count(sum(items, 'displayed')), 'left for shoppers, real ' + count(sum(items, 'real')));
  flowTiles(root, d.funnel || {});
  var rec = d.reconciliation || {};
  var b = renderBooks(root, rec, items);
  tile(root, 'books', b.word, typeof rec.rebuildWaitsFor === 'number' ? 'Redis lost the stock: rebuild waits for the queue'
    : rec.loaded ? 'Redis against Postgres' : 'stock not in Redis yet');
  byTestId('tile-books', root).setAttribute('data-state', String(rec.state || ''));
  var w = d.writer || {};
  tile(root, 'lag', lagText(w.lagSeconds), 'oldest order not yet written');
  tile(root, 'queue', w.queueDepth === null || w.queueDepth === undefined ? 'unknown' : count(w.queueDepth),
    w.queueDepth === null || w.queueDepth === undefined ? 'NATS did not answer' : 'messages waiting for the writer');
  renderItems(root, items);
  renderChart(root, d);
}
