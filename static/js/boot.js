// The one classic script, in <head>, run before the page is drawn: it marks <html> with the
// session as session.js will find it (the readable CSRF cookie, the role kept from the login),
// data-session="in", "merchant" or "out", so that the stylesheet draws the session box and the
// header's "My orders" link in their final state from the first frame and nothing moves when
// the modules take over. main.js takes the mark off once they have drawn the page; from then on
// they alone decide. A few hundred bytes, cached for good under its hashed name.
(function () {
  var state = 'out';
  if (/(?:^|;\s*)(?:__Host-)?fs_csrf=[^;]/.test(document.cookie)) {
    state = 'in';
    try {
      var u = JSON.parse(window.localStorage.getItem('fs_user') || 'null');
      if (u && u.role === 'merchant') {
        state = 'merchant';
      }
    } catch (e) {
      // storage disabled: a shopper, as session.js assumes
    }
  }
  document.documentElement.setAttribute('data-session', state);
})();
