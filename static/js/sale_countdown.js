// The sale page's countdown: the phase of the sale by the shop's clock (unknown until the clock
// is synced, ended early when the shop says so), its words, and a render at the very millisecond
// of the start and of the end.

import { byTestId, setText } from './dom.js';
import { formatDuration, saleState } from './time.js';
import { clock, serverNow } from './clock.js';
import { t } from './i18n.js';

// initCountdown returns render() (writes the countdown, returns the phase: 'unknown',
// 'upcoming', 'live' or 'ended'), schedule() (re-arms the start and end timers after the clock
// moved) and ended() (the shop answered that the sale is over).
export function initCountdown(page) {
  var countdown = byTestId('countdown', page.section);
  var detail = byTestId('countdown-detail', page.section);
  var startTimer = null;
  var endTimer = null;
  var endedByServer = false;

  function phaseNow() {
    if (!clock.synced || isNaN(page.startsAt) || isNaN(page.endsAt)) {
      return 'unknown';
    }
    if (endedByServer) {
      return 'ended';
    }
    return saleState(serverNow(), page.startsAt, page.endsAt);
  }

  function render() {
    var now = serverNow();
    var phase = phaseNow();
    if (countdown) {
      countdown.setAttribute('data-phase', phase);
    }
    if (phase === 'unknown') {
      setText(countdown, t('Syncing with the shop\u2019s clock\u2026'));
      setText(detail, '');
    } else if (phase === 'upcoming') {
      setText(countdown, t('Starts in {d}', { d: formatDuration(page.startsAt - now) }));
      setText(detail, t('Log in and solve the captcha now, so you are ready when the Buy buttons light up.'));
    } else if (phase === 'live') {
      setText(countdown, t('Live now'));
      setText(detail, t('Ends in {d}', { d: formatDuration(page.endsAt - now) }));
    } else {
      setText(countdown, t('Ended'));
      setText(detail, t('This sale is over.'));
    }
    return phase;
  }

  // atMoment re-renders at the exact millisecond of a start or end, re-arming itself if a
  // timer fires early.
  function atMoment(at, setTimer) {
    var left = at - serverNow();
    if (left > 0) {
      setTimer(window.setTimeout(function () {
        atMoment(at, setTimer);
      }, Math.min(Math.ceil(left), 2147483647)));
      return;
    }
    page.render();
  }

  function schedule() {
    window.clearTimeout(startTimer);
    window.clearTimeout(endTimer);
    if (!clock.synced) {
      return;
    }
    atMoment(page.startsAt, function (t) {
      startTimer = t;
    });
    atMoment(page.endsAt, function (t) {
      endTimer = t;
    });
  }

  return {
    render: render,
    schedule: schedule,
    ended: function () {
      endedByServer = true;
    }
  };
}
