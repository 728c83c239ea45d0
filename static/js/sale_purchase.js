// The sale page's purchase: one attempt at a time (a purchase token bought with the captcha's
// answer, then the purchase), the same attempt sent again when its answer is lost, and the
// shop's refusals in words.

import { byTestId, enc } from './dom.js';
import { serverNow } from './clock.js';
import { api, errorText } from './api.js';
import { backoff, sleep } from './poll.js';
import { isOnline } from './network.js';
import { loggedIn, sessionExpired } from './session.js';
import { t, href, locale } from './i18n.js';

// A purchase whose answer does not come back is sent again (the same attempt, the same token) at
// most this many times in all, each waiting at most PURCHASE_TIMEOUT_MS for its answer.
const PURCHASE_TRIES = 3;
const PURCHASE_TIMEOUT_MS = 15000;
// Answers to a resend that say nothing of what became of the first send, whose answer was lost:
// this instance's sold-out flag or clock answers before the attempt is looked up, the token may
// have expired in the meantime, or the first send's outcome is not settled yet. The page then
// says the answer was lost and looks for the order, as when no answer came back at all.
const UNCERTAIN_AFTER_LOSS = ['SOLD_OUT', 'SALE_ENDED', 'INVALID_PURCHASE_TOKEN', 'UNAVAILABLE', 'RATE_LIMITED'];

// sendPurchase sends the purchase of itemId with its purchase token. When no answer comes back
// (the request failed, or its answer was lost or late) it sends the SAME attempt again, with
// the same token to the same item, a few times with backoff while the browser is online: the
// server answers the same attempt as it answered it the first time (202 with the same order
// id), so this never makes a second purchase. It returns the last result: r.network set means
// no answer ever came back; r.lost that an answer after a lost one cannot say what became of
// the first (UNCERTAIN_AFTER_LOSS).
async function sendPurchase(say, itemId, token) {
  var r = null;
  for (var i = 0; i < PURCHASE_TRIES; i++) {
    if (i > 0) {
      if (!isOnline()) {
        break;
      }
      say(t('No answer from the shop yet; asking again about the same purchase\u2026'), 'info');
      await sleep(backoff(i - 1, 1000, 4000));
      if (!isOnline()) {
        break;
      }
    }
    r = await api('POST', '/api/flash-sales/items/' + enc(itemId) + '/purchase', {}, {
      'X-Purchase-Token': token
    }, undefined, PURCHASE_TIMEOUT_MS);
    if (!r.network) {
      break;
    }
  }
  if (i > 0 && !r.network && !r.ok && UNCERTAIN_AFTER_LOSS.indexOf(r.code) >= 0) {
    r.lost = true;
  }
  return r;
}

function hold(P, seconds) {
  var ms = Math.max(1, seconds) * 1000;
  P.holdUntil = Date.now() + ms;
  window.setTimeout(P.page.render, ms + 5);
  P.page.render();
}

// refused acts on a refusal that needs more than words.
function refused(P, r, itemId) {
  switch (r.code) {
    case 'SOLD_OUT':
      P.page.items.refused(itemId);
      break;
    case 'NOT_STARTED':
      // The server's clock says not yet: wait as long as it asks, and re-check ours.
      hold(P, r.retryAfter === null ? 1 : r.retryAfter);
      P.page.resync();
      break;
    case 'RATE_LIMITED':
      hold(P, r.retryAfter === null ? 1 : r.retryAfter);
      break;
    case 'SALE_ENDED':
      P.page.countdown.ended();
      break;
    case 'UNAUTHENTICATED':
    case 'CSRF':
      sessionExpired();
      break;
  }
}

function handleBuyError(P, r, itemId) {
  var say = P.page.say;
  if (r.code === 'ALREADY_PURCHASED') {
    // The limit: lead to the order already held, and show it in the order box.
    var held = r.data && r.data.orderId !== undefined && r.data.orderId !== null ? String(r.data.orderId) : '';
    if (held) {
      say(t('You already hold an order in this sale: '), 'notice', { text: t('view it'), href: href('/orders/' + enc(held)), testid: 'held-order-link', after: t('.') });
    } else {
      say(t('You already hold an order in this sale (one per shopper): '), 'notice', { text: t('see your orders'), href: href('/orders'), testid: 'held-order-link', after: t('.') });
    }
    P.page.orders.load();
    return;
  }
  if (r.code === 'PAUSED') {
    // The merchant paused the sale: nothing was reserved. Buy stays dark, with one sentence,
    // until the stock poll says the sale resumed.
    P.page.setPaused(true, true);
    return;
  }
  if (r.code === 'SOLD_OUT') {
    // Lost the race for the last unit: said beside the item tapped (its note), not far away.
    say('', 'info');
    refused(P, r, itemId);
    return;
  }
  say(errorText(r), 'error');
  refused(P, r, itemId);
}

// answerLost tells the shopper that the purchase was sent but no answer came back, so the page
// cannot know whether it went through, and leads them to their orders; the order box looks
// for the order, and catches up by itself once the shop answers again.
function answerLost(P, itemId, sentAt) {
  var name = P.page.itemNames[itemId] || t('the item');
  P.page.say(t('The shop\u2019s answer was lost (the network dropped), so this page cannot tell whether you bought {name}. Before buying again, check ', { name: name }),
    'error', { text: t('My orders'), href: href('/orders'), testid: 'lost-order-link', after: t(' to see whether it went through.') });
  P.page.orders.lookForLost(itemId, sentAt);
}

// ready says why nothing can be sent yet, or returns the captcha's answer.
function ready(P) {
  var page = P.page;
  if (!isOnline()) {
    page.say(t('You are offline: nothing was sent. Buy once the connection is back.'), 'error');
    return '';
  }
  // What Buy answers before anything is sent shows beside the item tapped too.
  page.anchor(P.tapped);
  if (!loggedIn()) {
    page.say(t('Please log in first.'), 'error');
    var user = byTestId('username', page.section);
    if (user) {
      user.focus();
    }
    return '';
  }
  if (!page.captcha.id()) {
    page.say(page.captcha.loading() ? t('The captcha is still loading; one moment.') : t('A captcha is needed first; a new one is on its way.'), 'error');
    page.captcha.load();
    return '';
  }
  var answer = page.captcha.answer();
  if (!answer) {
    page.say(t('Type the captcha answer first.'), 'error');
    page.captcha.focus();
  }
  return answer;
}

// tokenRefused speaks of a purchase token the shop did not give; true when the captcha is
// spent (or may be) and a new one is needed.
function tokenRefused(P, tok, itemId) {
  if (tok.ok) {
    P.page.say(t('The shop sent an answer this page does not understand; try again.'), 'error');
    return false;
  }
  if (tok.network) {
    // No purchase was sent. The captcha may have been used up on the way: a new one.
    P.page.say(t('No answer from the shop: nothing was bought (the purchase was not sent). Check your connection, then solve the new captcha and try again.'), 'error');
    return true;
  }
  // a paused sale may have spent the captcha already: a fresh one for the next try
  var fresh = tok.code === 'CAPTCHA_FAILED' || tok.code === 'PAUSED';
  handleBuyError(P, tok, itemId);
  return fresh;
}

// reserved: the unit is ours; the badge counts it at once and the order box shows the order.
// In a fair start's window (draw: true) no unit is taken yet: the purchase entered the draw, whose
// result the order box follows like any queued order.
function reserved(P, itemId, data) {
  var page = P.page;
  var orderId = String(data.orderId);
  var draw = data.draw === true;
  if (!draw) {
    page.items.bought(itemId, serverNow());
  }
  page.orders.expectQueued(orderId);
  if (draw) {
    var n = (page.fairMs / 1000).toLocaleString(locale, { maximumFractionDigits: 1 });
    if (!(page.fairMs > 0)) {
      page.say(t('You are in the draw \u2014 the result comes when the sale\u2019s first seconds close.'), 'ok');
    } else {
      page.say(page.fairMs === 1000 ? t('You are in the draw \u2014 the result comes when the first second closes.')
        : t('You are in the draw \u2014 the result comes when the first {n} seconds close.', { n: n }), 'ok');
    }
  } else {
    page.say(t('Got it! Your unit is reserved and the order is queued.'), 'ok');
  }
  page.orders.add({
    draw: draw,
    orderId: orderId,
    itemId: itemId,
    saleId: page.saleId,
    status: typeof data.status === 'string' ? data.status : 'QUEUED',
    payBy: null,
    itemName: page.itemNames[itemId] || '',
    priceCents: page.info.prices[itemId],
    currency: page.info.currency
  });
}

// attempt buys a purchase token with the answer, then sends the purchase. out.newCaptcha says
// whether the captcha is spent.
async function attempt(P, itemId, answer, out) {
  var page = P.page;
  var tok = await api('POST', '/api/flash-sales/' + enc(page.saleId) + '/purchase-token', {
    captchaId: page.captcha.id(),
    answer: answer
  });
  if (!tok.ok || !tok.data || !tok.data.purchaseToken) {
    out.newCaptcha = tokenRefused(P, tok, itemId);
    return;
  }
  // The captcha is spent once it has bought a purchase token.
  out.newCaptcha = true;
  page.captcha.spend();
  var sentAt = serverNow();
  var r = await sendPurchase(page.say, itemId, String(tok.data.purchaseToken));
  if (r.network || r.lost) {
    answerLost(P, itemId, sentAt);
  } else if (r.ok && r.data && r.data.orderId !== undefined && r.data.orderId !== null) {
    reserved(P, itemId, r.data);
  } else if (r.ok) {
    page.say(t('The shop sent an answer this page does not understand; check your order before trying again.'), 'error');
  } else {
    handleBuyError(P, r, itemId);
  }
}

async function buy(P, itemId) {
  if (P.inFlight) {
    return;
  }
  P.tapped = itemId;
  var answer = ready(P);
  if (!answer) {
    return;
  }
  var page = P.page;
  P.inFlight = true;
  P.buyingItem = itemId;
  page.anchor(itemId);
  page.orders.forgetLost(); // a new attempt: its own answer tells
  page.render();
  page.say(t('Reserving your unit\u2026'), 'info');
  var out = { newCaptcha: false };
  try {
    await attempt(P, itemId, answer, out);
  } finally {
    P.inFlight = false;
    P.buyingItem = null;
    if (out.newCaptcha) {
      page.captcha.spend();
    }
    page.render();
    if (out.newCaptcha) {
      page.captcha.load();
    }
  }
}

// initPurchase returns buy(itemId), busy() (an attempt is in flight), buying() (its item) and
// held() (the shop asked to wait before the next).
export function initPurchase(page) {
  var P = { page: page, inFlight: false, buyingItem: null, holdUntil: 0 };
  return {
    buy: function (itemId) {
      return buy(P, itemId);
    },
    busy: function () {
      return P.inFlight;
    },
    buying: function () {
      return P.buyingItem;
    },
    held: function () {
      return Date.now() < P.holdUntil;
    }
  };
}
