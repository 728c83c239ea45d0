// The order statuses in words.

import { t, lang } from './i18n.js';

export const FINAL_STATUSES = { PAID: true, EXPIRED: true, CANCELLED: true, FAILED: true, NOT_SELECTED: true };

// NOT_DRAWN is the server's sentence for an entry of a fair start's draw that was not drawn
// (shop.NotSelectedMessage), in the page's language.
const NOT_DRAWN = t('This sale\u2019s first moments were a draw: every purchase in them had the same chance, whatever its speed. You were not drawn this time; nothing was charged.');

export const ORDER_NOTES = {
  QUEUED: t('Your unit is reserved; the order is being recorded. This takes a moment.'),
  PENDING: t('Reserved for you. Pay before the deadline or the unit goes back on sale.'),
  PAID: t('Paid. Thank you for your order!'),
  EXPIRED: t('The payment window closed; the unit went back on sale.'),
  CANCELLED: t('This order was cancelled; its unit went back on sale.'),
  FAILED: t('The order could not be completed; nothing was charged.'),
  NOT_SELECTED: NOT_DRAWN
};

// STATUS_WORDS names an order status for people (the list of orders).
export const STATUS_WORDS = {
  QUEUED: t('Confirming'),
  PENDING: t('Awaiting payment'),
  PAID: t('Paid'),
  EXPIRED: t('Expired'),
  CANCELLED: t('Cancelled'),
  FAILED: t('Failed'),
  NOT_SELECTED: t('Not drawn'),
  ENTERED: t('In the draw') // an entry waiting for the draw, as the merchant's orders list it
};

// statusWord names an order's status; an entry of a fair start's draw (draw) that waits for it
// is "In the draw", not "Confirming".
export function statusWord(status, draw) {
  if (status === 'QUEUED' && draw) {
    return STATUS_WORDS.ENTERED;
  }
  return STATUS_WORDS[status] || status;
}

// drawNote says what an order of a fair start's draw means, or '' for any other: waiting for the
// draw, drawn (then like any order), or not drawn, in the answer's own words (message) on an
// English page.
export function drawNote(status, draw, message) {
  if (status === 'NOT_SELECTED') {
    return lang === 'en' && typeof message === 'string' && message ? message : NOT_DRAWN;
  }
  if (!draw) {
    return '';
  }
  if (status === 'QUEUED') {
    return t('You are in the draw: the result comes as soon as the sale\u2019s first seconds close. Nothing is charged unless you are drawn.');
  }
  if (status === 'PENDING') {
    return t('You were drawn! The unit is reserved for you: pay before the deadline or it goes back on sale.');
  }
  return '';
}

// refundNote says what became of a payment that came after its order had ended (paymentStatus
// refunded): being refunded, or refunded once the provider accepted the refund (refunded).
export function refundNote(refunded) {
  return refunded
    ? t('Your payment arrived after this order had ended (its payment window closed, or it was cancelled) and its unit had gone back on sale, so it has been refunded in full.')
    : t('Your payment arrived after this order had ended (its payment window closed, or it was cancelled) and its unit had gone back on sale; it is being refunded in full.');
}

// refundUnderWay reports whether an order's late payment (paymentStatus, refunded of its answer)
// is still being refunded: its status is final, what became of the payment is not yet.
export function refundUnderWay(paymentStatus, refunded) {
  return paymentStatus === 'refunded' && refunded !== true;
}

// LIVE_STATUSES are the orders that hold a unit: they count against the purchase limit.
export const LIVE_STATUSES = { QUEUED: true, PENDING: true, PAID: true };

// queueOf reads a QUEUED order's place in the queue from its status answer: {position (0: next),
// waitSeconds}, or null when the answer has none.
export function queueOf(data) {
  if (!data || data.status !== 'QUEUED') {
    return null;
  }
  var pos = Number(data.queuePosition);
  var wait = Number(data.estimatedWaitSeconds);
  if (data.queuePosition === undefined || data.queuePosition === null || !isFinite(pos) || pos < 0) {
    return null;
  }
  return { position: Math.floor(pos), waitSeconds: isFinite(wait) && wait >= 0 ? Math.ceil(wait) : null };
}

// queueText says where a QUEUED order stands: "You are number 3 in line, about 2 seconds."
// (position 0 is the next order to be recorded, so it is number 1).
export function queueText(position, waitSeconds) {
  if (waitSeconds === null || waitSeconds === undefined) {
    return t('You are number {n} in line.', { n: position + 1 });
  }
  return t('You are number {n} in line, about {wait}.', { n: position + 1, wait: waitText(waitSeconds) });
}

function waitText(s) {
  if (s <= 1) {
    return t('1 second');
  }
  if (s < 90) {
    return t('{n} seconds', { n: s });
  }
  return t('{n} minutes', { n: Math.round(s / 60) });
}
