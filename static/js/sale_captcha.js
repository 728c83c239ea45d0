// The sale page's captcha: fetched as soon as a logged-in shopper is on a live or upcoming sale,
// so that it is solved during the countdown, not after the start; not shown to a shopper who can
// buy nothing more here (the limit reached, or everything held or sold out).

import { byTestId, setText, show, enc } from './dom.js';
import { api, errorText, isUnauthenticated } from './api.js';
import { retryDelay } from './poll.js';
import { isOnline } from './network.js';
import { loggedIn, sessionExpired } from './session.js';
import { t } from './i18n.js';

// phaseOf is the sale's phase for the captcha: until the clock is synced, the phase the page was
// served in when that was "not started" (the box's data-upcoming), so the box the stylesheet
// showed from the first frame stays while the clock syncs.
function phaseOf(C) {
  var phase = C.page.phase;
  if ((phase === null || phase === 'unknown') && C.box && C.box.hasAttribute('data-upcoming')) {
    return 'upcoming';
  }
  return phase;
}

function want(C) {
  var page = C.page;
  var phase = phaseOf(C);
  if (!loggedIn() || page.merchant || !(phase === 'upcoming' || phase === 'live')) {
    return false;
  }
  // Not before the shop has said which orders the shopper holds here: a captcha shown and then
  // taken away when an order turns up moves the page (and asks for nothing). Before the start
  // nobody holds one: the box shows at once, in the room the stylesheet kept for it from the
  // first frame (a signed-in shopper on a sale not started yet).
  if (phase !== 'upcoming' && !page.orders.answered()) {
    return false;
  }
  var h = page.orders.holdings();
  if (page.info.limit === 'per-sale' && h.any !== null) {
    return false;
  }
  return page.buttons.some(function (b) {
    var id = b.getAttribute('data-item-id');
    return !h.byItem[id] && !page.items.soldOut(id);
  });
}

function hintText(C) {
  C.hintPhase = C.page.phase;
  return phaseOf(C) === 'upcoming'
    ? t('Solve this now, before the sale starts; then press Buy the moment it opens.')
    : t('Type the characters you see, then press Buy.');
}

// loaded shows a captcha the shop sent; false when the answer is not one.
function loaded(C, r) {
  var src = r.ok && r.data && typeof r.data.image === 'string' ? r.data.image : '';
  if (!(r.ok && r.data && r.data.captchaId !== undefined && r.data.captchaId !== null && src.indexOf('data:image/') === 0)) {
    return false;
  }
  C.id = String(r.data.captchaId);
  C.retries = 0;
  if (C.img) {
    C.img.src = src;
    C.img.hidden = false;
  }
  setText(C.hint, hintText(C));
  return true;
}

async function load(C) {
  if (C.loading || !want(C)) {
    return;
  }
  C.id = null;
  if (C.answerEl) {
    C.answerEl.value = '';
  }
  if (!isOnline()) {
    setText(C.hint, t('You are offline: a captcha loads once the connection is back.'));
    return;
  }
  C.loading = true;
  setText(C.hint, t('Loading a captcha\u2026'));
  var r = await api('POST', '/api/flash-sales/' + enc(C.page.saleId) + '/captcha', {});
  C.loading = false;
  if (loaded(C, r)) {
    return;
  }
  if (isUnauthenticated(r)) {
    C.page.say(errorText(r), 'error');
    sessionExpired();
    return;
  }
  setText(C.hint, t('Could not load a captcha: {why} Use \u201cNew challenge\u201d to retry.', { why: r.ok ? t('the answer was not understood.') : errorText(r) }));
  if ((r.network || r.status >= 500 || r.code === 'RATE_LIMITED') && C.retries < 3) {
    window.setTimeout(function () {
      load(C);
    }, retryDelay(r, C.retries++, 3000, 30000));
  }
}

function refreshArea(C) {
  var wanted = want(C);
  show(C.box, wanted);
  if (wanted && !C.id && !C.loading) {
    load(C);
  } else if (wanted && C.id) {
    setText(C.hint, hintText(C));
  }
  if (!wanted) {
    C.id = null;
  }
}

// captchaApi is what the other modules of the page ask of the captcha.
function captchaApi(C) {
  return {
    // follow is checked on every render: the captcha shows while there is something to buy.
    follow: function () {
      var wanted = want(C);
      if (wanted !== C.wanted) {
        C.wanted = wanted;
        refreshArea(C);
      } else if (wanted && C.id && C.hintPhase !== C.page.phase) {
        // The sale started while the captcha was shown: "before the sale starts" is no longer true.
        setText(C.hint, hintText(C));
      }
    },
    load: function () {
      return load(C);
    },
    id: function () {
      return C.id;
    },
    loading: function () {
      return C.loading;
    },
    answer: function () {
      return C.answerEl ? C.answerEl.value.trim() : '';
    },
    focus: function () {
      if (C.answerEl) {
        C.answerEl.focus();
      }
    },
    spend: function () {
      C.id = null;
    },
    reload: function () {
      if (want(C) && !C.id && !C.loading) {
        C.retries = 0;
        load(C);
      }
    }
  };
}

// initCaptcha returns follow() (shows or hides the captcha when that changes), load(), id()
// (the captcha ready to be answered, or null), loading(), answer() (typed, trimmed), focus(),
// spend() (it bought a purchase token, or cannot) and reload() (after the network came back).
export function initCaptcha(page) {
  var C = {
    page: page,
    box: byTestId('captcha', page.section),
    img: byTestId('captcha-image', page.section),
    answerEl: byTestId('captcha-answer', page.section),
    hint: byTestId('captcha-hint', page.section),
    id: null,
    loading: false,
    retries: 0,
    wanted: null
  };
  var refresh = byTestId('captcha-refresh', page.section);
  if (refresh) {
    refresh.addEventListener('click', function (ev) {
      ev.preventDefault();
      C.retries = 0;
      load(C);
    });
  }
  if (C.answerEl) {
    enterSubmits(page, C.answerEl);
  }
  return captchaApi(C);
}

// enterSubmits makes Enter in the answer field submit it: it buys the one item there is to buy,
// or leads to the Buy buttons when there are several (or says to wait for the start). The focus
// moves to the first Buy button once the key is released, so that the same press does not click it.
function enterSubmits(page, answerEl) {
  var focusOnKeyUp = null;
  answerEl.addEventListener('keyup', function (ev) {
    if (ev.key === 'Enter' && focusOnKeyUp) {
      var target = focusOnKeyUp;
      focusOnKeyUp = null;
      target.focus();
    }
  });
  answerEl.addEventListener('keydown', function (ev) {
    if (ev.key !== 'Enter' || ev.isComposing) {
      return;
    }
    ev.preventDefault();
    page.anchor(null); // the answer to Enter is about the page, not an item
    if (!answerEl.value.trim()) {
      page.say(t('Type the captcha answer first.'), 'error');
      return;
    }
    var open = page.buttons.filter(function (b) {
      return !b.disabled;
    });
    if (open.length === 1) {
      page.purchase.buy(open[0].getAttribute('data-item-id'));
    } else if (open.length > 1) {
      page.say(t('Answer ready: now press Buy on the item you want.'), 'info');
      focusOnKeyUp = open[0];
    } else if (page.phase === 'upcoming') {
      page.say(t('Answer ready: press Buy the moment the sale opens.'), 'info');
    } else {
      page.say(t('There is nothing to buy here right now.'), 'info');
    }
  });
}
