package limits

import (
	"fmt"
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

// Issue 18, item 9: the in-process buckets are bounded and aged. A flood of distinct keys
// (made-up usernames, IPv6 /64s) within a minute never holds more than two generations of
// buckets; a key in use keeps its bucket across generations; an idle one is gone after two
// minutes.
func TestLocalBucketsBoundedAndAged(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	l := NewLimiter(nil, Config{On: true, Now: func() time.Time { return now }})
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
	if NewLimiter(nil, Config{On: true, Now: time.Now}).localMax < 1<<14 {
		t.Errorf("the default bound is too small for a rush")
	}
}
