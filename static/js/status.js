// The order statuses in words.

import { t } from './i18n.js';

export const FINAL_STATUSES = { PAID: true, EXPIRED: true, CANCELLED: true, FAILED: true };

export const ORDER_NOTES = {
  QUEUED: t('Your unit is reserved; the order is being recorded. This takes a moment.'),
  PENDING: t('Reserved for you. Pay before the deadline or the unit goes back on sale.'),
  PAID: t('Paid. Thank you for your order!'),
  EXPIRED: t('The payment window closed; the unit went back on sale.'),
  CANCELLED: t('This order was cancelled; its unit went back on sale.'),
  FAILED: t('The order could not be completed; nothing was charged.')
};

// STATUS_WORDS names an order status for people (the list of orders).
export const STATUS_WORDS = {
  QUEUED: t('Confirming'),
  PENDING: t('Awaiting payment'),
  PAID: t('Paid'),
  EXPIRED: t('Expired'),
  CANCELLED: t('Cancelled'),
  FAILED: t('Failed')
};

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
