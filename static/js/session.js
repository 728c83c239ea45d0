// Who is signed in: the login and registration form, logout, and the listeners that follow a
// change of session. The session cookie is HttpOnly; the readable fs_csrf cookie tells that one
// exists (named __Host-fs_csrf in production). Who is signed in (id and role, from the login's
// answer) is kept for display only.

import { byTestId, setText, show } from './dom.js';
import { store, csrfCookie } from './storage.js';
import { api, errorText, sentence } from './api.js';
import { t, lang } from './i18n.js';

export function loggedIn() {
  var v = csrfCookie();
  return v !== null && v !== '';
}

function dropCsrfCookie() {
  document.cookie = 'fs_csrf=; Max-Age=0; Path=/; SameSite=Lax';
  document.cookie = '__Host-fs_csrf=; Max-Age=0; Path=/; Secure; SameSite=Lax';
}

export function currentUser() {
  if (!loggedIn()) {
    return null;
  }
  try {
    var u = JSON.parse(store.get('fs_user') || 'null');
    return u && typeof u === 'object' ? u : {};
  } catch (e) {
    return {};
  }
}

function tokenClaims(token) {
  try {
    var part = String(token).split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    while (part.length % 4) {
      part += '=';
    }
    return JSON.parse(window.atob(part)) || {};
  } catch (e) {
    return {};
  }
}

const sessionListeners = [];

// onSession calls fn whenever who is signed in may have changed.
export function onSession(fn) {
  sessionListeners.push(fn);
}

function sessionChanged() {
  sessionListeners.forEach(function (fn) {
    fn();
  });
}

// forgetSession drops what this browser knows about the signed-in user.
function forgetSession() {
  store.remove('fs_user');
  store.removePrefix('fs_order_');
  dropCsrfCookie();
}

// sessionExpired is called when the server says the session is gone (401 or CSRF refusal).
export function sessionExpired() {
  store.remove('fs_user');
  dropCsrfCookie();
  sessionChanged();
}

// learnUser asks the server who is signed in when the browser has the session cookie but
// not the id, role and username (a login made elsewhere, cleared storage, or a login whose
// username was typed in another case). force asks even when they are known. Best effort only.
export async function learnUser(force) {
  if (!loggedIn()) {
    return;
  }
  var known = currentUser();
  if (!force && known && typeof known.username === 'string') {
    return;
  }
  var r = await api('GET', '/api/auth/me', undefined, undefined, 'no-store');
  if (r.ok && r.data) {
    var u = {
      id: r.data.userId !== undefined && r.data.userId !== null ? String(r.data.userId) : '',
      role: typeof r.data.role === 'string' ? r.data.role : '',
      username: typeof r.data.username === 'string' ? r.data.username : ''
    };
    var before = store.get('fs_user');
    store.set('fs_user', JSON.stringify(u));
    if (before !== store.get('fs_user')) {
      sessionChanged();
    }
  } else if (r.status === 401) {
    sessionExpired();
  }
}

// userName is how the session area names a user: the username, or "shopper #2" for an
// identity the shop has no username for.
function userName(u) {
  if (u && u.username) {
    return String(u.username);
  }
  var who = t(u && u.role ? String(u.role) : 'user');
  return u && u.id ? t('{role} #{id}', { role: who, id: u.id }) : who;
}

// initSession wires the login/register form and the "signed in as" line of a session area.
export function initSession(area, say) {
  if (!area) {
    return;
  }
  var form = byTestId('login-form', area);
  var userLine = byTestId('session-user', area);
  var nameEl = byTestId('session-name', area);
  var logout = byTestId('logout-button', area);
  var regBox = byTestId('register-captcha', area);
  var regImage = byTestId('register-captcha-image', area);
  var regAnswer = byTestId('register-captcha-answer', area);
  var regRefresh = byTestId('register-captcha-refresh', area);
  var regButton = byTestId('register-button', area);
  var note = byTestId('login-note', area);
  var captchaId = '';
  // Errors of the form also show in the form itself: on a phone the page's message area is
  // below the items, out of sight.
  var pageSay = say;
  say = function (text, kind) {
    pageSay(text, kind);
    if (note) {
      setText(note, kind === 'error' ? text : '');
      show(note, kind === 'error' && !!text);
    }
  };
  var lastAction = 'login';
  var busy = false;

  // loadCaptcha shows a fresh registration challenge (each one takes a single answer).
  async function loadCaptcha() {
    captchaId = '';
    if (regAnswer) {
      regAnswer.value = '';
    }
    var r = await api('POST', '/api/auth/captcha', {}, undefined, 'no-store');
    if (!r.ok || !r.data || typeof r.data.captchaId !== 'string') {
      say(errorText(r), 'error');
      return false;
    }
    captchaId = r.data.captchaId;
    regImage.src = typeof r.data.image === 'string' ? r.data.image : '';
    show(regBox, true);
    return true;
  }

  if (regRefresh) {
    regRefresh.addEventListener('click', function () {
      loadCaptcha().then(function (ok) {
        if (ok) {
          regAnswer.focus();
        }
      });
    });
  }
  // Enter while the registration captcha is shown registers (the default button logs in).
  if (form && regBox) {
    form.addEventListener('keydown', function (ev) {
      if (ev.key !== 'Enter' || regBox.hidden || ev.target.tagName !== 'INPUT') {
        return;
      }
      ev.preventDefault();
      lastAction = 'register';
      if (form.requestSubmit) {
        form.requestSubmit(regButton);
      } else {
        regButton.click();
      }
    });
  }

  function render() {
    var u = currentUser();
    show(form, u === null);
    show(userLine, u !== null);
    if (u !== null) {
      setText(nameEl, userName(u));
      if (userLine) {
        userLine.setAttribute('data-user-id', u.id ? String(u.id) : '');
        userLine.setAttribute('data-role', u.role ? String(u.role) : '');
      }
    }
  }

  if (form) {
    Array.prototype.forEach.call(form.querySelectorAll('button[type="submit"]'), function (b) {
      b.addEventListener('click', function () {
        lastAction = b.value || 'login';
      });
    });
    form.addEventListener('submit', async function (ev) {
      ev.preventDefault();
      if (busy) {
        return;
      }
      var action = ev.submitter && ev.submitter.value ? ev.submitter.value : lastAction;
      if (action !== 'register') {
        action = 'login';
      }
      var username = form.elements.username.value.trim();
      var password = form.elements.password.value;
      if (!username || !password) {
        say(t('Type a username and a password.'), 'error');
        return;
      }
      var body = { username: username, password: password };
      if (action === 'register') {
        // Registration takes a captcha: show one first, then send its answer.
        if (!captchaId) {
          busy = true;
          var shown = await loadCaptcha();
          busy = false;
          if (shown) {
            say(t('Type what the picture shows, then press Register.'), 'info');
            regAnswer.focus();
          }
          return;
        }
        var answer = regAnswer.value.trim();
        if (!answer) {
          say(t('Type what the picture shows, then press Register.'), 'error');
          regAnswer.focus();
          return;
        }
        body.captchaId = captchaId;
        body.answer = answer;
      }
      busy = true;
      Array.prototype.forEach.call(form.querySelectorAll('button'), function (b) {
        b.disabled = true;
      });
      say(action === 'register' ? t('Creating your account…') : t('Logging in…'), 'info');
      var r = await api('POST', '/api/auth/' + action, body);
      busy = false;
      Array.prototype.forEach.call(form.querySelectorAll('button'), function (b) {
        b.disabled = false;
      });
      if (!r.ok || !r.data) {
        if (action === 'register' && !r.network) {
          // The challenge was used up (one answer each): show a fresh one.
          await loadCaptcha();
        }
        // The server's message in English; in Chinese, errorText says what it means.
        var text = lang === 'en' && r.message && !r.network && r.code !== 'RATE_LIMITED' ? sentence(r.message) : errorText(r);
        if (r.code === 'CAPTCHA_FAILED') {
          text = t('The captcha answer was wrong or expired; try the new picture.');
        } else if (r.code === 'UNAVAILABLE') {
          text = t('The shop is busy; try again in a moment.');
        }
        say(text, 'error');
        return;
      }
      var claims = tokenClaims(r.data.token);
      var role = typeof r.data.role === 'string' ? r.data.role : String(claims.role || '');
      var uid = r.data.userId !== undefined && r.data.userId !== null ? String(r.data.userId) : claims.sub ? String(claims.sub) : '';
      show(note, false);
      // The name as typed until the server says how the account spells it (usernames are
      // case-insensitive).
      var user = { id: uid, role: role, username: typeof r.data.username === 'string' ? r.data.username : username };
      store.set('fs_user', JSON.stringify(user));
      form.elements.password.value = '';
      captchaId = '';
      if (regBox) {
        regAnswer.value = '';
        show(regBox, false);
      }
      say(t(action === 'register' ? 'Account created; signed in as {name}.' : 'Signed in as {name}.', { name: userName(user) }), 'ok');
      sessionChanged();
      if (action === 'login') {
        learnUser(true);
      }
    });
  }

  if (logout) {
    logout.addEventListener('click', async function () {
      logout.disabled = true;
      var r = await api('POST', '/api/auth/logout', {});
      logout.disabled = false;
      if (r.ok || r.status === 401) {
        forgetSession();
        say(t('Logged out.'), 'info');
        sessionChanged();
      } else {
        say(errorText(r), 'error');
      }
    });
  }

  onSession(render);
  render();
}

// loginPrompt shows a page's "You are not signed in. Log in …" sentence while nobody is, and
// makes its link focus the login form's username field.
export function loginPrompt(page) {
  var note = byTestId('logged-out', page);
  var link = byTestId('login-link', page);
  if (link) {
    link.addEventListener('click', function (ev) {
      var user = byTestId('username', page);
      if (user) {
        ev.preventDefault();
        user.scrollIntoView({ block: 'center' });
        user.focus();
      }
    });
  }
  return function render(signedIn) {
    show(note, !signedIn);
  };
}
