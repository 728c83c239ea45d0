// The merchant's controls of one sale (views/admin_sale.templ, saleControls): whether Redis holds
// its stock, and Warm up now, Pause, Resume and End early (with a confirm step), each enabled only
// when it means something, with a sentence after each. Used in every sale of /admin and on the
// sale's live view.

import { byTestId, setText, show, enc, messenger } from './dom.js';
import { formatClock, parseTime } from './time.js';
import { api, errorText } from './api.js';

// ACTIONS: the route of each button and what it says once done.
const ACTIONS = {
  warm: { path: 'warm', busy: 'Loading the stock into Redis\u2026', done: 'Warmed up: the stock is in Redis, ready for the start.' },
  pause: { path: 'pause', busy: 'Pausing\u2026', done: 'Paused: shoppers are told the sale is paused and nothing is sold until you resume.' },
  resume: { path: 'resume', busy: 'Resuming\u2026', done: 'Resumed: shoppers can buy again.' },
  end: { path: 'end', busy: 'Ending the sale\u2026', done: 'Ended: nothing more is sold. The orders already taken stay.' }
};

// loadedText says whether Redis holds a sale's stock: "not loaded" or "loaded at HH:MM:SS".
export function loadedText(loadedAt) {
  var ms = parseTime(loadedAt);
  return isNaN(ms) ? 'not loaded' : 'loaded at ' + formatClock(ms);
}

function render(K) {
  var state = K.state;
  var ended = state.status === 'ended';
  var loaded = state.loadedAt !== undefined && state.loadedAt !== null;
  if (ended) {
    setText(K.loadedValue, 'the sale has ended');
    K.loadedLine.setAttribute('data-loaded', 'ended');
  } else if (state.loadedAt === undefined) {
    setText(K.loadedValue, 'checking\u2026');
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
  b.warm.title = loaded ? 'Redis already holds the stock' : ended ? 'The sale has ended' : '';
  b.pause.title = state.paused ? 'The sale is paused' : ended ? 'The sale has ended' : '';
  b.resume.title = !state.paused && !ended ? 'The sale is not paused' : ended ? 'The sale has ended' : '';
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
  K.say((name === 'warm' ? 'Could not warm up: ' : 'Could not ' + name + ' the sale: ') + errorText(r), 'error');
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
