// The JSON API and its refusals in words.

import { csrfCookie } from './storage.js';
import { parseRetryAfter } from './time.js';
import { t, lang } from './i18n.js';

// noAnswer is what api returns when no answer came back: the request failed to go out, or it
// went out and its answer was lost (the connection dropped, the body was cut, or timeoutMs passed).
function noAnswer(timedOut) {
  return { ok: false, status: 0, network: true, timedOut: timedOut, code: 'NETWORK', message: '', data: null, retryAfter: null };
}

// api calls the JSON API. It never throws: no answer comes back as status 0 with network set.
// Every POST carries the CSRF double-submit header and a JSON body. timeoutMs, if given, gives
// up waiting for the answer after that long.
export async function api(method, path, body, extraHeaders, cacheMode, timeoutMs) {
  var headers = { Accept: 'application/json' };
  var init = { method: method, headers: headers, credentials: 'same-origin' };
  if (method !== 'GET') {
    headers['Content-Type'] = 'application/json';
    headers['X-CSRF-Token'] = csrfCookie() || '';
    init.body = JSON.stringify(body === undefined ? {} : body);
  }
  if (extraHeaders) {
    Object.keys(extraHeaders).forEach(function (k) {
      headers[k] = extraHeaders[k];
    });
  }
  if (cacheMode) {
    init.cache = cacheMode;
  }
  var timedOut = false;
  var timer = null;
  if (timeoutMs) {
    var abort = new AbortController();
    init.signal = abort.signal;
    timer = window.setTimeout(function () {
      timedOut = true;
      abort.abort();
    }, timeoutMs);
  }
  var res;
  var text = '';
  try {
    res = await fetch(path, init);
    if (res.status !== 204) {
      text = await res.text();
    }
  } catch (e) {
    return noAnswer(timedOut);
  } finally {
    window.clearTimeout(timer);
  }
  var data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch (e) {
      data = null;
    }
  }
  var out = {
    ok: res.ok,
    status: res.status,
    network: false,
    code: null,
    message: '',
    data: data,
    retryAfter: parseRetryAfter(res.headers.get('Retry-After'))
  };
  if (!res.ok) {
    out.code = data && typeof data.error === 'string' ? data.error : 'HTTP_' + res.status;
    out.message = data && typeof data.message === 'string' ? data.message : '';
  }
  return out;
}

// sentence turns a server message ("the order is PAID and cannot be cancelled") into one.
export function sentence(text) {
  var s = String(text || '').trim();
  if (!s) {
    return '';
  }
  s = s.charAt(0).toUpperCase() + s.slice(1);
  return /[.!?]$/.test(s) ? s : s + '.';
}

// serverSentence is the server's message as a sentence in English; on a Chinese page, the
// sentence of the known messages of code, or fallback (the server writes English only).
function serverSentence(r, fallback) {
  if (lang === 'en' && r.message) {
    return sentence(r.message);
  }
  var m = String(r.message || '');
  switch (r.code) {
    case 'NOT_CANCELLABLE':
      return /QUEUED/.test(m) ? t('The order is still being confirmed; it can be cancelled in a moment, once it awaits payment.') : t('This order can no longer be cancelled.');
    case 'INVALID_CREDENTIALS':
      return t('Wrong username or password.');
    case 'USERNAME_TAKEN':
      return t('That username is taken; choose another.');
    case 'INVALID_INPUT':
      if (/^username must be/.test(m)) {
        return t('A username has 3 to 32 characters.');
      }
      if (/^username may hold/.test(m)) {
        return t('A username may hold only letters, digits, _, - and .');
      }
      if (/^password must be/.test(m)) {
        return t('A password has 8 to 72 bytes.');
      }
      return t('The input was not accepted; check it and try again.');
  }
  return fallback;
}

// errorText says in words what went wrong, by the contract's error code.
export function errorText(r) {
  if (r.network) {
    return t('Network problem: the shop could not be reached. Check your connection and try again.');
  }
  switch (r.code) {
    case 'SOLD_OUT':
      return t('Sold out: every unit has been taken.');
    case 'ALREADY_PURCHASED':
      return t('You already hold an order in this sale (one per shopper).');
    case 'NOT_STARTED':
      return t('The sale has not started yet.');
    case 'SALE_ENDED':
      return t('The sale has ended.');
    case 'RATE_LIMITED':
      return t('Too many attempts; try again in {s} s', { s: r.retryAfter === null ? 1 : r.retryAfter });
    case 'CAPTCHA_FAILED':
      return t('The captcha answer was wrong or expired; a new one is shown.');
    case 'INVALID_PURCHASE_TOKEN':
      return t('Your purchase pass was refused (used or expired); solve the new captcha and try again.');
    case 'UNAUTHENTICATED':
      return t('Please log in first.');
    case 'CSRF':
      return t('Your session could not be verified; please log in again.');
    case 'UNAVAILABLE':
      return t('The shop is busy; nothing was reserved, try again.');
    case 'PAUSED':
      return t('The sale is paused by the merchant; nothing was reserved. Try again when it resumes.');
    case 'MERCHANTS_CANNOT_BUY':
      return t('A merchant account cannot buy: log in with a shopper account to buy.');
    case 'EXPIRED':
      return t('Too late: the payment window closed and the order expired.');
    case 'NOT_PAYABLE':
      return t('This order cannot be paid: it is still being confirmed, or it was cancelled.');
    case 'NOT_CANCELLABLE':
      return serverSentence(r, t('This order can no longer be cancelled.'));
    case 'INVALID_CREDENTIALS':
    case 'USERNAME_TAKEN':
    case 'INVALID_INPUT':
      return serverSentence(r, t('Something went wrong (HTTP {status}).', { status: r.status }));
    default:
      return (lang === 'en' && r.message) || t('Something went wrong (HTTP {status}).', { status: r.status });
  }
}

export function isUnauthenticated(r) {
  return r.status === 401 || r.code === 'UNAUTHENTICATED' || r.code === 'CSRF';
}
