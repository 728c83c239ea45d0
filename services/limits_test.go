package services

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
)

// An IPv6 client is limited by its /64; IPv4 (mapped or not) by its address.
func TestClientKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"198.51.100.7":                  "198.51.100.7",
		"::ffff:198.51.100.7":           "198.51.100.7",
		"2001:db8:1:2::1":               "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff:ffff:ffff:1": "2001:db8:1:2::/64",
		"2001:db8:1:3::1":               "2001:db8:1:3::/64",
		"fe80::1%eth0":                  "fe80::/64",
		"::1":                           "::/64",
		"":                              "",
		"not an address":                "not an address",
		strings.Repeat("x", 100):        strings.Repeat("x", 64),
	} {
		if got := ClientKey(in); got != want {
			t.Errorf("ClientKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzClientKey(f *testing.F) {
	for _, s := range []string{"1.2.3.4", "::ffff:1.2.3.4", "2001:db8::1", "fe80::1%eth0", "", "x", "1.2.3.4:80", "[::1]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ip string) {
		k := ClientKey(ip)
		if len(k) > 64 {
			t.Fatalf("ClientKey(%q) = %q: longer than 64 bytes", ip, k)
		}
		a, err := netip.ParseAddr(ip)
		if err != nil {
			return
		}
		// Two addresses of one /64 share the key; the key is stable.
		if ClientKey(k) != k && !strings.HasSuffix(k, "/64") {
			t.Fatalf("ClientKey(%q) = %q, not stable", ip, k)
		}
		if a.Unmap().Is6() {
			b := a.Unmap().As16()
			b[15] ^= 0xff
			if other := ClientKey(netip.AddrFrom16(b).String()); other != k {
				t.Fatalf("%s and its /64 neighbour: %q vs %q", ip, k, other)
			}
		}
	})
}

// Excess bcrypt work is refused at once with 503 and Retry-After, never queued.
func TestBcryptSlotsRefuseExcess(t *testing.T) {
	t.Parallel()
	a := NewAuth(nil, testSecret, time.Hour, time.Now).With(AuthOptions{HashSlots: 1, Captcha: TestCaptcha{}})
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
	if cap(NewAuth(nil, testSecret, time.Hour, time.Now).hashing) < 2 {
		t.Errorf("the default bound is below 2")
	}
}

// A logged-out token is refused at once, even from the verified-token cache.
func TestLogoutRevokesCachedToken(t *testing.T) {
	t.Parallel()
	a := NewAuth(nil, testSecret, time.Hour, time.Now)
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

// Issue 18, item 9: the in-process buckets are bounded and aged. A flood of distinct keys
// (made-up usernames, IPv6 /64s) within a minute never holds more than two generations of
// buckets; a key in use keeps its bucket across generations; an idle one is gone after two
// minutes.
func TestLocalBucketsBoundedAndAged(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	l := NewLimiter(nil, true, nil, func() time.Time { return now })
	l.localMax = 100
	lim := AuthLimits[AuthLogin]
	// One client over its limit: its bucket stays while a flood of others passes through.
	for range lim.Burst {
		if _, ok := l.allowLocal("hot", lim); !ok {
			t.Fatal("refused within the burst")
		}
	}
	for i := range 10_000 {
		l.allowLocal(fmt.Sprintf("flood-%d", i), lim)
		if i%50 == 0 {
			if _, ok := l.allowLocal("hot", lim); ok {
				t.Fatalf("after %d other keys, the client over its limit got a fresh bucket", i)
			}
		}
	}
	if n := l.localBuckets(); n > 2*l.localMax {
		t.Fatalf("%d in-process buckets after 10000 keys in one instant, want at most %d", n, 2*l.localMax)
	}
	// Idle for two minutes: forgotten (the bucket would be full again anyway).
	now = now.Add(61 * time.Second)
	l.allowLocal("later", lim)
	now = now.Add(61 * time.Second)
	l.allowLocal("later", lim)
	if n := l.localBuckets(); n != 1 {
		t.Fatalf("%d in-process buckets two minutes later, want only the one in use", n)
	}
	if NewLimiter(nil, true, nil, time.Now).localMax < 1<<14 {
		t.Errorf("the default bound is too small for a rush")
	}
}

// Issue 18, item 9: with the rate limits on, one client address holds at most its share of the
// bcrypt slots (a quarter, at least one): its burst of logins never takes every slot, so another
// client still gets one. Beyond its share the client gets 429; with every slot taken, 503.
func TestBcryptSlotsShareOfOneClient(t *testing.T) {
	t.Parallel()
	a := NewAuth(nil, testSecret, time.Hour, time.Now).With(AuthOptions{HashSlots: 2,
		Limiter: NewLimiter(nil, true, nil, time.Now)})
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
	off := NewAuth(nil, testSecret, time.Hour, time.Now).With(AuthOptions{HashSlots: 2, Limiter: NewLimiter(nil, false, nil, time.Now)})
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
