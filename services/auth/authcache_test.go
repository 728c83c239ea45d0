package auth

import (
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
)

// A token verified once is remembered, but never past its expiry (plus the parser's leeway).
func TestVerifiedTokenCacheHonoursExpiry(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	a := New(Config{Secret: []byte("cache-secret-of-some-length"), TTL: time.Minute}, Deps{Now: func() time.Time { return now }})
	tok, err := a.Issue(Identity{UserID: 9, Role: RoleShopper})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		id, err := a.Verify(tok)
		if err != nil || id.UserID != 9 || id.Role != RoleShopper {
			t.Fatalf("verify #%d: %+v, %v", i+1, id, err)
		}
	}
	if v := a.slot(tok).Load(); v == nil || v.token != tok {
		t.Fatalf("a verified token is not cached")
	}
	now = now.Add(time.Minute + 4*time.Second)
	if _, err := a.Verify(tok); err != nil {
		t.Errorf("within the leeway: %v", err)
	}
	now = now.Add(2 * time.Second)
	if _, err := a.Verify(tok); shop.ErrorCode(err) != shop.CodeUnauthenticated {
		t.Errorf("past exp + leeway: got %v, want UNAUTHENTICATED", err)
	}
	// A tampered token never hits the cache entry of the real one.
	bad := tok[:len(tok)-2] + "xx"
	if _, err := a.Verify(bad); shop.ErrorCode(err) != shop.CodeUnauthenticated {
		t.Errorf("tampered token: got %v, want UNAUTHENTICATED", err)
	}
}
