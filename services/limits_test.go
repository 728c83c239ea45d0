package services

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
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
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeUnavailable || e.RetryAfter <= 0 {
		t.Fatalf("login with every slot taken: %v, want UNAVAILABLE with a Retry-After", err)
	}
	_, _, err = a.Register(context.Background(), "someone", "some password", "c", "test", "1.2.3.4")
	if ErrorCode(err) != CodeUnavailable {
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
	if _, err := a.Verify(tok); ErrorCode(err) != CodeUnauthenticated {
		t.Fatalf("verify after logout: %v, want UNAUTHENTICATED", err)
	}
}
