package views

import (
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"

	"github.com/flashsale/flashsale/static"
)

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
			checkHead(t, doc, html, tt.title)
			checkAssets(t, doc)
			checkModulePreloads(t, doc)
			checkHeader(t, doc)
			checkNothingInline(t, doc)
		})
	}
}

// checkHead checks the document's start, title and viewport.
func checkHead(t *testing.T, doc *goquery.Document, html, title string) {
	t.Helper()
	if got := strings.ToLower(html[:min(len(html), 15)]); got != "<!doctype html>" {
		t.Errorf("document starts with %q, want <!doctype html>", got)
	}
	if got := doc.Find("title").Text(); got != title {
		t.Errorf("title = %q, want %q", got, title)
	}
	if got, _ := doc.Find(`meta[name="viewport"]`).Attr("content"); !strings.Contains(got, "width=device-width") {
		t.Errorf("viewport content = %q, want width=device-width", got)
	}
}

// checkAssets checks that the page names the stylesheet and its one script, a module, by their
// hashed URLs.
func checkAssets(t *testing.T, doc *goquery.Document) {
	t.Helper()
	css := static.Path("style.css")
	if got, want := doc.Find(`link[rel="stylesheet"][href="`+css+`"]`).Length(), 1; got != want {
		t.Errorf("stylesheet links to %s = %d, want %d", css, got, want)
	}
	// Two scripts, both files: boot.js, classic, in <head> before the page is drawn (the
	// session's mark, so that nothing moves later), and the entry module main.js.
	scripts := doc.Find("script")
	if got, want := scripts.Length(), 2; got != want {
		t.Fatalf("script elements = %d, want %d (js/boot.js and js/main.js, no inline script)", got, want)
	}
	boot, entry := scripts.Eq(0), scripts.Eq(1)
	if got, want := boot.AttrOr("src", ""), static.Path("js/boot.js"); got != want {
		t.Errorf("first script src = %q, want %q", got, want)
	}
	if _, module := boot.Attr("type"); module || boot.Parent().Is("head") == false || boot.AttrOr("async", "x") != "x" || boot.AttrOr("defer", "x") != "x" {
		t.Errorf("boot.js must be a classic script in <head>, neither async nor deferred")
	}
	if got, want := entry.AttrOr("src", ""), static.Path("js/main.js"); got != want {
		t.Errorf("script src = %q, want %q", got, want)
	}
	if got, _ := entry.Attr("type"); got != "module" {
		t.Errorf("script type = %q, want module", got)
	}
	doc.Find(`[href^="/static/"], [src^="/static/"]`).Each(func(_ int, s *goquery.Selection) {
		url := s.AttrOr("href", s.AttrOr("src", ""))
		if !hashedAsset.MatchString(url) {
			t.Errorf("the page names the asset %s by a name without its hash: a cache could mix it with another deploy's", url)
		}
	})
}

// checkHeader checks the site header's links.
func checkHeader(t *testing.T, doc *goquery.Document) {
	t.Helper()
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
}

// checkNothingInline checks that the page holds no inline style or event handler (the CSP) and
// one main.
func checkNothingInline(t *testing.T, doc *goquery.Document) {
	t.Helper()
	if got := doc.Find("[style], style").Length(); got != 0 {
		t.Errorf("inline styles = %d, want 0 (the CSP allows style-src 'self' only)", got)
	}
	if got, want := doc.Find("main").Length(), 1; got != want {
		t.Errorf("main elements = %d, want %d", got, want)
	}
	if got := doc.Find("[onclick], [onload], [onerror], [onsubmit]").Length(); got != 0 {
		t.Errorf("inline event handlers = %d, want 0", got)
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
