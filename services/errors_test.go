package services

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
)

func TestSaleStatus(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	end := start.Add(time.Hour)
	for _, c := range []struct {
		now  time.Time
		want string
	}{
		{start.Add(-time.Hour), shop.SaleUpcoming},
		{start.Add(-time.Nanosecond), shop.SaleUpcoming},
		{start, shop.SaleLive},
		{start.Add(30 * time.Minute), shop.SaleLive},
		{end.Add(-time.Nanosecond), shop.SaleLive},
		{end, shop.SaleEnded},
		{end.Add(time.Hour), shop.SaleEnded},
		{start.In(time.FixedZone("UTC+8", 8*3600)), shop.SaleLive}, // the same instant in another zone
	} {
		if got := shop.SaleStatus(start, end, c.now); got != c.want {
			t.Errorf("SaleStatus at %v = %q, want %q", c.now, got, c.want)
		}
	}
}

func TestSaleWindow(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	end := start.Add(time.Hour)
	for _, c := range []struct {
		now   time.Time
		code  shop.Code
		retry time.Duration
	}{
		{start.Add(-90 * time.Second), shop.CodeNotStarted, 90 * time.Second},
		{start.Add(-1200 * time.Millisecond), shop.CodeNotStarted, 2 * time.Second}, // rounded up
		{start.Add(-time.Nanosecond), shop.CodeNotStarted, time.Second},
		{start, "", 0},
		{end.Add(-time.Nanosecond), "", 0},
		{end, shop.CodeSaleEnded, 0},
		{end.Add(time.Hour), shop.CodeSaleEnded, 0},
	} {
		err := saleWindow(start, end, c.now)
		if c.code == "" {
			if err != nil {
				t.Errorf("saleWindow at %v = %v, want open", c.now, err)
			}
			continue
		}
		var e *shop.Error
		if !errors.As(err, &e) || e.Code != c.code || e.RetryAfter != c.retry || e.Message == "" {
			t.Errorf("saleWindow at %v = %#v, want %s with Retry-After %v", c.now, err, c.code, c.retry)
		}
	}
	for d, want := range map[time.Duration]time.Duration{
		0: 0, time.Nanosecond: time.Second, time.Second: time.Second, time.Second + 1: 2 * time.Second, 89*time.Second + 999*time.Millisecond: 90 * time.Second,
	} {
		if got := retryAfter(d); got != want {
			t.Errorf("retryAfter(%v) = %v, want %v", d, got, want)
		}
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	e := shop.Errorf(shop.CodeNotFound, "no sale %d", 7)
	if e.Code != shop.CodeNotFound || e.Message != "no sale 7" || e.Error() != "NOT_FOUND: no sale 7" {
		t.Errorf("Errorf = %#v (%q)", e, e.Error())
	}
	cause := errors.New("dial tcp 127.0.0.1:6380: connection refused")
	u := shop.Unavailable(cause)
	if u.Code != shop.CodeUnavailable || !errors.Is(u, cause) || strings.Contains(u.Message, "6380") || u.Message == "" {
		t.Errorf("unavailable(cause) = %#v: want UNAVAILABLE wrapping the cause, which the message does not show", u)
	}
	if !strings.Contains(u.Error(), "connection refused") {
		t.Errorf("the logged form %q lacks the cause", u.Error())
	}
	for _, c := range []struct {
		err  error
		want shop.Code
	}{
		{e, shop.CodeNotFound},
		{fmt.Errorf("get sale: %w", e), shop.CodeNotFound},
		{errors.Join(errors.New("other"), shop.Errorf(shop.CodeSoldOut, "x")), shop.CodeSoldOut},
		{u, shop.CodeUnavailable},
		{cause, shop.CodeInternal},
		{context.DeadlineExceeded, shop.CodeInternal},
	} {
		if got := shop.ErrorCode(c.err); got != c.want {
			t.Errorf("ErrorCode(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

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

// Every invalid sale is refused before anything is stored (the Sales here has no database: a
// request that got that far would panic).
func TestCreateSaleValidation(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s := NewSales(nil, nil, nil, nil, 10*time.Minute, slog.New(slog.NewTextHandler(io.Discard, nil)), fixedNow(now))
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

func TestTestCaptcha(t *testing.T) {
	t.Parallel()
	var c TestCaptcha
	id, img, err := c.New(context.Background(), 1, 2)
	if err != nil || id == "" || !strings.HasPrefix(img, "data:image/") {
		t.Fatalf("New = %q, %.40q, %v", id, img, err)
	}
	for _, v := range []struct {
		id, answer string
		ok         bool
	}{
		{id, "test", true}, {id, " TEST ", true}, {id, "wrong", false}, {id, "", false}, {"", "test", false}, {id, "tes", false},
	} {
		if ok, err := c.Verify(context.Background(), 1, 2, v.id, v.answer); ok != v.ok || err != nil {
			t.Errorf("Verify(%q, %q) = %v, %v; want %v", v.id, v.answer, ok, err, v.ok)
		}
	}
}
