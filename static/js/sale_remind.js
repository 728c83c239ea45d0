// The sale page's "Remind me", before the start: for a signed-in shopper only (logged out, it says
// to log in first), the browser's permission to notify, a notification in this open tab at the
// start second by the shop's clock (the countdown renders the page at that very millisecond), the
// reminder kept in localStorage so a reload keeps it, and counted once per shopper by the shop
// (POST /api/flash-sales/{id}/remind, with the session; the body still carries a random id per
// browser and sale) for the merchant's estimate of the crowd. The calendar link needs none of
// it. From the start, the whole box goes away.

import { byTestId, enc, setText, show } from './dom.js';
import { api, isUnauthenticated } from './api.js';
import { store } from './storage.js';
import { currentUser, loggedIn, onSession, sessionExpired } from './session.js';
import { t } from './i18n.js';

function storeKey(saleId) {
  return 'fs_remind:' + saleId;
}

// load reads the sale's reminder: { id, on, counted, fired }; counted is the id of the shopper the
// shop counted it for ('' none yet; a reminder counted before it took a login, true, counts again).
function load(saleId) {
  var rec = null;
  try {
    rec = JSON.parse(store.get(storeKey(saleId)) || 'null');
  } catch (e) {
    rec = null;
  }
  if (!rec || typeof rec !== 'object' || typeof rec.id !== 'string' || !/^[A-Za-z0-9-]{16,64}$/.test(rec.id)) {
    rec = { id: newId(), on: false, counted: '', fired: false };
  }
  if (typeof rec.counted !== 'string') {
    rec.counted = '';
  }
  return rec;
}

// newId is a random id for this browser and sale: a UUID where the browser makes one (secure
// contexts), else 32 random hex digits.
function newId() {
  if (window.crypto && typeof window.crypto.randomUUID === 'function') {
    return window.crypto.randomUUID();
  }
  var b = new Uint8Array(16);
  window.crypto.getRandomValues(b);
  return Array.prototype.map.call(b, function (x) {
    return (x < 16 ? '0' : '') + x.toString(16);
  }).join('');
}

function notifications() {
  return typeof window.Notification === 'function' ? window.Notification : null;
}

// ask asks the browser's permission to notify: 'granted', 'denied', 'default' or 'unsupported'.
function ask() {
  var N = notifications();
  if (!N || typeof N.requestPermission !== 'function') {
    return Promise.resolve('unsupported');
  }
  if (N.permission === 'granted' || N.permission === 'denied') {
    return Promise.resolve(N.permission);
  }
  return new Promise(function (resolve) {
    var p;
    try {
      p = N.requestPermission(resolve); // older browsers answer through the callback
    } catch (e) {
      resolve('unsupported');
      return;
    }
    if (p && typeof p.then === 'function') {
      p.then(resolve, function () {
        resolve('unsupported');
      });
    }
  });
}

function setSentence() {
  return t('This page will notify you at the start: keep this tab open.');
}

function refusedSentence(answer) {
  return answer === 'unsupported'
    ? t('This browser cannot show notifications: add the sale to your calendar instead.')
    : t('Notifications are blocked for this site: add the sale to your calendar instead.');
}

function save(R) {
  store.set(storeKey(R.page.saleId), JSON.stringify(R.rec));
}

// shopperId is the signed-in shopper's id as the session knows it ('' when not known yet).
function shopperId() {
  var u = currentUser();
  return u && u.id ? String(u.id) : '';
}

// needLogin says that a reminder takes a signed-in shopper, and leads to the login form.
function needLogin(R) {
  setText(R.status, t('Log in first to set a reminder.'));
  R.status.setAttribute('data-kind', 'notice');
  R.askedLogin = true;
  var user = byTestId('username', R.page.section);
  if (user) {
    user.focus();
  }
}

// notShopper says that a merchant's account cannot set a reminder.
function notShopper(R) {
  setText(R.status, t('A merchant account cannot set a reminder: log in with a shopper account.'));
  R.status.setAttribute('data-kind', 'notice');
}

// count tells the shop once per shopper (the shop counts each shopper once however often it is
// told); a reminder whose count did not get through is counted on the next visit or login. A
// session the shop no longer takes signs out; after a press, that or a merchant's session takes
// the reminder back and says why. Any other refusal (the sale started, or is gone) is final.
async function count(R, pressed) {
  var who = shopperId();
  if (R.counting || !loggedIn() || (who && R.rec.counted === who)) {
    return;
  }
  R.counting = true;
  var r = await api('POST', '/api/flash-sales/' + enc(R.page.saleId) + '/remind', { reminderId: R.rec.id });
  R.counting = false;
  if (!r.ok && (isUnauthenticated(r) || r.code === 'FORBIDDEN')) {
    // Not counted: the session is gone (signed out here too), or it is a merchant's.
    if (isUnauthenticated(r)) {
      sessionExpired();
    }
    if (pressed) {
      R.rec.on = false;
      save(R);
      draw(R);
      if (r.code === 'FORBIDDEN') {
        notShopper(R);
      } else {
        needLogin(R);
      }
    }
    return;
  }
  if (r.ok || (!r.network && r.status >= 400 && r.status < 500 && r.status !== 429)) {
    R.rec.counted = who;
    save(R);
  }
}

function draw(R) {
  var on = R.rec.on;
  show(R.button, !on);
  show(R.setLabel, on);
  show(R.undo, on);
}

async function press(R) {
  if (!loggedIn()) {
    needLogin(R);
    return;
  }
  var u = currentUser();
  if (u && u.role === 'merchant') {
    notShopper(R);
    return;
  }
  R.button.disabled = true;
  var answer = await ask();
  R.button.disabled = false;
  if (answer !== 'granted') {
    setText(R.status, refusedSentence(answer));
    R.status.setAttribute('data-kind', 'notice');
    return;
  }
  R.rec.on = true;
  R.rec.fired = false;
  save(R);
  draw(R);
  setText(R.status, setSentence());
  R.status.setAttribute('data-kind', 'ok');
  if (R.undo) {
    R.undo.focus();
  }
  count(R, true);
}

function undo(R) {
  R.rec.on = false;
  save(R);
  draw(R);
  setText(R.status, t('Reminder removed.'));
  R.status.setAttribute('data-kind', 'info');
  if (R.button) {
    R.button.focus();
  }
}

// notify shows the start's notification once; clicking it brings this tab forward.
function notify(R) {
  var N = notifications();
  if (!N || N.permission !== 'granted' || R.rec.fired) {
    return;
  }
  R.rec.fired = true;
  save(R);
  try {
    var n = new N(t('{name} has started', { name: R.name }), {
      body: t('The sale is live: buy now.'),
      tag: 'flashsale-start-' + R.page.saleId
    });
    n.onclick = function () {
      window.focus();
      n.close();
    };
  } catch (e) {
    // Some browsers (Chrome on Android) show notifications only from a service worker: the open
    // page itself shows that the sale is live.
  }
}

// render follows the sale's phase: the box before the start only; at the start (the phase
// turning from upcoming to live while this tab is open) the notification.
function render(R, phase) {
  if (!R.box) {
    return;
  }
  var prev = R.phase;
  R.phase = phase;
  if (phase === 'upcoming') {
    show(R.box, true);
  } else if (phase !== 'unknown') {
    show(R.box, false);
  }
  if (prev === 'upcoming' && phase === 'live' && R.rec.on) {
    notify(R);
  }
}

// initRemind returns render(phase), which the page calls on every render.
export function initRemind(page) {
  var box = byTestId('remind', page.section);
  var name = byTestId('sale-name', page.section);
  var R = {
    page: page,
    box: box,
    name: name ? name.textContent.trim() : '',
    button: byTestId('remind-button', box || page.section),
    setLabel: byTestId('remind-set', box || page.section),
    undo: byTestId('remind-undo', box || page.section),
    status: byTestId('remind-status', box || page.section),
    rec: load(page.saleId),
    phase: null,
    counting: false,
    askedLogin: false // the status asks to log in
  };
  if (box) {
    if (R.button) {
      R.button.addEventListener('click', function () {
        press(R);
      });
    }
    if (R.undo) {
      R.undo.addEventListener('click', function () {
        undo(R);
      });
    }
    draw(R);
    if (R.rec.on) {
      var N = notifications();
      var granted = N && N.permission === 'granted';
      setText(R.status, granted ? setSentence() : refusedSentence(N ? 'denied' : 'unsupported'));
      R.status.setAttribute('data-kind', granted ? 'ok' : 'notice');
      count(R, false);
    }
    // A reminder set before a login (or counted for another shopper) counts once signed in;
    // the sentence asking to log in goes once someone is.
    onSession(function () {
      if (!loggedIn()) {
        return;
      }
      if (R.askedLogin) {
        R.askedLogin = false;
        setText(R.status, '');
      }
      if (R.rec.on && (R.phase === null || R.phase === 'upcoming')) {
        count(R, false);
      }
    });
  }
  return {
    render: function (phase) {
      render(R, phase);
    }
  };
}
