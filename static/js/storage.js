// localStorage that never throws (it may be disabled), and the cookies the script can read.

export const store = {
  get: function (key) {
    try {
      return window.localStorage.getItem(key);
    } catch (e) {
      return null;
    }
  },
  set: function (key, value) {
    try {
      window.localStorage.setItem(key, value);
    } catch (e) {
      // Storage may be disabled (private mode); the page still works without it.
    }
  },
  remove: function (key) {
    try {
      window.localStorage.removeItem(key);
    } catch (e) {
      // See set.
    }
  },
  removePrefix: function (prefix) {
    try {
      var doomed = [];
      for (var i = 0; i < window.localStorage.length; i++) {
        var k = window.localStorage.key(i);
        if (k && k.indexOf(prefix) === 0) {
          doomed.push(k);
        }
      }
      doomed.forEach(function (k) {
        window.localStorage.removeItem(k);
      });
    } catch (e) {
      // See set.
    }
  }
};

export function getCookie(name) {
  var parts = document.cookie ? document.cookie.split(';') : [];
  for (var i = 0; i < parts.length; i++) {
    var p = parts[i];
    var eq = p.indexOf('=');
    if (eq < 0) {
      continue;
    }
    if (p.slice(0, eq).trim() === name) {
      return p.slice(eq + 1).trim();
    }
  }
  return null;
}

// The session cookie is HttpOnly; the readable fs_csrf cookie tells that one exists (named
// __Host-fs_csrf in production). Who is signed in (id and role, from the login's answer) is
// kept for display only.
export function csrfCookie() {
  return getCookie('__Host-fs_csrf') || getCookie('fs_csrf');
}
