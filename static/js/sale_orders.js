// The sale page's order box: every order of the signed-in shopper in this sale, newest first,
// each following its own status (order.js), and which of them the page's message is about: the
// order just queued, or the order of a purchase whose answer was lost.

import { byTestId, show } from './dom.js';
import { parseTime } from './time.js';
import { serverNow } from './clock.js';
import { api, isUnauthenticated } from './api.js';
import { retryDelay } from './poll.js';
import { isOnline } from './network.js';
import { loggedIn, sessionExpired } from './session.js';
import { LIVE_STATUSES } from './status.js';
import { orderController } from './order.js';
import { t } from './i18n.js';

// After a lost answer the orders are looked at this many times, this far apart.
const LOST_CHECKS = 10;
const LOST_CHECK_MS = 3000;

function orderEntries(B) {
  return Object.keys(B.entries).map(function (id) {
    return B.entries[id];
  }).sort(function (a, b) {
    return b.createdAt - a.createdAt;
  });
}

// holdings says which items the shopper holds a live order for, and one such order.
function holdings(B) {
  var byItem = {};
  var any = null;
  if (!loggedIn()) {
    return { byItem: byItem, any: any };
  }
  orderEntries(B).forEach(function (e) {
    if (LIVE_STATUSES[e.status] && e.itemId) {
      if (byItem[e.itemId] !== 'PAID') {
        // an entry of the fair start's draw, waiting for it: DRAW
        byItem[e.itemId] = e.status === 'QUEUED' && e.draw ? 'DRAW' : e.status;
      }
      if (any === null || e.status === 'PAID') {
        any = e;
      }
    }
  });
  return { byItem: byItem, any: any };
}

function layoutOrders(B) {
  var list = orderEntries(B);
  var current = Array.prototype.slice.call(B.list.children);
  var same = current.length === list.length && list.every(function (e, i) {
    return current[i] === e.li;
  });
  if (!same) {
    list.forEach(function (e) {
      B.list.appendChild(e.li);
    });
  }
  show(B.box, list.length > 0);
}

function dropOrder(B, id) {
  var e = B.entries[id];
  if (!e) {
    return;
  }
  e.ctl.stop();
  if (e.li.parentNode) {
    e.li.parentNode.removeChild(e.li);
  }
  delete B.entries[id];
  layoutOrders(B);
  B.page.render();
}

function itemName(B, e, fallback) {
  return e.itemName || B.page.itemNames[e.itemId] || fallback;
}

function orderStatusChanged(B, e, status, d, x) {
  e.status = status;
  e.draw = e.draw || !!(x && x.draw);
  if (d && d.itemName) {
    e.itemName = d.itemName;
  }
  var name = { name: itemName(B, e, t('your item')) };
  if (B.queuedFor === e.id && status !== 'QUEUED') {
    B.queuedFor = null;
    if (status === 'PENDING' && e.draw) {
      sayAbout(B, e, t('You were drawn! Your order of {name} is confirmed: pay before the deadline below, or the unit goes back on sale.', name), 'ok');
    } else if (status === 'NOT_SELECTED') {
      // not drawn: said calmly, not as an error; the entry below explains the draw (status.js),
      // so the message does not say it a second time
      sayAbout(B, e, t('The draw is done: your entry below says how it went.'), 'info');
    } else if (status === 'PENDING') {
      sayAbout(B, e, t('Your order of {name} is confirmed: pay before the deadline below, or the unit goes back on sale.', name), 'ok');
    } else if (status === 'FAILED') {
      B.page.say(t('Your order of {name} could not be completed; nothing was charged.', name), 'error');
    }
  } else {
    followSaid(B, e, status, name);
  }
  B.page.render();
}

// sayAbout says a sentence about order e in the page's message, and remembers it: the sentence
// follows the order from then on (followSaid), so that "pay before the deadline" never stands
// beside an order that expired.
function sayAbout(B, e, text, kind) {
  B.page.say(text, kind);
  B.said = { id: e.id, text: text };
}

// followSaid rewrites the page's sentence about order e when the order moved on (paid, expired,
// cancelled), unless another sentence has taken its place since.
function followSaid(B, e, status, name) {
  var area = byTestId('message', B.page.section); // where page.say writes
  if (!B.said || B.said.id !== e.id || !area || area.textContent !== B.said.text) {
    return;
  }
  if (status === 'EXPIRED') {
    sayAbout(B, e, t('Your order of {name} expired: the payment window closed and the unit went back on sale.', name), 'info');
  } else if (status === 'CANCELLED') {
    sayAbout(B, e, t('Your order of {name} was cancelled; its unit went back on sale.', name), 'info');
  } else if (status === 'PAID') {
    sayAbout(B, e, t('Your order of {name} is paid. Thank you!', name), 'ok');
  }
}

// foundLost: a live order of the item, reserved since the lost purchase was sent (a few
// seconds of slack for the clocks), is that purchase's, which went through after all.
function foundLost(B, e, status) {
  if (B.lostFor !== null && B.lostFor === e.itemId && LIVE_STATUSES[status] && e.createdAt >= B.lostSince - 5000) {
    B.lostFor = null;
    B.queuedFor = status === 'QUEUED' ? e.id : B.queuedFor;
    B.page.say(t('Your purchase of {name} went through after all: the order is below.', { name: itemName(B, e, t('the item')) }), 'ok');
  }
}

// newEntry copies the template for an order, its panel following the order's status.
function newEntry(B, o) {
  var id = String(o.orderId);
  var li = B.template.content.cloneNode(true).querySelector('[data-testid="order"]');
  var e = {
    id: id,
    li: li,
    status: null,
    itemId: o.itemId !== undefined && o.itemId !== null ? String(o.itemId) : '',
    itemName: typeof o.itemName === 'string' ? o.itemName : '',
    draw: o.draw === true, // an entry of the sale's fair-start draw
    createdAt: parseTime(o.createdAt)
  };
  if (isNaN(e.createdAt)) {
    e.createdAt = serverNow();
  }
  e.ctl = orderController(li, B.page.say, {
    words: true,
    onStatus: function (oid, status, d, x) {
      orderStatusChanged(B, e, status, d, x);
    },
    onMissing: function () {
      dropOrder(B, id);
    }
  });
  return e;
}

// addOrder shows an order (from the list, or just bought) and follows its status.
function addOrder(B, o) {
  if (!B.list || !B.template) {
    return null;
  }
  var e = B.entries[String(o.orderId)];
  if (e) {
    // Listed before the purchase's answer was found lost (my orders lists a QUEUED order at
    // once): it may be that purchase's all the same.
    foundLost(B, e, o.status);
    return e;
  }
  e = newEntry(B, o);
  B.entries[e.id] = e;
  layoutOrders(B);
  foundLost(B, e, o.status);
  e.ctl.follow(o);
  return e;
}

function clearOrders(B) {
  B.gen++;
  window.clearTimeout(B.retry);
  Object.keys(B.entries).forEach(function (id) {
    B.entries[id].ctl.stop();
  });
  B.entries = {};
  B.queuedFor = null;
  B.lostFor = null;
  B.answered = false;
  if (B.list) {
    B.list.replaceChildren();
  }
  show(B.box, false);
}

// loadOrders fetches the shopper's orders in this sale and shows those not shown yet (the
// shown ones follow their own status).
async function loadOrders(B) {
  if (!loggedIn() || !B.list || !B.template) {
    return;
  }
  window.clearTimeout(B.retry);
  if (!isOnline()) {
    return; // loaded when the network is back
  }
  var g = B.gen;
  var r = await api('GET', '/api/flash-sales/orders?saleId=' + encodeURIComponent(B.page.saleId), undefined, undefined, 'no-store');
  if (g !== B.gen || !loggedIn()) {
    return;
  }
  B.answered = true;
  if (r.ok && r.data && Array.isArray(r.data.orders)) {
    r.data.orders.forEach(function (o) {
      if (o && o.orderId !== undefined && o.orderId !== null &&
        (o.saleId === undefined || o.saleId === null || String(o.saleId) === B.page.saleId)) {
        addOrder(B, o);
      }
    });
    B.failures = 0;
    B.page.render();
    return;
  }
  if (isUnauthenticated(r)) {
    sessionExpired();
    return;
  }
  B.retry = window.setTimeout(function () {
    loadOrders(B);
  }, retryDelay(r, B.failures++, 2000, 30000));
}

// lookForLost loads the shopper's orders in the sale until the lost purchase's order turns up
// (addOrder), ten times at most, a few seconds apart: an order still being recorded is not
// listed yet.
async function lookForLost(B) {
  await loadOrders(B);
  if (B.lostFor !== null && ++B.lostChecks < LOST_CHECKS) {
    B.lostTimer = window.setTimeout(function () {
      lookForLost(B);
    }, LOST_CHECK_MS);
  }
}

// sessionChanged: the box follows who is signed in.
function sessionChanged(B) {
  var on = loggedIn();
  if (on !== B.signedIn) {
    B.signedIn = on;
    clearOrders(B);
    if (on) {
      loadOrders(B);
    }
  }
  B.page.render();
}

// boxApi is what the other modules of the page ask of the order box.
function boxApi(B) {
  return {
    holdings: function () {
      return holdings(B);
    },
    // answered: the shop has answered about the shopper's orders here (with them, or an error).
    answered: function () {
      return B.answered;
    },
    add: function (o) {
      return addOrder(B, o);
    },
    load: function () {
      return loadOrders(B);
    },
    tick: function () {
      Object.keys(B.entries).forEach(function (id) {
        B.entries[id].ctl.tick();
      });
    },
    sessionChanged: function () {
      sessionChanged(B);
    },
    expectQueued: function (orderId) {
      B.queuedFor = orderId;
    },
    lookForLost: function (itemId, sentAt) {
      B.lostFor = itemId;
      B.lostSince = sentAt;
      B.lostChecks = 0;
      window.clearTimeout(B.lostTimer);
      lookForLost(B);
    },
    forgetLost: function () {
      B.lostFor = null;
    }
  };
}

// initOrderBox returns holdings(), add(order), load(), tick(), sessionChanged(), and what the
// purchase tells it: expectQueued(orderId), lookForLost(itemId, sentAt), forgetLost().
export function initOrderBox(page) {
  var B = {
    page: page,
    box: byTestId('sale-orders', page.section),
    list: byTestId('sale-order-list', page.section),
    template: byTestId('sale-order-template', page.section),
    entries: {}, // order id -> { id, li, ctl, status, itemId, itemName, draw, createdAt }
    gen: 0, // bumped when the list is thrown away (logout)
    signedIn: null,
    answered: false, // the first load of the orders came back (holdings() is what the shop says)
    retry: null, // the timer of the next try after a failed load
    failures: 0, // failed loads in a row
    // queuedFor is the order the "…the order is queued." message is about; it gives way when
    // that order is no longer queued.
    queuedFor: null,
    // said is the page's sentence about one order ({id, text}) that follows that order: a
    // confirmation turns into "expired", "cancelled" or "paid" (followSaid).
    said: null,
    // lostFor is the item of a purchase whose answer was lost, sent at lostSince (the shop's
    // clock): the box looks for its order a few times (lostChecks), and the message says so
    // when it turns up.
    lostFor: null,
    lostSince: 0,
    lostChecks: 0,
    lostTimer: null
  };
  // Back to the tab, or to the page from the browser's cache: orders may have changed
  // elsewhere (another tab, "My orders").
  document.addEventListener('visibilitychange', function () {
    if (!document.hidden) {
      loadOrders(B);
    }
  });
  window.addEventListener('pageshow', function (ev) {
    if (ev.persisted) {
      loadOrders(B);
    }
  });
  return boxApi(B);
}
