// Whether the browser is online, as far as it knows: navigator.onLine and its online and
// offline events. "Offline" is reliable (there is no network); "online" only means there may be.

import { byTestId, show } from './dom.js';

var listeners = [];

export function isOnline() {
  return navigator.onLine !== false;
}

// onNetwork calls fn(online) whenever the browser goes offline or comes back online.
export function onNetwork(fn) {
  listeners.push(fn);
}

function changed() {
  var online = isOnline();
  listeners.forEach(function (fn) {
    fn(online);
  });
}

window.addEventListener('online', changed);
window.addEventListener('offline', changed);

// initOfflineNotice shows the layout's offline notice while the browser is offline.
export function initOfflineNotice() {
  var notice = byTestId('offline-notice');
  function render(online) {
    show(notice, !online);
  }
  onNetwork(render);
  render(isOnline());
}
