// The sale page's order box: every order of the signed-in shopper in this sale, newest first,
// each following its own status (order.js), and which of them the page's message is about: the
// order just queued, or the order of a purchase whose answer was lost.

import { byTestId, show } from './dom.js';
import { parseTime } from './time.js';
import { serverNow } from './clock.js';
import { api, isUnauthenticated } from './api.js';
import { backoff } from './poll.js';
import { isOnline } from './network.js';
import { loggedIn, sessionExpired } from './session.js';
import { LIVE_STATUSES } from './status.js';
import { orderController } from './order.js';
import { t } from './i18n.js';

// After a lost answer the orders are looked at this many times, this far apart.
const LOST_CHECKS = 10;
const LOST_CHECK_MS = 3000;

// initOrderBox returns holdings(), add(order), load(), tick(), sessionChanged(), and what the
// purchase tells it: expectQueued(orderId), lookForLost(itemId, sentAt), forgetLost().
export function initOrderBox(page) {
  var say = page.say;
  var orderBox = byTestId('sale-orders', page.section);
  var orderList = byTestId('sale-order-list', page.section);
  var orderTemplate = byTestId('sale-order-template', page.section);
  var box = {
    entries: {}, // order id -> { id, li, ctl, status, itemId, itemName, createdAt }
    gen: 0, // bumped when the list is thrown away (logout)
    signedIn: null,
    retry: null, // the timer of the next try after a failed load
    failures: 0 // failed loads in a row
  };
  var msg = {
    // queuedFor is the order the "…the order is queued." message is about; it gives way
    // when that order is no longer queued.
    queuedFor: null,
    // lostFor is the item of a purchase whose answer was lost, sent at lostSince (the shop's
    // clock): the box looks for its order a few times (lostChecks), and the message says so
    // when it turns up.
    lostFor: null,
    lostSince: 0,
    lostChecks: 0,
    lostTimer: null
  };

  function orderEntries() {
    return Object.keys(box.entries).map(function (id) {
      return box.entries[id];
    }).sort(function (a, b) {
      return b.createdAt - a.createdAt;
    });
  }

  // holdings says which items the shopper holds a live order for, and one such order.
  function holdings() {
    var byItem = {};
    var any = null;
    if (!loggedIn()) {
      return { byItem: byItem, any: any };
    }
    orderEntries().forEach(function (e) {
      if (LIVE_STATUSES[e.status] && e.itemId) {
        if (byItem[e.itemId] !== 'PAID') {
          byItem[e.itemId] = e.status;
        }
        if (any === null || e.status === 'PAID') {
          any = e;
        }
      }
    });
    return { byItem: byItem, any: any };
  }

  function layoutOrders() {
    var list = orderEntries();
    var current = Array.prototype.slice.call(orderList.children);
    var same = current.length === list.length && list.every(function (e, i) {
      return current[i] === e.li;
    });
    if (!same) {
      list.forEach(function (e) {
        orderList.appendChild(e.li);
      });
    }
    show(orderBox, list.length > 0);
  }

  function dropOrder(id) {
    var e = box.entries[id];
    if (!e) {
      return;
    }
    e.ctl.stop();
    if (e.li.parentNode) {
      e.li.parentNode.removeChild(e.li);
    }
    delete box.entries[id];
    layoutOrders();
    page.render();
  }

  function itemName(e, fallback) {
    return e.itemName || page.itemNames[e.itemId] || fallback;
  }

  function orderStatusChanged(e, status, d) {
    e.status = status;
    if (d && d.itemName) {
      e.itemName = d.itemName;
    }
    if (msg.queuedFor === e.id && status !== 'QUEUED') {
      msg.queuedFor = null;
      if (status === 'PENDING') {
        say(t('Your order of {name} is confirmed: pay before the deadline below, or the unit goes back on sale.', { name: itemName(e, t('your item')) }), 'ok');
      } else if (status === 'FAILED') {
        say(t('Your order of {name} could not be completed; nothing was charged.', { name: itemName(e, t('your item')) }), 'error');
      }
    }
    page.render();
  }

  // foundLost: a live order of the item, reserved since the lost purchase was sent (a few
  // seconds of slack for the clocks), is that purchase's, which went through after all.
  function foundLost(e, status) {
    if (msg.lostFor !== null && msg.lostFor === e.itemId && LIVE_STATUSES[status] && e.createdAt >= msg.lostSince - 5000) {
      msg.lostFor = null;
      msg.queuedFor = status === 'QUEUED' ? e.id : msg.queuedFor;
      say(t('Your purchase of {name} went through after all: the order is below.', { name: itemName(e, t('the item')) }), 'ok');
    }
  }

  function newEntry(o) {
    var id = String(o.orderId);
    var li = orderTemplate.content.cloneNode(true).querySelector('[data-testid="order"]');
    var e = {
      id: id,
      li: li,
      status: null,
      itemId: o.itemId !== undefined && o.itemId !== null ? String(o.itemId) : '',
      itemName: typeof o.itemName === 'string' ? o.itemName : '',
      createdAt: parseTime(o.createdAt)
    };
    if (isNaN(e.createdAt)) {
      e.createdAt = serverNow();
    }
    e.ctl = orderController(li, say, {
      words: true,
      onStatus: function (oid, status, d) {
        orderStatusChanged(e, status, d);
      },
      onMissing: function () {
        dropOrder(id);
      }
    });
    return e;
  }

  // addOrder shows an order (from the list, or just bought) and follows its status.
  function addOrder(o) {
    if (!orderList || !orderTemplate) {
      return null;
    }
    var e = box.entries[String(o.orderId)];
    if (e) {
      // Listed before the purchase's answer was found lost (my orders lists a QUEUED order at
      // once): it may be that purchase's all the same.
      foundLost(e, o.status);
      return e;
    }
    e = newEntry(o);
    box.entries[e.id] = e;
    layoutOrders();
    foundLost(e, o.status);
    e.ctl.follow(o);
    return e;
  }

  function clearOrders() {
    box.gen++;
    window.clearTimeout(box.retry);
    Object.keys(box.entries).forEach(function (id) {
      box.entries[id].ctl.stop();
    });
    box.entries = {};
    msg.queuedFor = null;
    msg.lostFor = null;
    if (orderList) {
      orderList.replaceChildren();
    }
    show(orderBox, false);
  }

  // loadOrders fetches the shopper's orders in this sale and shows those not shown yet (the
  // shown ones follow their own status).
  async function loadOrders() {
    if (!loggedIn() || !orderList || !orderTemplate) {
      return;
    }
    window.clearTimeout(box.retry);
    if (!isOnline()) {
      return; // loaded when the network is back
    }
    var g = box.gen;
    var r = await api('GET', '/api/flash-sales/orders?saleId=' + encodeURIComponent(page.saleId), undefined, undefined, 'no-store');
    if (g !== box.gen || !loggedIn()) {
      return;
    }
    if (r.ok && r.data && Array.isArray(r.data.orders)) {
      r.data.orders.forEach(function (o) {
        if (o && o.orderId !== undefined && o.orderId !== null &&
          (o.saleId === undefined || o.saleId === null || String(o.saleId) === page.saleId)) {
          addOrder(o);
        }
      });
      box.failures = 0;
      page.render();
      return;
    }
    if (isUnauthenticated(r)) {
      sessionExpired();
      return;
    }
    box.retry = window.setTimeout(loadOrders, Math.max(backoff(box.failures++, 2000, 30000), (r.retryAfter || 0) * 1000));
  }

  // lookForLost loads the shopper's orders in the sale until the lost purchase's order turns up
  // (addOrder), ten times at most, a few seconds apart: an order still being recorded is not
  // listed yet.
  async function lookForLost() {
    await loadOrders();
    if (msg.lostFor !== null && ++msg.lostChecks < LOST_CHECKS) {
      msg.lostTimer = window.setTimeout(lookForLost, LOST_CHECK_MS);
    }
  }

  // Back to the tab, or to the page from the browser's cache: orders may have changed
  // elsewhere (another tab, "My orders").
  document.addEventListener('visibilitychange', function () {
    if (!document.hidden) {
      loadOrders();
    }
  });
  window.addEventListener('pageshow', function (ev) {
    if (ev.persisted) {
      loadOrders();
    }
  });

  return {
    holdings: holdings,
    add: addOrder,
    load: loadOrders,
    tick: function () {
      Object.keys(box.entries).forEach(function (id) {
        box.entries[id].ctl.tick();
      });
    },
    // sessionChanged: the box follows who is signed in.
    sessionChanged: function () {
      var on = loggedIn();
      if (on !== box.signedIn) {
        box.signedIn = on;
        clearOrders();
        if (on) {
          loadOrders();
        }
      }
      page.render();
    },
    expectQueued: function (orderId) {
      msg.queuedFor = orderId;
    },
    lookForLost: function (itemId, sentAt) {
      msg.lostFor = itemId;
      msg.lostSince = sentAt;
      msg.lostChecks = 0;
      window.clearTimeout(msg.lostTimer);
      lookForLost();
    },
    forgetLost: function () {
      msg.lostFor = null;
    }
  };
}
