package views

import (
	"bytes"
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"
)

// render renders c and parses the result, failing the test on any error.
func render(t *testing.T, c templ.Component) (*goquery.Document, string) {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(context.Background(), &buf); err != nil {
		t.Fatalf("Render: %v", err)
	}
	html := buf.String()
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(html))
	if err != nil {
		t.Fatalf("parse HTML: %v", err)
	}
	return doc, html
}

func byTestID(id string) string {
	return `[data-testid="` + id + `"]`
}

var (
	saleStart = time.Date(2031, 3, 4, 2, 0, 0, 0, time.UTC)
	saleEnd   = time.Date(2031, 3, 4, 3, 30, 0, 0, time.UTC)
)

func demoSale() Sale {
	return Sale{
		ID:       "42",
		Name:     "Spring phones",
		StartsAt: saleStart,
		EndsAt:   saleEnd,
		Items: []SaleItem{
			{ID: "7", Name: "Phone X", PriceCents: 1234, Quantity: 100},
			{ID: "8", Name: "Phone Y", PriceCents: 99900, Quantity: 5},
			{ID: "9", Name: "Case", PriceCents: 5, Quantity: 1},
		},
	}
}

func TestLayout(t *testing.T) {
	tests := []struct {
		name  string
		c     templ.Component
		title string
	}{
		{"home", HomePage(Home{}), "Flash sales · flashsale"},
		{"sale", SalePage(demoSale()), "Spring phones · flashsale"},
		{"order", OrderPage(Order{ID: "b3c1"}), "Order · flashsale"},
		{"my orders", MyOrdersPage(MyOrders{}), "My orders · flashsale"},
		{"admin", AdminPage(Admin{}), "Merchant admin · flashsale"},
		{"not found", NotFoundPage("no such sale"), "Not found · flashsale"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, html := render(t, tt.c)
			if got := strings.ToLower(html[:min(len(html), 15)]); got != "<!doctype html>" {
				t.Errorf("document starts with %q, want <!doctype html>", got)
			}
			if got, want := doc.Find("title").Text(), tt.title; got != want {
				t.Errorf("title = %q, want %q", got, want)
			}
			if got, _ := doc.Find(`meta[name="viewport"]`).Attr("content"); !strings.Contains(got, "width=device-width") {
				t.Errorf("viewport content = %q, want width=device-width", got)
			}
			if got, want := doc.Find(`link[rel="stylesheet"][href="/static/style.css"]`).Length(), 1; got != want {
				t.Errorf("stylesheet links = %d, want %d", got, want)
			}
			scripts := doc.Find("script")
			if got, want := scripts.Length(), 1; got != want {
				t.Fatalf("script elements = %d, want %d (only /static/js/main.js, no inline script)", got, want)
			}
			if got, _ := scripts.Attr("src"); got != "/static/js/main.js" {
				t.Errorf("script src = %q, want /static/js/main.js", got)
			}
			if got, _ := scripts.Attr("type"); got != "module" {
				t.Errorf("script type = %q, want module", got)
			}
			checkModulePreloads(t, doc)
			home := doc.Find("header " + byTestID("home-link"))
			if got, _ := home.Attr("href"); got != "/" {
				t.Errorf("home link href = %q, want /", got)
			}
			if got, want := home.Text(), "flashsale"; got != want {
				t.Errorf("home link text = %q, want %q", got, want)
			}
			if got, _ := doc.Find("header " + byTestID("admin-link")).Attr("href"); got != "/admin" {
				t.Errorf("admin link href = %q, want /admin", got)
			}
			// "My orders" is for signed-in shoppers: the page is the same for everyone, so the
			// link is there but hidden, and the script shows it.
			orders := doc.Find("header nav " + byTestID("nav-orders"))
			if got, want := orders.Length(), 1; got != want {
				t.Fatalf("my orders links in the nav = %d, want %d", got, want)
			}
			if got := orders.AttrOr("href", ""); got != "/orders" {
				t.Errorf("my orders link href = %q, want /orders", got)
			}
			if got, want := orders.Text(), "My orders"; got != want {
				t.Errorf("my orders link text = %q, want %q", got, want)
			}
			if _, hidden := orders.Attr("hidden"); !hidden {
				t.Errorf("my orders link visible in the rendered page, want hidden until the script knows who is signed in")
			}
			if got := doc.Find("[style], style").Length(); got != 0 {
				t.Errorf("inline styles = %d, want 0 (the CSP allows style-src 'self' only)", got)
			}
			if got, want := doc.Find("main").Length(), 1; got != want {
				t.Errorf("main elements = %d, want %d", got, want)
			}
			if got := doc.Find("[onclick], [onload], [onerror], [onsubmit]").Length(); got != 0 {
				t.Errorf("inline event handlers = %d, want 0", got)
			}
		})
	}
}

func TestSalePage(t *testing.T) {
	s := demoSale()
	doc, _ := render(t, SalePage(s))

	sec := doc.Find("section" + byTestID("sale"))
	if got, want := sec.Length(), 1; got != want {
		t.Fatalf("sale sections = %d, want %d", got, want)
	}
	for attr, want := range map[string]time.Time{"data-starts-at": s.StartsAt, "data-ends-at": s.EndsAt} {
		v, _ := sec.Attr(attr)
		got, err := time.Parse(time.RFC3339, v)
		if err != nil {
			t.Errorf("%s = %q, not RFC 3339: %v", attr, v, err)
			continue
		}
		if !got.Equal(want) {
			t.Errorf("%s = %v, want %v", attr, got, want)
		}
	}
	if got, _ := sec.Attr("data-sale-id"); got != "42" {
		t.Errorf("data-sale-id = %q, want 42", got)
	}
	if got, want := sec.Find(byTestID("sale-name")).Text(), "Spring phones"; got != want {
		t.Errorf("sale name = %q, want %q", got, want)
	}

	// One row, one stock badge and one disabled buy button per item, in order.
	rows := sec.Find(byTestID("item"))
	if got, want := rows.Length(), len(s.Items); got != want {
		t.Fatalf("item rows = %d, want %d", got, want)
	}
	buttons := sec.Find("button" + byTestID("buy-button"))
	if got, want := buttons.Length(), len(s.Items); got != want {
		t.Errorf("buy buttons = %d, want %d", got, want)
	}
	buttons.Each(func(i int, b *goquery.Selection) {
		if _, disabled := b.Attr("disabled"); !disabled {
			t.Errorf("buy button %d is not disabled", i)
		}
	})
	wantPrices := []string{"¥12.34", "¥999.00", "¥0.05"}
	rows.Each(func(i int, row *goquery.Selection) {
		it := s.Items[i]
		if got, _ := row.Attr("data-item-id"); got != it.ID {
			t.Errorf("row %d data-item-id = %q, want %q", i, got, it.ID)
		}
		if got := row.Find(byTestID("item-name")).Text(); got != it.Name {
			t.Errorf("row %d name = %q, want %q", i, got, it.Name)
		}
		if got, want := row.Find(byTestID("price")).Text(), wantPrices[i]; got != want {
			t.Errorf("row %d price = %q, want %q", i, got, want)
		}
		if got := row.Find(".item-price").Text(); !strings.Contains(got, "Price") {
			t.Errorf("row %d price text = %q, want it labelled Price", i, got)
		}
		if got, _ := row.Find("span" + byTestID("stock")).Attr("data-item-id"); got != it.ID {
			t.Errorf("row %d stock data-item-id = %q, want %q", i, got, it.ID)
		}
		if got, _ := row.Find(byTestID("buy-button")).Attr("data-item-id"); got != it.ID {
			t.Errorf("row %d buy button data-item-id = %q, want %q", i, got, it.ID)
		}
	})

	// Every element the script drives exists exactly once.
	for _, id := range []string{"countdown", "session", "login-form", "captcha", "captcha-image",
		"captcha-answer", "captcha-refresh", "message", "order", "order-status", "pay-by", "pay-button"} {
		if got, want := sec.Find(byTestID(id)).Length(), 1; got != want {
			t.Errorf("elements with data-testid=%q = %d, want %d", id, got, want)
		}
	}
	form := sec.Find(byTestID("login-form"))
	if got := form.Find(`input[name="username"]`).Length(); got != 1 {
		t.Errorf("username inputs = %d, want 1", got)
	}
	if got, _ := form.Find(`input[name="password"]`).Attr("type"); got != "password" {
		t.Errorf("password input type = %q, want password", got)
	}
	for _, id := range []string{"register-captcha", "register-captcha-image", "register-captcha-answer", "register-captcha-refresh", "login-note"} {
		if got := form.Find(byTestID(id)).Length(); got != 1 {
			t.Errorf("login form elements with data-testid=%q = %d, want 1", id, got)
		}
	}
	if _, hidden := form.Find(byTestID("register-captcha")).Attr("hidden"); !hidden {
		t.Errorf("the registration captcha is shown before Register is pressed, want hidden")
	}
	if got, want := form.Find(`button[type="submit"]`).Map(func(_ int, b *goquery.Selection) string { return b.Text() }), []string{"Log in", "Register"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("login form buttons = %q, want %q", got, want)
	}
	if got := sec.Find("img" + byTestID("captcha-image")).Length(); got != 1 {
		t.Errorf("captcha images = %d, want 1", got)
	}
	msg := sec.Find("p" + byTestID("message"))
	if got, _ := msg.Attr("role"); got != "status" {
		t.Errorf("message role = %q, want status", got)
	}
	if got, _ := msg.Attr("aria-live"); got != "polite" {
		t.Errorf("message aria-live = %q, want polite", got)
	}
	if _, hidden := sec.Find(byTestID("sale-orders")).Attr("hidden"); !hidden {
		t.Errorf("order box is visible before any purchase, want hidden")
	}
	if got := sec.Find("template " + byTestID("order")).Length(); got != 1 {
		t.Errorf("orders in the order box's template = %d, want 1 (the script copies it per order)", got)
	}
	if got := sec.Find("span" + byTestID("order-status")).Length(); got != 1 {
		t.Errorf("order-status spans = %d, want 1", got)
	}
	if got := sec.Find("span" + byTestID("pay-by")).Length(); got != 1 {
		t.Errorf("pay-by spans = %d, want 1", got)
	}
	if _, hidden := sec.Find("button" + byTestID("pay-button")).Attr("hidden"); !hidden {
		t.Errorf("pay button is visible, want hidden")
	}
}

func TestSalePageTimes(t *testing.T) {
	shanghai := time.FixedZone("CST", 8*3600)
	s := demoSale()
	s.StartsAt = time.Date(2031, 3, 4, 10, 0, 0, 0, shanghai) // 02:00 UTC
	doc, _ := render(t, SalePage(s))

	if got, want := doc.Find(byTestID("sale")).AttrOr("data-starts-at", ""), "2031-03-04T02:00:00Z"; got != want {
		t.Errorf("data-starts-at = %q, want %q", got, want)
	}
	tests := []struct {
		testid, datetime, text string
	}{
		{"starts-at", "2031-03-04T02:00:00Z", "2031-03-04 02:00 UTC"},
		{"ends-at", "2031-03-04T03:30:00Z", "2031-03-04 03:30 UTC"},
	}
	for _, tt := range tests {
		tm := doc.Find("time" + byTestID(tt.testid))
		if got := tm.AttrOr("datetime", ""); got != tt.datetime {
			t.Errorf("%s datetime = %q, want %q", tt.testid, got, tt.datetime)
		}
		if got := tm.Text(); got != tt.text {
			t.Errorf("%s text = %q, want %q", tt.testid, got, tt.text)
		}
	}
}

// The sale page is cached by a CDN: it must not depend on who asks or when.
func TestSalePageSameForEveryVisitor(t *testing.T) {
	t.Parallel()
	_, first := render(t, SalePage(demoSale()))
	time.Sleep(1100 * time.Millisecond)
	doc, second := render(t, SalePage(demoSale()))
	if first != second {
		t.Errorf("two renders of the same sale differ; want byte-identical pages")
	}
	now := time.Now()
	own := rfc3339(saleStart) + " " + rfc3339(saleEnd) // the sale's own times may share a date with today
	for _, s := range []string{now.UTC().Format("2006-01-02"), now.Format("2006-01-02"), now.UTC().Format("15:04:05")} {
		if !strings.Contains(own, s) && strings.Contains(second, s) {
			t.Errorf("page contains %q from the current time; want no time-dependent text", s)
		}
	}
	tests := []struct {
		testid string
		want   string
	}{
		{"session-name", ""},
		{"order-id", ""},
		{"pay-by", ""},
		{"message", ""},
	}
	for _, tt := range tests {
		if got := doc.Find(byTestID(tt.testid)).Text(); got != tt.want {
			t.Errorf("%s text = %q, want %q (filled in by the script)", tt.testid, got, tt.want)
		}
	}
	if _, hidden := doc.Find(byTestID("session-user")).Attr("hidden"); !hidden {
		t.Errorf("signed-in line is visible in the cached page, want hidden")
	}
	doc.Find(byTestID("stock")).Each(func(i int, s *goquery.Selection) {
		if got := s.Text(); strings.ContainsAny(got, "0123456789") {
			t.Errorf("stock badge %d = %q, want a placeholder (live stock comes from the script)", i, got)
		}
	})
}

func TestSalePageEscapesNames(t *testing.T) {
	const evilItem = `<script>alert("pwned")</script>`
	const evilSale = `"><img src=x onerror=alert(1)>`
	s := demoSale()
	s.Name = evilSale
	s.ID = `1" onmouseover="alert(1)`
	s.Items[0].Name = evilItem
	doc, html := render(t, SalePage(s))

	for _, bad := range []string{"<script>alert", "<img src=x", `" onmouseover="`} {
		if strings.Contains(html, bad) {
			t.Errorf("HTML contains %q unescaped", bad)
		}
	}
	if got, want := doc.Find("script").Length(), 1; got != want {
		t.Errorf("script elements = %d, want %d", got, want)
	}
	if got := doc.Find("[onerror], [onmouseover]").Length(); got != 0 {
		t.Errorf("elements with injected handlers = %d, want 0", got)
	}
	if got := doc.Find(byTestID("item-name")).First().Text(); got != evilItem {
		t.Errorf("item name text = %q, want %q", got, evilItem)
	}
	if got := doc.Find(byTestID("sale-name")).Text(); got != evilSale {
		t.Errorf("sale name text = %q, want %q", got, evilSale)
	}
	if got := doc.Find(byTestID("sale")).AttrOr("data-sale-id", ""); got != s.ID {
		t.Errorf("data-sale-id = %q, want %q", got, s.ID)
	}
}

func TestFormatPrice(t *testing.T) {
	tests := []struct {
		cents int64
		want  string
	}{
		{0, "¥0.00"},
		{5, "¥0.05"},
		{10, "¥0.10"},
		{1234, "¥12.34"},
		{100000, "¥1000.00"},
		{-250, "-¥2.50"},
		{math.MinInt64, "-¥92233720368547758.08"},
	}
	for _, tt := range tests {
		if got := formatPrice(tt.cents); got != tt.want {
			t.Errorf("formatPrice(%d) = %q, want %q", tt.cents, got, tt.want)
		}
	}
}

func TestHomePage(t *testing.T) {
	tests := []struct {
		name       string
		home       Home
		wantCards  int
		wantEmpty  bool
		wantLinks  []string
		wantBadges []string
	}{
		{name: "no sales", home: Home{}, wantEmpty: true},
		{
			name: "live and upcoming",
			home: Home{Sales: []SaleCard{
				{ID: "1", Name: "Phones", StartsAt: saleStart, EndsAt: saleEnd, Status: "live"},
				{ID: "a/b", Name: "Tea <b>", StartsAt: saleStart, EndsAt: saleEnd, Status: "upcoming"},
			}},
			wantCards:  2,
			wantLinks:  []string{"/sales/1", "/sales/a%2Fb"},
			wantBadges: []string{"Live now", "Upcoming"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, _ := render(t, HomePage(tt.home))
			cards := doc.Find(byTestID("sale-card"))
			if got := cards.Length(); got != tt.wantCards {
				t.Fatalf("sale cards = %d, want %d", got, tt.wantCards)
			}
			if got := doc.Find(byTestID("empty-state")).Length() == 1; got != tt.wantEmpty {
				t.Errorf("empty state shown = %v, want %v", got, tt.wantEmpty)
			}
			cards.Each(func(i int, c *goquery.Selection) {
				sc := tt.home.Sales[i]
				link := c.Find("a" + byTestID("sale-link"))
				if got := link.AttrOr("href", ""); got != tt.wantLinks[i] {
					t.Errorf("card %d href = %q, want %q", i, got, tt.wantLinks[i])
				}
				if got := link.Text(); got != sc.Name {
					t.Errorf("card %d name = %q, want %q", i, got, sc.Name)
				}
				badge := c.Find(byTestID("sale-status"))
				if got := badge.Text(); got != tt.wantBadges[i] {
					t.Errorf("card %d badge = %q, want %q", i, got, tt.wantBadges[i])
				}
				if got := badge.AttrOr("data-status", ""); got != sc.Status {
					t.Errorf("card %d data-status = %q, want %q", i, got, sc.Status)
				}
				if got, want := c.Find("time").Length(), 2; got != want {
					t.Errorf("card %d times = %d, want %d", i, got, want)
				}
				if got, want := c.AttrOr("data-starts-at", ""), "2031-03-04T02:00:00Z"; got != want {
					t.Errorf("card %d data-starts-at = %q, want %q", i, got, want)
				}
			})
		})
	}
}

func TestOrderPage(t *testing.T) {
	const id = "0b9f6a4e-2f6c-4c35-9d3b-3a1f0c9e7d11"
	doc, _ := render(t, OrderPage(Order{ID: id}))
	panel := doc.Find(byTestID("order"))
	if got, want := panel.Length(), 1; got != want {
		t.Fatalf("order panels = %d, want %d", got, want)
	}
	if got := panel.AttrOr("data-order-id", ""); got != id {
		t.Errorf("data-order-id = %q, want %q", got, id)
	}
	if _, hidden := panel.Attr("hidden"); hidden {
		t.Errorf("order panel hidden, want visible")
	}
	if got, want := panel.Find("a"+byTestID("order-link")).AttrOr("href", ""), "/orders/"+id; got != want {
		t.Errorf("order link = %q, want %q", got, want)
	}
	for _, testid := range []string{"order-status", "pay-by", "pay-button"} {
		if got := panel.Find(byTestID(testid)).Length(); got != 1 {
			t.Errorf("elements with data-testid=%q = %d, want 1", testid, got)
		}
	}
	if _, hidden := panel.Find(byTestID("pay-button")).Attr("hidden"); !hidden {
		t.Errorf("pay button visible before the status is known, want hidden")
	}
	if got, _ := doc.Find(byTestID("message")).Attr("role"); got != "status" {
		t.Errorf("message role = %q, want status", got)
	}
}

func TestAdminPage(t *testing.T) {
	doc, _ := render(t, AdminPage(Admin{}))
	form := doc.Find(byTestID("login-form"))
	for _, name := range []string{"username", "password"} {
		if got := form.Find(`input[name="` + name + `"]`).Length(); got != 1 {
			t.Errorf("login inputs named %s = %d, want 1", name, got)
		}
	}
	if got := form.Find(byTestID("register-button")).Length(); got != 0 {
		t.Errorf("register buttons = %d, want 0 (merchants are created by the operator)", got)
	}
	if _, hidden := doc.Find(byTestID("admin-panel")).Attr("hidden"); !hidden {
		t.Errorf("admin panel visible before login, want hidden")
	}

	create := doc.Find("form" + byTestID("create-sale-form"))
	inputs := []struct {
		name, typ string
	}{
		{"name", "text"},
		{"startsAt", "datetime-local"},
		{"endsAt", "datetime-local"},
	}
	for _, in := range inputs {
		if got := create.Find(`input[name="`+in.name+`"]`).AttrOr("type", ""); got != in.typ {
			t.Errorf("input %s type = %q, want %q", in.name, got, in.typ)
		}
	}
	row := create.Find(byTestID("item-rows") + " " + byTestID("item-row"))
	if got, want := row.Length(), 1; got != want {
		t.Fatalf("item rows = %d, want %d", got, want)
	}
	for _, in := range []struct{ name, typ string }{{"itemName", "text"}, {"price", "text"}, {"quantity", "number"}} {
		if got := row.Find(`input[name="`+in.name+`"]`).AttrOr("type", ""); got != in.typ {
			t.Errorf("item input %s type = %q, want %q", in.name, got, in.typ)
		}
	}
	if got := create.Find("template" + byTestID("item-row-template")).Length(); got != 1 {
		t.Errorf("item row templates = %d, want 1", got)
	}
	if got := create.Find("button" + byTestID("add-item")).Text(); got != "Add item" {
		t.Errorf("add item button = %q, want %q", got, "Add item")
	}
	if got := doc.Find(byTestID("admin-sales")).Length(); got != 1 {
		t.Errorf("admin sales lists = %d, want 1", got)
	}
	headers := doc.Find("table" + byTestID("stock-table") + " thead th").Map(func(_ int, s *goquery.Selection) string { return s.Text() })
	if got, want := strings.Join(headers, ","), "Item,Price,Quantity,Displayed,Frozen,Real,Paid,Reconciled"; got != want {
		t.Errorf("stock table columns = %q, want %q", got, want)
	}
}

// TestAdminPageMerchantForm: issue 13's merchant points in the markup. A price is typed as a
// decimal after the sale's currency symbol, the sale has a currency, a payment window and a
// purchase limit with defaults, every field has a place for its error (tied to it for screen
// readers), each item is one group with its own Remove button, and the live stock panel has a
// way to close it.
func TestAdminPageMerchantForm(t *testing.T) {
	doc, _ := render(t, AdminPage(Admin{}))
	create := doc.Find("form" + byTestID("create-sale-form"))
	if _, ok := create.Attr("novalidate"); !ok {
		t.Errorf("the create form lacks novalidate: the browser's own bubbles would stand in for the merchant's words")
	}

	// 9: a price in the sale's currency, as a decimal.
	cur := create.Find("select[name=currency]" + byTestID("create-currency"))
	opts := cur.Find("option").Map(func(_ int, s *goquery.Selection) string { return s.AttrOr("value", "") })
	if got := strings.Join(opts, ","); got != "CNY,USD,EUR" {
		t.Errorf("currency options = %q, want CNY,USD,EUR", got)
	}
	if got := cur.Find("option[selected]").AttrOr("value", ""); got != "CNY" {
		t.Errorf("default currency = %q, want CNY", got)
	}
	price := create.Find(byTestID("item-rows") + " " + byTestID("item-price-input"))
	if price.AttrOr("type", "") != "text" || price.AttrOr("inputmode", "") != "decimal" || price.AttrOr("name", "") != "price" {
		t.Errorf("price input: type %q inputmode %q name %q, want a decimal text field named price",
			price.AttrOr("type", ""), price.AttrOr("inputmode", ""), price.AttrOr("name", ""))
	}
	if _, has := price.Attr("step"); has {
		t.Errorf("the price input has a step: the browser would refuse 19.99")
	}
	if got := create.Find(byTestID("item-rows") + " " + byTestID("item-price-symbol")).Text(); got != "¥" {
		t.Errorf("price symbol = %q, want ¥ (CNY)", got)
	}
	if strings.Contains(create.Text(), "cents") {
		t.Errorf("the form still speaks of cents: %q", create.Text())
	}
	win := create.Find(`input[name="paymentWindowMinutes"]`)
	if win.AttrOr("value", "") != "10" || win.AttrOr("min", "") != "1" || win.AttrOr("max", "") != "1440" {
		t.Errorf("payment window: value %q min %q max %q, want 10 minutes, 1 to 1440",
			win.AttrOr("value", ""), win.AttrOr("min", ""), win.AttrOr("max", ""))
	}
	limits := create.Find(`input[type="radio"][name="purchaseLimit"]`)
	if got := strings.Join(limits.Map(func(_ int, s *goquery.Selection) string { return s.AttrOr("value", "") }), ","); got != "per-sale,per-item" {
		t.Errorf("purchase limit choices = %q, want per-sale,per-item", got)
	}
	if got := limits.Filter("[checked]").AttrOr("value", ""); got != "per-sale" {
		t.Errorf("default purchase limit = %q, want per-sale", got)
	}

	// 10: a place for each field's error, named by the field's aria-describedby.
	for _, f := range []struct{ input, errID string }{
		{`input[name="name"]`, "error-name"},
		{`input[name="startsAt"]`, "error-starts-at"},
		{`input[name="endsAt"]`, "error-ends-at"},
		{`select[name="currency"]`, "error-currency"},
		{`input[name="paymentWindowMinutes"]`, "error-payment-window"},
	} {
		in := create.Find(f.input)
		if !strings.Contains(" "+in.AttrOr("aria-describedby", "")+" ", " "+f.errID+" ") {
			t.Errorf("%s aria-describedby = %q, want it to name %s", f.input, in.AttrOr("aria-describedby", ""), f.errID)
		}
		errEl := create.Find("#" + f.errID)
		if errEl.Length() != 1 || !errEl.HasClass("field-error") || errEl.Closest("[data-field]").Find(f.input).Length() != 1 {
			t.Errorf("error place #%s: %d found, want one .field-error beside %s", f.errID, errEl.Length(), f.input)
		}
		if _, hidden := errEl.Attr("hidden"); !hidden {
			t.Errorf("#%s is shown before anything went wrong", f.errID)
		}
	}
	if got := create.Find(byTestID("form-status")).AttrOr("role", ""); got != "status" {
		t.Errorf("form status role = %q, want status", got)
	}

	// 11: each item is one group (a fieldset with a numbered legend) holding its fields and
	// its Remove button, in the page and in the template the script clones.
	for _, where := range []string{byTestID("item-rows"), "template" + byTestID("item-row-template")} {
		row := create.Find(where + " " + byTestID("item-row"))
		if row.Length() != 1 || goquery.NodeName(row) != "fieldset" {
			t.Errorf("%s: item rows = %d (%s), want one fieldset", where, row.Length(), goquery.NodeName(row))
			continue
		}
		if got := strings.Join(strings.Fields(row.ChildrenFiltered("legend").Text()), " "); got != "Item 1" {
			t.Errorf("%s: item legend = %q, want \"Item 1\"", where, got)
		}
		for _, id := range []string{"item-name-input", "item-price-input", "item-quantity-input", "remove-item", "item-name-error", "item-price-error", "item-quantity-error"} {
			if row.Find(byTestID(id)).Length() != 1 {
				t.Errorf("%s: the item group lacks %s", where, id)
			}
		}
	}

	// The stock panel starts hidden, can be closed, and stacks on a phone by labelled cells.
	panel := doc.Find(byTestID("stock-panel"))
	if _, hidden := panel.Attr("hidden"); !hidden || panel.AttrOr("id", "") != "stock-panel" {
		t.Errorf("stock panel: hidden %v, id %q; want hidden with id stock-panel", hidden, panel.AttrOr("id", ""))
	}
	if got := panel.Find("button" + byTestID("stock-close")).Text(); got != "Close" {
		t.Errorf("stock panel close button = %q, want Close", got)
	}
}

func TestNotFoundPage(t *testing.T) {
	tests := []struct {
		message string
		want    string
	}{
		{"No sale 99.", "No sale 99."},
		{"<b>bold</b>", "<b>bold</b>"},
		{"", "The page you asked for does not exist, or the sale is over."},
	}
	for _, tt := range tests {
		doc, html := render(t, NotFoundPage(tt.message))
		if got := doc.Find(byTestID("not-found-message")).Text(); got != tt.want {
			t.Errorf("NotFoundPage(%q) message = %q, want %q", tt.message, got, tt.want)
		}
		if strings.Contains(html, "<b>bold") {
			t.Errorf("NotFoundPage(%q) left the message unescaped", tt.message)
		}
		if got := doc.Find("main a[href=\"/\"]").Length(); got != 1 {
			t.Errorf("NotFoundPage(%q) links home %d times, want 1", tt.message, got)
		}
	}
}

// loginTarget checks a page's logged-out sentence: hidden in the rendered page, and its link
// leads to the page's own login form.
func loginTarget(t *testing.T, doc *goquery.Document, wantText string) {
	t.Helper()
	note := doc.Find(byTestID("logged-out"))
	if got, want := note.Length(), 1; got != want {
		t.Fatalf("logged-out sentences = %d, want %d", got, want)
	}
	if _, hidden := note.Attr("hidden"); !hidden {
		t.Errorf("logged-out sentence visible before the script knows, want hidden")
	}
	if got := strings.Join(strings.Fields(note.Text()), " "); got != wantText {
		t.Errorf("logged-out sentence = %q, want %q", got, wantText)
	}
	href := note.Find("a"+byTestID("login-link")).AttrOr("href", "")
	if !strings.HasPrefix(href, "#") {
		t.Fatalf("login link href = %q, want a link to the page's login form", href)
	}
	target := doc.Find(`[id="` + href[1:] + `"]`)
	if got, want := target.Length(), 1; got != want {
		t.Fatalf("elements with id %q = %d, want %d", href[1:], got, want)
	}
	form := target.Find("form" + byTestID("login-form"))
	for _, name := range []string{"username", "password"} {
		if got := form.Find(`input[name="` + name + `"]`).Length(); got != 1 {
			t.Errorf("login inputs named %s under #%s = %d, want 1", name, href[1:], got)
		}
	}
	if got := form.Find(byTestID("register-button")).Length(); got != 0 {
		t.Errorf("register buttons = %d, want 0 (a new account has no orders)", got)
	}
}

func TestMyOrdersPage(t *testing.T) {
	doc, html := render(t, MyOrdersPage(MyOrders{}))
	page := doc.Find("section" + byTestID("my-orders"))
	if got, want := page.Length(), 1; got != want {
		t.Fatalf("my orders sections = %d, want %d", got, want)
	}
	if got, want := page.Find("h1").Text(), "My orders"; got != want {
		t.Errorf("heading = %q, want %q", got, want)
	}
	loginTarget(t, doc, "You are not signed in. Log in to see your orders.")

	// Nothing is shown as loading, empty or loaded until the script knows: a page whose script
	// never runs must not spin forever.
	for _, id := range []string{"orders-loading", "orders-empty", "load-more"} {
		el := page.Find(byTestID(id))
		if got := el.Length(); got != 1 {
			t.Errorf("elements with data-testid=%q = %d, want 1", id, got)
		}
		if _, hidden := el.Attr("hidden"); !hidden {
			t.Errorf("%s visible in the rendered page, want hidden", id)
		}
	}
	if got := page.Find(byTestID("orders-loading")).Text(); !strings.Contains(got, "Loading your orders") {
		t.Errorf("loading text = %q", got)
	}
	if got := page.Find(byTestID("orders-empty") + ` a[href="/"]`).Length(); got != 1 {
		t.Errorf("empty state links to the sales %d times, want 1", got)
	}
	more := page.Find("button" + byTestID("load-more"))
	if got, want := more.Text(), "Load more"; got != want {
		t.Errorf("load more button = %q, want %q", got, want)
	}
	if got := more.AttrOr("type", ""); got != "button" {
		t.Errorf("load more button type = %q, want button", got)
	}
	if got := page.Find("ul" + byTestID("order-list")).Children().Length(); got != 0 {
		t.Errorf("orders in the rendered list = %d, want 0 (the script loads them)", got)
	}
	if got, _ := page.Find("p" + byTestID("message")).Attr("role"); got != "status" {
		t.Errorf("message role = %q, want status", got)
	}
	if got := page.Find("noscript").Length(); got != 1 {
		t.Errorf("noscript notes = %d, want 1", got)
	}

	// One row template with every part the script fills in.
	tpl := page.Find("template" + byTestID("order-row-template"))
	if got, want := tpl.Length(), 1; got != want {
		t.Fatalf("order row templates = %d, want %d", got, want)
	}
	// goquery does not see into <template>: parse its content on its own.
	inner, err := tpl.Html()
	if err != nil {
		t.Fatalf("template content: %v", err)
	}
	row, err := goquery.NewDocumentFromReader(strings.NewReader("<ul>" + inner + "</ul>"))
	if err != nil {
		t.Fatalf("parse the row template: %v", err)
	}
	if got, want := row.Find("li"+byTestID("order-row")).Length(), 1; got != want {
		t.Fatalf("rows in the template = %d, want %d", got, want)
	}
	for _, id := range []string{"order-row-item", "order-row-status", "order-row-price", "order-row-sale",
		"order-row-deadline", "order-row-pay-by", "order-row-pay-left", "order-row-note", "order-row-created", "order-row-link"} {
		if got := row.Find(byTestID(id)).Length(); got != 1 {
			t.Errorf("template elements with data-testid=%q = %d, want 1", id, got)
		}
	}
	if got := row.Find("a" + byTestID("order-row-link")).Text(); got != "View order" {
		t.Errorf("row link text = %q, want View order", got)
	}
	if got := row.Find("a" + byTestID("order-row-sale")).Length(); got != 1 {
		t.Errorf("row sale links = %d, want 1", got)
	}
	if _, hidden := row.Find(byTestID("order-row-deadline")).Attr("hidden"); !hidden {
		t.Errorf("row deadline visible in the template, want hidden (pending orders only)")
	}
	if got := row.Find(byTestID("order-row-status")).AttrOr("class", ""); !strings.Contains(got, "order-badge") {
		t.Errorf("row status class = %q, want the order badge", got)
	}
	if strings.Contains(html, "<script>") {
		t.Errorf("page has an inline script")
	}
}

func TestOrderPageActions(t *testing.T) {
	const id = "0b9f6a4e-2f6c-4c35-9d3b-3a1f0c9e7d11"
	doc, _ := render(t, OrderPage(Order{ID: id}))
	panel := doc.Find(byTestID("order"))

	// Item, price and sale come from the API: their rows wait hidden for the script.
	for _, id := range []string{"order-item-row", "order-price-row", "order-sale-row"} {
		el := panel.Find(byTestID(id))
		if got := el.Length(); got != 1 {
			t.Errorf("elements with data-testid=%q = %d, want 1", id, got)
		}
		if _, hidden := el.Attr("hidden"); !hidden {
			t.Errorf("%s visible before the order is known, want hidden", id)
		}
	}
	if got := panel.Find("a" + byTestID("order-sale")).Length(); got != 1 {
		t.Errorf("sale links = %d, want 1", got)
	}

	// Pay and cancel: buttons, hidden until the order is known to be PENDING; cancelling asks first.
	buttons := []struct{ testid, text string }{
		{"pay-button", "Pay now"},
		{"cancel-button", "Cancel order"},
		{"cancel-confirm-button", "Yes, cancel the order"},
		{"cancel-keep-button", "No, keep it"},
	}
	for _, b := range buttons {
		el := panel.Find("button" + byTestID(b.testid))
		if got := el.Length(); got != 1 {
			t.Errorf("buttons with data-testid=%q = %d, want 1", b.testid, got)
			continue
		}
		if got := el.Text(); got != b.text {
			t.Errorf("%s text = %q, want %q", b.testid, got, b.text)
		}
		if got := el.AttrOr("type", ""); got != "button" {
			t.Errorf("%s type = %q, want button", b.testid, got)
		}
	}
	for _, id := range []string{"pay-button", "cancel-button", "cancel-confirm"} {
		if _, hidden := panel.Find(byTestID(id)).Attr("hidden"); !hidden {
			t.Errorf("%s visible before the status is known, want hidden", id)
		}
	}
	confirm := panel.Find(byTestID("cancel-confirm"))
	if got := confirm.Text(); !strings.Contains(got, "Cancel this order?") || !strings.Contains(got, "back on sale") {
		t.Errorf("cancel question = %q, want it to ask and say the unit goes back on sale", strings.Join(strings.Fields(got), " "))
	}
	if got := confirm.Find(byTestID("cancel-confirm-button") + "," + byTestID("cancel-keep-button")).Length(); got != 2 {
		t.Errorf("buttons in the confirmation = %d, want 2", got)
	}

	loginTarget(t, doc, "You are not signed in. Log in to see this order.")
	if got := doc.Find("main a"+byTestID("all-orders-link")).AttrOr("href", ""); got != "/orders" {
		t.Errorf("all orders link = %q, want /orders", got)
	}
}

// The sale page's order panel offers the same actions, hidden until a purchase.
func TestSalePageOrderActions(t *testing.T) {
	doc, _ := render(t, SalePage(demoSale()))
	for _, id := range []string{"pay-button", "cancel-button", "cancel-confirm", "pay-by-row", "order-actions"} {
		el := doc.Find(byTestID("order") + " " + byTestID(id))
		if got := el.Length(); got != 1 {
			t.Errorf("elements with data-testid=%q in the order panel = %d, want 1", id, got)
		}
		if _, hidden := el.Attr("hidden"); !hidden {
			t.Errorf("%s visible on the cached sale page, want hidden", id)
		}
	}
	if got := doc.Find(byTestID("logged-out")).Length(); got != 0 {
		t.Errorf("logged-out sentences on the sale page = %d, want 0 (it has its own login form)", got)
	}
}

// The sale page's order box (issue 13, points 3-5): one list for every order of the shopper in
// the sale, filled by the script from a template that shows each order's item, price, status in
// words, deadline, "Pay now" and "Cancel"; each item has a note for why it cannot be bought.
// Nothing of it is shown on the cached page, and no id repeats when the template is copied.
func TestSalePageOrderBox(t *testing.T) {
	doc, html := render(t, SalePage(demoSale()))
	box := doc.Find("section" + byTestID("sale-orders"))
	if box.Length() != 1 {
		t.Fatalf("order boxes = %d, want 1", box.Length())
	}
	if _, hidden := box.Attr("hidden"); !hidden {
		t.Errorf("the order box is shown on the cached page, want hidden until the script has orders")
	}
	if got := strings.TrimSpace(box.Find("h2").Text()); got != "Your orders in this sale" {
		t.Errorf("order box heading = %q, want \"Your orders in this sale\"", got)
	}
	if got := box.Find("ul" + byTestID("sale-order-list")).Children().Length(); got != 0 {
		t.Errorf("orders listed on the cached page = %d, want 0", got)
	}
	tmpl := box.Find("template" + byTestID("sale-order-template"))
	if tmpl.Length() != 1 {
		t.Fatalf("order templates = %d, want 1", tmpl.Length())
	}
	order := tmpl.Find("li" + byTestID("order"))
	if order.Length() != 1 {
		t.Fatalf("orders in the template = %d, want 1", order.Length())
	}
	for _, id := range []string{"order-item", "order-price", "order-status", "pay-by", "pay-left", "order-note",
		"pay-button", "cancel-button", "cancel-confirm-button", "cancel-keep-button", "order-link", "order-id"} {
		if got := order.Find(byTestID(id)).Length(); got != 1 {
			t.Errorf("elements with data-testid=%q in an order of the box = %d, want 1", id, got)
		}
	}
	if got := order.Find(byTestID("order-status")).Text(); got != "Checking…" {
		t.Errorf("status before the script knows it = %q, want \"Checking…\" (sentence case)", got)
	}
	if got := order.Find("[id]").Length(); got != 0 {
		t.Errorf("elements with an id in the order template = %d, want 0 (it is copied once per order)", got)
	}
	if strings.Count(html, `id="sale-orders-heading"`) != 1 {
		t.Errorf("the order box heading's id is not unique")
	}
	// One note per item, empty and hidden until the script knows the shopper's orders.
	notes := doc.Find(byTestID("item") + " " + byTestID("item-note"))
	if got, want := notes.Length(), len(demoSale().Items); got != want {
		t.Errorf("item notes = %d, want %d", got, want)
	}
	notes.Each(func(i int, n *goquery.Selection) {
		if _, hidden := n.Attr("hidden"); !hidden || strings.TrimSpace(n.Text()) != "" {
			t.Errorf("item note %d = %q, hidden %v; want empty and hidden", i, n.Text(), hidden)
		}
		if got, _ := n.Attr("data-item-id"); got != demoSale().Items[i].ID {
			t.Errorf("item note %d data-item-id = %q, want %q", i, got, demoSale().Items[i].ID)
		}
	})
	if got, _ := doc.Find(byTestID("captcha-answer")).Attr("enterkeyhint"); got != "go" {
		t.Errorf("captcha answer enterkeyhint = %q, want go (Enter submits it)", got)
	}
	if got := doc.Find(byTestID("order-page")).Length(); got != 0 {
		t.Errorf("the sale page holds an order page")
	}
}

// The sale page writes its prices in the sale's currency, like every other page.
func TestSalePageCurrency(t *testing.T) {
	for currency, want := range map[string]string{"": "¥12.34", "CNY": "¥12.34", "USD": "$12.34", "EUR": "€12.34"} {
		s := demoSale()
		s.Currency = currency
		doc, _ := render(t, SalePage(s))
		if got := doc.Find(byTestID("item") + " " + byTestID("price")).First().Text(); got != want {
			t.Errorf("currency %q: price = %q, want %q", currency, got, want)
		}
	}
}

// Each card of the home page shows its sale's items with their prices in the sale's currency,
// and an empty countdown that the script fills in; more than five items are counted, not listed.
func TestHomePageCardItems(t *testing.T) {
	items := func(n int) []SaleItem {
		var out []SaleItem
		for i := range n {
			out = append(out, SaleItem{ID: strconv.Itoa(i + 1), Name: "Thing " + strconv.Itoa(i+1), PriceCents: int64(100*i + 5)})
		}
		return out
	}
	home := Home{Sales: []SaleCard{
		{ID: "1", Name: "Phones", StartsAt: saleStart, EndsAt: saleEnd, Status: "live", Currency: "CNY",
			Items: []SaleItem{{ID: "7", Name: "Phone <X>", PriceCents: 1999, Quantity: 100}, {ID: "8", Name: "Case", PriceCents: 5, Quantity: 5}}},
		{ID: "2", Name: "Shoes", StartsAt: saleStart, EndsAt: saleEnd, Status: "upcoming", Currency: "USD",
			Items: []SaleItem{{ID: "9", Name: "Runner", PriceCents: 123456}}},
		{ID: "3", Name: "Tea", StartsAt: saleStart, EndsAt: saleEnd, Status: "upcoming", Currency: "EUR", Items: items(7)},
		{ID: "4", Name: "Old", StartsAt: saleStart, EndsAt: saleEnd, Status: "upcoming"},
	}}
	doc, _ := render(t, HomePage(home))
	type item struct{ name, price string }
	want := [][]item{
		{{"Phone <X>", "¥19.99"}, {"Case", "¥0.05"}},
		{{"Runner", "$1,234.56"}},
		{{"Thing 1", "€0.05"}, {"Thing 2", "€1.05"}, {"Thing 3", "€2.05"}, {"Thing 4", "€3.05"}, {"Thing 5", "€4.05"}},
		nil,
	}
	wantMore := []string{"", "", "and 2 more items", ""}
	cards := doc.Find(byTestID("sale-card"))
	if cards.Length() != len(want) {
		t.Fatalf("cards = %d, want %d", cards.Length(), len(want))
	}
	cards.Each(func(i int, c *goquery.Selection) {
		var got []item
		c.Find(byTestID("card-item")).Each(func(_ int, li *goquery.Selection) {
			got = append(got, item{li.Find(byTestID("card-item-name")).Text(), li.Find(byTestID("card-item-price")).Text()})
		})
		if len(got) != len(want[i]) {
			t.Errorf("card %d items = %v, want %v", i, got, want[i])
			return
		}
		for j := range got {
			if got[j] != want[i][j] {
				t.Errorf("card %d item %d = %v, want %v", i, j, got[j], want[i][j])
			}
		}
		if got := strings.TrimSpace(c.Find(byTestID("card-items-more")).Text()); got != wantMore[i] {
			t.Errorf("card %d more line = %q, want %q", i, got, wantMore[i])
		}
		if want[i] == nil && c.Find(byTestID("card-items")).Length() != 0 {
			t.Errorf("card %d without items has an item list", i)
		}
		cd := c.Find(byTestID("card-countdown"))
		if _, hidden := cd.Attr("hidden"); cd.Length() != 1 || !hidden || cd.Text() != "" {
			t.Errorf("card %d countdown: %d, hidden %v, text %q; want one, hidden and empty until the script fills it", i, cd.Length(), hidden, cd.Text())
		}
	})
	if _, hidden := doc.Find(byTestID("all-ended")).Attr("hidden"); !hidden {
		t.Errorf("the all-ended note is visible in the page, want hidden until the script sees every sale ended")
	}
}

// The home page holds nothing that depends on the visitor or on the moment of rendering beyond
// what its model says, so a shared cache may give it to everyone.
func TestHomePageSameForEveryVisitor(t *testing.T) {
	home := Home{Sales: []SaleCard{{ID: "1", Name: "Phones", StartsAt: saleStart, EndsAt: saleEnd, Status: "live",
		Items: []SaleItem{{ID: "7", Name: "Phone", PriceCents: 1999}}}}}
	_, first := render(t, HomePage(home))
	time.Sleep(1100 * time.Millisecond)
	_, second := render(t, HomePage(home))
	if first != second {
		t.Errorf("two renders of the same home page differ; want byte-identical pages")
	}
}

// The session area names the user through hooks the script fills in: the name (empty and
// hidden in the page), and the user id and role as attributes.
func TestSessionAreaHooks(t *testing.T) {
	for _, c := range []struct {
		name string
		page templ.Component
	}{{"sale", SalePage(demoSale())}, {"order", OrderPage(Order{ID: "x"})}, {"my orders", MyOrdersPage(MyOrders{})}} {
		doc, _ := render(t, c.page)
		line := doc.Find(byTestID("session") + " " + byTestID("session-user"))
		if line.Length() != 1 {
			t.Errorf("%s: session-user lines = %d, want 1", c.name, line.Length())
			continue
		}
		if _, hidden := line.Attr("hidden"); !hidden {
			t.Errorf("%s: the signed-in line is visible in the page, want hidden", c.name)
		}
		name := line.Find(byTestID("session-name"))
		if name.Length() != 1 || name.Text() != "" {
			t.Errorf("%s: session-name: %d, text %q; want one, empty", c.name, name.Length(), name.Text())
		}
		if got := strings.Join(strings.Fields(line.Text()), " "); got != "Signed in as · Log out" {
			t.Errorf("%s: the signed-in line reads %q, want \"Signed in as · Log out\" around the name", c.name, got)
		}
		if line.Find(byTestID("logout-button")).Length() != 1 {
			t.Errorf("%s: no logout button in the signed-in line", c.name)
		}
	}
}

func TestMoneyText(t *testing.T) {
	for _, tt := range []struct {
		minor    int64
		currency string
		want     string
	}{
		{1999, "CNY", "¥19.99"}, {1999, "", "¥19.99"}, {1999, "usd", "$19.99"}, {5, "EUR", "€0.05"},
		{100, "JPY", "¥100"}, {-250, "USD", "-$2.50"}, {1999, "CHF", "19.99 CHF"},
		{math.MinInt64, "CNY", "-¥92,233,720,368,547,758.08"},
		{99900, "CNY", "¥999.00"}, {100000, "CNY", "¥1,000.00"}, {123456789, "USD", "$1,234,567.89"}, {1000000, "JPY", "¥1,000,000"},
	} {
		if got := moneyText(tt.minor, tt.currency); got != tt.want {
			t.Errorf("moneyText(%d, %q) = %q, want %q", tt.minor, tt.currency, got, tt.want)
		}
	}
}
