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

// bindControls wires one saleControls block. opts: saleId, name (for the sentences), after
// (called with the action's name and the sale the server answered, once an action succeeded),
// authProblem (called with a refusal; true when it handled it). It returns update(state), where
// state is {status: 'upcoming' | 'live' | 'ended', paused, loadedAt (a time, null: not loaded,
// undefined: not known)}.
export function bindControls(root, opts) {
  var buttons = {
    warm: byTestId('warm-button', root),
    pause: byTestId('pause-button', root),
    resume: byTestId('resume-button', root),
    end: byTestId('end-button', root)
  };
  var confirmBox = byTestId('end-confirm', root);
  var confirmYes = byTestId('end-confirm-button', root);
  var confirmNo = byTestId('end-keep-button', root);
  var loadedLine = byTestId('sale-loaded', root);
  var loadedValue = byTestId('sale-loaded-text', root);
  var say = messenger(byTestId('control-status', root));
  var state = { status: '', paused: false, loadedAt: undefined };
  var busy = false;

  function render() {
    var ended = state.status === 'ended';
    var loaded = state.loadedAt !== undefined && state.loadedAt !== null;
    if (ended) {
      setText(loadedValue, 'the sale has ended');
      loadedLine.setAttribute('data-loaded', 'ended');
    } else if (state.loadedAt === undefined) {
      setText(loadedValue, 'checking\u2026');
      loadedLine.setAttribute('data-loaded', 'unknown');
    } else {
      setText(loadedValue, loadedText(state.loadedAt));
      loadedLine.setAttribute('data-loaded', loaded ? 'yes' : 'no');
    }
    buttons.warm.disabled = busy || ended || loaded || state.loadedAt === undefined;
    buttons.pause.disabled = busy || ended || state.paused;
    buttons.resume.disabled = busy || ended || !state.paused;
    buttons.end.disabled = busy || ended;
    buttons.warm.title = loaded ? 'Redis already holds the stock' : ended ? 'The sale has ended' : '';
    buttons.pause.title = state.paused ? 'The sale is paused' : ended ? 'The sale has ended' : '';
    buttons.resume.title = !state.paused && !ended ? 'The sale is not paused' : ended ? 'The sale has ended' : '';
    if (ended || busy) {
      show(confirmBox, false);
    }
  }

  async function run(name) {
    var a = ACTIONS[name];
    busy = true;
    render();
    say(a.busy, 'info');
    var r = await api('POST', '/api/admin/sales/' + enc(opts.saleId) + '/' + a.path, {});
    busy = false;
    if (r.ok && r.data) {
      state.paused = r.data.paused === true;
      if (typeof r.data.status === 'string') {
        state.status = r.data.status;
      }
      render();
      say(a.done, 'ok');
      if (opts.after) {
        await opts.after(name, r.data);
      }
      return;
    }
    render();
    if (opts.authProblem && opts.authProblem(r)) {
      say('', 'info');
      return;
    }
    say((name === 'warm' ? 'Could not warm up: ' : 'Could not ' + name + ' the sale: ') + errorText(r), 'error');
  }

  buttons.warm.addEventListener('click', function () {
    run('warm');
  });
  buttons.pause.addEventListener('click', function () {
    run('pause');
  });
  buttons.resume.addEventListener('click', function () {
    run('resume');
  });
  buttons.end.addEventListener('click', function () {
    show(confirmBox, true);
    confirmNo.focus();
  });
  confirmNo.addEventListener('click', function () {
    show(confirmBox, false);
    buttons.end.focus();
  });
  confirmYes.addEventListener('click', function () {
    show(confirmBox, false);
    run('end');
  });

  return {
    update: function (next) {
      if (next.status !== undefined) {
        state.status = next.status;
      }
      if (next.paused !== undefined) {
        state.paused = next.paused === true;
      }
      if (next.loadedAt !== undefined || next.status === 'ended') {
        state.loadedAt = next.loadedAt;
      }
      render();
    },
    say: say
  };
}
