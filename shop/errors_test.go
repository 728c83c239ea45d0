package shop_test

import (
	"context"
	"errors"
	"fmt"
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
			t.Errorf("shop.SaleStatus at %v = %q, want %q", c.now, got, c.want)
		}
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	e := shop.Errorf(shop.CodeNotFound, "no sale %d", 7)
	if e.Code != shop.CodeNotFound || e.Message != "no sale 7" || e.Error() != "NOT_FOUND: no sale 7" {
		t.Errorf("shop.Errorf = %#v (%q)", e, e.Error())
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
			t.Errorf("shop.ErrorCode(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}
