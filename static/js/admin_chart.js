// The live view's chart: accepted and refused requests per second over the sale, drawn as inline
// SVG (no library). Seconds are grouped into bars at least three pixels wide; a bar is the mean
// per second of its group, accepted at the bottom and refused stacked on top. Colours come from
// the style sheet (.chart-accepted, .chart-refused), so the legend and the dark theme match.

import { formatClock } from './time.js';
import { t, locale } from './i18n.js';

const NS = 'http://www.w3.org/2000/svg';

function svg(tag, attrs, text) {
  var node = document.createElementNS(NS, tag);
  Object.keys(attrs || {}).forEach(function (k) {
    node.setAttribute(k, String(attrs[k]));
  });
  if (text !== undefined) {
    node.textContent = String(text);
  }
  return node;
}

// niceCeil rounds a maximum up to 1, 2 or 5 times a power of ten (at least 1).
function niceCeil(v) {
  if (!(v > 1)) {
    return 1;
  }
  var p = Math.pow(10, Math.floor(Math.log10(v)));
  var steps = [1, 2, 5, 10];
  for (var i = 0; i < steps.length; i++) {
    if (v <= steps[i] * p) {
      return steps[i] * p;
    }
  }
  return 10 * p;
}

function rateText(v) {
  return v >= 10 || v === Math.round(v) ? Math.round(v).toLocaleString(locale) : v.toFixed(1);
}

// drawChart draws series ([{t (Unix seconds), accepted, refused}]) from `from` to `to` (Unix
// seconds) into box, as wide as box is. It returns the totals drawn and the seconds per bar.
export function drawChart(box, series, from, to) {
  var width = Math.max(260, Math.floor(box.clientWidth || 600));
  var height = width < 480 ? 170 : 210;
  var pad = { l: 46, r: 10, t: 12, b: 26 };
  var plotW = width - pad.l - pad.r;
  var plotH = height - pad.t - pad.b;
  var span = Math.max(60, to - from + 1);
  var bucket = Math.max(1, Math.ceil(span / Math.floor(plotW / 3)));
  var n = Math.ceil(span / bucket);
  var acc = new Array(n).fill(0);
  var ref = new Array(n).fill(0);
  var totals = { accepted: 0, refused: 0, bucket: bucket };
  (series || []).forEach(function (p) {
    var t = Number(p.t);
    if (!(t >= from) || t >= from + n * bucket) {
      return;
    }
    var i = Math.floor((t - from) / bucket);
    acc[i] += Number(p.accepted) || 0;
    ref[i] += Number(p.refused) || 0;
    totals.accepted += Number(p.accepted) || 0;
    totals.refused += Number(p.refused) || 0;
  });
  var max = 0;
  for (var i = 0; i < n; i++) {
    max = Math.max(max, (acc[i] + ref[i]) / bucket);
  }
  var top = niceCeil(max);
  var root = svg('svg', { width: width, height: height, viewBox: '0 0 ' + width + ' ' + height, class: 'chart-svg', 'data-testid': 'chart-svg',
    'data-bucket-seconds': bucket, 'data-accepted': totals.accepted, 'data-refused': totals.refused, focusable: 'false' });
  root.setAttribute('aria-hidden', 'true');
  // grid lines and the rate axis: 0, half and top
  [0, 0.5, 1].forEach(function (f) {
    var y = pad.t + plotH - f * plotH;
    root.appendChild(svg('line', { x1: pad.l, x2: pad.l + plotW, y1: y, y2: y, class: f === 0 ? 'chart-base' : 'chart-grid' }));
    root.appendChild(svg('text', { x: pad.l - 6, y: y + 4, 'text-anchor': 'end', class: 'chart-axis' }, rateText(top * f)));
  });
  root.appendChild(svg('text', { x: 4, y: pad.t - 2 + 8, class: 'chart-axis chart-unit' }, t('/s')));
  var bw = plotW / n;
  var gap = bw >= 4 ? 1 : 0;
  for (var j = 0; j < n; j++) {
    if (acc[j] + ref[j] === 0) {
      continue;
    }
    var x = pad.l + j * bw;
    var ha = (acc[j] / bucket) / top * plotH;
    var hr = (ref[j] / bucket) / top * plotH;
    var base = pad.t + plotH;
    if (acc[j] > 0) {
      root.appendChild(svg('rect', { x: x.toFixed(2), y: (base - ha).toFixed(2), width: Math.max(1, bw - gap).toFixed(2), height: Math.max(1, ha).toFixed(2), class: 'chart-accepted' }));
    }
    if (ref[j] > 0) {
      root.appendChild(svg('rect', { x: x.toFixed(2), y: (base - ha - hr).toFixed(2), width: Math.max(1, bw - gap).toFixed(2), height: Math.max(1, hr).toFixed(2), class: 'chart-refused' }));
    }
  }
  // the time axis: start, middle, end in the merchant's zone
  [[0, 'start'], [0.5, 'middle'], [1, 'end']].forEach(function (m) {
    var t = from + m[0] * n * bucket;
    root.appendChild(svg('text', { x: pad.l + m[0] * plotW, y: height - 6, 'text-anchor': m[1], class: 'chart-axis' }, formatClock(t * 1000)));
  });
  box.replaceChildren(root);
  return totals;
}
