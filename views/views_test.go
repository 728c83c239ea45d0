package views

// The pages' tests share these helpers; each page's tests are in a file of its own.

import (
	"bytes"
	"context"
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

// loginTarget checks a page's logged-out sentence: hidden in the rendered page, and its link
// leads to the page's own login form.
// register says whether the form offers Register beside Log in: the pages a logged-out shopper
// lands on do (the sale page, my orders); the one order's page does not (a new account has no
// order to see there).
func loginTarget(t *testing.T, doc *goquery.Document, wantText string, register bool) {
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
	want := 0
	if register {
		want = 1
	}
	if got := form.Find(byTestID("register-button")).Length(); got != want {
		t.Errorf("register buttons = %d, want %d", got, want)
	}
}
