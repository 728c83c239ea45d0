// The site header.

import { byTestId, show } from './dom.js';
import { currentUser, onSession } from './session.js';

// initNav shows "My orders" to a signed-in shopper and "Merchant admin" to a merchant only, and
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
  function render() {
    var u = currentUser();
    show(orders, u !== null && u.role !== 'merchant');
    show(admin, u !== null && u.role === 'merchant');
  }
  onSession(render);
  render();
}
