// The clock synced to the server.

import { parseTime } from './time.js';
import { backoff } from './poll.js';

// The countdown and the buy buttons follow the server's clock, never the bare browser clock:
// offset = serverNow - (t0 + t1) / 2 from the quickest of three round trips, redone every minute.
export const clock = {
  offset: 0,
  synced: false,
  rtt: null,
  started: false,
  syncing: null,
  listeners: []
};

export function serverNow() {
  return Date.now() + clock.offset;
}

export function onClock(fn) {
  clock.listeners.push(fn);
}

async function clockSample() {
  var t0 = Date.now();
  var res = await fetch('/api/time', {
    cache: 'no-store',
    credentials: 'same-origin',
    headers: { Accept: 'application/json' }
  });
  var t1 = Date.now();
  if (!res.ok) {
    throw new Error('GET /api/time: HTTP ' + res.status);
  }
  var body = await res.json();
  var server = parseTime(body && body.now);
  if (isNaN(server)) {
    throw new Error('GET /api/time: no time in the answer');
  }
  return { rtt: t1 - t0, offset: server - (t0 + t1) / 2 };
}

export function syncClock() {
  if (clock.syncing) {
    return clock.syncing;
  }
  clock.syncing = (async function () {
    var best = null;
    for (var i = 0; i < 3; i++) {
      try {
        var s = await clockSample();
        if (best === null || s.rtt < best.rtt) {
          best = s;
        }
      } catch (e) {
        // One failed sample is not fatal; the others may do.
      }
    }
    clock.syncing = null;
    if (best === null) {
      return false;
    }
    clock.offset = best.offset;
    clock.rtt = best.rtt;
    clock.synced = true;
    clock.listeners.forEach(function (fn) {
      fn();
    });
    return true;
  }());
  return clock.syncing;
}

export function startClock() {
  if (clock.started) {
    return;
  }
  clock.started = true;
  var failures = 0;
  var loop = async function () {
    var ok = await syncClock();
    // Until the first sync succeeds, retry soon (backing off: the shop may be down or the
    // browser offline); afterwards, once a minute.
    window.setTimeout(loop, ok || clock.synced ? 60000 : backoff(failures++, 2000, 30000));
  };
  loop();
}
