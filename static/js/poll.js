// Polling one call at a time: paused while the tab is hidden or the browser is offline, never
// sooner than the server's Retry-After, and backing off after failures.

import { isOnline, onNetwork } from './network.js';

// A poll function returns false to stop, or else what its call found:
//   true (or nothing): poll again after the poller's interval;
//   after(ms): poll again after the interval, and not sooner than ms (the server's Retry-After);
//   failed(ms): the call failed (no answer, or the server could not serve it): poll again after
//     a backoff that doubles with each failure in a row (with jitter, capped), and not sooner
//     than ms.
export function after(ms) {
  return { after: ms || 0 };
}

export function failed(ms) {
  return { failed: true, after: ms || 0 };
}

// backoff is the wait before retry n (0 for the first retry): base doubled n times, capped at
// cap, with "equal jitter": between half of that and all of it, so that the pages of a crowd
// that lost the network together do not come back in the same millisecond.
export function backoff(n, base, cap) {
  var d = Math.min(cap, base * Math.pow(2, Math.min(n, 30)));
  return d / 2 + Math.random() * (d / 2);
}

// retryDelay is the wait before retry n after the answer r: backoff(n, base, cap), and never
// sooner than the answer's Retry-After.
export function retryDelay(r, n, base, cap) {
  return Math.max(backoff(n, base, cap), (r.retryAfter || 0) * 1000);
}

// sleep resolves after ms milliseconds.
export function sleep(ms) {
  return new Promise(function (resolve) {
    window.setTimeout(resolve, ms);
  });
}

function schedule(Q, g, delay) {
  if (Q.timer !== null) {
    window.clearTimeout(Q.timer);
  }
  Q.timer = window.setTimeout(function () {
    tick(Q, g);
  }, Math.max(0, delay, Q.notBefore - Date.now()));
}

// next schedules the poll after one whose call found res.
function next(Q, g, res) {
  var delay = Q.ms;
  var wait = res && typeof res === 'object' ? res.after || 0 : 0;
  if (res && res.failed) {
    delay = backoff(Q.failures, Q.ms, Q.cap);
    Q.failures++;
  } else {
    Q.failures = 0;
  }
  Q.notBefore = wait > 0 ? Date.now() + wait : 0;
  schedule(Q, g, delay);
}

async function tick(Q, g) {
  Q.timer = null;
  if (g !== Q.gen) {
    return;
  }
  if (document.hidden || !isOnline()) {
    Q.waiting = true;
    return;
  }
  var res;
  Q.busy = true;
  try {
    res = await Q.fn();
  } catch (e) {
    res = failed(0);
  }
  Q.busy = false;
  if (g !== Q.gen) {
    return;
  }
  if (res === false) {
    Q.running = false;
    return;
  }
  next(Q, g, res);
}

// resume polls at once a poller that waited (hidden tab, offline) or is backing off.
function resume(Q) {
  if (!Q.running || Q.busy || document.hidden || !isOnline()) {
    return;
  }
  if (Q.waiting || Q.failures > 0) {
    Q.waiting = false;
    schedule(Q, Q.gen, 0);
  }
}

function stop(Q) {
  Q.running = false;
  Q.waiting = false;
  Q.busy = false;
  Q.failures = 0;
  Q.gen++;
  if (Q.timer !== null) {
    window.clearTimeout(Q.timer);
    Q.timer = null;
  }
}

function start(Q) {
  if (Q.running) {
    return;
  }
  Q.running = true;
  Q.waiting = false;
  Q.gen++;
  schedule(Q, Q.gen, 0);
}

// makePoller runs fn every ms milliseconds, one call at a time (see after and failed for what
// fn may ask). While the tab is hidden or the browser offline it waits, and polls at once when
// the tab is back or the network returns (but never before a Retry-After has passed).
export function makePoller(fn, ms) {
  var Q = {
    fn: fn,
    ms: ms,
    cap: Math.max(30000, 4 * ms),
    gen: 0,
    timer: null,
    running: false,
    waiting: false, // a poll came due while hidden or offline
    busy: false, // a call of fn is under way
    failures: 0, // failed calls in a row
    notBefore: 0 // Date.now() before which the server asked not to be polled
  };
  var onChange = function () {
    resume(Q);
  };
  document.addEventListener('visibilitychange', onChange);
  onNetwork(onChange);
  return {
    start: function () {
      start(Q);
    },
    stop: function () {
      stop(Q);
    },
    // restart polls now (after the Retry-After the server gave last, if any).
    restart: function () {
      stop(Q);
      start(Q);
    },
    isRunning: function () {
      return Q.running;
    }
  };
}
