// Polling one call at a time, paused while the tab is hidden.

// makePoller runs fn every ms milliseconds, one call at a time, pausing while the tab is
// hidden. fn returning false stops it.
export function makePoller(fn, ms) {
  var gen = 0;
  var timer = null;
  var running = false;
  var waitingVisible = false;

  async function tick(g) {
    timer = null;
    if (g !== gen) {
      return;
    }
    if (document.hidden) {
      waitingVisible = true;
      return;
    }
    var again = true;
    try {
      again = (await fn()) !== false;
    } catch (e) {
      again = true;
    }
    if (g !== gen) {
      return;
    }
    if (again) {
      timer = window.setTimeout(function () {
        tick(g);
      }, ms);
    } else {
      running = false;
    }
  }

  document.addEventListener('visibilitychange', function () {
    if (!document.hidden && running && waitingVisible) {
      waitingVisible = false;
      tick(gen);
    }
  });

  var poller = {
    start: function () {
      if (running) {
        return;
      }
      running = true;
      waitingVisible = false;
      gen++;
      tick(gen);
    },
    stop: function () {
      running = false;
      waitingVisible = false;
      gen++;
      if (timer !== null) {
        window.clearTimeout(timer);
        timer = null;
      }
    },
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
