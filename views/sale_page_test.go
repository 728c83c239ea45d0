package views

import (
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
)

func TestSalePage(t *testing.T) {
	s := demoSale()
	doc, _ := render(t, SalePage(s))
	sec := doc.Find("section" + byTestID("sale"))
	if got, want := sec.Length(), 1; got != want {
		t.Fatalf("sale sections = %d, want %d", got, want)
	}
	checkSaleSection(t, sec, s)
	checkSaleItems(t, sec, s)
	checkSaleHooks(t, sec)
	checkSaleLoginForm(t, sec.Find(byTestID("login-form")))
}

// checkSaleSection checks what the sale's section says of the sale: its id, times and name.
func checkSaleSection(t *testing.T, sec *goquery.Selection, s Sale) {
	t.Helper()
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
}

// checkSaleItems checks one row, one stock badge and one disabled buy button per item, in order.
func checkSaleItems(t *testing.T, sec *goquery.Selection, s Sale) {
	t.Helper()
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
}

// checkSaleHooks checks that every element the script drives exists exactly once, hidden or
// empty until the script knows.
func checkSaleHooks(t *testing.T, sec *goquery.Selection) {
	t.Helper()
	for _, id := range []string{"countdown", "session", "login-form", "captcha", "captcha-image",
		"captcha-answer", "captcha-refresh", "message", "order", "order-status", "pay-by", "pay-button"} {
		if got, want := sec.Find(byTestID(id)).Length(), 1; got != want {
			t.Errorf("elements with data-testid=%q = %d, want %d", id, got, want)
		}
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

// checkSaleLoginForm checks the sale page's login form: log in, or register with a captcha.
func checkSaleLoginForm(t *testing.T, form *goquery.Selection) {
	t.Helper()
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
	if got, want := doc.Find("script").Length(), 2; got != want { // boot.js and main.js
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

// The sale page's order box: one list for every order of the shopper in
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

// What the merchant wrote is shown: the sale's description, and each item's picture in a box of
// fixed size (width and height set, so nothing shifts when it arrives), loaded lazily; an item
// without a picture has none. Merchants get a note (hidden until the script knows who is there)
// leading to the sale's live view.
func TestSalePageDescriptionImagesAndMerchantNote(t *testing.T) {
	s := demoSale()
	s.Description = "Line one\nline <two>"
	s.Items[0].ImageURL = "https://img.example/phone-x.png"
	doc, html := render(t, SalePage(s))
	if got := doc.Find(byTestID("sale-description")).Text(); got != s.Description {
		t.Errorf("description = %q, want %q", got, s.Description)
	}
	if strings.Contains(html, "<two>") {
		t.Errorf("the description is not escaped")
	}
	imgs := doc.Find(byTestID("item-image"))
	if got := imgs.Length(); got != 1 {
		t.Fatalf("item pictures = %d, want 1 (only the item that has one)", got)
	}
	img := imgs.First()
	if id := img.Closest(byTestID("item")).AttrOr("data-item-id", ""); id != "7" {
		t.Errorf("the picture is in item %q, want 7", id)
	}
	for attr, want := range map[string]string{"src": "https://img.example/phone-x.png", "loading": "lazy", "width": "96", "height": "96", "alt": ""} {
		if got, ok := img.Attr(attr); !ok || got != want {
			t.Errorf("picture %s = %q (set %v), want %q", attr, got, ok, want)
		}
	}
	note := doc.Find(byTestID("merchant-note"))
	if _, hidden := note.Attr("hidden"); !hidden || note.Length() != 1 {
		t.Errorf("merchant notes = %d (hidden %v), want 1, hidden until the script knows a merchant is there", note.Length(), hidden)
	}
	if got := note.Find(byTestID("merchant-live-link")).AttrOr("href", ""); got != "/admin/sales/42" {
		t.Errorf("merchant's live view link = %q, want /admin/sales/42", got)
	}
	if got := strings.Join(strings.Fields(note.Text()), " "); got != "You are signed in as a merchant: merchants do not buy. Watch this sale’s live view." {
		t.Errorf("merchant note = %q", got)
	}
	if _, hidden := doc.Find("header " + byTestID("admin-link")).Attr("hidden"); !hidden {
		t.Errorf("Merchant admin shown to everyone, want hidden until the script knows a merchant is signed in")
	}
	// No description, no picture: nothing rendered for them.
	doc, _ = render(t, SalePage(demoSale()))
	if n := doc.Find(byTestID("sale-description") + "," + byTestID("item-image")).Length(); n != 0 {
		t.Errorf("%d description or picture elements for a sale without them", n)
	}
}
