// The site header.

import { byTestId, show } from './dom.js';
import { currentUser, onSession } from './session.js';

// initNav shows "My orders" to a signed-in shopper, "Merchant admin" to a merchant only, "Log in
// or register" to a visitor signed out, and
// marks the link of the current page.
export function initNav() {
  var nav = document.querySelector('.site-nav');
  if (!nav) {
    return;
  }
  Array.prototype.forEach.call(nav.querySelectorAll('a[href]'), function (a) {
    // The link's path: a page asked for with ?lang= links with it too (i18n.js).
    if (new URL(a.href, window.location.href).pathname === window.location.pathname) {
      a.setAttribute('aria-current', 'page');
    }
  });
  var orders = byTestId('nav-orders', nav);
  var admin = byTestId('admin-link', nav);
  var login = byTestId('nav-login', nav); // a logged-out visitor logs in or registers on My orders
  function render() {
    var u = currentUser();
    show(login, u === null);
    show(orders, u !== null && u.role !== 'merchant');
    show(admin, u !== null && u.role === 'merchant');
  }
  onSession(render);
  render();
}
