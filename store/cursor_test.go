package store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/store"
)

// Cursors round-trip, and anything this server did not give out (junk, too long, the other
// kind's) is refused.
func TestCursors(t *testing.T) {
	at := time.UnixMicro(1764550000123456)
	o := store.OrderCursor{ReservedAt: at, ID: "01a22f2c-d409-845b-ad2f-fe1a00000016"}
	if got, ok := store.DecodeOrderCursor(o.Encode()); !ok || got != o {
		t.Errorf("order cursor round trip = %+v, %v", got, ok)
	}
	sc := store.SaleCursor{StartsAt: at, ID: 42}
	if got, ok := store.DecodeSaleCursor(sc.Encode()); !ok || !got.StartsAt.Equal(at) || got.ID != 42 {
		t.Errorf("sale cursor round trip = %+v, %v", got, ok)
	}
	for _, bad := range []string{"", "nonsense", "!!!", sc.Encode() + strings.Repeat("A", 200)} {
		if _, ok := store.DecodeOrderCursor(bad); ok {
			t.Errorf("order cursor %q accepted", bad)
		}
		if _, ok := store.DecodeSaleCursor(bad); ok {
			t.Errorf("sale cursor %q accepted", bad)
		}
	}
	if _, ok := store.DecodeOrderCursor(sc.Encode()); ok {
		t.Error("a sale cursor was taken for an order cursor")
	}
	if _, ok := store.DecodeSaleCursor(o.Encode()); ok {
		t.Error("an order cursor was taken for a sale cursor")
	}
}
