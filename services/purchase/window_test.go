package purchase

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/captcha"
	"github.com/flashsale/flashsale/shop"
)

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

func TestTestCaptcha(t *testing.T) {
	t.Parallel()
	var c captcha.Test
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
