// The sale page's items: each one's stock badge (polled every second from the micro-cached
// endpoint), its Buy button and the note that says why it cannot be bought.

import { allByTestId, setText, show, enc } from './dom.js';
import { parseTime, formatClock } from './time.js';
import { api } from './api.js';
import { makePoller, failed } from './poll.js';
import { isOnline } from './network.js';
import { t } from './i18n.js';

// initItems returns soldOut(id), render(phase) (the buttons and notes), renderStock() (the
// badges), phaseChanged(), refused(id) (a purchase came back SOLD_OUT), bought(id) (a unit is
// ours) and start() (the stock's poller).
export function initItems(page) {
  var stockEls = allByTestId('stock', page.section);
  var itemNotes = allByTestId('item-note', page.section);
  var s = {
    stock: {},
    // refusedAt[itemId] is the displayed stock when a purchase came back SOLD_OUT: the item
    // stays sold out until the displayed stock reaches 0 or rises above that figure.
    refusedAt: {},
    // ownBuys are this page's purchases of the last seconds: a stock snapshot taken before
    // one (the endpoint is cached for a second) still counts its unit, so it is taken off.
    ownBuys: [],
    // stockAt is when the stock was last refreshed (Date.now()); stockFailing, that the last
    // refresh failed.
    stockAt: 0,
    stockFailing: false
  };

  function soldOut(id) {
    return s.stock[id] === 0 || Object.prototype.hasOwnProperty.call(s.refusedAt, id);
  }

  function renderStock() {
    var ended = page.phase === 'ended';
    stockEls.forEach(function (el) {
      var id = el.getAttribute('data-item-id');
      el.classList.toggle('stock-ended', ended);
      if (ended) {
        // An ended sale offers nothing: no "N left" in green.
        setText(el, t('Ended'));
        el.classList.remove('stock-out', 'stock-low');
        return;
      }
      var n = soldOut(id) ? 0 : s.stock[id];
      if (typeof n !== 'number' || isNaN(n)) {
        return;
      }
      setText(el, n <= 0 ? t('sold out') : t('{n} left', { n: n }));
      el.setAttribute('data-stock', String(Math.max(0, n)));
      el.classList.toggle('stock-out', n <= 0);
      el.classList.toggle('stock-low', n > 0 && n <= 10);
      // A count the shop could not refresh is shown faded, with when it was last known.
      var stale = s.stockAt > 0 && (!isOnline() || s.stockFailing);
      el.classList.toggle('stock-stale', stale);
      if (stale) {
        el.title = t('Last known at {time}; the shop cannot be reached just now.', { time: formatClock(s.stockAt) });
      } else {
        el.removeAttribute('title');
      }
    });
  }

  // renderButtons: a Buy button is enabled only while the sale is live, the item not sold out
  // nor held, no purchase in flight, no wait asked for, the limit not reached, and online.
  function renderButtons(phase, h, limitReached) {
    var purchase = page.purchase;
    page.buttons.forEach(function (b) {
      var id = b.getAttribute('data-item-id');
      var gone = soldOut(id);
      var mine = h.byItem[id];
      b.disabled = !(phase === 'live' && !gone && !purchase.busy() && !purchase.held() && !mine && !limitReached && isOnline());
      var label = t('Buy');
      if (purchase.busy() && purchase.buying() === id) {
        label = t('Buying\u2026');
      } else if (mine) {
        label = mine === 'PAID' ? t('Bought') : t('Ordered');
      } else if (phase === 'ended') {
        label = t('Ended');
      } else if (gone) {
        label = t('Sold out');
      }
      setText(b, label);
      b.classList.toggle('button-held', !!mine);
    });
  }

  // renderNotes says under each item why it cannot be bought: held already, or the limit.
  function renderNotes(phase, h, limitReached) {
    itemNotes.forEach(function (n) {
      var id = n.getAttribute('data-item-id');
      var text = '';
      var mine = h.byItem[id];
      if (mine === 'PAID') {
        text = t('You bought this item.');
      } else if (mine === 'PENDING') {
        text = t('You ordered this item: pay for it in your orders below.');
      } else if (mine) {
        text = t('You ordered this item; it is being confirmed.');
      } else if (limitReached && phase !== 'ended') {
        text = t('One per shopper in this sale: you already have {name}.', { name: h.any.itemName || page.itemNames[h.any.itemId] || t('an item') });
      }
      setText(n, text);
      n.setAttribute('data-kind', mine ? 'held' : 'limit');
      show(n, text !== '');
    });
  }

  function render(phase) {
    var h = page.orders.holdings();
    var limitReached = page.info.limit === 'per-sale' && h.any !== null;
    renderButtons(phase, h, limitReached);
    renderNotes(phase, h, limitReached);
  }

  // readStock takes in a stock snapshot, less this page's purchases it may not count yet.
  function readStock(data) {
    var asOf = parseTime(data.asOf);
    var recent = Date.now() - 10000;
    s.ownBuys = s.ownBuys.filter(function (b) {
      return b.local > recent;
    });
    data.items.forEach(function (it) {
      if (it && it.itemId !== undefined && it.itemId !== null) {
        var id = String(it.itemId);
        var n = Number(it.stock);
        s.ownBuys.forEach(function (b) {
          if (b.itemId === id && (isNaN(asOf) ? Date.now() - b.local < 2000 : asOf < b.at)) {
            n--;
          }
        });
        n = Math.max(0, n);
        s.stock[id] = n;
        if (Object.prototype.hasOwnProperty.call(s.refusedAt, id) && (n <= 0 || n > s.refusedAt[id])) {
          delete s.refusedAt[id];
        }
      }
    });
  }

  var poller = makePoller(async function () {
    var r = await api('GET', '/api/flash-sales/' + enc(page.saleId) + '/stock');
    if (r.ok && r.data && Array.isArray(r.data.items)) {
      readStock(r.data);
      s.stockAt = Date.now();
      s.stockFailing = false;
      renderStock();
      page.render();
    } else if (page.phase !== 'ended') {
      s.stockFailing = true;
      renderStock();
      return failed((r.retryAfter || 0) * 1000); // back off while the shop cannot answer
    }
    // After the end, one last refresh is enough.
    return page.phase !== 'ended';
  }, 1000);

  page.buttons.forEach(function (b) {
    b.addEventListener('click', function () {
      page.purchase.buy(b.getAttribute('data-item-id'));
    });
  });

  return {
    soldOut: soldOut,
    render: render,
    renderStock: renderStock,
    phaseChanged: function () {
      renderStock();
      if (page.phase === 'ended') {
        poller.stop();
      }
    },
    refused: function (itemId) {
      s.refusedAt[itemId] = typeof s.stock[itemId] === 'number' ? s.stock[itemId] : 0;
      renderStock();
    },
    // bought counts a unit the shop reserved for this page at once, not a second later.
    bought: function (itemId, at) {
      s.ownBuys.push({ itemId: itemId, at: at, local: Date.now() });
      if (typeof s.stock[itemId] === 'number') {
        s.stock[itemId] = Math.max(0, s.stock[itemId] - 1);
      }
      renderStock();
    },
    start: function () {
      poller.start();
    }
  };
}
