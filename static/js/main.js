// flashsale browser script, the entry module.
//
// The pages are rendered identically for every visitor (a CDN may cache them), so everything that
// depends on the shopper or on the current time happens in these modules: the clock synced to the
// server, the countdown, the buy buttons, the stock badges, the captcha, the purchase and the order
// status. Server data only ever reaches the page through textContent, never innerHTML, and nothing
// is inline, so a strict Content-Security-Policy (script-src 'self') works.
//
// Each page loads only its own module, found by the page's root element; the layout names the
// modules a page needs in <link rel="modulepreload"> hints (views/assets.go), so they are fetched
// in parallel with this one rather than one import after another.

import { byTestId } from './dom.js';
import { localizeTimes } from './time.js';
import { learnUser } from './session.js';
import { initNav } from './nav.js';
import { initOfflineNotice } from './network.js';
import { initLang } from './i18n.js';

// PAGES maps a page's root (its data-testid) to its module and whether the page shows who is
// signed in (then the script asks the server who that is, when the browser does not know).
const PAGES = [
  { testid: 'sale', load: () => import('./sale.js'), init: 'initSalePage', user: true },
  { testid: 'order-page', load: () => import('./order.js'), init: 'initOrderPage', user: true },
  { testid: 'my-orders', load: () => import('./orders.js'), init: 'initMyOrdersPage', user: true },
  { testid: 'admin', load: () => import('./admin.js'), init: 'initAdminPage', user: true },
  { testid: 'admin-live', load: () => import('./admin_live.js'), init: 'initAdminLivePage', user: true },
  { testid: 'admin-orders', load: () => import('./admin_orders.js'), init: 'initAdminOrdersPage', user: true },
  { testid: 'home', load: () => import('./home.js'), init: 'initHomePage', user: false },
  { testid: 'simpay', load: () => import('./simpay.js'), init: 'initSimPayPage', user: false }
];

async function main() {
  // A shopper who chose the other language goes to this page's address in it: nothing to start.
  if (initLang()) {
    return;
  }
  localizeTimes(document);
  initOfflineNotice();
  let user = false;
  for (const p of PAGES) {
    const root = byTestId(p.testid);
    if (root) {
      const mod = await p.load();
      mod[p.init](root);
      user = user || p.user;
    }
  }
  initNav();
  // The modules drew the session box and the header: boot.js's mark has done its work.
  document.documentElement.removeAttribute('data-session');
  if (user) {
    learnUser();
  }
}

// A module script runs after the document is parsed; main runs at once.
main();
