// The home page: the sale cards' badges and countdowns.

import { byTestId, allByTestId, setText, show } from './dom.js';
import { parseTime, formatDuration, saleState } from './time.js';
import { clock, serverNow, onClock, startClock } from './clock.js';
import { t } from './i18n.js';

const STATUS_LABELS = { upcoming: t('Upcoming'), live: t('Live now'), ended: t('Ended') };

// initHomePage keeps each sale card's badge and countdown ("Starts in 1:12", "Ends in 12:03")
// in step with the shop's clock, as the sale page does, and hides a sale once it has ended
// (the page is cached for a few seconds, so a sale may end while it is shown).
export function initHomePage(home) {
  var cards = allByTestId('sale-card', home);
  if (cards.length === 0) {
    return;
  }
  var allEnded = byTestId('all-ended', home);
  function render() {
    if (!clock.synced) {
      return;
    }
    var now = serverNow();
    var shown = 0;
    cards.forEach(function (card) {
      var s = parseTime(card.getAttribute('data-starts-at'));
      var e = parseTime(card.getAttribute('data-ends-at'));
      var badge = byTestId('sale-status', card);
      var countdown = byTestId('card-countdown', card);
      if (isNaN(s) || isNaN(e) || !badge) {
        shown++;
        return;
      }
      var st = saleState(now, s, e);
      card.setAttribute('data-status', st);
      badge.setAttribute('data-status', st);
      badge.className = 'badge badge-' + st;
      setText(badge, STATUS_LABELS[st]);
      if (countdown) {
        countdown.setAttribute('data-phase', st);
        setText(countdown, st === 'upcoming' ? t('Starts in {d}', { d: formatDuration(s - now) })
          : st === 'live' ? t('Ends in {d}', { d: formatDuration(e - now) }) : t('Ended'));
        show(countdown, true);
      }
      show(card, st !== 'ended');
      if (st !== 'ended') {
        shown++;
      }
    });
    show(allEnded, shown === 0);
  }
  // Tick just after each second of the shop's clock, when the countdowns change.
  function tick() {
    render();
    window.setTimeout(tick, 1000 - (serverNow() % 1000) + 10);
  }
  onClock(render);
  startClock();
  tick();
}
