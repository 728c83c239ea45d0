// One order: the panel that shows it, polls it and pays or cancels it (on the sale page's order
// box and on the order page), and the order page itself.

import { byTestId, setText, show, enc, messenger } from './dom.js';
import { parseTime, formatClock, formatDeadline, formatDuration } from './time.js';
import { serverNow, onClock, startClock } from './clock.js';
import { formatMoney } from './money.js';
import { api, errorText, isUnauthenticated } from './api.js';
import { makePoller, after, failed } from './poll.js';
import { isOnline, onNetwork } from './network.js';
import { loggedIn, sessionExpired, onSession, initSession, loginPrompt } from './session.js';
import { FINAL_STATUSES, ORDER_NOTES, STATUS_WORDS, queueOf, queueText } from './status.js';
import { t, href, lang } from './i18n.js';

// orderController shows one order in an order panel, polls it every second until it reaches
// a final state (while it is QUEUED no sooner than the server's Retry-After, showing its place in
// the queue), and pays or cancels it while it is pending. After every action it fetches the
// order again, so that what the panel says is what the server holds. While the shop cannot be
// reached the note says so and since when the status is known, and the buttons wait while the
// browser is offline.
export function orderController(panel, say, hooks) {
  hooks = hooks || {};
  var statusEl = byTestId('order-status', panel);
  var payByRow = byTestId('pay-by-row', panel);
  var payByEl = byTestId('pay-by', panel);
  var payLeftEl = byTestId('pay-left', panel);
  var payBtn = byTestId('pay-button', panel);
  var cancelBtn = byTestId('cancel-button', panel);
  var actions = byTestId('order-actions', panel);
  var confirmBox = byTestId('cancel-confirm', panel);
  var confirmYes = byTestId('cancel-confirm-button', panel);
  var confirmNo = byTestId('cancel-keep-button', panel);
  var note = byTestId('order-note', panel);
  var queueEl = byTestId('order-queue', panel);
  var link = byTestId('order-link', panel);
  var idEl = byTestId('order-id', panel);
  var itemRow = byTestId('order-item-row', panel);
  var itemEl = byTestId('order-item', panel);
  var priceRow = byTestId('order-price-row', panel);
  var priceEl = byTestId('order-price', panel);
  var saleRow = byTestId('order-sale-row', panel);
  var saleEl = byTestId('order-sale', panel);
  var orderId = null;
  var status = null;
  var payBy = NaN;
  var detail = null; // item, price and sale, once the API has told them
  var queue = null; // {position, waitSeconds} while QUEUED, from the last answer
  var knownAt = 0; // Date.now() of the last answer about the order
  var stale = ''; // the note while the status cannot be refreshed ('' once it is)
  var paying = false;
  var cancelling = false;
  var confirming = false;
  // epoch changes when an action starts and ends: a status fetched before is stale.
  var epoch = 0;
  var notified = null; // the status hooks.onStatus was last told

  function renderDetail() {
    var d = detail || {};
    setText(itemEl, d.itemName || '');
    show(itemRow, !!d.itemName);
    setText(priceEl, d.price || '');
    show(priceRow, !!d.price);
    setText(saleEl, d.saleName || '');
    if (saleEl) {
      if (d.saleId) {
        saleEl.setAttribute('href', href('/sales/' + enc(d.saleId)));
      } else {
        saleEl.removeAttribute('href');
      }
    }
    show(saleRow, !!d.saleName);
  }

  function renderStatus() {
    // The order page shows the status's code (PENDING) in English, its words in Chinese.
    var words = hooks.words || lang !== 'en';
    var s = status ? (words ? STATUS_WORDS[status] || status : status) : (hooks.words ? t('Checking…') : t('checking…'));
    setText(statusEl, s);
    if (statusEl) {
      statusEl.setAttribute('data-status', status || '');
    }
    setText(note, stale || (status ? ORDER_NOTES[status] || '' : ''));
    var queued = status === 'QUEUED' && queue !== null;
    setText(queueEl, queued ? queueText(queue.position, queue.waitSeconds) : '');
    show(queueEl, queued);
    var pending = status === 'PENDING';
    if (!pending) {
      confirming = false;
    }
    var busy = paying || cancelling || !isOnline();
    show(actions, pending && !confirming);
    show(payBtn, pending && !confirming);
    show(cancelBtn, pending && !confirming);
    show(confirmBox, pending && confirming);
    if (payBtn) {
      payBtn.disabled = busy;
      setText(payBtn, paying ? t('Paying…') : detail && detail.price ? t('Pay now · {price}', { price: detail.price }) : t('Pay now'));
    }
    if (cancelBtn) {
      cancelBtn.disabled = busy;
    }
    if (confirmYes) {
      confirmYes.disabled = busy;
      setText(confirmYes, cancelling ? t('Cancelling…') : t('Yes, cancel the order'));
    }
    if (confirmNo) {
      confirmNo.disabled = busy;
    }
    if (pending && !isNaN(payBy)) {
      var now = serverNow();
      setText(payByEl, t(hooks.words ? 'Pay by {time}' : 'pay by {time}', { time: formatDeadline(payBy, now) }));
      var left = payBy - now;
      setText(payLeftEl, left > 0 ? t('({d} left)', { d: formatDuration(left) }) : t('(time is up)'));
      show(payByRow, true);
    } else {
      show(payByRow, false);
    }
    if (hooks.onStatus && orderId && status !== notified) {
      notified = status;
      hooks.onStatus(orderId, status, detail);
    }
  }

  function learn(data) {
    status = typeof data.status === 'string' ? data.status : status;
    payBy = parseTime(data.payBy);
    queue = queueOf(data);
    if (typeof data.itemName === 'string' || data.priceCents !== undefined) {
      detail = {
        itemName: typeof data.itemName === 'string' ? data.itemName : '',
        price: formatMoney(data.priceCents, data.currency),
        saleName: typeof data.saleName === 'string' && data.saleName
          ? data.saleName
          : data.saleId !== undefined && data.saleId !== null && data.saleId !== '' ? t('Sale {id}', { id: data.saleId }) : '',
        saleId: data.saleId !== undefined && data.saleId !== null ? String(data.saleId) : ''
      };
    }
    renderDetail();
    renderStatus();
  }

  async function pollOnce() {
    if (!orderId) {
      return false;
    }
    var id = orderId;
    var asked = epoch;
    var r = await api('GET', '/api/flash-sales/orders/' + enc(id), undefined, undefined, 'no-store');
    if (id !== orderId) {
      return false;
    }
    if (asked !== epoch || paying || cancelling) {
      return true; // an action ran meanwhile: this answer may predate it, ask again
    }
    if (r.ok && r.data) {
      knownAt = Date.now();
      stale = isOnline() ? '' : offlineNote(); // an answer that came in as the network went
      learn(r.data);
      // A QUEUED answer says when to ask again (Retry-After): not sooner.
      return FINAL_STATUSES[status] ? false : after(r.retryAfter === null ? 0 : r.retryAfter * 1000);
    }
    if (r.status === 404) {
      status = null;
      detail = null;
      renderDetail();
      setText(statusEl, t('not found'));
      setText(note, t('This order does not exist, or it belongs to another account.'));
      show(actions, false);
      show(payBtn, false);
      show(cancelBtn, false);
      show(confirmBox, false);
      show(payByRow, false);
      if (hooks.onMissing) {
        hooks.onMissing(id);
      }
      return false;
    }
    if (isUnauthenticated(r)) {
      setText(note, t('Please log in first to see this order.'));
      show(actions, false);
      show(payBtn, false);
      show(cancelBtn, false);
      show(confirmBox, false);
      sessionExpired();
      return false;
    }
    stale = (r.network ? t('Could not reach the shop') : t('Could not refresh the status ({why})', { why: errorText(r) })) + staleSince() + t(' Trying again…');
    renderStatus();
    return failed(r.retryAfter === null ? 0 : r.retryAfter * 1000);
  }

  function offlineNote() {
    return t('You are offline') + staleSince();
  }

  // staleSince says how old the status shown is, when it is not fresh.
  function staleSince() {
    return status && knownAt ? t('; the status shown is from {time}.', { time: formatClock(knownAt) }) : t('.');
  }

  // Offline, the buttons wait and the note says why; back online, the poller asks at once.
  onNetwork(function (online) {
    if (!orderId) {
      return;
    }
    if (!online) {
      stale = offlineNote();
    } else if (stale) {
      stale = t('Back online; checking the status…');
    }
    renderStatus();
  });

  var poller = makePoller(pollOnce, 1000);

  // refresh fetches the order now, and keeps polling while it is not final.
  function refresh() {
    if (orderId) {
      poller.restart();
    }
  }

  if (payBtn) {
    payBtn.addEventListener('click', async function () {
      if (paying || cancelling || !orderId) {
        return;
      }
      paying = true;
      epoch++;
      renderStatus();
      say(t('Paying…'), 'info');
      var r = await api('POST', '/api/flash-sales/orders/' + enc(orderId) + '/pay', {});
      paying = false;
      epoch++;
      if (r.ok) {
        status = r.data && typeof r.data.status === 'string' ? r.data.status : 'PAID';
        renderStatus();
        say(t('Payment received: the order is paid.'), 'ok');
        refresh();
        return;
      }
      if (r.network) {
        // Sent, perhaps, but no answer came back: the status (asked again) tells what happened.
        say(t('The shop\u2019s answer to the payment was lost (the network dropped): it may or may not have gone through. The status below says which once the shop answers.'), 'error');
        renderStatus();
        refresh();
        return;
      }
      say(errorText(r), 'error');
      if (r.code === 'EXPIRED') {
        // The server expired the order there and then: no Pay button, and ask what it holds.
        status = 'EXPIRED';
        renderStatus();
        refresh();
        return;
      }
      if (isUnauthenticated(r)) {
        renderStatus();
        sessionExpired();
        return;
      }
      renderStatus();
      refresh();
    });
  }

  if (cancelBtn) {
    cancelBtn.addEventListener('click', function () {
      if (paying || cancelling || status !== 'PENDING') {
        return;
      }
      confirming = true;
      renderStatus();
      if (confirmNo) {
        confirmNo.focus();
      }
    });
  }

  if (confirmNo) {
    confirmNo.addEventListener('click', function () {
      confirming = false;
      renderStatus();
      if (cancelBtn) {
        cancelBtn.focus();
      }
    });
  }

  if (confirmYes) {
    confirmYes.addEventListener('click', async function () {
      if (paying || cancelling || !orderId) {
        return;
      }
      cancelling = true;
      epoch++;
      renderStatus();
      say(t('Cancelling the order…'), 'info');
      var r = await api('POST', '/api/flash-sales/orders/' + enc(orderId) + '/cancel', {});
      cancelling = false;
      confirming = false;
      epoch++;
      if (r.ok) {
        status = r.data && typeof r.data.status === 'string' ? r.data.status : 'CANCELLED';
        renderStatus();
        say(t('Order cancelled. Its unit went back on sale; nothing was charged.'), 'ok');
        if (hooks.onCancelled) {
          hooks.onCancelled(orderId);
        }
        refresh();
        return;
      }
      if (r.network) {
        say(t('The shop\u2019s answer to the cancellation was lost (the network dropped): the status below says whether the order was cancelled once the shop answers.'), 'error');
      } else {
        say(errorText(r), 'error');
      }
      renderStatus();
      if (isUnauthenticated(r)) {
        sessionExpired();
        return;
      }
      refresh();
    });
  }

  return {
    track: function (id, initialStatus) {
      var same = orderId === String(id);
      orderId = String(id);
      status = initialStatus || (same ? status : null);
      payBy = same ? payBy : NaN;
      detail = same ? detail : null;
      queue = same ? queue : null;
      knownAt = same ? knownAt : 0;
      stale = '';
      confirming = false;
      panel.setAttribute('data-order-id', orderId);
      setText(idEl, orderId);
      if (link) {
        link.setAttribute('href', href('/orders/' + enc(orderId)));
      }
      show(panel, true);
      renderDetail();
      renderStatus();
      poller.restart();
    },
    // follow shows an order already fetched (an entry of the orders list), and keeps polling
    // it while it is not final.
    follow: function (data) {
      orderId = String(data.orderId);
      panel.setAttribute('data-order-id', orderId);
      setText(idEl, orderId);
      if (link) {
        link.setAttribute('href', href('/orders/' + enc(orderId)));
      }
      show(panel, true);
      knownAt = Date.now();
      stale = '';
      learn(data);
      if (FINAL_STATUSES[status]) {
        poller.stop();
      } else if (!poller.isRunning()) {
        poller.start();
      }
    },
    stop: function () {
      poller.stop();
    },
    clear: function () {
      orderId = null;
      status = null;
      detail = null;
      queue = null;
      stale = '';
      confirming = false;
      poller.stop();
      show(panel, false);
    },
    tick: function () {
      if (orderId && status === 'PENDING') {
        renderStatus();
      }
    }
  };
}

export function initOrderPage(page) {
  var panel = byTestId('order', page);
  var say = messenger(byTestId('message', page));
  if (!panel) {
    return;
  }
  var id = panel.getAttribute('data-order-id');
  if (!id) {
    return;
  }
  var prompt = loginPrompt(page);
  var orders = orderController(panel, say, {});
  var tracking = false;

  // Logged out, the page shows the sentence and the login form, not a status it cannot know.
  function sessionUpdate() {
    var signedIn = loggedIn();
    prompt(signedIn);
    if (signedIn && !tracking) {
      tracking = true;
      orders.track(id, null);
    } else if (!signedIn) {
      tracking = false;
      orders.clear();
    }
  }

  onClock(function () {
    orders.tick();
  });
  startClock();
  window.setInterval(orders.tick, 1000);
  onSession(sessionUpdate);
  initSession(byTestId('session', page), say);
  sessionUpdate();
}
