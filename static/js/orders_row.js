// One row of the "My orders" page (orders.js): an order's item, status, price, sale, deadline,
// note, when it was ordered and its link, written into a copy of the page's row template.

import { setText, show, enc } from './dom.js';
import { parseTime, formatDeadline, formatDuration, timeElement } from './time.js';
import { serverNow } from './clock.js';
import { formatMoney } from './money.js';
import { statusWord, drawNote, queueOf, queueText, refundNote } from './status.js';
import { t, href, lang } from './i18n.js';

function part(li, id) {
  return li.querySelector('[data-testid="' + id + '"]');
}

// rowDeadline shows when a pending order must be paid, and the time left.
function rowDeadline(li, o, st) {
  var deadline = parseTime(o.payBy);
  var pending = st === 'PENDING' && !isNaN(deadline);
  show(part(li, 'order-row-deadline'), pending);
  if (pending) {
    var now = serverNow();
    var left = deadline - now;
    setText(part(li, 'order-row-pay-by'), t('Pay by {time}', { time: formatDeadline(deadline, now) }));
    setText(part(li, 'order-row-pay-left'), left > 0 ? t('({d} left)', { d: formatDuration(left) }) : t('(time is up)'));
  }
}

// rowNote says what the status means, and a QUEUED order's place in the queue.
function rowNote(li, o, st) {
  var notes = {
    QUEUED: t('Your unit is reserved; the order is being recorded.'),
    EXPIRED: t('Not paid in time; the unit went back on sale.'),
    CANCELLED: t('Cancelled; the unit went back on sale.'),
    FAILED: t('Could not be completed; nothing was charged.')
  };
  var draw = o.draw === true;
  if (draw && (st === 'QUEUED' || st === 'NOT_SELECTED')) {
    // an entry of a fair start's draw: waiting for it, or not drawn (calmly, in the answer's words)
    setText(part(li, 'order-row-note'), drawNote(st, draw, o.message));
    return;
  }
  if (st === 'NOT_SELECTED') {
    setText(part(li, 'order-row-note'), drawNote(st, true, o.message));
    return;
  }
  if (o.paymentStatus === 'refunded') {
    // paid after it ended: not "not paid in time", but what became of the payment
    setText(part(li, 'order-row-note'), refundNote(o.refunded === true));
    return;
  }
  // A QUEUED order fetched on its own carries its place in the queue.
  var queue = queueOf(o);
  // Two sentences: a space between them in English, none after Chinese's full stop.
  setText(part(li, 'order-row-note'), (draw && st === 'PENDING' ? t('Drawn in the sale\u2019s fair start.') + (lang === 'zh' ? '' : ' ') : '') +
    (notes[st] || '') + (queue ? (lang === 'zh' ? '' : ' ') + queueText(queue.position, queue.waitSeconds) : ''));
}

// rowCreated writes "Ordered {time}": the words around the <time> element, in the page's order.
function rowCreated(li, o) {
  var created = part(li, 'order-row-created');
  var at = parseTime(o.createdAt);
  created.replaceChildren();
  if (!isNaN(at)) {
    var words = t('Ordered {time}').split('{time}');
    created.appendChild(document.createTextNode(words[0]));
    created.appendChild(timeElement(o.createdAt));
    if (words[1]) {
      created.appendChild(document.createTextNode(words[1]));
    }
  }
}

// renderRow writes the order into its row.
export function renderRow(li, o) {
  var st = typeof o.status === 'string' ? o.status : '';
  var id = String(o.orderId);
  var item = o.itemName ? String(o.itemName) : t('Item {id}', { id: o.itemId === undefined ? '' : o.itemId });
  li.setAttribute('data-order-id', id);
  li.setAttribute('data-status', st);
  setText(part(li, 'order-row-item'), item);
  var badge = part(li, 'order-row-status');
  badge.setAttribute('data-status', st);
  setText(badge, statusWord(st, o.draw === true) || t('unknown'));
  setText(part(li, 'order-row-price'), formatMoney(o.priceCents, o.currency));
  var sale = part(li, 'order-row-sale');
  setText(sale, o.saleName ? String(o.saleName) : t('Sale {id}', { id: o.saleId === undefined ? '' : o.saleId }));
  if (o.saleId !== undefined && o.saleId !== null && o.saleId !== '') {
    sale.setAttribute('href', href('/sales/' + enc(o.saleId)));
  }
  rowDeadline(li, o, st);
  rowNote(li, o, st);
  rowCreated(li, o);
  var link = part(li, 'order-row-link');
  link.setAttribute('href', href('/orders/' + enc(id)));
  setText(link, st === 'PENDING' ? t('Pay or cancel') : t('View order'));
  link.setAttribute('aria-label', t(st === 'PENDING' ? 'Pay or cancel: {item}' : 'View order: {item}', { item: item }));
}
