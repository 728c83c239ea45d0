// The sale page's "Remind me", before the start: the browser's permission to notify, a
// notification in this open tab at the start second by the shop's clock (the countdown renders
// the page at that very millisecond), the reminder kept in localStorage so a reload keeps it, and
// counted once by the shop (POST /api/flash-sales/{id}/remind, a random id per browser and sale)
// for the merchant's estimate of the crowd. The calendar link needs none of it. From the start,
// the whole box goes away.

import { byTestId, enc, setText, show } from './dom.js';
import { api } from './api.js';
import { store } from './storage.js';
import { t } from './i18n.js';

function storeKey(saleId) {
  return 'fs_remind:' + saleId;
}

// load reads the sale's reminder: { id, on, counted, fired }.
function load(saleId) {
  var rec = null;
  try {
    rec = JSON.parse(store.get(storeKey(saleId)) || 'null');
  } catch (e) {
    rec = null;
  }
  if (!rec || typeof rec !== 'object' || typeof rec.id !== 'string' || !/^[A-Za-z0-9-]{16,64}$/.test(rec.id)) {
    rec = { id: newId(), on: false, counted: false, fired: false };
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

// count tells the shop once; a reminder whose count did not get through is counted on the next
// visit. A refusal (the sale started, or is gone) is final.
async function count(R) {
  if (R.rec.counted || R.counting) {
    return;
  }
  R.counting = true;
  var r = await api('POST', '/api/flash-sales/' + enc(R.page.saleId) + '/remind', { reminderId: R.rec.id });
  R.counting = false;
  if (r.ok || (!r.network && r.status >= 400 && r.status < 500 && r.status !== 429)) {
    R.rec.counted = true;
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
  count(R);
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
    counting: false
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
      count(R);
    }
  }
  return {
    render: function (phase) {
      render(R, phase);
    }
  };
}
