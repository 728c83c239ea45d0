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

// loadRegCaptcha shows a fresh registration challenge (each one takes a single answer).
async function loadRegCaptcha(S) {
  S.captchaId = '';
  if (S.regAnswer) {
    S.regAnswer.value = '';
  }
  var r = await api('POST', '/api/auth/captcha', {}, undefined, 'no-store');
  if (!r.ok || !r.data || typeof r.data.captchaId !== 'string') {
    S.say(errorText(r), 'error');
    return false;
  }
  S.captchaId = r.data.captchaId;
  S.regImage.src = typeof r.data.image === 'string' ? r.data.image : '';
  show(S.regBox, true);
  return true;
}

function bindRegisterCaptcha(S) {
  if (S.regRefresh) {
    S.regRefresh.addEventListener('click', function () {
      loadRegCaptcha(S).then(function (ok) {
        if (ok) {
          S.regAnswer.focus();
        }
      });
    });
  }
  // Enter while the registration captcha is shown registers (the default button logs in).
  if (S.form && S.regBox) {
    var registering = function (ev) {
      return ev.key === 'Enter' && !S.regBox.hidden && ev.target.tagName === 'INPUT';
    };
    // The form's implicit submission (as Log in) is the keypress's default, and a keypress can
    // come on its own after its keydown (a loaded browser, the DevTools protocol): refuse it
    // here too, or it logs in an account the captcha is still creating.
    S.form.addEventListener('keypress', function (ev) {
      if (registering(ev)) {
        ev.preventDefault();
      }
    });
    S.form.addEventListener('keydown', function (ev) {
      if (!registering(ev)) {
        return;
      }
      ev.preventDefault();
      S.lastAction = 'register';
      if (S.form.requestSubmit) {
        S.form.requestSubmit(S.regButton);
      } else {
        S.regButton.click();
      }
    });
  }
}

function renderArea(S) {
  var u = currentUser();
  show(S.form, u === null);
  show(S.userLine, u !== null);
  if (u !== null) {
    setText(S.nameEl, userName(u));
    if (S.nameEl) {
      S.nameEl.title = userName(u); // whole, where the line cuts it short
    }
    if (S.userLine) {
      S.userLine.setAttribute('data-user-id', u.id ? String(u.id) : '');
      S.userLine.setAttribute('data-role', u.role ? String(u.role) : '');
    }
  }
}

// credentials reads the form into the request's body, or says what is missing and returns
// null. A registration takes a captcha: the first press shows one, the next sends its answer.
async function credentials(S, action) {
  var username = S.form.elements.username.value.trim();
  var password = S.form.elements.password.value;
  if (!username || !password) {
    S.say(t('Type a username and a password.'), 'error');
    return null;
  }
  var body = { username: username, password: password };
  if (action !== 'register') {
    return body;
  }
  if (!S.captchaId) {
    S.busy = true;
    var shown = await loadRegCaptcha(S);
    S.busy = false;
    if (shown) {
      S.say(t('Type what the picture shows, then press Register.'), 'info');
      S.regAnswer.focus();
    }
    return null;
  }
  var answer = S.regAnswer.value.trim();
  if (!answer) {
    S.say(t('Type what the picture shows, then press Register.'), 'error');
    S.regAnswer.focus();
    return null;
  }
  body.captchaId = S.captchaId;
  body.answer = answer;
  return body;
}

// refused says why the shop did not sign the user in.
async function refused(S, action, r) {
  if (action === 'register' && !r.network) {
    // The challenge was used up (one answer each): show a fresh one.
    await loadRegCaptcha(S);
  }
  // The server's message in English; in Chinese, errorText says what it means.
  var text = lang === 'en' && r.message && !r.network && r.code !== 'RATE_LIMITED' ? sentence(r.message) : errorText(r);
  if (r.code === 'CAPTCHA_FAILED') {
    text = t('The captcha answer was wrong or expired; try the new picture.');
  } else if (r.code === 'UNAVAILABLE') {
    text = t('The shop is busy; try again in a moment.');
  }
  S.say(text, 'error');
}

// signedIn keeps who signed in, clears the form and tells the pages.
function signedIn(S, action, data, username) {
  var claims = tokenClaims(data.token);
  var role = typeof data.role === 'string' ? data.role : String(claims.role || '');
  var uid = data.userId !== undefined && data.userId !== null ? String(data.userId) : claims.sub ? String(claims.sub) : '';
  show(S.note, false);
  // The name as typed until the server says how the account spells it (usernames are
  // case-insensitive).
  var user = { id: uid, role: role, username: typeof data.username === 'string' ? data.username : username };
  store.set('fs_user', JSON.stringify(user));
  S.form.elements.password.value = '';
  S.captchaId = '';
  if (S.regBox) {
    S.regAnswer.value = '';
    show(S.regBox, false);
  }
  // Who is signed in is the session line's to say (beside this message on a phone, it read twice).
  S.say(t(action === 'register' ? 'Account created. Welcome!' : 'Welcome back!'), 'ok');
  sessionChanged();
  if (action === 'login') {
    learnUser(true);
  }
}

function setButtons(S, disabled) {
  Array.prototype.forEach.call(S.form.querySelectorAll('button'), function (b) {
    b.disabled = disabled;
  });
}

async function submit(S, ev) {
  if (S.busy) {
    return;
  }
  var action = ev.submitter && ev.submitter.value ? ev.submitter.value : S.lastAction;
  if (action !== 'register') {
    action = 'login';
  }
  // Busy from the first moment: a second submit of the same keystroke (Enter in the captcha's
  // field submits as Register; the browser's own implicit submission, as Log in, can follow it)
  // must not slip in while the credentials are read.
  S.busy = true;
  var body;
  try {
    body = await credentials(S, action);
  } finally {
    S.busy = false;
  }
  if (!body) {
    return;
  }
  S.busy = true;
  setButtons(S, true);
  S.say(action === 'register' ? t('Creating your account…') : t('Logging in…'), 'info');
  var r = await api('POST', '/api/auth/' + action, body);
  S.busy = false;
  setButtons(S, false);
  if (!r.ok || !r.data) {
    await refused(S, action, r);
    return;
  }
  signedIn(S, action, r.data, body.username);
}

function bindForm(S) {
  Array.prototype.forEach.call(S.form.querySelectorAll('button[type="submit"]'), function (b) {
    b.addEventListener('click', function () {
      S.lastAction = b.value || 'login';
    });
  });
  S.form.addEventListener('submit', function (ev) {
    ev.preventDefault();
    submit(S, ev);
  });
}

function bindLogout(S, logout) {
  logout.addEventListener('click', async function () {
    logout.disabled = true;
    var r = await api('POST', '/api/auth/logout', {});
    logout.disabled = false;
    if (r.ok || r.status === 401) {
      forgetSession();
      S.say(t('Logged out.'), 'info');
      sessionChanged();
    } else {
      S.say(errorText(r), 'error');
    }
  });
}

// initSession wires the login/register form and the "signed in as" line of a session area.
export function initSession(area, say) {
  if (!area) {
    return;
  }
  var S = {
    form: byTestId('login-form', area),
    userLine: byTestId('session-user', area),
    nameEl: byTestId('session-name', area),
    regBox: byTestId('register-captcha', area),
    regImage: byTestId('register-captcha-image', area),
    regAnswer: byTestId('register-captcha-answer', area),
    regRefresh: byTestId('register-captcha-refresh', area),
    regButton: byTestId('register-button', area),
    note: byTestId('login-note', area),
    // the page's message area, where a sentence said by the form fades (S.say)
    pageArea: document.querySelector('[data-testid="message"]'),
    fade: null,
    captchaId: '',
    lastAction: 'login',
    busy: false
  };
  // What the form answers shows in the form itself, once: on a phone the page's message area is
  // below the items, out of sight. Only what outlives the form (signed in, logged out) goes to
  // the page's message area, and goes away after a few seconds.
  S.say = function (text, kind) {
    if (S.note && kind !== 'ok' && currentUser() === null) {
      setText(S.note, text || '');
      S.note.setAttribute('data-kind', kind || 'info');
      show(S.note, !!text);
      return;
    }
    say(text, kind);
    window.clearTimeout(S.fade);
    if (kind === 'error') {
      return;
    }
    S.fade = window.setTimeout(function () {
      if (S.pageArea && S.pageArea.textContent === text) {
        say('', 'info');
      }
    }, 6000);
  };
  bindRegisterCaptcha(S);
  if (S.form) {
    bindForm(S);
  }
  var logout = byTestId('logout-button', area);
  if (logout) {
    bindLogout(S, logout);
  }
  onSession(function () {
    renderArea(S);
  });
  renderArea(S);
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
