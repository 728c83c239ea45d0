package handlers

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/services/catalog"
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

// pastSales is the ended sales' listing of one page, recording the cursor it was asked for.
type pastSales struct {
	sales  []shop.Sale
	next   string
	cursor *string
}

func (p pastSales) Ended(_ context.Context, cursor string) ([]shop.Sale, string, error) {
	*p.cursor = cursor
	return p.sales, p.next, nil
}

// GET /?ended=1 lists the ended sales (folded away from the current ones), publicly cacheable,
// with a pager that stays on that list; the current list links to it.
func TestHomeEndedSalesFolded(t *testing.T) {
	now := time.Date(2031, 3, 4, 12, 0, 0, 0, time.UTC)
	var asked string
	past := pastSales{sales: []shop.Sale{{ID: 9, Name: "old sale", StartsAt: now.Add(-2 * time.Hour), EndsAt: now.Add(-time.Hour)}}, next: "n1", cursor: &asked}
	p := &Pages{Catalog: listingCatalog{}, Past: past, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }}
	get := func(target string) *goquery.Document {
		t.Helper()
		w := httptest.NewRecorder()
		c, _ := gin.CreateTestContext(w)
		c.Request = httptest.NewRequest(http.MethodGet, target, nil)
		p.Home(c)
		if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Cache-Control"), "public") {
			t.Fatalf("GET %s = %d, Cache-Control %q; want 200 and public", target, w.Code, w.Header().Get("Cache-Control"))
		}
		doc, err := goquery.NewDocumentFromReader(strings.NewReader(w.Body.String()))
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}
	doc := get("/?ended=1&cursor=c0")
	if asked != "c0" {
		t.Errorf("the ended listing was asked for cursor %q, want c0", asked)
	}
	if got := doc.Find(`[data-testid="sale-card"]`).AttrOr("data-sale-id", ""); got != "9" || doc.Find("h1").Text() != "Ended sales" {
		t.Errorf("ended page: card %q, heading %q; want sale 9 under Ended sales", got, doc.Find("h1").Text())
	}
	if got := doc.Find(`[data-testid="sales-more"]`).AttrOr("href", ""); got != "/?cursor=n1&ended=1" {
		t.Errorf("the ended list's next page = %q", got)
	}
	doc = get("/")
	if got := doc.Find(`[data-testid="ended-sales-link"]`).AttrOr("href", ""); got != "/?ended=1" {
		t.Errorf("the current list's link to the ended sales = %q, want /?ended=1", got)
	}
}

// stockCatalog answers one stock snapshot.
type stockCatalog struct {
	Catalog
	d catalog.DisplayedStock
}

func (c stockCatalog) Displayed(context.Context, int64) (catalog.DisplayedStock, error) {
	return c.d, nil
}

// The stock answer carries the sale's state an open page follows (paused, its window and status,
// each item's quantity), and stays cacheable for a second.
func TestStockCarriesTheSaleState(t *testing.T) {
	now := time.Date(2031, 3, 4, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name       string
		ends       time.Time
		paused     bool
		wantStatus string
	}{
		{"paused while live", now.Add(time.Hour), true, "live"},
		{"ended early", now.Add(-time.Millisecond), false, "ended"},
	} {
		d := catalog.DisplayedStock{SaleID: 5, AsOf: now, StartsAt: now.Add(-time.Hour), EndsAt: c.ends, Paused: c.paused,
			Items: []catalog.ItemStock{{ItemID: 51, Stock: 3, Quantity: 8}}}
		api := &API{Catalog: stockCatalog{d: d}, Now: func() time.Time { return now }}
		w := httptest.NewRecorder()
		ctx, r := gin.CreateTestContext(w)
		r.GET("/api/flash-sales/:saleId/stock", api.Stock)
		ctx.Request = httptest.NewRequest(http.MethodGet, "/api/flash-sales/5/stock", nil)
		r.HandleContext(ctx)
		var got struct {
			Status, StartsAt, EndsAt string
			Paused                   bool
			Items                    []struct {
				ItemID          string
				Stock, Quantity int
			}
		}
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s (%v)", c.name, w.Code, w.Body, err)
		}
		if cc := w.Header().Get("Cache-Control"); cc != "public, max-age=1" {
			t.Errorf("%s: Cache-Control %q, want public, max-age=1", c.name, cc)
		}
		if got.Status != c.wantStatus || got.Paused != c.paused || got.EndsAt != c.ends.UTC().Format(time.RFC3339Nano) ||
			got.StartsAt != now.Add(-time.Hour).UTC().Format(time.RFC3339Nano) || len(got.Items) != 1 || got.Items[0].Quantity != 8 || got.Items[0].Stock != 3 {
			t.Errorf("%s: stock answer %s; want status %s, paused %v, the window and quantity 8", c.name, w.Body, c.wantStatus, c.paused)
		}
	}
}
