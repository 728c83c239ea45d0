package catalog

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
)

func TestValidName(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"Spring sale", true},
		{strings.Repeat("é", 200), true},
		{"", false},
		{" \t\n", false},
		{strings.Repeat("é", 201), false},
		{"bad \xff utf-8", false},
		{"nul \x00 byte", false},
	} {
		err := validName("name", c.name)
		if c.ok != (err == nil) || (!c.ok && shop.ErrorCode(err) != shop.CodeInvalidInput) {
			t.Errorf("validName(%q) = %v, want ok %v", c.name, err, c.ok)
		}
	}
}

// An item's picture is an https address: the pages show it as it is (services/catalog is the
// one place that checks it), so anything else is refused, the edit's check being the same.
func TestValidImageURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		url string
		ok  bool
	}{
		{"https://img.example/coat.png", true},
		{"HTTPS://img.example/coat.png", true},
		{"http://img.example/coat.png", false},
		{"//img.example/coat.png", false},
		{"javascript:alert(1)", false},
		{"data:image/png;base64,AAAA", false},
		{"https://user:pass@img.example/x.png", false},
		{"https:///nohost.png", false},
		{"https://img.example/a b.png", false},
		{"https://img.example/\"onerror=x", false},
		{"https://img.example/" + strings.Repeat("x", shop.MaxImageURLBytes), false},
	} {
		err := itemInput{ImageURL: &c.url}.validate("items[0]")
		if c.ok != (err == nil) || (!c.ok && (shop.ErrorCode(err) != shop.CodeInvalidInput || !strings.Contains(err.Error(), "items[0].imageUrl must be an https:// address"))) {
			t.Errorf("imageUrl %q: %v, want ok %v", c.url, err, c.ok)
		}
	}
}

// Every invalid sale is refused before anything is stored (the Sales here has no database: a
// request that got that far would panic).
func TestCreateSaleValidation(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s, err := NewSales(Config{PayWindow: 10 * time.Minute}, Deps{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: fixedNow(now)})
	if err != nil {
		t.Fatal(err)
	}
	good := func(edit func(*NewSale)) NewSale {
		n := NewSale{Name: "sale", StartsAt: now.Add(time.Hour), EndsAt: now.Add(2 * time.Hour),
			Items: []NewItem{{Name: "thing", PriceCents: 100, Quantity: 10}}}
		edit(&n)
		return n
	}
	many := make([]NewItem, 51)
	for i := range many {
		many[i] = NewItem{Name: "x", PriceCents: 1, Quantity: 1}
	}
	for name, in := range map[string]NewSale{
		"empty name":            good(func(n *NewSale) { n.Name = "" }),
		"blank name":            good(func(n *NewSale) { n.Name = "   " }),
		"overlong name":         good(func(n *NewSale) { n.Name = strings.Repeat("x", 201) }),
		"no start":              good(func(n *NewSale) { n.StartsAt = time.Time{} }),
		"no end":                good(func(n *NewSale) { n.EndsAt = time.Time{} }),
		"end before start":      good(func(n *NewSale) { n.StartsAt, n.EndsAt = now.Add(2*time.Hour), now.Add(time.Hour) }),
		"end equals start":      good(func(n *NewSale) { n.EndsAt = n.StartsAt }),
		"ended":                 good(func(n *NewSale) { n.StartsAt, n.EndsAt = now.Add(-2*time.Hour), now.Add(-time.Hour) }),
		"ends now":              good(func(n *NewSale) { n.StartsAt, n.EndsAt = now.Add(-time.Hour), now }),
		"longer than 30 days":   good(func(n *NewSale) { n.EndsAt = n.StartsAt.Add(30*24*time.Hour + time.Second) }),
		"no items":              good(func(n *NewSale) { n.Items = nil }),
		"51 items":              good(func(n *NewSale) { n.Items = many }),
		"item name empty":       good(func(n *NewSale) { n.Items[0].Name = "" }),
		"item name overlong":    good(func(n *NewSale) { n.Items[0].Name = strings.Repeat("x", 201) }),
		"negative price":        good(func(n *NewSale) { n.Items[0].PriceCents = -1 }),
		"price too high":        good(func(n *NewSale) { n.Items[0].PriceCents = shop.MaxPriceCents + 1 }),
		"zero quantity":         good(func(n *NewSale) { n.Items[0].Quantity = 0 }),
		"negative quantity":     good(func(n *NewSale) { n.Items[0].Quantity = -1 }),
		"quantity over maximum": good(func(n *NewSale) { n.Items[0].Quantity = shop.MaxQuantity + 1 }),
		"quantity over int32":   good(func(n *NewSale) { n.Items[0].Quantity = 1 << 40 }),
		"second item bad":       good(func(n *NewSale) { n.Items = append(n.Items, NewItem{Name: "y", PriceCents: 1, Quantity: 0}) }),
	} {
		_, err := s.Create(context.Background(), 9000, in)
		var e *shop.Error
		if !errors.As(err, &e) || e.Code != shop.CodeInvalidInput || e.Message == "" {
			t.Errorf("%s: Create = %v, want INVALID_INPUT", name, err)
		}
	}
}
func fixedNow(t time.Time) func() time.Time { return func() time.Time { return t } }

type floor map[string]int64

func (f floor) MinimumCents(c string) int64 { return f[c] }

// A price the provider cannot charge is refused with its minimum; 0 (free) and prices at the
// minimum pass; an edit checks what it sets (a new or repriced item, every item when the currency
// changes), not an old price it leaves alone.
func TestCheckPayable(t *testing.T) {
	f := floor{"CNY": 400, "USD": 50}
	sale := func(currency string, prices ...int64) shop.Sale {
		s := shop.Sale{Currency: currency}
		for i, p := range prices {
			s.Items = append(s.Items, shop.Item{ID: int64(i + 1), PriceCents: p})
		}
		return s
	}
	for _, c := range []struct {
		name      string
		old, next shop.Sale
		wantMin   int64
	}{
		{"new sale at the minimum and free", shop.Sale{}, sale("CNY", 400, 0), 0},
		{"new sale below the minimum", shop.Sale{}, sale("CNY", 399), 400},
		{"new sale of one cent in USD", shop.Sale{}, sale("USD", 1), 50},
		{"an old low price left alone", sale("CNY", 100), sale("CNY", 100), 0},
		{"an old low price repriced, still low", sale("CNY", 100), sale("CNY", 200), 400},
		{"the currency changed under an old price", sale("USD", 100), sale("CNY", 100), 400},
		{"a new item below the minimum", sale("CNY", 500), func() shop.Sale { s := sale("CNY", 500); s.Items = append(s.Items, shop.Item{PriceCents: 1}); return s }(), 400},
	} {
		err := checkPayable(c.old, c.next, f)
		var e *shop.Error
		switch {
		case c.wantMin == 0 && err != nil:
			t.Errorf("%s: %v, want accepted", c.name, err)
		case c.wantMin != 0 && (!errors.As(err, &e) || e.Code != shop.CodePriceNotPayable || e.MinimumCents != c.wantMin || e.Currency != c.next.Currency):
			t.Errorf("%s: %v, want PRICE_NOT_PAYABLE with minimum %d %s", c.name, err, c.wantMin, c.next.Currency)
		}
	}
}
