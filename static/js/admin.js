// The merchant's page (/admin), by concern: their sales (admin_sales.js), each with its
// controls (admin_controls.js) and its live stock (admin_stock.js), and the form that creates a
// sale or edits one (admin_form.js). This module holds what those share and lets only a
// merchant in (admin_merchant.js).

import './i18n_zh_admin.js'; // first: the merchant's words before any module runs
import { byTestId, messenger } from './dom.js';
import { merchantPage } from './admin_merchant.js';
import { initSales } from './admin_sales.js';
import { initStock } from './admin_stock.js';
import { initSaleForm } from './admin_form.js';

export function initAdminPage(admin) {
  var page = {
    root: admin,
    say: messenger(byTestId('message', admin)),
    // itemNames are the names of items this page created, for the stock table.
    itemNames: {}
  };
  page.gate = merchantPage(admin, {
    panel: byTestId('admin-panel', admin),
    say: page.say,
    stop: function () {
      page.sales.poller.stop();
      page.stock.stop();
    },
    signedOut: function () {
      page.stock.forget();
    },
    start: function (u) {
      if (u.role === 'merchant' && page.gate.admit()) {
        page.form.prefillTimes();
      }
      page.sales.poller.restart();
    }
  });
  page.sales = initSales(page);
  page.stock = initStock(page);
  page.form = initSaleForm(page);
  page.gate.watch();
}
