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
import { FINAL_STATUSES, ORDER_NOTES, statusWord, drawNote, queueOf, queueText, refundNote, refundUnderWay } from './status.js';
import { t, href } from './i18n.js';
import { bindActions } from './order_actions.js';
import { bindVerify } from './order_verify.js';

// PARTS are the panel's elements, by their data-testid.
const PARTS = {
  statusEl: 'order-status', payByRow: 'pay-by-row', payByEl: 'pay-by', payLeftEl: 'pay-left', payBtn: 'pay-button',
  cancelBtn: 'cancel-button', actions: 'order-actions', confirmBox: 'cancel-confirm', confirmYes: 'cancel-confirm-button',
  confirmNo: 'cancel-keep-button', note: 'order-note', queueEl: 'order-queue', link: 'order-link', idEl: 'order-id',
  itemRow: 'order-item-row', itemEl: 'order-item', priceRow: 'order-price-row', priceEl: 'order-price',
  saleRow: 'order-sale-row', saleEl: 'order-sale'
};

function parts(panel) {
  var el = {};
  Object.keys(PARTS).forEach(function (k) {
    el[k] = byTestId(PARTS[k], panel);
  });
  return el;
}

// renderDetail writes the item, price and sale. Until the first answer says them, their rows
// keep their room (the order page draws them with their labels), so that the status and what
// follows do not move down when they come in; an order not found has none.
function renderDetail(O) {
  var el = O.el;
  var d = O.detail || {};
  var waiting = O.detail === null && !O.missing;
  setText(el.itemEl, d.itemName || '');
  show(el.itemRow, !!d.itemName || waiting);
  setText(el.priceEl, d.price || '');
  show(el.priceRow, !!d.price || waiting);
  setText(el.saleEl, d.saleName || '');
  if (el.saleEl) {
    if (d.saleId) {
      el.saleEl.setAttribute('href', href('/sales/' + enc(d.saleId)));
    } else {
      el.saleEl.removeAttribute('href');
    }
  }
  show(el.saleRow, !!d.saleName || waiting);
}

// renderButtons shows Pay and Cancel (or the cancel's confirm step) while the order is
// pending, waiting while an action runs or the browser is offline.
function renderButtons(O, pending) {
  var el = O.el;
  var busy = O.paying || O.cancelling || !isOnline();
  show(el.actions, pending && !O.confirming);
  show(el.payBtn, pending && !O.confirming);
  show(el.cancelBtn, pending && !O.confirming);
  show(el.confirmBox, pending && O.confirming);
  if (el.payBtn) {
    el.payBtn.disabled = busy;
    setText(el.payBtn, O.paying ? t('Paying…') : O.detail && O.detail.price ? t('Pay now · {price}', { price: O.detail.price }) : t('Pay now'));
  }
  if (el.cancelBtn) {
    el.cancelBtn.disabled = busy;
  }
  if (el.confirmYes) {
    el.confirmYes.disabled = busy;
    setText(el.confirmYes, O.cancelling ? t('Cancelling…') : t('Yes, cancel the order'));
  }
  if (el.confirmNo) {
    el.confirmNo.disabled = busy;
  }
}

// renderPayBy shows the payment deadline of a pending order and the time left.
function renderPayBy(O, pending) {
  var el = O.el;
  if (pending && !isNaN(O.payBy)) {
    var now = serverNow();
    setText(el.payByEl, t('Pay by {time}', { time: formatDeadline(O.payBy, now) }));
    var left = O.payBy - now;
    setText(el.payLeftEl, left > 0 ? t('({d} left)', { d: formatDuration(left) }) : t('(time is up)'));
    show(el.payByRow, true);
  } else {
    show(el.payByRow, false);
  }
}

// paymentNote says what became of the order's payment where its status alone does not: a
// payment sent from the provider's page and not confirmed yet, a checkout still open, or a payment
// that came after the order had ended and goes back.
function paymentNote(O) {
  if (O.payment === 'free') {
    return t('A free item: nothing to pay, the order is confirmed.');
  }
  if (O.payment === 'refunded') {
    return refundNote(O.refunded);
  }
  if (O.status !== 'PENDING') {
    return lateWait(O) ? t('If your payment went through after the order ended, it is refunded in full: this page says so within a few minutes.') : '';
  }
  if (O.gaveUp) {
    // Back by the provider's Cancel: its checkout stays open until it expires, but the shopper
    // just left it; "finish paying there" would send them back to where they gave up.
    return t('Payment not made: the order is still yours until its deadline.');
  }
  if (O.returned) {
    return t('Payment sent: waiting for the payment provider to confirm it. This page updates by itself.');
  }
  if (O.payment === 'awaiting') {
    return t('A payment page is open for this order: finish paying there, or press Pay to go back to it.');
  }
  return '';
}

// LATE_WAIT is how long a page back from the provider's after paying keeps asking about an order
// that ended meanwhile: the provider's confirmation of a last-second payment may still be on its
// way, and its refund with it.
const LATE_WAIT = 5 * 60 * 1000;

// lateWait reports whether the page waits for the word on a payment made on the provider's page
// for an order that ended (expired, cancelled) before the confirmation came.
function lateWait(O) {
  return O.returned && (O.status === 'EXPIRED' || O.status === 'CANCELLED') && O.payment === 'none' && Date.now() - O.openedAt < LATE_WAIT;
}

// settled reports whether nothing more can change about the order: a final status, no refund
// still on its way, and no confirmation awaited of a payment made at the last second.
function settled(O) {
  return !!FINAL_STATUSES[O.status] && !refundUnderWay(O.payment, O.refunded) && !lateWait(O);
}

// followStatus takes away the sentence the panel said about the order (an action's progress, its
// refusal, "try again") once the order has moved on from the status it was said in: paid in
// another tab, expired, cancelled. The status and its note say what holds now. A sentence said
// since by someone else (the session, the sale page) is left alone.
function followStatus(O) {
  var said = O.said;
  if (!said || said.status === O.status || !O.status) {
    return;
  }
  O.said = null;
  if (O.shows(said.text)) {
    O.sayRaw('', 'info');
  }
}

function renderStatus(O) {
  var el = O.el;
  var status = O.status;
  followStatus(O);
  var s = status ? statusWord(status, O.draw) : t('Checking…');
  setText(el.statusEl, s);
  if (el.statusEl) {
    el.statusEl.setAttribute('data-status', status || '');
    el.statusEl.setAttribute('data-draw', O.draw ? 'true' : 'false');
  }
  setText(el.note, O.stale || paymentNote(O) || drawNote(status, O.draw, O.message) || (status ? ORDER_NOTES[status] || '' : ''));
  var queued = status === 'QUEUED' && O.queue !== null;
  setText(el.queueEl, queued ? queueText(O.queue.position, O.queue.waitSeconds) : '');
  show(el.queueEl, queued);
  var pending = status === 'PENDING';
  if (!pending) {
    O.confirming = false;
  }
  renderButtons(O, pending);
  renderPayBy(O, pending);
  O.verify({ draw: O.draw, orderId: O.orderId, saleId: O.detail ? O.detail.saleId : '', itemId: O.itemId, status: status });
  if (O.hooks.onStatus && O.orderId && status !== O.notified) {
    O.notified = status;
    O.hooks.onStatus(O.orderId, status, O.detail, { draw: O.draw, message: O.message });
  }
}

function learn(O, data) {
  O.status = typeof data.status === 'string' ? data.status : O.status;
  // an entry of a fair start's draw stays one (a later answer may leave the flag out)
  O.draw = O.draw || data.draw === true;
  O.message = typeof data.message === 'string' ? data.message : '';
  O.payBy = parseTime(data.payBy);
  O.queue = queueOf(data);
  O.payment = typeof data.paymentStatus === 'string' ? data.paymentStatus : 'none';
  O.refunded = data.refunded === true;
  if (typeof data.itemName === 'string' || data.priceCents !== undefined) {
    O.detail = {
      itemName: typeof data.itemName === 'string' ? data.itemName : '',
      price: formatMoney(data.priceCents, data.currency),
      saleName: typeof data.saleName === 'string' && data.saleName
        ? data.saleName
        : data.saleId !== undefined && data.saleId !== null && data.saleId !== '' ? t('Sale {id}', { id: data.saleId }) : '',
      saleId: data.saleId !== undefined && data.saleId !== null ? String(data.saleId) : ''
    };
  }
  if (data.itemId !== undefined && data.itemId !== null) {
    O.itemId = String(data.itemId);
  }
  renderDetail(O);
  renderStatus(O);
}

// hideActions takes the order's buttons away: the panel cannot act on it.
function hideActions(O) {
  show(O.el.actions, false);
  show(O.el.payBtn, false);
  show(O.el.cancelBtn, false);
  show(O.el.confirmBox, false);
}

function notFound(O, id) {
  O.status = null;
  O.detail = null;
  O.missing = true;
  renderDetail(O);
  setText(O.el.statusEl, t('not found'));
  setText(O.el.note, t('This order does not exist, or it belongs to another account.'));
  hideActions(O);
  show(O.el.payByRow, false);
  if (O.hooks.onMissing) {
    O.hooks.onMissing(id);
  }
}

// staleSince says how old the status shown is, when it is not fresh.
function staleSince(O) {
  return O.status && O.knownAt ? t('; the status shown is from {time}.', { time: formatClock(O.knownAt) }) : t('.');
}

function offlineNote(O) {
  return t('You are offline') + staleSince(O);
}

async function pollOnce(O) {
  if (!O.orderId) {
    return false;
  }
  var id = O.orderId;
  var asked = O.epoch;
  var r = await api('GET', '/api/flash-sales/orders/' + enc(id), undefined, undefined, 'no-store');
  if (id !== O.orderId) {
    return false;
  }
  if (asked !== O.epoch || O.paying || O.cancelling) {
    return true; // an action ran meanwhile: this answer may predate it, ask again
  }
  if (r.ok && r.data) {
    O.knownAt = Date.now();
    O.stale = isOnline() ? '' : offlineNote(O); // an answer that came in as the network went
    learn(O, r.data);
    // A QUEUED answer says when to ask again (Retry-After): not sooner.
    return settled(O) ? false : after(r.retryAfter === null ? 0 : r.retryAfter * 1000);
  }
  if (r.status === 404) {
    notFound(O, id);
    return false;
  }
  if (isUnauthenticated(r)) {
    setText(O.el.note, t('Please log in first to see this order.'));
    hideActions(O);
    sessionExpired();
    return false;
  }
  O.stale = (r.network ? t('Could not reach the shop') : t('Could not refresh the status ({why})', { why: errorText(r) })) + staleSince(O) + t(' Trying again…');
  renderStatus(O);
  return failed(r.retryAfter === null ? 0 : r.retryAfter * 1000);
}

// showId shows the panel for the order O.orderId, with its id and link.
function showId(O) {
  O.panel.setAttribute('data-order-id', O.orderId);
  setText(O.el.idEl, O.orderId);
  if (O.el.link) {
    O.el.link.setAttribute('href', href('/orders/' + enc(O.orderId)));
  }
  show(O.panel, true);
}

function track(O, id, initialStatus) {
  var same = O.orderId === String(id);
  O.orderId = String(id);
  O.missing = same && O.missing;
  O.status = initialStatus || (same ? O.status : null);
  O.payBy = same ? O.payBy : NaN;
  O.detail = same ? O.detail : null;
  O.queue = same ? O.queue : null;
  O.draw = same && O.draw;
  O.knownAt = same ? O.knownAt : 0;
  O.stale = '';
  O.confirming = false;
  showId(O);
  renderDetail(O);
  renderStatus(O);
  O.poller.restart();
}

// follow shows an order already fetched (an entry of the orders list), and keeps polling it
// while it is not final.
function follow(O, data) {
  O.orderId = String(data.orderId);
  showId(O);
  O.knownAt = Date.now();
  O.stale = '';
  learn(O, data);
  if (settled(O)) {
    O.poller.stop();
  } else if (!O.poller.isRunning()) {
    O.poller.start();
  }
}

function clear(O) {
  O.orderId = null;
  O.status = null;
  O.detail = null;
  O.queue = null;
  O.draw = false;
  O.stale = '';
  O.confirming = false;
  O.poller.stop();
  show(O.panel, false);
}

// controllerApi is what a page asks of an order's panel: track(id, status) (fetch and follow
// it), follow(order) (an order already fetched), stop(), clear() (nobody is signed in) and tick()
// (the time left to pay).
function controllerApi(O) {
  return {
    track: function (id, initialStatus) {
      track(O, id, initialStatus);
    },
    follow: function (data) {
      follow(O, data);
    },
    stop: function () {
      O.poller.stop();
    },
    clear: function () {
      clear(O);
    },
    tick: function () {
      if (O.orderId && O.status === 'PENDING') {
        renderStatus(O);
      }
    }
  };
}

// orderController shows one order in an order panel, polls it every second until it reaches
// a final state (while it is QUEUED no sooner than the server's Retry-After, showing its place in
// the queue), and pays or cancels it while it is pending (order_actions.js). After every action
// it fetches the order again, so that what the panel says is what the server holds. While the
// shop cannot be reached the note says so and since when the status is known, and the buttons
// wait while the browser is offline.
export function orderController(panel, say, hooks) {
  var O = {
    panel: panel,
    sayRaw: say,
    shows: say.shows || function () {
      return false;
    },
    said: null, // {text, status}: the panel's last sentence and the status it was said in
    hooks: hooks || {},
    el: parts(panel),
    orderId: null,
    status: null,
    payBy: NaN,
    detail: null, // item, price and sale, once the API has told them
    missing: false, // the API said the order does not exist (or is another's)
    queue: null, // {position, waitSeconds} while QUEUED, from the last answer
    draw: false, // an entry of the sale's fair-start draw (the answers' draw: true)
    message: '', // the answer's sentence for the shopper, where the status alone does not tell
    payment: 'none', // paymentStatus: none, awaiting, paid, refunded, free
    refunded: false, // the refund of a payment that came too late was made
    returned: !!(hooks && hooks.returned), // back from the provider's page after paying
    openedAt: Date.now(),
    gaveUp: !!(hooks && hooks.gaveUp), // back from the provider's page without paying
    knownAt: 0, // Date.now() of the last answer about the order
    stale: '', // the note while the status cannot be refreshed ('' once it is)
    paying: false,
    cancelling: false,
    confirming: false,
    epoch: 0, // changes when an action starts and ends: a status fetched before is stale
    notified: null, // the status hooks.onStatus was last told
    itemId: '', // the order's item, once the API has told it
    verify: bindVerify(panel) // the "Verify the draw" box of a decided entry
  };
  // say writes a sentence about the order in the page's message area, and remembers in which
  // status it was said (followStatus).
  O.say = function (text, kind) {
    say(text, kind);
    O.said = text ? { text: text, status: O.status } : null;
  };
  // keepSaid: the last sentence stays when the order moves on (a refusal that says why).
  O.keepSaid = function () {
    O.said = null;
  };
  O.renderStatus = function () {
    renderStatus(O);
  };
  // refresh fetches the order now, and keeps polling while it is not final.
  O.refresh = function () {
    if (O.orderId) {
      O.poller.restart();
    }
  };
  // Offline, the buttons wait and the note says why; back online, the poller asks at once.
  onNetwork(function (online) {
    if (!O.orderId) {
      return;
    }
    if (!online) {
      O.stale = offlineNote(O);
    } else if (O.stale) {
      O.stale = t('Back online; checking the status…');
    }
    renderStatus(O);
  });
  O.poller = makePoller(function () {
    return pollOnce(O);
  }, 1000);
  bindActions(O);
  return controllerApi(O);
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
  // Back from the payment provider's page: ?payment=done after paying, cancelled after giving up.
  var payment = new URLSearchParams(window.location.search).get('payment');
  var orders = orderController(panel, say, { returned: payment === 'done', gaveUp: payment === 'cancelled' });
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
