package views

import "github.com/flashsale/flashsale/static"

// The script is native ES modules under /static/js/ (no build step): js/main.js is the entry, and
// it imports the module of the page it finds (see PAGES in static/js/main.js). Each page names
// every module it will load in <link rel="modulepreload"> hints, so that the browser fetches them
// side by side with main.js instead of discovering them one import after another: static.Preloads
// follows the modules' imports from main.js and the page's module. checkModulePreloads checks the
// hints against the imports as the test reads them. Every URL of an asset is static's: its
// content-hashed name, cached for good (static/assets.go).

// scriptEntry is the URL of the module the layout loads with <script type="module">.
func scriptEntry() string { return static.Path("js/main.js") }

// bootScript is the URL of the classic script the layout runs in <head>, before the page is
// drawn (static/js/boot.js: the session's mark on <html>, so that nothing moves later).
func bootScript() string { return static.Path("js/boot.js") }

// stylesheet is the URL of the pages' stylesheet.
func stylesheet() string { return static.Path("style.css") }

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
	pageSimPay      = "simpay" // the simulated payment provider's page
)

// pageModules are the module main.js loads for each page (none for the 404 page).
var pageModules = map[string]string{
	pageHome:        "home.js",
	pageSale:        "sale.js",
	pageOrder:       "order.js",
	pageMyOrders:    "orders.js",
	pageAdmin:       "admin.js",
	pageAdminLive:   "admin_live.js",
	pageAdminOrders: "admin_orders.js",
	pageNotFound:    "",
	pageSimPay:      "simpay.js",
}

// modulePreloads returns the URLs of the modules page loads besides the entry: its own and what
// it imports first, then what main.js imports.
func modulePreloads(page string) []string {
	roots := []string{"js/main.js"}
	if m := pageModules[page]; m != "" {
		roots = []string{"js/" + m, "js/main.js"}
	}
	entry := scriptEntry()
	var urls []string
	for _, u := range static.Preloads(roots...) {
		if u != entry { // the script element loads it
			urls = append(urls, u)
		}
	}
	return urls
}
