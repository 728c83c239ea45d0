// The simulated payment provider's page (/pay/simulated/{session}): Pay takes the (pretend) money
// and confirms it, as Stripe's webhook would, then returns to the order page, which polls the
// status, the same round trip as with Stripe Checkout.

import { byTestId, enc, messenger } from './dom.js';
import { api, errorText } from './api.js';
import { t, href } from './i18n.js';

export function initSimPayPage(page) {
  var btn = byTestId('simpay-pay', page);
  var say = messenger(byTestId('message', page));
  var session = page.getAttribute('data-session-id');
  page.setAttribute('data-ready', ''); // the page's script is running (the tests wait for it)
  if (!btn || !session) {
    return;
  }
  var busy = false;
  btn.addEventListener('click', async function () {
    if (busy) {
      return;
    }
    busy = true;
    btn.disabled = true;
    say(t('Paying…'), 'info');
    var r = await api('POST', '/api/payments/simulated/' + enc(session) + '/pay', {});
    if (r.ok && r.data && typeof r.data.returnUrl === 'string') {
      window.location.assign(href(r.data.returnUrl));
      return;
    }
    busy = false;
    btn.disabled = false;
    say(r.network ? t('The payment could not be sent (the network dropped): nothing was charged. Try again.') : errorText(r), 'error');
  });
}
