// The live view of one sale (/admin/sales/{id}): GET /api/admin/sales/{id}/live every second,
// drawn as headline numbers, the stock per item, a chart of requests per second, the funnel and
// the reconciliation (admin_live_view.js), the fair start's draw (admin_draw.js); and the sale's
// controls (admin_controls.js).

import './i18n_zh_admin.js'; // first: the merchant's words before any module runs
import { byTestId, setText, show, enc, messenger } from './dom.js';
import { formatClock, formatDate, formatDuration, parseTime } from './time.js';
import { api } from './api.js';
import { makePoller } from './poll.js';
import { bindControls } from './admin_controls.js';
import { bindDrill } from './admin_drill.js';
import { merchantPage, SALE_NOT_FOUND, adminErrorText as errorText } from './admin_merchant.js';
import { renderLive, renderChart } from './admin_live_view.js';
import { initDraw } from './admin_draw.js';
import { t } from './i18n.js';

// The sale's state for a person, by the live view's status.
const STATUS = {
  scheduled: { word: function () { return t('upcoming'); }, badge: 'upcoming', controls: 'upcoming' },
  running: { word: function () { return t('live'); }, badge: 'live', controls: 'live' },
  paused: { word: function () { return t('paused'); }, badge: 'paused', controls: 'live' },
  ended: { word: function () { return t('ended'); }, badge: 'ended', controls: 'ended' }
};

// windowText writes when the sale starts and ends, and how long until it starts or ends by the
// server's clock of this answer.
function windowText(sale, asOf) {
  var starts = parseTime(sale.startsAt);
  var ends = parseTime(sale.endsAt);
  var left = '';
  if (!isNaN(asOf) && sale.status === 'scheduled' && starts > asOf) {
    left = t(' \u00b7 starts in {d}', { d: formatDuration(starts - asOf) });
  } else if (!isNaN(asOf) && (sale.status === 'running' || sale.status === 'paused') && ends > asOf) {
    left = t(' \u00b7 ends in {d}', { d: formatDuration(ends - asOf) });
  }
  // in the past tense once past (an ended sale "Ended …", not "Ends …")
  var now = isNaN(asOf) ? Date.now() : asOf;
  var startWords = starts <= now ? t('Started {time}', { time: formatDate(starts) }) : t('Starts {time}', { time: formatDate(starts) });
  var endWords = ends <= now || sale.status === 'ended' ? t('Ended {time}', { time: formatDate(ends) }) : t('Ends {time}', { time: formatDate(ends) });
  return (isNaN(starts) ? '' : startWords) + (isNaN(ends) ? '' : ' \u00b7 ' + endWords) + left;
}

// renderHead draws the sale's name, status, window and controls.
function renderHead(V, d) {
  var sale = d.sale || {};
  var name = sale.name || t('sale {id}', { id: V.saleId });
  setText(byTestId('live-sale-name', V.root), name);
  document.title = t('Live view \u00b7 {name}', { name: name }) + ' \u00b7 flashsale';
  var st = STATUS[sale.status] || { word: function () { return String(sale.status || '?'); }, badge: '', controls: '' };
  var statusEl = byTestId('live-status', V.root);
  statusEl.className = 'badge badge-' + st.badge;
  statusEl.setAttribute('data-status', String(sale.status || ''));
  setText(statusEl, st.word());
  setText(byTestId('live-window', V.root), windowText(sale, parseTime(d.asOf)));
  if (V.controls) {
    V.controls.update({ status: st.controls, paused: sale.paused === true, loadedAt: typeof sale.loadedAt === 'string' ? sale.loadedAt : null });
  }
}

async function load(V) {
  var r = await api('GET', '/api/admin/sales/' + enc(V.saleId) + '/live', undefined, undefined, 'no-store');
  if (r.ok && r.data && r.data.sale) {
    if (V.gate.admit()) {
      V.say('', 'info');
    }
    V.last = r.data;
    renderHead(V, r.data);
    renderLive(V.root, r.data);
    V.draw.update(r.data);
    setText(V.updated, t('Updated {time}, every second.', { time: formatClock(Date.now()) }));
    return true;
  }
  if (V.gate.authProblem(r)) {
    return false;
  }
  if (r.status === 404 || r.status === 400) {
    show(V.panel, false);
    V.say(SALE_NOT_FOUND, 'error');
    return false;
  }
  setText(V.updated, t('Could not refresh: {why} Retrying\u2026', { why: errorText(r) }));
  return true;
}

export function initAdminLivePage(root) {
  var V = {
    root: root,
    saleId: root.getAttribute('data-sale-id') || '',
    say: messenger(byTestId('message', root)),
    panel: byTestId('live-panel', root),
    updated: byTestId('live-updated', root),
    last: null, // the last answer, redrawn at a new width
    draw: initDraw(root, root.getAttribute('data-sale-id') || ''), // the fair start's draw (admin_draw.js)
    controls: null,
    drill: null // the fire drill's section (admin_drill.js)
  };
  var poller = makePoller(function () {
    return load(V);
  }, 1000);
  V.gate = merchantPage(root, {
    panel: V.panel,
    say: V.say,
    stop: function () {
      poller.stop();
      if (V.drill) {
        V.drill.stop();
      }
    },
    signedOut: function () {
      V.say(t('Log in with a merchant account to watch this sale.'), 'info');
    },
    start: function () {
      poller.restart();
      if (V.drill) {
        V.drill.start();
      }
    }
  });
  var controlsRoot = byTestId('sale-controls', root);
  V.controls = controlsRoot ? bindControls(controlsRoot, {
    saleId: V.saleId,
    authProblem: V.gate.authProblem,
    after: function () {
      return load(V);
    }
  }) : null;
  var drillRoot = byTestId('fire-drill', root);
  V.drill = drillRoot ? bindDrill(drillRoot, { saleId: V.saleId, authProblem: V.gate.authProblem }) : null;
  var resizeTimer = null;
  window.addEventListener('resize', function () {
    window.clearTimeout(resizeTimer);
    resizeTimer = window.setTimeout(function () {
      if (V.last) {
        renderChart(root, V.last);
      }
    }, 150);
  });
  V.gate.watch();
}
