package catalog

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
)

func ptr[T any](v T) *T { return &v }

// editSale is a sale of two items, 10 and 5 units, 3 of the first already sold.
func editSale(starts time.Time) shop.Sale {
	return shop.Sale{ID: 7, Name: "Spring", StartsAt: starts, EndsAt: starts.Add(time.Hour), PaymentWindowSeconds: 600,
		PurchaseLimit: shop.LimitPerSale, Currency: "CNY",
		Items: []shop.Item{{ID: 70, Name: "Tea", PriceCents: 100, Quantity: 10, Sold: 3}, {ID: 71, Name: "Cup", PriceCents: 200, Quantity: 5}}}
}

// The edit rules, without an engine: what a change may not do, before and after the start.
func TestApplyEditRules(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	before, after := now.Add(time.Hour), now.Add(-time.Minute) // the sale's start
	cases := []struct {
		name   string
		starts time.Time
		edit   SaleEdit
		code   shop.Code // "" : accepted
		want   string    // in the message
	}{
		{"quantity below sold", after, SaleEdit{Items: []ItemEdit{{ItemID: 70, Quantity: ptr[int64](2)}}}, shop.CodeQuantityTooLow, "below the 3 units already sold"},
		{"quantity down to sold", after, SaleEdit{Items: []ItemEdit{{ItemID: 70, Quantity: ptr[int64](3)}}}, "", ""},
		{"start moves once started", after, SaleEdit{StartsAt: ptr(now.Add(time.Minute))}, shop.CodeSaleStarted, "its start cannot move"},
		{"start moves before", before, SaleEdit{StartsAt: ptr(before.Add(time.Minute))}, "", ""},
		{"end in the past", after, SaleEdit{EndsAt: ptr(now.Add(-time.Second))}, shop.CodeInvalidInput, "use its end action"},
		{"window too long", before, SaleEdit{EndsAt: ptr(before.Add(31 * 24 * time.Hour))}, shop.CodeInvalidInput, "at most 30 days"},
		{"currency once started", after, SaleEdit{Currency: ptr("USD")}, shop.CodeSaleStarted, "currency cannot change"},
		{"currency before", before, SaleEdit{Currency: ptr("EUR")}, "", ""},
		{"unknown currency", before, SaleEdit{Currency: ptr("XBT")}, shop.CodeInvalidInput, "CNY, USD or EUR"},
		{"limit once started", after, SaleEdit{PurchaseLimit: ptr(shop.LimitPerItem)}, shop.CodeSaleStarted, "purchase limit cannot change"},
		{"item added once started", after, SaleEdit{Items: []ItemEdit{{Name: ptr("Pot"), PriceCents: ptr[int64](1), Quantity: ptr[int64](1)}}}, shop.CodeSaleStarted, "items cannot be added"},
		{"new item without quantity", before, SaleEdit{Items: []ItemEdit{{Name: ptr("Pot"), PriceCents: ptr[int64](1)}}}, shop.CodeInvalidInput, "needs name, priceCents and quantity"},
		{"item of another sale", before, SaleEdit{Items: []ItemEdit{{ItemID: 99, Name: ptr("x")}}}, shop.CodeInvalidInput, "not an item of this sale"},
		{"item named twice", before, SaleEdit{Items: []ItemEdit{{ItemID: 71, Name: ptr("a")}, {ItemID: 71, Name: ptr("b")}}}, shop.CodeInvalidInput, "named twice"},
		{"empty name", after, SaleEdit{Name: ptr("  ")}, shop.CodeInvalidInput, "name must not be empty"},
		// Refused in the order the edit applies its changes: the first refusal is the one a
		// client sees, whatever else the edit holds.
		{"new item with a bad price once started", after, SaleEdit{Items: []ItemEdit{{Name: ptr("Pot"), PriceCents: ptr[int64](-1), Quantity: ptr[int64](1)}}}, shop.CodeSaleStarted, "items cannot be added"},
		{"start moved once started, bad window too", after, SaleEdit{StartsAt: ptr(now.Add(time.Minute)), PaymentWindowSeconds: ptr(0)}, shop.CodeSaleStarted, "its start cannot move"},
		{"unknown item with a bad name", before, SaleEdit{Items: []ItemEdit{{ItemID: 99, Name: ptr("")}}}, shop.CodeInvalidInput, "not an item of this sale"},
		{"below sold with a bad image", after, SaleEdit{Items: []ItemEdit{{ItemID: 70, Quantity: ptr[int64](1), ImageURL: ptr("ftp://x")}}}, shop.CodeQuantityTooLow, "below the 3 units"},
		{"http image", after, SaleEdit{Items: []ItemEdit{{ItemID: 71, ImageURL: ptr("http://x.example/a.png")}}}, shop.CodeInvalidInput, "items[0].imageUrl must be an https://"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cur := editSale(c.starts)
			next, err := applyEdit(cur, c.edit, now)
			if c.code == "" {
				if err != nil {
					t.Fatalf("applyEdit: %v, want accepted", err)
				}
				return
			}
			var e *shop.Error
			if !errors.As(err, &e) || e.Code != c.code || !strings.Contains(e.Message, c.want) {
				t.Fatalf("applyEdit = %v, want %s mentioning %q", err, c.code, c.want)
			}
			_ = next
		})
	}
}

// An accepted edit changes what it names, trims what people type, and leaves the rest (and the
// sale it was applied to) as it was.
func TestApplyEditChangesOnlyWhatItNames(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	cur := editSale(now.Add(time.Hour))
	next, err := applyEdit(cur, SaleEdit{Name: ptr("  Summer "), Items: []ItemEdit{
		{ItemID: 71, Quantity: ptr[int64](8)},
		{Name: ptr(" Pot "), PriceCents: ptr[int64](900), Quantity: ptr[int64](2), ImageURL: ptr("https://img.example/pot.png")},
	}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if next.Name != "Summer" || len(next.Items) != 3 || next.Items[1].Quantity != 8 || next.Items[0] != cur.Items[0] {
		t.Fatalf("next = %+v", next)
	}
	if pot := next.Items[2]; pot.Name != "Pot" || pot.PriceCents != 900 || pot.Quantity != 2 || pot.ImageURL != "https://img.example/pot.png" {
		t.Fatalf("added item = %+v", pot)
	}
	if cur.Items[1].Quantity != 5 || len(cur.Items) != 2 || cur.Name != "Spring" {
		t.Fatalf("the sale edited was changed: %+v", cur)
	}
	adj, up := adjustmentOf(cur, next)
	if len(adj.Stock) != 2 || adj.Stock[0].Delta != 3 || len(up) != 2 {
		t.Fatalf("adjustment = %+v, up %v", adj, up)
	}
}

// One validation for both: a field refused on creation is refused with the same words on edit.
func TestCreateAndEditShareTheValidation(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	s, err := NewSales(Config{PayWindow: 10 * time.Minute}, Deps{Log: quietLog(), Now: fixedNow(now)})
	if err != nil {
		t.Fatal(err)
	}
	good := func() NewSale {
		return NewSale{Name: "Spring", StartsAt: now.Add(time.Hour), EndsAt: now.Add(2 * time.Hour),
			Items: []NewItem{{Name: "Tea", PriceCents: 100, Quantity: 10}}}
	}
	cases := []struct {
		name   string
		create func(*NewSale)
		edit   SaleEdit
	}{
		{"payment window", func(n *NewSale) { n.PaymentWindowSeconds = ptr(0) }, SaleEdit{PaymentWindowSeconds: ptr(0)}},
		{"currency", func(n *NewSale) { n.Currency = "GBP" }, SaleEdit{Currency: ptr("GBP")}},
		{"purchase limit", func(n *NewSale) { n.PurchaseLimit = "per-day" }, SaleEdit{PurchaseLimit: ptr("per-day")}},
		{"description", func(n *NewSale) { n.Description = strings.Repeat("x", shop.MaxDescriptionRunes+1) }, SaleEdit{Description: ptr(strings.Repeat("x", shop.MaxDescriptionRunes+1))}},
		{"price", func(n *NewSale) { n.Items[0].PriceCents = -1 }, SaleEdit{Items: []ItemEdit{{ItemID: 70, PriceCents: ptr[int64](-1)}}}},
		{"quantity", func(n *NewSale) { n.Items[0].Quantity = shop.MaxQuantity + 1 }, SaleEdit{Items: []ItemEdit{{ItemID: 70, Quantity: ptr[int64](shop.MaxQuantity + 1)}}}},
		{"item name", func(n *NewSale) { n.Items[0].Name = "a\x00b" }, SaleEdit{Items: []ItemEdit{{ItemID: 70, Name: ptr("a\x00b")}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := good()
			c.create(&in)
			_, cerr := s.create(t.Context(), 1, in)
			_, eerr := applyEdit(editSale(now.Add(time.Hour)), c.edit, now)
			if cerr == nil || eerr == nil || cerr.Error() != eerr.Error() {
				t.Fatalf("create: %v\nedit:   %v\nwant the same refusal", cerr, eerr)
			}
		})
	}
}
