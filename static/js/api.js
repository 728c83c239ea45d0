// The JSON API and its refusals in words.

import { csrfCookie } from './storage.js';
import { parseRetryAfter } from './time.js';

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
  var t = String(text || '').trim();
  if (!t) {
    return '';
  }
  t = t.charAt(0).toUpperCase() + t.slice(1);
  return /[.!?]$/.test(t) ? t : t + '.';
}

// errorText says in words what went wrong, by the contract's error code.
export function errorText(r) {
  if (r.network) {
    return 'Network problem: the shop could not be reached. Check your connection and try again.';
  }
  switch (r.code) {
    case 'SOLD_OUT':
      return 'Sold out: every unit has been taken.';
    case 'ALREADY_PURCHASED':
      return 'You already hold an order in this sale (one per shopper).';
    case 'NOT_STARTED':
      return 'The sale has not started yet.';
    case 'SALE_ENDED':
      return 'The sale has ended.';
    case 'RATE_LIMITED':
      return 'Too many attempts; try again in ' + (r.retryAfter === null ? 1 : r.retryAfter) + ' s';
    case 'CAPTCHA_FAILED':
      return 'The captcha answer was wrong or expired; a new one is shown.';
    case 'INVALID_PURCHASE_TOKEN':
      return 'Your purchase pass was refused (used or expired); solve the new captcha and try again.';
    case 'UNAUTHENTICATED':
      return 'Please log in first.';
    case 'CSRF':
      return 'Your session could not be verified; please log in again.';
    case 'UNAVAILABLE':
      return 'The shop is busy; nothing was reserved, try again.';
    case 'EXPIRED':
      return 'Too late: the payment window closed and the order expired.';
    case 'NOT_PAYABLE':
      return 'This order cannot be paid: it is still being confirmed, or it was cancelled.';
    case 'NOT_CANCELLABLE':
      return r.message ? sentence(r.message) : 'This order can no longer be cancelled.';
    default:
      return r.message || 'Something went wrong (HTTP ' + r.status + ').';
  }
}

export function isUnauthenticated(r) {
  return r.status === 401 || r.code === 'UNAUTHENTICATED' || r.code === 'CSRF';
}
