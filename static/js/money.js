// Money: prices in minor units with an ISO 4217 currency, written and read.

import { locale } from './i18n.js';

// Prices come in minor units (cents, fen) with an ISO 4217 currency. The known currencies get
// their symbol, like the sale page's "¥12.34"; any other is written "12.34 XYZ".
export const CURRENCIES = {
  CNY: { symbol: '\u00a5', digits: 2 },
  JPY: { symbol: '\u00a5', digits: 0 },
  USD: { symbol: '$', digits: 2 },
  EUR: { symbol: '\u20ac', digits: 2 },
  GBP: { symbol: '\u00a3', digits: 2 },
  HKD: { symbol: 'HK$', digits: 2 },
  KRW: { symbol: '\u20a9', digits: 0 }
};

export function formatMoney(minor, currency) {
  var n = Number(minor);
  if (minor === null || minor === undefined || minor === '' || !isFinite(n)) {
    return '';
  }
  var code = typeof currency === 'string' && currency ? currency.toUpperCase() : 'CNY';
  var c = Object.prototype.hasOwnProperty.call(CURRENCIES, code) ? CURRENCIES[code] : null;
  var digits = c ? c.digits : 2;
  var neg = n < 0;
  n = Math.round(Math.abs(n));
  var scale = Math.pow(10, digits);
  var text = groupedNumber(Math.floor(n / scale));
  if (digits > 0) {
    var frac = String(n % scale);
    while (frac.length < digits) {
      frac = '0' + frac;
    }
    text += '.' + frac;
  }
  return (neg ? '-' : '') + (c ? c.symbol + text : text + ' ' + code);
}

// The whole units are written by Intl in the page's locale (en and zh-CN both group thousands
// with commas: "1,999"), as the server writes them (views/money.go). Past what a double holds
// exactly, or without Intl, the digits are grouped by hand the same way.
const integerFormat = (function () {
  try {
    return new Intl.NumberFormat(locale, { maximumFractionDigits: 0, useGrouping: true });
  } catch (e) {
    return null;
  }
}());

function groupedNumber(whole) {
  if (integerFormat && whole <= Number.MAX_SAFE_INTEGER) {
    return integerFormat.format(whole);
  }
  return String(whole).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

// The most a price may be, in minor units (the server's limit: 100,000,000.00).
const MAX_PRICE_MINOR = 10000000000;

// parseMoney reads a price typed in a currency's major unit ("19.99", "19,99", "¥1,999.5")
// and returns {minor: integer minor units} or {error: why not}.
export function parseMoney(text, currency) {
  var c = Object.prototype.hasOwnProperty.call(CURRENCIES, currency) ? CURRENCIES[currency] : { digits: 2 };
  var t = String(text || '').replace(/[\s\u00a0]/g, '').replace(/^(?:[\u00a5$\u20ac]|CNY|USD|EUR)/i, '');
  if (t === '') {
    return { error: 'empty' };
  }
  if (t.indexOf('.') < 0 && /^\d+,\d{1,2}$/.test(t)) {
    t = t.replace(',', '.'); // a decimal comma: 19,99
  } else if (/^\d{1,3}(,\d{3})+(\.\d*)?$/.test(t)) {
    t = t.replace(/,/g, ''); // thousands: 1,999.00
  }
  var m = /^(\d+)(?:\.(\d*))?$/.exec(t);
  if (!m) {
    return { error: 'format' };
  }
  var frac = m[2] || '';
  if (frac.length > c.digits) {
    return { error: 'digits' };
  }
  while (frac.length < c.digits) {
    frac += '0';
  }
  var minor = Number(m[1] + frac);
  if (!isFinite(minor) || minor > MAX_PRICE_MINOR) {
    return { error: 'range' };
  }
  return { minor: minor };
}
