// The sale page's captcha: fetched as soon as a logged-in shopper is on a live or upcoming sale,
// so that it is solved during the countdown, not after the start; not shown to a shopper who can
// buy nothing more here (the limit reached, or everything held or sold out).

import { byTestId, setText, show, enc } from './dom.js';
import { api, errorText, isUnauthenticated } from './api.js';
import { backoff } from './poll.js';
import { isOnline } from './network.js';
import { loggedIn, sessionExpired } from './session.js';
import { t } from './i18n.js';

// initCaptcha returns follow() (shows or hides the captcha when that changes), load(), id()
// (the captcha ready to be answered, or null), loading(), answer() (typed, trimmed), focus(),
// spend() (it bought a purchase token, or cannot) and reload() (after the network came back).
export function initCaptcha(page) {
  var box = byTestId('captcha', page.section);
  var img = byTestId('captcha-image', page.section);
  var answerEl = byTestId('captcha-answer', page.section);
  var hint = byTestId('captcha-hint', page.section);
  var refresh = byTestId('captcha-refresh', page.section);
  var c = { id: null, loading: false, retries: 0, wanted: null };

  function want() {
    if (!loggedIn() || !(page.phase === 'upcoming' || page.phase === 'live')) {
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

  function hintText() {
    return page.phase === 'upcoming'
      ? t('Solve this now, before the sale starts; then press Buy the moment it opens.')
      : t('Type the characters you see, then press Buy.');
  }

  async function load() {
    if (c.loading || !want()) {
      return;
    }
    c.id = null;
    if (answerEl) {
      answerEl.value = '';
    }
    if (!isOnline()) {
      setText(hint, t('You are offline: a captcha loads once the connection is back.'));
      return;
    }
    c.loading = true;
    setText(hint, t('Loading a captcha\u2026'));
    var r = await api('POST', '/api/flash-sales/' + enc(page.saleId) + '/captcha', {});
    c.loading = false;
    var src = r.ok && r.data && typeof r.data.image === 'string' ? r.data.image : '';
    if (r.ok && r.data && r.data.captchaId !== undefined && r.data.captchaId !== null && src.indexOf('data:image/') === 0) {
      c.id = String(r.data.captchaId);
      c.retries = 0;
      if (img) {
        img.src = src;
        img.hidden = false;
      }
      setText(hint, hintText());
      return;
    }
    if (isUnauthenticated(r)) {
      page.say(errorText(r), 'error');
      sessionExpired();
      return;
    }
    setText(hint, t('Could not load a captcha: {why} Use \u201cNew challenge\u201d to retry.', { why: r.ok ? t('the answer was not understood.') : errorText(r) }));
    if ((r.network || r.status >= 500 || r.code === 'RATE_LIMITED') && c.retries < 3) {
      window.setTimeout(load, Math.max(backoff(c.retries++, 3000, 30000), (r.retryAfter || 0) * 1000));
    }
  }

  function refreshArea() {
    var wanted = want();
    show(box, wanted);
    if (wanted && !c.id && !c.loading) {
      load();
    } else if (wanted && c.id) {
      setText(hint, hintText());
    }
    if (!wanted) {
      c.id = null;
    }
  }

  if (refresh) {
    refresh.addEventListener('click', function (ev) {
      ev.preventDefault();
      c.retries = 0;
      load();
    });
  }
  if (answerEl) {
    enterSubmits(page, answerEl);
  }

  return {
    // follow is checked on every render: the captcha shows while there is something to buy.
    follow: function () {
      var wanted = want();
      if (wanted !== c.wanted) {
        c.wanted = wanted;
        refreshArea();
      }
    },
    load: load,
    id: function () {
      return c.id;
    },
    loading: function () {
      return c.loading;
    },
    answer: function () {
      return answerEl ? answerEl.value.trim() : '';
    },
    focus: function () {
      if (answerEl) {
        answerEl.focus();
      }
    },
    spend: function () {
      c.id = null;
    },
    reload: function () {
      if (want() && !c.id && !c.loading) {
        c.retries = 0;
        load();
      }
    }
  };
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
