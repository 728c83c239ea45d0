// The sale page, by concern: the countdown (sale_countdown.js), the items' stock badges, Buy
// buttons and notes (sale_items.js), the captcha (sale_captcha.js), the purchase
// (sale_purchase.js), the shopper's orders in the sale (sale_orders.js) and "Remind me" before
// the start (sale_remind.js). This module finds the
// page, holds what those share (salePage) and draws them together (render), four times a second
// and whenever something changes.

import { byTestId, allByTestId, enc, messenger, show } from './dom.js';
import { parseTime } from './time.js';
import { onClock, startClock, syncClock, serverNow } from './clock.js';
import { api } from './api.js';
import { retryDelay } from './poll.js';
import { onNetwork } from './network.js';
import { onSession, initSession, currentUser } from './session.js';
import { t } from './i18n.js';
import { initCountdown } from './sale_countdown.js';
import { initItems } from './sale_items.js';
import { initCaptcha } from './sale_captcha.js';
import { initPurchase } from './sale_purchase.js';
import { initOrderBox } from './sale_orders.js';
import { initRemind } from './sale_remind.js';

// salePage is what the sale page's modules share: the page's parts and what the shop said of the
// sale. Each module adds itself (page.countdown, page.items, …) and calls the others through it.
function salePage(section) {
  var itemNames = {};
  allByTestId('item', section).forEach(function (li) {
    var name = byTestId('item-name', li);
    itemNames[li.getAttribute('data-item-id')] = name ? name.textContent.trim() : '';
  });
  var page = {
    section: section,
    saleId: section.getAttribute('data-sale-id') || '',
    startsAt: parseTime(section.getAttribute('data-starts-at')),
    endsAt: parseTime(section.getAttribute('data-ends-at')),
    // fairMs: the sale's fair start, the draw window after its start (0: none).
    fairMs: Number(section.getAttribute('data-fair-start-millis')) || 0,
    fairNote: byTestId('fair-start-note', section),
    say: messenger(byTestId('message', section)),
    messageArea: byTestId('message', section),
    merchantNote: byTestId('merchant-note', section),
    buttons: allByTestId('buy-button', section),
    itemNames: itemNames,
    // From GET /api/flash-sales/{saleId}: "per-sale" or "per-item" (null until known), the
    // currency and the prices in minor units, for the order box.
    info: { limit: null, currency: null, prices: {} },
    // phase is the sale's phase as last drawn (null before the first render).
    phase: null,
    // paused: the merchant paused the sale, as the stock poll (or a PAUSED refusal) said last.
    paused: false,
    // merchant: a merchant is signed in; merchants see the sale but never buy.
    merchant: false,
    render: function () {
      render(page);
    },
    // anchor moves the page's message beside the item itemId (the answer to its Buy shows
    // where the eye is, on a phone too), or back to its place below the items (null).
    anchor: function (itemId) {
      anchor(page, itemId);
    },
    setPaused: function (paused, byRefusal) {
      setPaused(page, paused, byRefusal);
    },
    // resync asks the shop's time again and re-arms the countdown's timers.
    resync: function () {
      syncClock().then(function (ok) {
        if (ok) {
          page.countdown.schedule();
          page.render();
        }
      });
    }
  };
  return page;
}

// pausedText is the one sentence an open page shows while the merchant has paused the sale.
function pausedText() {
  return t('The merchant paused the sale for a moment: Buy comes back when it resumes.');
}

// setPaused follows the merchant's pause and resume: Buy goes dark with one sentence while
// paused; on resume Buy comes back and the sentence goes away. byRefusal: a purchase was just
// refused PAUSED; a poll answer older than that refusal does not undo it.
function setPaused(page, paused, byRefusal) {
  if (byRefusal) {
    page.pausedAt = Date.now();
  } else if (!paused && Date.now() - (page.pausedAt || 0) < 2500) {
    return;
  }
  if (paused === page.paused) {
    return;
  }
  page.paused = paused;
  if (paused) {
    if (!isMerchant()) { // a merchant has no Buy to wait for
      page.say(pausedText(), 'notice');
    }
  } else if (page.messageArea && page.messageArea.textContent === pausedText()) {
    page.say('', 'info');
  }
  page.render();
}

function anchor(page, itemId) {
  var area = page.messageArea;
  if (!area) {
    return;
  }
  var li = null;
  allByTestId('item', page.section).forEach(function (x) {
    if (itemId !== null && x.getAttribute('data-item-id') === String(itemId)) {
      li = x;
    }
  });
  if (li) {
    if (area.parentNode !== li) {
      li.appendChild(area);
    }
  } else if (page.messageHome && area.parentNode !== page.messageHome.parent) {
    page.messageHome.parent.insertBefore(area, page.messageHome.next);
  }
}

function render(page) {
  page.merchant = isMerchant();
  show(page.merchantNote, page.merchant);
  var phase = page.countdown.render();
  // The fair start's word stands before and during its window, not after.
  if (page.fairNote) {
    show(page.fairNote, !(serverNow() >= page.startsAt + page.fairMs));
  }
  page.remind.render(phase);
  page.items.render(phase);
  if (phase !== page.phase) {
    page.phase = phase;
    page.items.phaseChanged();
  }
  page.captcha.follow();
  page.orders.tick();
}

function isMerchant() {
  var u = currentUser();
  return u !== null && u.role === 'merchant';
}

// loadSaleInfo learns the purchase limit, the currency and the prices.
async function loadSaleInfo(page, attempt) {
  var r = await api('GET', '/api/flash-sales/' + enc(page.saleId));
  if (r.ok && r.data) {
    page.info.limit = r.data.purchaseLimit === 'per-item' ? 'per-item' : 'per-sale';
    page.info.currency = typeof r.data.currency === 'string' ? r.data.currency : null;
    (Array.isArray(r.data.items) ? r.data.items : []).forEach(function (it) {
      if (it && it.itemId !== undefined && it.itemId !== null) {
        page.info.prices[String(it.itemId)] = it.priceCents;
      }
    });
    page.render();
    return;
  }
  if (attempt < 5 && r.status !== 404) {
    window.setTimeout(function () {
      loadSaleInfo(page, attempt + 1);
    }, retryDelay(r, attempt, 2000, 30000));
  }
}

export function initSalePage(section) {
  var page = salePage(section);
  if (page.messageArea && page.messageArea.parentNode) {
    page.messageHome = { parent: page.messageArea.parentNode, next: page.messageArea.nextElementSibling };
  }
  page.countdown = initCountdown(page);
  page.captcha = initCaptcha(page);
  page.items = initItems(page);
  page.purchase = initPurchase(page);
  page.orders = initOrderBox(page);
  page.remind = initRemind(page);

  onSession(page.orders.sessionChanged);
  onSession(page.render);
  // The network: offline, the Buy buttons wait (render); back online, the clock, the captcha and
  // the orders catch up (the stock and the orders' pollers resume by themselves).
  onNetwork(function (online) {
    page.items.renderStock();
    page.render();
    if (!online) {
      return;
    }
    page.resync();
    page.orders.load();
    page.captcha.reload();
  });
  initSession(byTestId('session', section), page.say);
  onClock(function () {
    page.countdown.schedule();
    page.render();
  });
  startClock();
  loadSaleInfo(page, 0);
  page.orders.sessionChanged();
  // Drawn once now, before main.js takes boot.js's mark off: what the stylesheet showed from
  // the first frame for the session (the captcha's box, before the start) is the script's from
  // then on.
  page.render();
  window.setInterval(page.render, 250);
  page.items.start();
}
