package purchase

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/internal/mac"
	"github.com/google/uuid"
)

func TestOrderIDRoundTrip(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_123)
	for _, item := range []int64{1, 2, 7, 255, 256, 65536, 1 << 31, math.MaxUint32} {
		id := NewOrderID(item, now)
		got, canonical, ok := ItemOfOrderID(id)
		if !ok || got != item || canonical != id {
			t.Errorf("ItemOfOrderID(NewOrderID(%d)) = %d, %q, %v; want %d, %q, true", item, got, canonical, ok, item, id)
		}
		u, err := uuid.Parse(id)
		if err != nil {
			t.Fatalf("%q: %v", id, err)
		}
		if u.Version() != 8 || u.Variant() != uuid.RFC4122 {
			t.Errorf("%q: version %d, variant %v; want 8, RFC 4122", id, u.Version(), u.Variant())
		}
		if id != strings.ToLower(id) || len(id) != 36 {
			t.Errorf("%q is not the canonical lower-case form", id)
		}
		// The first 48 bits are the Unix milliseconds.
		var ms int64
		for _, b := range u[:6] {
			ms = ms<<8 | int64(b)
		}
		if ms != now.UnixMilli() {
			t.Errorf("%q carries %d ms, want %d", id, ms, now.UnixMilli())
		}
		// Upper case is the same id, answered in canonical form.
		if got, canonical, ok := ItemOfOrderID(strings.ToUpper(id)); !ok || got != item || canonical != id {
			t.Errorf("upper case %q = %d, %q, %v; want %d, %q", strings.ToUpper(id), got, canonical, ok, item, id)
		}
	}
}

func TestOrderIDsAreUniqueAndSortByTime(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_800_000_000_000)
	seen := map[string]bool{}
	for range 10000 {
		id := NewOrderID(42, now)
		if seen[id] {
			t.Fatalf("duplicate order id %s", id)
		}
		seen[id] = true
	}
	earlier, later := NewOrderID(42, now), NewOrderID(42, now.Add(time.Millisecond))
	if !(earlier < later) {
		t.Errorf("ids do not sort by time: %s !< %s", earlier, later)
	}
}

func TestItemOfOrderIDRejects(t *testing.T) {
	t.Parallel()
	good := NewOrderID(9, time.Now())
	v4 := uuid.New().String()
	v7 := uuid.Must(uuid.NewV7()).String()
	// Same bytes as good, with the RFC 9562 variant bits replaced by the Microsoft ones.
	b := []byte(good)
	b[19] = 'c'
	microsoft := string(b)
	for _, id := range []string{
		"", "abc", "1", "-1", "99999999999999999999",
		v4, v7, microsoft,
		"00000000-0000-0000-0000-000000000000",
		"00000000-0000-8000-8000-000000000000", // v8 with item 0
		"ffffffff-ffff-ffff-ffff-ffffffffffff",
		"zzzzzzzz-zzzz-8zzz-8zzz-zzzzzzzzzzzz",
		"{" + good + "}", "urn:uuid:" + good, strings.ReplaceAll(good, "-", ""),
		good + "0", good[1:], " " + good[1:], good[:35] + "\x00",
		strings.Replace(good, "-", "_", 1),
	} {
		if item, canonical, ok := ItemOfOrderID(id); ok {
			t.Errorf("ItemOfOrderID(%q) = %d, %q, true; want rejected", id, item, canonical)
		}
	}
}

// An attempt's order id is a function of its token and item under the server's secret: the same
// attempt sent again gets the same id; any other token, item or secret another one. It keeps
// NewOrderID's layout (the token's issue time, version 8, the item id), so a status poll finds
// the item in it.
func TestAttemptIDs(t *testing.T) {
	t.Parallel()
	ids := newAttemptIDs([]byte("a secret of at least 32 bytes, for HS256"))
	issued := time.UnixMilli(1_800_000_000_321)
	tok := purchaseToken{UserID: 7, SaleID: 3, Expires: issued.Add(30 * time.Second), Nonce: "00112233445566778899aabb"}
	id := ids.of(tok, 42, issued)
	if again := ids.of(tok, 42, issued); again != id {
		t.Errorf("the same attempt: %s, then %s; want the same id", id, again)
	}
	item, canonical, ok := ItemOfOrderID(id)
	if !ok || item != 42 || canonical != id {
		t.Errorf("ItemOfOrderID(%s) = %d, %q, %v; want 42, the id, true", id, item, canonical, ok)
	}
	u := uuid.MustParse(id)
	var ms int64
	for _, b := range u[:6] {
		ms = ms<<8 | int64(b)
	}
	if ms != issued.UnixMilli() {
		t.Errorf("%s carries %d ms, want the issue time %d", id, ms, issued.UnixMilli())
	}
	seen := map[string]string{id: "the attempt"}
	other := func(what, got string) {
		t.Helper()
		if prev, dup := seen[got]; dup {
			t.Errorf("%s has the id of %s: %s", what, prev, got)
		}
		seen[got] = what
	}
	other("another item", ids.of(tok, 43, issued))
	for name, tk := range map[string]purchaseToken{
		"another nonce":   {UserID: 7, SaleID: 3, Expires: tok.Expires, Nonce: "00112233445566778899aabc"},
		"another shopper": {UserID: 8, SaleID: 3, Expires: tok.Expires, Nonce: tok.Nonce},
		"another sale":    {UserID: 7, SaleID: 4, Expires: tok.Expires, Nonce: tok.Nonce},
	} {
		other(name, ids.of(tk, 42, issued))
	}
	other("another secret", newAttemptIDs([]byte("another secret of at least 32 bytes!!")).of(tok, 42, issued))
	// Random tokens: no two ids alike.
	for range 10000 {
		tk := tok
		tk.Nonce = mac.Nonce()
		other("a random token", ids.of(tk, 42, issued))
	}
}

func BenchmarkAttemptID(b *testing.B) {
	ids := newAttemptIDs([]byte("a secret of at least 32 bytes, for HS256"))
	tok := purchaseToken{UserID: 7, SaleID: 3, Expires: time.Now(), Nonce: mac.Nonce()}
	b.ReportAllocs()
	for b.Loop() {
		_ = ids.of(tok, 42, tok.Expires)
	}
}

func BenchmarkNewOrderID(b *testing.B) {
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		_ = NewOrderID(42, now)
	}
}
