package limits

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
)

// fakeGCRA allows every request but those to the keys in refuse (the shared buckets spent).
type fakeGCRA struct {
	mu     sync.Mutex
	refuse map[string]bool
	taken  map[string]int
}

func (g *fakeGCRA) Allow(_ context.Context, key string, _, _ int, _ time.Duration) (bool, time.Duration, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.taken[key]++
	if g.refuse[key] {
		return false, time.Second, nil
	}
	return true, 0, nil
}

// fakeKnown is KnownLogins in a map (client + " " + username -> keep); err fails every call.
type fakeKnown struct {
	mu   sync.Mutex
	keep map[string]time.Duration
	asks int
	err  error
}

func (k *fakeKnown) Known(_ context.Context, client, username string) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.asks++
	if k.err != nil {
		return false, k.err
	}
	_, ok := k.keep[client+" "+username]
	return ok, nil
}

func (k *fakeKnown) Remember(_ context.Context, client, username string, keep time.Duration) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		return k.err
	}
	k.keep[client+" "+username] = keep
	return nil
}

// An address that logged in to a username skips the username's global bucket, spent by guesses
// from elsewhere (in Redis and in memory alike): the owner is never kept out by ten addresses.
// Every other address still meets it, the known one keeps its own buckets, registrations never
// skip it, and a known-logins store that cannot answer knows nobody.
func TestKnownAddressSkipsUsernameBucket(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	gcra := &fakeGCRA{refuse: map[string]bool{}, taken: map[string]int{}}
	known := &fakeKnown{keep: map[string]time.Duration{}}
	l := NewLimiter(gcra, Config{On: true, Now: func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Known: known})
	ctx := context.Background()
	limited := func(err error) bool { return shop.ErrorCode(err) == shop.CodeRateLimited }

	// The owner logs in at home (an IPv6 /64, the username as typed in another case).
	if err := l.AllowAuth(ctx, AuthLogin, "2001:db8:aa:bb::1", "Owner"); err != nil {
		t.Fatalf("the owner's first login: %v", err)
	}
	l.SignedIn(ctx, "2001:db8:aa:bb::1", "Owner")
	if keep, ok := known.keep["2001:db8:aa:bb::/64 owner"]; !ok || keep != KnownLoginKeep {
		t.Fatalf("remembered %v, want the /64 and the lower-case name for %v", known.keep, KnownLoginKeep)
	}
	if KnownLoginKeep < 7*24*time.Hour {
		t.Errorf("KnownLoginKeep = %v: an owner who logs in weekly would be forgotten", KnownLoginKeep)
	}

	// Guesses from many addresses spend the username's bucket in memory (the clock stands still).
	refused := 0
	for i := range 2 * AuthUsernameLimit.Burst {
		if limited(l.AllowAuth(ctx, AuthLogin, fmt.Sprintf("198.51.100.%d", i), "owner")) {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("the username's bucket never refused the guesses")
	}
	if err := l.AllowAuth(ctx, AuthLogin, "203.0.113.9", "owner"); !limited(err) {
		t.Fatalf("a new address with the bucket spent in memory: %v, want RATE_LIMITED", err)
	}
	if err := l.AllowAuth(ctx, AuthLogin, "2001:db8:aa:bb::2", "OWNER"); err != nil {
		t.Fatalf("the owner's /64 with the bucket spent in memory: %v, want allowed", err)
	}
	// And spent in Redis (another instance's guesses).
	gcra.refuse["rl:a:user:owner"] = true
	now = now.Add(time.Hour) // the bucket in memory is full again
	if err := l.AllowAuth(ctx, AuthLogin, "203.0.113.10", "owner"); !limited(err) {
		t.Fatalf("a new address with the bucket spent in Redis: %v, want RATE_LIMITED", err)
	}
	before := gcra.taken["rl:a:user:owner"]
	if err := l.AllowAuth(ctx, AuthLogin, "2001:db8:aa:bb::1", "owner"); err != nil {
		t.Fatalf("the owner with the bucket spent in Redis: %v, want allowed", err)
	}
	if gcra.taken["rl:a:user:owner"] != before {
		t.Errorf("the owner's login took from the username's bucket")
	}
	// Known to this username only; a registration never skips the bucket.
	gcra.refuse["rl:a:user:other"] = true
	if err := l.AllowAuth(ctx, AuthLogin, "2001:db8:aa:bb::1", "other"); !limited(err) {
		t.Errorf("the owner's address at another username: %v, want RATE_LIMITED", err)
	}
	if err := l.AllowAuth(ctx, AuthRegister, "2001:db8:aa:bb::1", "owner"); !limited(err) {
		t.Errorf("a registration from the known address: %v, want RATE_LIMITED", err)
	}
	// The known address keeps its own bucket at the username, and its address's.
	gcra.refuse["rl:a:uc:2001:db8:aa:bb::/64:owner"] = true
	if err := l.AllowAuth(ctx, AuthLogin, "2001:db8:aa:bb::1", "owner"); !limited(err) {
		t.Errorf("the known address over its own bucket: %v, want RATE_LIMITED", err)
	}
	// A request its own buckets refuse is never looked up.
	asks := known.asks
	l.AllowAuth(ctx, AuthLogin, "2001:db8:aa:bb::1", "owner")
	if known.asks != asks {
		t.Errorf("a request over its address's own limit was looked up in the known logins")
	}
	delete(gcra.refuse, "rl:a:uc:2001:db8:aa:bb::/64:owner")
	// Known logins unavailable: nobody is known, the cap holds.
	known.err = errors.New("redis down")
	if err := l.AllowAuth(ctx, AuthLogin, "2001:db8:aa:bb::1", "owner"); !limited(err) {
		t.Errorf("known logins unavailable: %v, want RATE_LIMITED", err)
	}
	l.SignedIn(ctx, "198.51.100.1", "owner") // logged, never a panic
	known.err = nil
	// The limits off: nothing is remembered.
	off := NewLimiter(gcra, Config{Now: time.Now, Known: known})
	off.SignedIn(ctx, "192.0.2.1", "owner")
	if _, ok := known.keep["192.0.2.1 owner"]; ok {
		t.Errorf("a login remembered with the limits off")
	}
}
