package auth

import (
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
)

func FuzzVerifyJWT(f *testing.F) {
	a := New(Config{Secret: []byte("fuzz-secret-of-some-length"), TTL: time.Hour}, Deps{Now: time.Now})
	good, _ := a.Issue(Identity{UserID: 5, Role: RoleShopper})
	for _, seed := range []string{good, "", "a.b.c", "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.", good + "x", strings.Repeat(".", 5000)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		id, err := a.Verify(tok)
		if err == nil && (id.UserID <= 0 || (id.Role != RoleShopper && id.Role != RoleMerchant)) {
			t.Fatalf("Verify(%q) accepted an identity it should not: %+v", tok, id)
		}
		if err != nil && shop.ErrorCode(err) != shop.CodeUnauthenticated {
			t.Fatalf("Verify(%q) failed with %v, want UNAUTHENTICATED", tok, shop.ErrorCode(err))
		}
	})
}
