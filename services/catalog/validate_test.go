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
