// The merchant's controls of one sale (views/admin_sale.templ, saleControls): whether Redis holds
// its stock, and Warm up now, Pause, Resume and End early (with a confirm step), each enabled only
// when it means something, with a sentence after each. Used in every sale of /admin and on the
// sale's live view.

import { byTestId, setText, show, enc, messenger } from './dom.js';
import { formatClock, parseTime } from './time.js';
import { api } from './api.js';
import { adminErrorText as errorText } from './admin_merchant.js';
import { t } from './i18n.js';

// ACTIONS: the route of each button and what it says once done.
const ACTIONS = {
  warm: { path: 'warm', busy: t('Loading the stock for the sale\u2026'), done: t('Warmed up: the stock is loaded, ready for the start.') },
  pause: { path: 'pause', busy: t('Pausing\u2026'), done: t('Paused: shoppers are told the sale is paused and nothing is sold until you resume.') },
  resume: { path: 'resume', busy: t('Resuming\u2026'), done: t('Resumed: shoppers can buy again.') },
  end: { path: 'end', busy: t('Ending the sale\u2026'), done: t('Ended: nothing more is sold. The orders already taken stay.') }
};

// loadedText says whether the sale's stock is loaded: "not loaded" or "loaded at HH:MM:SS".
export function loadedText(loadedAt) {
  var ms = parseTime(loadedAt);
  return isNaN(ms) ? t('not loaded') : t('loaded at {time}', { time: formatClock(ms) });
}

function render(K) {
  var state = K.state;
  var ended = state.status === 'ended';
  var loaded = state.loadedAt !== undefined && state.loadedAt !== null;
  if (ended) {
    setText(K.loadedValue, t('the sale has ended'));
    K.loadedLine.setAttribute('data-loaded', 'ended');
  } else if (state.loadedAt === undefined) {
    setText(K.loadedValue, t('checking\u2026'));
    K.loadedLine.setAttribute('data-loaded', 'unknown');
  } else {
    setText(K.loadedValue, loadedText(state.loadedAt));
    K.loadedLine.setAttribute('data-loaded', loaded ? 'yes' : 'no');
  }
  var b = K.buttons;
  b.warm.disabled = K.busy || ended || loaded || state.loadedAt === undefined;
  b.pause.disabled = K.busy || ended || state.paused;
  b.resume.disabled = K.busy || ended || !state.paused;
  b.end.disabled = K.busy || ended;
  b.warm.title = loaded ? t('The stock is already loaded') : ended ? t('The sale has ended') : '';
  b.pause.title = state.paused ? t('The sale is paused') : ended ? t('The sale has ended') : '';
  b.resume.title = !state.paused && !ended ? t('The sale is not paused') : ended ? t('The sale has ended') : '';
  if (ended || K.busy) {
    show(K.confirmBox, false);
  }
}

async function run(K, name) {
  var a = ACTIONS[name];
  K.busy = true;
  render(K);
  K.say(a.busy, 'info');
  var r = await api('POST', '/api/admin/sales/' + enc(K.opts.saleId) + '/' + a.path, {});
  K.busy = false;
  if (r.ok && r.data) {
    K.state.paused = r.data.paused === true;
    if (typeof r.data.status === 'string') {
      K.state.status = r.data.status;
    }
    render(K);
    K.say(a.done, 'ok');
    if (K.opts.after) {
      await K.opts.after(name, r.data);
    }
    return;
  }
  render(K);
  if (K.opts.authProblem && K.opts.authProblem(r)) {
    K.say('', 'info');
    return;
  }
  K.say(failedText(name, errorText(r)), 'error');
}

// failedText says that an action did not happen, and why.
function failedText(name, why) {
  switch (name) {
    case 'warm':
      return t('Could not warm up: {why}', { why: why });
    case 'pause':
      return t('Could not pause the sale: {why}', { why: why });
    case 'resume':
      return t('Could not resume the sale: {why}', { why: why });
  }
  return t('Could not end the sale: {why}', { why: why });
}

// bindButtons runs each action on its button; End early asks first.
function bindButtons(K, root) {
  var b = K.buttons;
  ['warm', 'pause', 'resume'].forEach(function (name) {
    b[name].addEventListener('click', function () {
      run(K, name);
    });
  });
  var confirmYes = byTestId('end-confirm-button', root);
  var confirmNo = byTestId('end-keep-button', root);
  b.end.addEventListener('click', function () {
    show(K.confirmBox, true);
    confirmNo.focus();
  });
  confirmNo.addEventListener('click', function () {
    show(K.confirmBox, false);
    b.end.focus();
  });
  confirmYes.addEventListener('click', function () {
    show(K.confirmBox, false);
    run(K, 'end');
  });
}

// bindControls wires one saleControls block. opts: saleId, name (for the sentences), after
// (called with the action's name and the sale the server answered, once an action succeeded),
// authProblem (called with a refusal; true when it handled it). It returns update(state), where
// state is {status: 'upcoming' | 'live' | 'ended', paused, loadedAt (a time, null: not loaded,
// undefined: not known)}, and say (the block's messenger).
export function bindControls(root, opts) {
  var K = {
    opts: opts,
    buttons: {
      warm: byTestId('warm-button', root),
      pause: byTestId('pause-button', root),
      resume: byTestId('resume-button', root),
      end: byTestId('end-button', root)
    },
    confirmBox: byTestId('end-confirm', root),
    loadedLine: byTestId('sale-loaded', root),
    loadedValue: byTestId('sale-loaded-text', root),
    say: messenger(byTestId('control-status', root)),
    state: { status: '', paused: false, loadedAt: undefined },
    busy: false
  };
  bindButtons(K, root);
  return {
    update: function (next) {
      if (next.status !== undefined) {
        K.state.status = next.status;
      }
      if (next.paused !== undefined) {
        K.state.paused = next.paused === true;
      }
      if (next.loadedAt !== undefined || next.status === 'ended') {
        K.state.loadedAt = next.loadedAt;
      }
      render(K);
    },
    say: K.say
  };
}
