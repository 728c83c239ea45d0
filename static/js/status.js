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
