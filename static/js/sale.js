// The sale page, by concern: the countdown (sale_countdown.js), the items' stock badges, Buy
// buttons and notes (sale_items.js), the captcha (sale_captcha.js), the purchase
// (sale_purchase.js) and the shopper's orders in the sale (sale_orders.js). This module finds the
// page, holds what those share (salePage) and draws them together (render), four times a second
// and whenever something changes.

import { byTestId, allByTestId, enc, messenger } from './dom.js';
import { parseTime } from './time.js';
import { onClock, startClock, syncClock } from './clock.js';
import { api } from './api.js';
import { retryDelay } from './poll.js';
import { onNetwork } from './network.js';
import { onSession, initSession } from './session.js';
import { initCountdown } from './sale_countdown.js';
import { initItems } from './sale_items.js';
import { initCaptcha } from './sale_captcha.js';
import { initPurchase } from './sale_purchase.js';
import { initOrderBox } from './sale_orders.js';

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
    say: messenger(byTestId('message', section)),
    buttons: allByTestId('buy-button', section),
    itemNames: itemNames,
    // From GET /api/flash-sales/{saleId}: "per-sale" or "per-item" (null until known), the
    // currency and the prices in minor units, for the order box.
    info: { limit: null, currency: null, prices: {} },
    // phase is the sale's phase as last drawn (null before the first render).
    phase: null,
    render: function () {
      render(page);
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

function render(page) {
  var phase = page.countdown.render();
  page.items.render(phase);
  if (phase !== page.phase) {
    page.phase = phase;
    page.items.phaseChanged();
  }
  page.captcha.follow();
  page.orders.tick();
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
  page.countdown = initCountdown(page);
  page.captcha = initCaptcha(page);
  page.items = initItems(page);
  page.purchase = initPurchase(page);
  page.orders = initOrderBox(page);

  onSession(page.orders.sessionChanged);
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
  window.setInterval(page.render, 250);
  page.items.start();
}
