// The fire drill of a sale's live view (views/admin_sale.templ, fireDrill): GET
// /api/admin/sales/{id}/drill for the sale's last drill and what keeps a new one from starting,
// POST to start one; polled every second while a drill runs, every ten seconds otherwise. The
// result is written in plain words in the page's language from the answer's numbers.

import { byTestId, setText, show, enc } from './dom.js';
import { api, sentence } from './api.js';
import { makePoller, after, failed } from './poll.js';
import { adminErrorText as errorText } from './admin_merchant.js';
import { formatDate, parseTime } from './time.js';
import { t, lang, locale } from './i18n.js';

const RUNNING = { preparing: true, running: true, draining: true, cleaning: true };

function num(n, digits) {
  return Number(n || 0).toLocaleString(locale, { maximumFractionDigits: digits || 0 });
}

// phaseText says where a running drill is.
function phaseText(d) {
  switch (d.phase) {
    case 'preparing':
      return t('Preparing a hidden copy of the sale\u2026');
    case 'running':
      return t('Sending shoppers: {sent} of {n} sent, {answered} answered ({s} s)\u2026', {
        sent: num(d.sent), n: num(d.shoppers), answered: num(d.answered), s: num(d.elapsedSeconds, 1)
      });
    case 'draining':
      return t('Waiting for the last orders to be recorded\u2026');
    case 'cleaning':
      return t('Removing the copy of the sale\u2026');
  }
  return '';
}

// verdictText is the verdict sentence with N, K and M in the page's language.
export function verdictText(r) {
  if (!r.capacityPerSecond) {
    return t('This instance answered no shopper within a second during the drill; your expected crowd of {k} cannot be sized from it: look at the errors and try a smaller drill.', { k: num(r.expectedCrowd) });
  }
  var p = { n: num(r.capacityPerSecond), k: num(r.expectedCrowd), m: num(r.instancesNeeded) };
  if (r.capacityIsFloor) { // N is the rate the drill sent, not the instance's limit: M is a bound
    return r.instancesNeeded === 1 ?
      t('This instance answered every shopper of the drill within a second, {n} per second, as many as the drill sent: it did not reach its limit. Your expected crowd of {k} needs at most 1 instance; a larger drill tells more.', p) :
      t('This instance answered every shopper of the drill within a second, {n} per second, as many as the drill sent: it did not reach its limit. Your expected crowd of {k} needs at most {m} instances; a larger drill tells more.', p);
  }
  return r.instancesNeeded === 1 ?
    t('This instance can take about {n} shoppers per second; your expected crowd of {k} needs 1 instance.', p) :
    t('This instance can take about {n} shoppers per second; your expected crowd of {k} needs {m} instances.', p);
}

function crowdText(r) {
  var k = { k: num(r.expectedCrowd) };
  switch (r.crowdSource) {
    case 'given':
      return t('Expected crowd: {k} shoppers in the first second (your figure).', k);
    case 'reminders':
      return t('Expected crowd: {k} shoppers in the first second (reminders \u00d710).', k);
  }
  return t('Expected crowd: {k} shoppers in the first second (units on sale \u00d720).', k);
}

function renderResult(D, d) {
  var r = d.result;
  show(D.result, !!r);
  if (!r) {
    return;
  }
  setText(D.verdict, verdictText(r));
  setText(byTestId('drill-sellout', D.root), r.soldOut && r.sellOutSeconds !== null ?
    t('{s} s', { s: num(r.sellOutSeconds, 2) }) :
    t('not sold out ({a} of {u} units)', { a: num(r.accepted), u: num(r.units) }));
  var refusals = t('{pct}% ({r} of {n})', { pct: num(r.refusalRate * 100, 1), r: num(r.refused), n: num(r.shoppers) });
  if (r.errors > 0) {
    refusals += ' \u00b7 ' + t('{e} errors', { e: num(r.errors) });
  }
  setText(byTestId('drill-refusals', D.root), refusals);
  setText(byTestId('drill-accepted', D.root), num(r.acceptedPerSecond, 1));
  setText(byTestId('drill-latency', D.root), t('{p50} ms / {p99} ms', { p50: num(r.p50Millis, 1), p99: num(r.p99Millis, 1) }));
  setText(byTestId('drill-writer', D.root), r.writerDrained ?
    t('{ms} ms after the last accepted order', { ms: num(r.writerLagMillis, 1) }) :
    t('not all recorded after a minute'));
  var when = parseTime(d.startedAt);
  setText(byTestId('drill-when', D.root), t('Drill of {time}: {n} shoppers over {s} s.', {
    time: isNaN(when) ? '' : formatDate(when), n: num(d.shoppers), s: num(d.seconds)
  }) + ' ' + crowdText(r));
}

// blockedText says why no drill can start now: the server's words on an English page, the
// page's own from the sale's facts otherwise.
function blockedText(b) {
  if (lang === 'en' && b.message) {
    return sentence(b.message);
  }
  var next = parseTime(b.nextAt);
  if (b.nextAt && !isNaN(next)) { // the cooldown after the merchant's last drill
    return t('Your last fire drill ended a short while ago, and one merchant\u2019s drills are spaced apart: the next may start at {time}, in {d}.', {
      time: formatDate(next), d: t('{m} min', { m: Math.max(1, Math.ceil((next - Date.now()) / 60000)) })
    });
  }
  if (b.error !== 'DRILL_NOT_NOW') {
    return t('Another fire drill is running; one runs at a time. Try again when it has ended.');
  }
  var starts = parseTime(b.startsAt);
  var ends = parseTime(b.endsAt);
  if (isNaN(starts) || isNaN(ends)) {
    return t('A sale is live or starts within 30 minutes, so the fire drill cannot run now: it shares the machines.');
  }
  if (!b.saleId) { // another merchant's sale: only when the drill can run
    return t('A sale on the machines every sale shares is live or starts within 30 minutes: the fire drill cannot run until it has ended, at {time}.', { time: formatDate(ends) });
  }
  var p = { name: b.saleName || '', id: b.saleId };
  if (starts <= Date.now()) {
    p.time = formatDate(ends);
    return t('\u201c{name}\u201d (sale {id}) is live until {time}: the fire drill shares the machines with it, so it cannot run now.', p);
  }
  p.time = formatDate(starts);
  p.d = t('{m} min', { m: Math.max(1, Math.ceil((starts - Date.now()) / 60000)) });
  return t('\u201c{name}\u201d (sale {id}) starts in {d}, at {time}: no fire drill within 30 minutes of a sale\u2019s start, as it shares the machines.', p);
}

function render(D) {
  var s = D.status;
  var d = s ? s.drill : null;
  var running = !!(d && RUNNING[d.phase]);
  show(D.progress, running);
  if (running) {
    D.bar.value = d.phase === 'running' && d.shoppers ? Math.min(100, Math.round(100 * d.sent / d.shoppers)) : d.phase === 'preparing' ? 0 : 100;
    D.say(phaseText(d), 'info');
  } else if (D.said) {
    D.say(D.said.text, D.said.kind);
  } else if (s && s.blocked) {
    D.say(blockedText(s.blocked), 'notice');
  } else if (d && d.phase === 'failed') {
    D.say(lang === 'en' ? t('The last drill failed: {why}', { why: d.failure || '' }) : t('The last drill failed; it removed what it had made.'), 'error');
  } else {
    D.say('', 'info');
  }
  D.root.setAttribute('data-phase', d ? d.phase : 'none');
  renderResult(D, d || {});
  D.button.disabled = D.busy || !s || running || !!s.blocked;
}

async function load(D) {
  var r = await api('GET', '/api/admin/sales/' + enc(D.saleId) + '/drill', undefined, undefined, 'no-store');
  if (r.ok && r.data) {
    D.status = r.data;
    render(D);
    return r.data.drill && RUNNING[r.data.drill.phase] ? true : after(10000);
  }
  if (D.authProblem && D.authProblem(r)) {
    return false;
  }
  return failed(r.retryAfter ? r.retryAfter * 1000 : 0);
}

function field(D, name) {
  var input = D.form.querySelector('input[name="' + name + '"]');
  var v = input ? input.value.trim() : '';
  return v === '' ? undefined : Number(v);
}

async function start(D) {
  var body = { shoppers: field(D, 'shoppers'), seconds: field(D, 'seconds') };
  var crowd = field(D, 'expectedCrowd');
  if (crowd !== undefined) {
    body.expectedCrowd = crowd;
  }
  D.busy = true;
  D.said = null;
  render(D);
  var r = await api('POST', '/api/admin/sales/' + enc(D.saleId) + '/drill', body);
  D.busy = false;
  if (r.ok && r.data) {
    D.status = { drill: r.data, blocked: null };
    render(D);
    D.poller.restart();
    return;
  }
  if (D.authProblem && D.authProblem(r)) {
    render(D);
    return;
  }
  D.said = { text: r.code === 'DRILL_NOT_NOW' || r.code === 'DRILL_RUNNING' ? blockedText({ error: r.code, message: lang === 'en' ? r.message : '' }) : errorText(r), kind: 'error' };
  render(D);
  D.said = null;
  D.poller.restart();
}

// bindDrill ties the fire drill's section to the sale; opts: saleId, authProblem(r). It returns
// start() and stop() for the page's session gate.
export function bindDrill(root, opts) {
  var D = {
    root: root,
    saleId: opts.saleId,
    authProblem: opts.authProblem,
    form: byTestId('drill-form', root),
    button: byTestId('drill-start', root),
    progress: byTestId('drill-progress', root),
    bar: byTestId('drill-bar', root),
    result: byTestId('drill-result', root),
    verdict: byTestId('drill-verdict', root),
    status: null,
    busy: false,
    said: null
  };
  var area = byTestId('drill-status', root);
  D.say = function (text, kind) {
    area.textContent = text || '';
    area.setAttribute('data-kind', kind || 'info');
  };
  D.poller = makePoller(function () {
    return load(D);
  }, 1000);
  D.form.addEventListener('submit', function (e) {
    e.preventDefault();
    if (!D.form.reportValidity || D.form.reportValidity()) {
      start(D);
    }
  });
  return {
    start: function () {
      D.poller.restart();
    },
    stop: function () {
      D.poller.stop();
    }
  };
}
