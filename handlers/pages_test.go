package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/shop"
)

// listingCatalog is a Catalog whose listing is a fixed page; the home page needs nothing else.
type listingCatalog struct {
	Catalog
	sales []shop.Sale
	next  string
}

func (c listingCatalog) Upcoming(context.Context, string) ([]shop.Sale, string, error) {
	return c.sales, c.next, nil
}

// The home page lists the live sales first, then the upcoming ones by start time, and no ended
// one; each card shows its items and their prices in the sale's currency; and the page is
// publicly cacheable, the same for every visitor.
func TestHomeLiveFirstWithItems(t *testing.T) {
	now := time.Date(2031, 3, 4, 12, 0, 0, 0, time.UTC)
	sale := func(id int64, name string, starts, ends time.Duration, currency string, items ...shop.Item) shop.Sale {
		return shop.Sale{ID: id, Name: name, StartsAt: now.Add(starts), EndsAt: now.Add(ends), Currency: currency, Items: items}
	}
	// Out of order on purpose: whatever order the listing comes in, live comes first.
	cat := listingCatalog{sales: []shop.Sale{
		sale(1, "soon", time.Minute, time.Hour, "USD", shop.Item{ID: 11, Name: "Runner", PriceCents: 1999}),
		sale(2, "live early", -time.Hour, time.Hour, "CNY", shop.Item{ID: 21, Name: "Phone", PriceCents: 99900}, shop.Item{ID: 22, Name: "Case", PriceCents: 5}),
		sale(3, "ended", -2*time.Hour, -time.Second, "CNY"),
		sale(4, "later", 2*time.Hour, 3*time.Hour, "EUR", shop.Item{ID: 41, Name: "Tea", PriceCents: 450}),
		sale(5, "live late", -time.Minute, time.Minute, "CNY"),
	}, next: "abc"}
	p := &Pages{Catalog: cat, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }}
	get := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		c.Request = httptest.NewRequest(http.MethodGet, "/", nil)
		p.Home(c)
		return w
	}
	w := get()
	if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Cache-Control"), "public") {
		t.Fatalf("GET / = %d, Cache-Control %q; want 200 and public", w.Code, w.Header().Get("Cache-Control"))
	}
	if again := get(); again.Body.String() != w.Body.String() {
		t.Errorf("two requests got different home pages; want the same page for every visitor")
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(w.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	var names, statuses, items []string
	doc.Find(`[data-testid="sale-card"]`).Each(func(_ int, card *goquery.Selection) {
		names = append(names, card.Find(`[data-testid="sale-link"]`).Text())
		statuses = append(statuses, card.Find(`[data-testid="sale-status"]`).AttrOr("data-status", ""))
		card.Find(`[data-testid="card-item"]`).Each(func(_ int, it *goquery.Selection) {
			items = append(items, it.Find(`[data-testid="card-item-name"]`).Text()+" "+it.Find(`[data-testid="card-item-price"]`).Text())
		})
	})
	if got, want := strings.Join(names, ","), "live early,live late,soon,later"; got != want {
		t.Errorf("cards = %s, want %s (live first, then upcoming by start time, no ended sale)", got, want)
	}
	if got, want := strings.Join(statuses, ","), "live,live,upcoming,upcoming"; got != want {
		t.Errorf("statuses = %s, want %s", got, want)
	}
	if got, want := strings.Join(items, ","), "Phone ¥999.00,Case ¥0.05,Runner $19.99,Tea €4.50"; got != want {
		t.Errorf("items = %s, want %s", got, want)
	}
	if href := doc.Find(`[data-testid="sales-more"]`).AttrOr("href", ""); href != "/?cursor=abc" {
		t.Errorf("more link = %q, want /?cursor=abc", href)
	}
}
