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

// makePoller runs fn every ms milliseconds, one call at a time (see after and failed for what
// fn may ask). While the tab is hidden or the browser offline it waits, and polls at once when
// the tab is back or the network returns (but never before a Retry-After has passed).
export function makePoller(fn, ms) {
  var gen = 0;
  var timer = null;
  var running = false;
  var waiting = false; // a poll came due while hidden or offline
  var busy = false; // a call of fn is under way
  var failures = 0; // failed calls in a row
  var notBefore = 0; // Date.now() before which the server asked not to be polled
  var cap = Math.max(30000, 4 * ms);

  function schedule(g, delay) {
    if (timer !== null) {
      window.clearTimeout(timer);
    }
    timer = window.setTimeout(function () {
      tick(g);
    }, Math.max(0, delay, notBefore - Date.now()));
  }

  async function tick(g) {
    timer = null;
    if (g !== gen) {
      return;
    }
    if (document.hidden || !isOnline()) {
      waiting = true;
      return;
    }
    var res;
    busy = true;
    try {
      res = await fn();
    } catch (e) {
      res = failed(0);
    }
    busy = false;
    if (g !== gen) {
      return;
    }
    if (res === false) {
      running = false;
      return;
    }
    var delay = ms;
    var wait = res && typeof res === 'object' ? res.after || 0 : 0;
    if (res && res.failed) {
      delay = backoff(failures, ms, cap);
      failures++;
    } else {
      failures = 0;
    }
    notBefore = wait > 0 ? Date.now() + wait : 0;
    schedule(g, delay);
  }

  // resume polls at once a poller that waited (hidden tab, offline) or is backing off.
  function resume() {
    if (!running || busy || document.hidden || !isOnline()) {
      return;
    }
    if (waiting || failures > 0) {
      waiting = false;
      schedule(gen, 0);
    }
  }

  document.addEventListener('visibilitychange', resume);
  onNetwork(resume);

  var poller = {
    start: function () {
      if (running) {
        return;
      }
      running = true;
      waiting = false;
      gen++;
      schedule(gen, 0);
    },
    stop: function () {
      running = false;
      waiting = false;
      busy = false;
      failures = 0;
      gen++;
      if (timer !== null) {
        window.clearTimeout(timer);
        timer = null;
      }
    },
    // restart polls now (after the Retry-After the server gave last, if any).
    restart: function () {
      poller.stop();
      poller.start();
    },
    isRunning: function () {
      return running;
    }
  };
  return poller;
}
