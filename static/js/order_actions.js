// Paying and cancelling one order (order.js's panel): Pay opens the payment provider's checkout
// and goes there (the provider's page returns to the order page); Cancel after a confirm step,
// after which the panel fetches the order again, so that it says what the server holds; an answer
// lost on the way is said as lost, and the status tells what happened.

import { enc } from './dom.js';
import { api, errorText, isUnauthenticated } from './api.js';
import { sessionExpired } from './session.js';
import { t } from './i18n.js';

// checkedOut takes in the answer to opening the provider's checkout: the browser goes there (the
// provider sends it back to the order page, which polls until the provider's confirmation lands).
function checkedOut(O, r) {
  var say = O.say;
  if (r.ok && r.data && typeof r.data.checkoutUrl === 'string' && r.data.checkoutUrl) {
    say(t('Taking you to the payment page…'), 'info');
    window.location.assign(r.data.checkoutUrl);
    return;
  }
  if (r.network) {
    say(t('The shop could not be reached to start the payment: nothing was charged. Try again.'), 'error');
    O.renderStatus();
    O.refresh();
    return;
  }
  if (r.code === 'EXPIRED') {
    // The server expired the order there and then: no Pay button, and ask what it holds. The
    // sentence is said in the status it is about (order.js's followStatus keeps it).
    O.status = 'EXPIRED';
    say(errorText(r), 'error');
    O.renderStatus();
    O.refresh();
    return;
  }
  say(errorText(r), 'error');
  O.keepSaid(); // the shop's refusal says why the payment did not open, whatever the order does next
  O.renderStatus();
  if (isUnauthenticated(r)) {
    sessionExpired();
    return;
  }
  O.refresh();
}

// pay opens the order's checkout (one per order however often it is pressed) and goes there.
async function pay(O) {
  if (O.paying || O.cancelling || !O.orderId) {
    return;
  }
  O.paying = true;
  O.epoch++;
  O.renderStatus();
  O.say(t('Opening the payment page…'), 'info');
  var r = await api('POST', '/api/flash-sales/orders/' + enc(O.orderId) + '/checkout', {});
  O.paying = !!(r.ok && r.data && r.data.checkoutUrl); // leaving: the button stays busy
  O.epoch++;
  checkedOut(O, r);
}

// cancelled takes in the answer to a cancellation.
function cancelled(O, r) {
  if (r.ok) {
    O.status = r.data && typeof r.data.status === 'string' ? r.data.status : 'CANCELLED';
    O.renderStatus();
    O.say(t('Order cancelled. Its unit went back on sale; nothing was charged.'), 'ok');
    if (O.hooks.onCancelled) {
      O.hooks.onCancelled(O.orderId);
    }
    O.refresh();
    return;
  }
  if (r.network) {
    O.say(t('The shop\u2019s answer to the cancellation was lost (the network dropped): the status below says whether the order was cancelled once the shop answers.'), 'error');
  } else {
    O.say(errorText(r), 'error');
    O.keepSaid(); // the shop's refusal says why, whatever the order does next
  }
  O.renderStatus();
  if (isUnauthenticated(r)) {
    sessionExpired();
    return;
  }
  O.refresh();
}

async function cancel(O) {
  if (O.paying || O.cancelling || !O.orderId) {
    return;
  }
  O.cancelling = true;
  O.epoch++;
  O.renderStatus();
  O.say(t('Cancelling the order…'), 'info');
  var r = await api('POST', '/api/flash-sales/orders/' + enc(O.orderId) + '/cancel', {});
  O.cancelling = false;
  O.confirming = false;
  O.epoch++;
  cancelled(O, r);
}

// bindActions wires the panel's Pay, Cancel and the cancel's confirm step. O is the panel's
// state (order.js), with its renderStatus() and refresh().
export function bindActions(O) {
  var el = O.el;
  if (el.payBtn) {
    el.payBtn.addEventListener('click', function () {
      pay(O);
    });
  }
  if (el.cancelBtn) {
    el.cancelBtn.addEventListener('click', function () {
      if (O.paying || O.cancelling || O.status !== 'PENDING') {
        return;
      }
      O.confirming = true;
      O.renderStatus();
      if (el.confirmNo) {
        el.confirmNo.focus();
      }
    });
  }
  if (el.confirmNo) {
    el.confirmNo.addEventListener('click', function () {
      O.confirming = false;
      O.renderStatus();
      if (el.cancelBtn) {
        el.cancelBtn.focus();
      }
    });
  }
  if (el.confirmYes) {
    el.confirmYes.addEventListener('click', function () {
      cancel(O);
    });
  }
}
