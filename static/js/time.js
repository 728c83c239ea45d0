// Times: parsing the API's RFC 3339 and Retry-After, and writing spans, clocks and dates.

import { el, setText } from './dom.js';
import { t, locale } from './i18n.js';

export function pad2(n) {
  return (n < 10 ? '0' : '') + n;
}

// parseTime reads an RFC 3339 time into epoch milliseconds (NaN when it is not one).
// Fractions finer than a millisecond are cut, since not every engine parses them.
export function parseTime(s) {
  if (typeof s !== 'string' || s === '') {
    return NaN;
  }
  return Date.parse(s.replace(/(\.\d{3})\d+/, '$1').replace(/\.(\d{1,2})(?=[Z+-])/i, function (m, d) {
    return '.' + (d + '00').slice(0, 3);
  }));
}

// parseRetryAfter reads a Retry-After header as whole seconds (null when absent).
export function parseRetryAfter(v) {
  if (v === null || v === undefined || v === '') {
    return null;
  }
  if (/^\s*\d+\s*$/.test(v)) {
    return parseInt(v, 10);
  }
  var at = Date.parse(v);
  if (isNaN(at)) {
    return null;
  }
  return Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

// formatDuration renders a positive span as "1:59", "1:02:03" or "2 d 3:04:05", rounding up
// so that "0:00" never shows while the moment has not come.
export function formatDuration(ms) {
  var total = Math.max(0, Math.ceil(ms / 1000));
  var d = Math.floor(total / 86400);
  var h = Math.floor((total % 86400) / 3600);
  var m = Math.floor((total % 3600) / 60);
  var s = total % 60;
  if (d > 0) {
    return t('{d} d {hms}', { d: d, hms: h + ':' + pad2(m) + ':' + pad2(s) });
  }
  if (h > 0) {
    return h + ':' + pad2(m) + ':' + pad2(s);
  }
  return m + ':' + pad2(s);
}

// formatClock renders epoch milliseconds as the local "HH:MM:SS".
export function formatClock(ms) {
  var d = new Date(ms);
  return pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
}

// formatDeadline renders a deadline as the local "HH:MM:SS" when it is less than 12 hours
// away, else with its date.
export function formatDeadline(ms, now) {
  return Math.abs(ms - now) < 12 * 3600000 ? formatClock(ms) : formatDate(ms);
}

const dateFormat = (function () {
  try {
    return new Intl.DateTimeFormat(locale, {
      year: 'numeric', month: 'short', day: 'numeric',
      hour: '2-digit', minute: '2-digit', timeZoneName: 'short'
    });
  } catch (e) {
    return null;
  }
}());

export function formatDate(ms) {
  var d = new Date(ms);
  return dateFormat ? dateFormat.format(d) : d.toString();
}

// localizeTimes rewrites every <time datetime> in the viewer's zone, keeping UTC as a tooltip.
export function localizeTimes(root) {
  Array.prototype.forEach.call((root || document).querySelectorAll('time[datetime]'), function (t) {
    var ms = parseTime(t.getAttribute('datetime'));
    if (isNaN(ms)) {
      return;
    }
    if (!t.title) {
      t.title = t.textContent;
    }
    setText(t, formatDate(ms));
  });
}

// timeElement builds a localised <time> for a time the API sent.
export function timeElement(rfc3339) {
  var t = el('time', { datetime: String(rfc3339 || '') });
  var ms = parseTime(rfc3339);
  t.textContent = isNaN(ms) ? String(rfc3339 || '') : formatDate(ms);
  return t;
}

// saleState says where a sale stands at a given server time.
export function saleState(now, startsAt, endsAt) {
  if (now < startsAt) {
    return 'upcoming';
  }
  if (now >= endsAt) {
    return 'ended';
  }
  return 'live';
}
