// Package views renders the HTML pages of the shop from plain view models.
//
// The components hold no business logic and never see database types: handlers
// translate what the services return into the structs below. The sale page is
// identical for every visitor so that a CDN can cache it; everything that
// depends on the shopper or on the current time is done by the script (/static/js/).
package views

import "time"

// Page is the data every page shares through the layout.
type Page struct {
	Title string
}

// SaleCard is one sale as listed on the home page.
type SaleCard struct {
	ID       string
	Name     string
	StartsAt time.Time
	EndsAt   time.Time
	// Status is "upcoming", "live" or "ended", as computed when the page was rendered;
	// the script corrects it with the server-synced clock.
	Status string
	// Currency is the ISO 4217 code of the sale's prices (CNY, USD, EUR); "" is CNY.
	Currency string
	// Items are the sale's items, in their order; a card shows their names and prices.
	Items []SaleItem
	// Description is what the merchant wrote about the sale ("" when nothing).
	Description string
}

// Home is the home page: the live and upcoming sales, or (Ended) the sales that have ended.
type Home struct {
	Sales []SaleCard
	Next  string // the cursor of the next page ("" on the last)
	Paged bool   // this is not the first page
	// Ended: this page lists the ended sales, newest end first, folded away from the current ones.
	Ended bool
}

// SaleItem is one item on sale, with its price in cents and the units offered.
type SaleItem struct {
	ID         string
	Name       string
	PriceCents int64
	Quantity   int
	// ImageURL is the item's picture, an https address the catalog checked ("" when none).
	ImageURL string
}

// Sale is the cacheable sale page: it carries no shopper and no "now".
type Sale struct {
	ID       string
	Name     string
	StartsAt time.Time
	EndsAt   time.Time
	Items    []SaleItem
	// Currency is the ISO 4217 code of the sale's prices (CNY, USD, EUR); "" is CNY.
	Currency string
	// Description is what the merchant wrote about the sale ("" when nothing).
	Description string
	// FairStartMillis is the sale's draw window after its start (0: none): purchases in it are
	// drawn at random instead of first come, first served.
	FairStartMillis int
	// Upcoming: the sale had not started when the page was made. The page then shows "Remind me"
	// and the calendar link at once (the script hides them from the start, by the shop's clock).
	Upcoming bool
	// FairOver: the fair start's window had closed when the page was made: its note is drawn
	// hidden from the first frame (the script hides it at the window's end, by the shop's
	// clock, on a page made before), so nothing below it moves up as the page is drawn.
	FairOver bool
}

// Order is the order page, whose status the script polls.
type Order struct {
	ID string
}

// SimulatedCheckout is the simulated payment provider's page of one order.
type SimulatedCheckout struct {
	SessionID, OrderID, ItemName, SaleName string
	AmountCents                            int64
	Currency                               string
	Open, Paid                             bool
	PayBy                                  time.Time
}

// Admin is the merchant page; everything on it is loaded by the script after login.
type Admin struct{}

// AdminSale is a merchant page of one sale (its live view, its orders): only the sale's id,
// since the page is the same for everyone and the script loads the rest for its merchant.
type AdminSale struct {
	ID string
}
