// The order statuses in words.

export const FINAL_STATUSES = { PAID: true, EXPIRED: true, CANCELLED: true, FAILED: true };

export const ORDER_NOTES = {
  QUEUED: 'Your unit is reserved; the order is being recorded. This takes a moment.',
  PENDING: 'Reserved for you. Pay before the deadline or the unit goes back on sale.',
  PAID: 'Paid. Thank you for your order!',
  EXPIRED: 'The payment window closed; the unit went back on sale.',
  CANCELLED: 'This order was cancelled; its unit went back on sale.',
  FAILED: 'The order could not be completed; nothing was charged.'
};

// STATUS_WORDS names an order status for people (the list of orders).
export const STATUS_WORDS = {
  QUEUED: 'Confirming',
  PENDING: 'Awaiting payment',
  PAID: 'Paid',
  EXPIRED: 'Expired',
  CANCELLED: 'Cancelled',
  FAILED: 'Failed'
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
  var text = 'You are number ' + (position + 1) + ' in line';
  if (waitSeconds === null || waitSeconds === undefined) {
    return text + '.';
  }
  return text + ', about ' + waitText(waitSeconds) + '.';
}

function waitText(s) {
  if (s <= 1) {
    return '1 second';
  }
  if (s < 90) {
    return s + ' seconds';
  }
  return Math.round(s / 60) + ' minutes';
}
