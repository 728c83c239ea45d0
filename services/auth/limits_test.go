package auth

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/captcha"
	"github.com/flashsale/flashsale/services/limits"
	"github.com/flashsale/flashsale/shop"
)

// Excess bcrypt work is refused at once with 503 and Retry-After, never queued.
func TestBcryptSlotsRefuseExcess(t *testing.T) {
	t.Parallel()
	a := New(Config{Secret: testSecret, TTL: time.Hour, HashSlots: 1}, Deps{Now: time.Now, Captcha: captcha.Test{}})
	a.hashing <- struct{}{} // one login in flight takes the only slot
	start := time.Now()
	_, _, err := a.Login(context.Background(), "someone", "some password", "1.2.3.4")
	var e *shop.Error
	if !errors.As(err, &e) || e.Code != shop.CodeUnavailable || e.RetryAfter <= 0 {
		t.Fatalf("login with every slot taken: %v, want UNAVAILABLE with a Retry-After", err)
	}
	_, _, err = a.Register(context.Background(), "someone", "some password", "c", "test", "1.2.3.4")
	if shop.ErrorCode(err) != shop.CodeUnavailable {
		t.Fatalf("register with every slot taken: %v, want UNAVAILABLE", err)
	}
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Errorf("refusals took %v: they must not wait for a slot", d)
	}
	if cap(New(Config{Secret: testSecret, TTL: time.Hour}, Deps{Now: time.Now}).hashing) < 2 {
		t.Errorf("the default bound is below 2")
	}
}

// A logged-out token is refused at once, even from the verified-token cache.
func TestLogoutRevokesCachedToken(t *testing.T) {
	t.Parallel()
	a := New(Config{Secret: testSecret, TTL: time.Hour}, Deps{Now: time.Now})
	tok, _ := a.Issue(Identity{UserID: 4, Role: RoleShopper})
	if _, err := a.Verify(tok); err != nil {
		t.Fatal(err)
	}
	if err := a.Logout(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Verify(tok); shop.ErrorCode(err) != shop.CodeUnauthenticated {
		t.Fatalf("verify after logout: %v, want UNAUTHENTICATED", err)
	}
}

// Issue 18, item 9: with the rate limits on, one client address holds at most its share of the
// bcrypt slots (a quarter, at least one): its burst of logins never takes every slot, so another
// client still gets one. Beyond its share the client gets 429; with every slot taken, 503.
func TestBcryptSlotsShareOfOneClient(t *testing.T) {
	t.Parallel()
	a := New(Config{Secret: testSecret, TTL: time.Hour, HashSlots: 2},
		Deps{Now: time.Now, Limiter: limits.NewLimiter(nil, limits.Config{On: true, Now: time.Now})})
	first, err := a.hashSlot("198.51.100.7")
	if err != nil {
		t.Fatalf("the client's first bcrypt: %v", err)
	}
	var e *shop.Error
	if _, err := a.hashSlot("198.51.100.7"); !errors.As(err, &e) || e.Code != shop.CodeRateLimited || e.RetryAfter <= 0 {
		t.Fatalf("the same client's second bcrypt at once: %v, want RATE_LIMITED with a Retry-After", err)
	}
	if _, err := a.hashSlot("::ffff:198.51.100.7"); shop.ErrorCode(err) != shop.CodeRateLimited {
		t.Fatalf("the same client, IPv4-mapped: %v, want RATE_LIMITED", err)
	}
	second, err := a.hashSlot("2001:db8:1:2::1")
	if err != nil {
		t.Fatalf("another client while the first holds its share: %v", err)
	}
	if _, err := a.hashSlot("2001:db8:1:2::ffff"); shop.ErrorCode(err) != shop.CodeRateLimited {
		t.Fatalf("the same IPv6 /64: %v, want RATE_LIMITED", err)
	}
	if _, err := a.hashSlot("203.0.113.1"); shop.ErrorCode(err) != shop.CodeUnavailable {
		t.Fatalf("a third client with every slot taken: %v, want UNAVAILABLE", err)
	}
	first()
	again, err := a.hashSlot("198.51.100.7")
	if err != nil {
		t.Fatalf("the first client once its bcrypt is done: %v", err)
	}
	again()
	second()
	if n := len(a.hashBy); n != 0 {
		t.Errorf("%d clients counted with nothing in flight", n)
	}
	// The command line (no address) and the limits off have no share.
	off := New(Config{Secret: testSecret, TTL: time.Hour, HashSlots: 2}, Deps{Now: time.Now, Limiter: limits.NewLimiter(nil, limits.Config{Now: time.Now})})
	for _, ip := range []string{"198.51.100.7", "198.51.100.7"} {
		if _, err := off.hashSlot(ip); err != nil {
			t.Fatalf("limits off: %v", err)
		}
	}
	if _, err := a.hashSlot(""); err != nil {
		t.Fatal(err)
	}
	if _, err := a.hashSlot(""); err != nil {
		t.Fatalf("no address: %v", err)
	}
}
