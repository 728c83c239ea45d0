// The sale page's countdown: the phase of the sale by the shop's clock (unknown until the clock
// is synced, ended early when the shop says so), its words, and a render at the very millisecond
// of the start and of the end.

import { byTestId, setText } from './dom.js';
import { formatDuration, saleState } from './time.js';
import { clock, serverNow } from './clock.js';
import { loggedIn } from './session.js';
import { t } from './i18n.js';

function phaseNow(C) {
  var page = C.page;
  if (!clock.synced || isNaN(page.startsAt) || isNaN(page.endsAt)) {
    return 'unknown';
  }
  if (C.endedByServer) {
    return 'ended';
  }
  return saleState(serverNow(), page.startsAt, page.endsAt);
}

// render writes the countdown and returns the phase it wrote.
function render(C) {
  var now = serverNow();
  var phase = phaseNow(C);
  if (C.countdown) {
    C.countdown.setAttribute('data-phase', phase);
    C.countdown.setAttribute('data-paused', C.page.paused && phase === 'live' ? 'true' : 'false');
  }
  if (phase === 'unknown') {
    setText(C.countdown, t('Syncing with the shop\u2019s clock\u2026'));
    setText(C.detail, '');
  } else if (phase === 'upcoming') {
    setText(C.countdown, t('Starts in {d}', { d: formatDuration(C.page.startsAt - now) }));
    // The advice follows who is there: a merchant never buys, a signed-in shopper has only the
    // captcha left to do.
    setText(C.detail, C.page.merchant ? '' : loggedIn()
      ? t('Solve the captcha now, so you are ready when the Buy buttons light up.')
      : t('Log in and solve the captcha now, so you are ready when the Buy buttons light up.'));
  } else if (phase === 'live') {
    setText(C.countdown, C.page.paused ? t('Paused') : t('Live now'));
    setText(C.detail, t('Ends in {d}', { d: formatDuration(C.page.endsAt - now) }));
  } else {
    setText(C.countdown, t('Ended'));
    setText(C.detail, t('This sale is over.'));
  }
  return phase;
}

// atMoment re-renders the page at the exact millisecond of a start or end, re-arming itself if
// a timer fires early.
function atMoment(C, at, setTimer) {
  var left = at - serverNow();
  if (left > 0) {
    setTimer(window.setTimeout(function () {
      atMoment(C, at, setTimer);
    }, Math.min(Math.ceil(left), 2147483647)));
    return;
  }
  C.page.render();
}

function schedule(C) {
  window.clearTimeout(C.startTimer);
  window.clearTimeout(C.endTimer);
  if (!clock.synced) {
    return;
  }
  atMoment(C, C.page.startsAt, function (t) {
    C.startTimer = t;
  });
  atMoment(C, C.page.endsAt, function (t) {
    C.endTimer = t;
  });
}

// initCountdown returns render() (writes the countdown, returns the phase: 'unknown',
// 'upcoming', 'live' or 'ended'), schedule() (re-arms the start and end timers after the clock
// moved) and ended() (the shop answered that the sale is over).
export function initCountdown(page) {
  var C = {
    page: page,
    countdown: byTestId('countdown', page.section),
    detail: byTestId('countdown-detail', page.section),
    startTimer: null,
    endTimer: null,
    endedByServer: false
  };
  return {
    render: function () {
      return render(C);
    },
    schedule: function () {
      schedule(C);
    },
    ended: function () {
      C.endedByServer = true;
    }
  };
}
