package tests

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
)

// A shopper over the limit gets 429 with Retry-After on every instance (two servers, one
// Redis); the per-IP bucket is separate; limits are set per sale.
func TestRateLimitsAcrossInstances(t *testing.T) {
	t.Parallel()
	on := map[string]string{"FLASHSALE_RATE_LIMITS": "on"}
	a := newHarness(t, harnessOpts{env: on})
	b := newHarness(t, harnessOpts{shared: a, env: on})
	r := a.do("POST", "/api/admin/sales", a.token(9000, auth.RoleMerchant), map[string]any{
		"name": "limited", "startsAt": time.Now().Add(-time.Second).UTC().Format(time.RFC3339),
		"endsAt":     time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"items":      []map[string]any{{"name": "x", "priceCents": 1, "quantity": 100}},
		"rateLimits": map[string]int{"userPerSecond": 2, "ipPerSecond": 6},
	})
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Raw)
	}
	sale, _ := strconv.ParseInt(r.str("saleId"), 10, 64)
	captcha := func(h *harness, bearer string) response {
		return h.do("POST", fmt.Sprintf("/api/flash-sales/%d/captcha", sale), bearer, nil)
	}
	alice := a.token(1, auth.RoleShopper)
	// Burst of twice the rate: four requests pass, split over both instances.
	for i, h := range []*harness{a, b, a, b} {
		if r := captcha(h, alice); r.Status != http.StatusOK {
			t.Fatalf("request %d within the burst: %d %s", i+1, r.Status, r.Raw)
		}
	}
	for _, h := range []*harness{a, b} {
		r := captcha(h, alice)
		if r.Status != http.StatusTooManyRequests || r.str("error") != "RATE_LIMITED" {
			t.Errorf("over the limit: %d %s, want 429 RATE_LIMITED", r.Status, r.Raw)
		}
		if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 {
			t.Errorf("Retry-After = %q, want whole seconds >= 1", r.Header.Get("Retry-After"))
		}
	}
	// Other shoppers on the same address: the IP bucket (12) is separate and runs out too.
	limited := 0
	for i := range 12 {
		if r := captcha(b, b.token(int64(100+i), auth.RoleShopper)); r.Status == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited == 0 {
		t.Errorf("no request of the 16 from one address was limited by the per-IP bucket (6/s, burst 12)")
	}
	// A bad limit is refused at creation.
	r = a.do("POST", "/api/admin/sales", a.token(9000, auth.RoleMerchant), map[string]any{
		"name": "bad", "startsAt": time.Now().UTC().Format(time.RFC3339), "endsAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"items": []map[string]any{{"name": "x", "priceCents": 1, "quantity": 1}}, "rateLimits": map[string]int{"userPerSecond": 0, "ipPerSecond": 5},
	})
	if r.Status != http.StatusBadRequest || r.str("error") != "INVALID_INPUT" {
		t.Errorf("zero rate: %d %s, want 400 INVALID_INPUT", r.Status, r.Raw)
	}
}

// X-Forwarded-For is believed only from trusted proxies.
func TestClientIPFromTrustedProxiesOnly(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		proxies string
		wantHit bool // whether spoofed addresses spread the load over separate IP buckets
	}{
		{"untrusted", "", false},
		{"trusted loopback proxy", "127.0.0.1", true},
	} {
		h := newHarness(t, harnessOpts{env: map[string]string{"FLASHSALE_RATE_LIMITS": "on", "FLASHSALE_TRUSTED_PROXIES": c.proxies}})
		r := h.do("POST", "/api/admin/sales", h.token(9000, auth.RoleMerchant), map[string]any{
			"name": "ip", "startsAt": time.Now().UTC().Format(time.RFC3339), "endsAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
			"items": []map[string]any{{"name": "x", "priceCents": 1, "quantity": 1}}, "rateLimits": map[string]int{"userPerSecond": 100, "ipPerSecond": 1},
		})
		sale := r.str("saleId")
		limited := 0
		for i := range 6 {
			r := h.do("POST", "/api/flash-sales/"+sale+"/captcha", h.token(int64(1+i), auth.RoleShopper), nil,
				"X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i+1))
			if r.Status == http.StatusTooManyRequests {
				limited++
			}
		}
		if got := limited == 0; got != c.wantHit {
			t.Errorf("%s: %d of 6 requests from distinct forwarded addresses were limited; want limited=%v", c.name, limited, !c.wantHit)
		}
	}
}
