package views

import "github.com/flashsale/flashsale/static"

// The script is native ES modules under /static/js/ (no build step): js/main.js is the entry, and
// it imports the module of the page it finds (see PAGES in static/js/main.js). Each page names
// every module it will load in <link rel="modulepreload"> hints, so that the browser fetches them
// side by side with main.js instead of discovering them one import after another.
// TestModulePreloads checks these lists against the modules' imports. Every URL of an asset is
// static.Path's: its content-hashed name, cached for good (static/assets.go).

// scriptEntry is the URL of the module the layout loads with <script type="module">.
func scriptEntry() string { return static.Path("js/main.js") }

// stylesheet is the URL of the pages' stylesheet.
func stylesheet() string { return static.Path("style.css") }

// commonModules are what main.js imports on every page.
var commonModules = []string{"dom.js", "i18n.js", "time.js", "storage.js", "api.js", "session.js", "nav.js", "network.js"}

// Page keys for layout: which page's modules to preload.
const (
	pageHome     = "home"
	pageSale     = "sale"
	pageOrder    = "order"
	pageMyOrders = "orders"
	pageAdmin    = "admin"
	// the merchant's pages of one sale
	pageAdminLive   = "admin-live"
	pageAdminOrders = "admin-orders"
	pageNotFound    = "notfound"
)

// pageModules are the modules a page needs besides commonModules: its own and what it imports.
var pageModules = map[string][]string{
	pageHome: {"home.js", "clock.js", "poll.js"},
	pageSale: {"sale.js", "sale_countdown.js", "sale_items.js", "sale_captcha.js", "sale_purchase.js", "sale_orders.js",
		"order.js", "order_actions.js", "status.js", "clock.js", "money.js", "poll.js"},
	pageOrder:    {"order.js", "order_actions.js", "status.js", "clock.js", "money.js", "poll.js"},
	pageMyOrders: {"orders.js", "orders_row.js", "status.js", "clock.js", "money.js", "poll.js"},
	pageAdmin: {"admin.js", "admin_merchant.js", "admin_sales.js", "admin_stock.js", "admin_form.js", "admin_form_fields.js",
		"admin_form_errors.js", "admin_form_edit.js", "admin_controls.js", "clock.js", "money.js", "poll.js"},
	pageAdminLive:   {"admin_live.js", "admin_live_view.js", "admin_merchant.js", "admin_controls.js", "admin_chart.js", "poll.js"},
	pageAdminOrders: {"admin_orders.js", "admin_merchant.js", "money.js"},
	pageNotFound:    nil,
}

// modulePreloads returns the URLs of the modules page needs besides the entry: its own first.
func modulePreloads(page string) []string {
	mods := append(append([]string(nil), pageModules[page]...), commonModules...)
	urls := make([]string, len(mods))
	for i, m := range mods {
		urls[i] = static.Path("js/" + m)
	}
	return urls
}
