// The sale page's items: each one's stock badge (polled every second from the micro-cached
// endpoint), its Buy button and the note that says why it cannot be bought.

import { allByTestId, setText, show, enc } from './dom.js';
import { parseTime, formatClock, formatDate } from './time.js';
import { api } from './api.js';
import { makePoller, failed } from './poll.js';
import { isOnline } from './network.js';
import { loggedIn } from './session.js';
import { t } from './i18n.js';

function soldOut(S, id) {
  return S.stock[id] === 0 || Object.prototype.hasOwnProperty.call(S.refusedAt, id);
}

function renderStock(S) {
  var ended = S.page.phase === 'ended';
  S.stockEls.forEach(function (el) {
    var id = el.getAttribute('data-item-id');
    el.classList.toggle('stock-ended', ended);
    if (ended) {
      // An ended sale offers nothing: no "N left" in green, and its Buy button says "Ended"
      // (once per item).
      setText(el, '');
      el.classList.remove('stock-out', 'stock-low');
      return;
    }
    var n = soldOut(S, id) ? 0 : S.stock[id];
    if (typeof n !== 'number' || isNaN(n)) {
      return;
    }
    // Sold out is the Buy button's to say ("Sold out"), not said twice side by side; beside a
    // button that says the shopper's own order ("Bought", "Ordered"), and for a merchant (who has
    // no Buy button), the count says it.
    var mine = !!S.page.orders.holdings().byItem[id];
    setText(el, n > 0 ? t('{n} left', { n: n }) : mine || S.page.merchant ? t('sold out') : '');
    el.setAttribute('data-stock', String(Math.max(0, n)));
    el.classList.toggle('stock-out', n <= 0);
    el.classList.toggle('stock-low', n > 0 && n <= 10);
    // A count the shop could not refresh is shown faded, with when it was last known.
    var stale = S.stockAt > 0 && (!isOnline() || S.stockFailing);
    el.classList.toggle('stock-stale', stale);
    if (stale) {
      el.title = t('Last known at {time}; the shop cannot be reached just now.', { time: formatClock(S.stockAt) });
    } else {
      el.removeAttribute('title');
    }
  });
}

// renderButtons: a Buy button is enabled only while the sale is live, the item not sold out
// nor held, no purchase in flight, no wait asked for, the limit not reached, and online.
function renderButtons(S, phase, h, limitReached) {
  var purchase = S.page.purchase;
  S.page.buttons.forEach(function (b) {
    var id = b.getAttribute('data-item-id');
    var gone = soldOut(S, id);
    var mine = h.byItem[id];
    var page = S.page;
    b.disabled = !(phase === 'live' && !page.paused && !page.merchant && !gone && !purchase.busy() && !purchase.held() && !mine && !limitReached && isOnline());
    // Merchants see the sale, never a Buy button (the note leads them to its live view).
    show(b, !page.merchant);
    var label = t('Buy');
    if (purchase.busy() && purchase.buying() === id) {
      label = t('Buying\u2026');
    } else if (mine) {
      label = mine === 'PAID' ? t('Bought') : mine === 'DRAW' ? t('In the draw') : t('Ordered');
    } else if (phase === 'ended') {
      label = t('Ended');
    } else if (gone) {
      label = t('Sold out');
    } else if (page.paused && phase === 'live') {
      label = t('Paused');
    }
    setText(b, label);
    b.classList.toggle('button-held', !!mine);
  });
}

// renderNotes says under each item why it cannot be bought: held already, or the limit. For a
// signed-in shopper each note keeps a line's room even while it has nothing to say (the
// stylesheet draws it so from the first frame, static/js/boot.js), so that the items do not move
// down when the shopper's orders come in and the notes with them.
function renderNotes(S, phase, h, limitReached) {
  var room = loggedIn() && !S.page.merchant;
  S.itemNotes.forEach(function (n) {
    var id = n.getAttribute('data-item-id');
    var text = '';
    var mine = h.byItem[id];
    if (mine === 'PAID') {
      text = t('You bought this item.');
    } else if (mine === 'DRAW') {
      text = t('You entered the draw for this item.');
    } else if (mine === 'PENDING') {
      text = t('You ordered this item: pay for it in your orders below.');
    } else if (mine) {
      text = t('You ordered this item; it is being confirmed.');
    } else if (limitReached && phase !== 'ended') {
      text = t('One per shopper in this sale: you already have {name}.', { name: h.any.itemName || S.page.itemNames[h.any.itemId] || t('an item') });
    } else if (S.lost[id] && soldOut(S, id) && phase === 'live') {
      // This shopper tapped Buy and lost the race for the last unit: said beside the item.
      text = othersOnSale(S, id)
        ? t('{name} just sold out; the other items are still on sale.', { name: S.page.itemNames[id] || t('This item') })
        : t('{name} just sold out: every unit has been taken.', { name: S.page.itemNames[id] || t('This item') });
    }
    setText(n, text);
    n.setAttribute('data-kind', mine ? 'held' : S.lost[id] && !limitReached ? 'sold-out' : 'limit');
    show(n, text !== '' || room);
  });
}

// othersOnSale: another item of the sale can still be bought (not sold out, not held).
function othersOnSale(S, id) {
  var h = S.page.orders.holdings();
  return S.page.buttons.some(function (b) {
    var other = b.getAttribute('data-item-id');
    return other !== id && !soldOut(S, other) && !h.byItem[other];
  });
}

function render(S, phase) {
  var h = S.page.orders.holdings();
  var limitReached = S.page.info.limit === 'per-sale' && h.any !== null;
  renderButtons(S, phase, h, limitReached);
  renderNotes(S, phase, h, limitReached);
}

// readState follows the sale's state the stock answer carries: the merchant's pause and resume,
// an end moved or brought forward (ended early), a start moved, each item's quantity.
function readState(S, data) {
  var page = S.page;
  var starts = parseTime(data.startsAt);
  var ends = parseTime(data.endsAt);
  var moved = false;
  if (!isNaN(starts) && starts !== page.startsAt) {
    page.startsAt = starts;
    moved = true;
  }
  if (!isNaN(ends) && ends !== page.endsAt) {
    page.endsAt = ends;
    moved = true;
  }
  if (moved) {
    retime(page.section, 'starts-at', data.startsAt);
    retime(page.section, 'ends-at', data.endsAt);
    page.countdown.schedule();
  }
  if (data.status === 'ended') {
    page.countdown.ended();
  }
  if (typeof data.paused === 'boolean') {
    // An ended sale is over, paused before or not: no "Buy comes back" for it.
    page.setPaused(data.paused && data.status !== 'ended', false);
  }
  data.items.forEach(function (it) {
    var q = it ? Number(it.quantity) : NaN;
    if (!isNaN(q) && q > 0) {
      var el = S.quantityEls[String(it.itemId)];
      if (el && el.getAttribute('data-quantity') !== String(q)) {
        el.setAttribute('data-quantity', String(q));
        setText(el, q === 1 ? t('1 unit in this sale') : t('{n} units in this sale', { n: q }));
      }
    }
  });
}

// retime writes a moved start or end into the page's <time> of that name.
function retime(section, testid, rfc3339) {
  allByTestId(testid, section).forEach(function (el) {
    var ms = parseTime(rfc3339);
    if (!isNaN(ms) && parseTime(el.getAttribute('datetime')) !== ms) {
      el.setAttribute('datetime', rfc3339);
      setText(el, formatDate(ms));
    }
  });
}

// readStock takes in a stock snapshot, less this page's purchases it may not count yet.
function readStock(S, data) {
  readState(S, data);
  var asOf = parseTime(data.asOf);
  var recent = Date.now() - 10000;
  S.ownBuys = S.ownBuys.filter(function (b) {
    return b.local > recent;
  });
  data.items.forEach(function (it) {
    if (it && it.itemId !== undefined && it.itemId !== null) {
      var id = String(it.itemId);
      var n = Number(it.stock);
      S.ownBuys.forEach(function (b) {
        if (b.itemId === id && (isNaN(asOf) ? Date.now() - b.local < 2000 : asOf < b.at)) {
          n--;
        }
      });
      n = Math.max(0, n);
      S.stock[id] = n;
      if (Object.prototype.hasOwnProperty.call(S.refusedAt, id) && (n <= 0 || n > S.refusedAt[id])) {
        delete S.refusedAt[id];
      }
    }
  });
}

// pollStock is one poll of the stock, every second from the micro-cached endpoint.
async function pollStock(S) {
  var r = await api('GET', '/api/flash-sales/' + enc(S.page.saleId) + '/stock');
  if (r.ok && r.data && Array.isArray(r.data.items)) {
    readStock(S, r.data);
    S.stockAt = Date.now();
    S.stockFailing = false;
    renderStock(S);
    S.page.render();
  } else if (S.page.phase !== 'ended') {
    S.stockFailing = true;
    renderStock(S);
    return failed((r.retryAfter || 0) * 1000); // back off while the shop cannot answer
  }
  // After the end, one last refresh is enough.
  return S.page.phase !== 'ended';
}

// itemsApi is what the other modules of the page ask of the items.
function itemsApi(S) {
  return {
    soldOut: function (id) {
      return soldOut(S, id);
    },
    render: function (phase) {
      render(S, phase);
    },
    renderStock: function () {
      renderStock(S);
    },
    phaseChanged: function () {
      renderStock(S);
      if (S.page.phase === 'ended') {
        S.poller.stop();
      }
    },
    // refused: a purchase of the item came back SOLD_OUT (this shopper lost the race): the item
    // is shown sold out, and its note says so beside it.
    refused: function (itemId) {
      S.refusedAt[itemId] = typeof S.stock[itemId] === 'number' ? S.stock[itemId] : 0;
      S.lost[itemId] = true;
      renderStock(S);
      S.page.render();
    },
    // bought counts a unit the shop reserved for this page at once, not a second later.
    bought: function (itemId, at) {
      S.ownBuys.push({ itemId: itemId, at: at, local: Date.now() });
      if (typeof S.stock[itemId] === 'number') {
        S.stock[itemId] = Math.max(0, S.stock[itemId] - 1);
      }
      renderStock(S);
    },
    start: function () {
      S.poller.start();
    }
  };
}

// initItems returns soldOut(id), render(phase) (the buttons and notes), renderStock() (the
// badges), phaseChanged(), refused(id) (a purchase came back SOLD_OUT), bought(id, at) (a unit
// is ours) and start() (the stock's poller).
export function initItems(page) {
  var S = {
    page: page,
    stockEls: allByTestId('stock', page.section),
    itemNotes: allByTestId('item-note', page.section),
    stock: {},
    // lost[itemId]: a purchase of the item by this page came back SOLD_OUT.
    lost: {},
    quantityEls: {},
    // refusedAt[itemId] is the displayed stock when a purchase came back SOLD_OUT: the item
    // stays sold out until the displayed stock reaches 0 or rises above that figure.
    refusedAt: {},
    // ownBuys are this page's purchases of the last seconds: a stock snapshot taken before
    // one (the endpoint is cached for a second) still counts its unit, so it is taken off.
    ownBuys: [],
    // stockAt is when the stock was last refreshed (Date.now()); stockFailing, that the last
    // refresh failed.
    stockAt: 0,
    stockFailing: false,
    poller: null
  };
  allByTestId('item', page.section).forEach(function (li) {
    var q = li.querySelector('[data-testid="quantity"]');
    if (q) {
      S.quantityEls[li.getAttribute('data-item-id')] = q;
    }
  });
  S.poller = makePoller(function () {
    return pollStock(S);
  }, 1000);
  page.buttons.forEach(function (b) {
    b.addEventListener('click', function () {
      page.purchase.buy(b.getAttribute('data-item-id'));
    });
  });
  return itemsApi(S);
}
