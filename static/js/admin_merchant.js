// What the merchant's pages (/admin, a sale's live view, a sale's orders) share: who may see
// them. Only a signed-in merchant; a refusal that means "log in again" signs out, one that means
// "not a merchant" hides the page's panel and says so.

import { byTestId, show } from './dom.js';
import { errorText, isUnauthenticated } from './api.js';
import { currentUser, sessionExpired, onSession, initSession } from './session.js';
import { t, lang } from './i18n.js';

// The words are the page's language's (i18n.js knows it as soon as it is imported).
const NOT_MERCHANT = t('Signed in, but this account is not a merchant. Log out and log in with a merchant account.');
export const SALE_NOT_FOUND = t('This sale was not found (it may belong to another merchant).');

// adminErrorText is api.js's errorText with the refusals only a merchant meets, in the page's
// language (the server's messages are English; an English page shows them as they are).
export function adminErrorText(r) {
  if (lang === 'en' || r.network) {
    return errorText(r);
  }
  switch (r.code) {
    case 'QUEUE_NOT_DRAINED':
      return t('Orders of this sale are still being recorded; the stock is rebuilt by itself once they are. Try again in a moment.');
    case 'SALE_STARTED':
      return t('The sale has started.');
    case 'QUANTITY_TOO_LOW':
      return t('A quantity cannot go below what is sold or held.');
    case 'NOT_FOUND':
      return SALE_NOT_FOUND;
    case 'FORBIDDEN':
      return t('Signed in, but this account is not a merchant. Log out and log in with a merchant account.');
    case 'INTERNAL':
      return t('The shop had an internal error; try again in a moment.');
  }
  return errorText(r);
}

// merchantPage ties a merchant's page to who is signed in. opts:
//   panel: what only a merchant sees (shown once the server answered as to a merchant);
//   say: the page's messenger;
//   stop(): stops what the page polls (nobody signed in, or not a merchant);
//   signedOut(): what the page says or clears when nobody is signed in (after stop);
//   start(user): a merchant, or a user whose role is not known yet, is signed in.
// It returns authProblem(r) (true when the refusal r was one of those, and handled), notMerchant(),
// admit() (the server answered as to a merchant: shows the panel; true the first time) and
// watch() (follows the session from now on, and starts the page).
export function merchantPage(root, opts) {
  var merchant = false;

  function leave() {
    merchant = false;
    show(opts.panel, false);
    opts.stop();
  }

  function notMerchant() {
    leave();
    opts.say(NOT_MERCHANT, 'error');
  }

  function authProblem(r) {
    if (isUnauthenticated(r)) {
      opts.say(errorText(r), 'error');
      sessionExpired();
      return true;
    }
    if (r.status === 403) {
      notMerchant();
      return true;
    }
    return false;
  }

  function sessionUpdate() {
    var u = currentUser();
    if (u === null) {
      leave();
      opts.signedOut();
      return;
    }
    if (u.role && u.role !== 'merchant') {
      notMerchant();
      return;
    }
    opts.start(u);
  }

  return {
    authProblem: authProblem,
    notMerchant: notMerchant,
    admit: function () {
      if (merchant) {
        return false;
      }
      merchant = true;
      show(opts.panel, true);
      return true;
    },
    watch: function () {
      onSession(sessionUpdate);
      initSession(byTestId('session', root), opts.say);
      sessionUpdate();
    }
  };
}
