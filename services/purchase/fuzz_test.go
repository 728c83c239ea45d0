package purchase

import (
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/internal/mac"
)

// Fuzz targets for every parser of client input in this package; run one with
// `go test -fuzz=FuzzPurchaseToken ./services`. The seeds below run in every `go test`.

func FuzzPurchaseToken(f *testing.F) {
	s := newTokenSigner([]byte("fuzz-secret-of-some-length"))
	good := s.sign(purchaseToken{UserID: 7, SaleID: 3, Expires: time.UnixMilli(1_800_000_000_000), Nonce: mac.Nonce()})
	for _, seed := range []string{good, "", ".", good[:48], good + "x", strings.Repeat("A", 71), strings.Replace(good, ".", "_", 1)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		got, ok := s.verify(tok)
		if ok && s.sign(got) != tok {
			t.Fatalf("verify accepted %q, which is not what signing its content gives", tok)
		}
	})
}

func FuzzOrderID(f *testing.F) {
	for _, seed := range []string{NewOrderID(12, time.Now()), "", "00000000-0000-0000-0000-000000000000",
		"550e8400-e29b-41d4-a716-446655440000", "{01a22958-8d6e-802a-8916-367400000001}", "01A22958-8D6E-802A-8916-367400000001"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, id string) {
		item, canonical, ok := ItemOfOrderID(id)
		if !ok {
			return
		}
		if item <= 0 || len(canonical) != 36 {
			t.Fatalf("ItemOfOrderID(%q) = %d, %q", id, item, canonical)
		}
		if again, c2, ok2 := ItemOfOrderID(canonical); !ok2 || again != item || c2 != canonical {
			t.Fatalf("canonical form %q does not parse back to item %d", canonical, item)
		}
	})
}
