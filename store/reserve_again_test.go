package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// The same attempt sent again (same token, same order id) after its first send reserved is
// answered by what became of the reservation since, and never takes a second unit: still in
// flight (Again, to be confirmed by its sender), claimed by the writer or written (Again and
// Durable), released (a used token: the unit is not taken again). The same token with another
// order id (another item) stays a used token. Per-sale and per-item limits alike.
func TestReserveSameAttemptAgain(t *testing.T) {
	t.Parallel()
	for _, limit := range []string{shop.LimitPerSale, shop.LimitPerItem} {
		t.Run(limit, func(t *testing.T) {
			t.Parallel()
			s, rdb := newStock(t)
			const sale, item = 21, 210
			mustLoad(t, s, snapshot(t, s, sale, limit, item, 5), 0)
			a := sentAgainWhileHeld(t, s, rdb, sale, item)
			sentAgainAfterItsRelease(t, s, rdb, sale, item)

			// Expired or cancelled and its unit returned (the shopper left buyers): not durable
			// any more, not made again.
			if out := release(t, s, shop.OrderRef{SaleID: sale, ItemID: item, UserID: 1, OrderID: "o1"}, shop.ReturnUnit); out != store.Released {
				t.Fatalf("return = %v", out)
			}
			if r, err := s.Reserve(context.Background(), a); !errors.Is(err, store.ErrTokenAlreadyUsed) {
				t.Errorf("returned: sent again = %+v, %v; want ErrTokenAlreadyUsed", r, err)
			}
			if got := stockOf(t, rdb, sale, item); got != 5 {
				t.Errorf("stock = %d, want 5", got)
			}
		})
	}
}

// sendAgain sends an attempt again, which must answer a reservation (what: the case).
func sendAgain(t *testing.T, s *store.Stock, a store.Attempt, what string) store.Reservation {
	t.Helper()
	r, err := s.Reserve(context.Background(), a)
	if err != nil {
		t.Fatalf("%s: sent again = %+v, %v; want its reservation", what, r, err)
	}
	return r
}

// sentAgainWhileHeld reserves a unit for shopper 1 (o1) and sends the attempt again while it is
// in flight, claimed by the writer, then written and settled: the same reservation each time,
// and one unit; the same token on another item is a used token. It returns the attempt.
func sentAgainWhileHeld(t *testing.T, s *store.Stock, rdb redis.UniversalClient, sale, item int64) store.Attempt {
	t.Helper()
	ctx := context.Background()
	// In flight, not claimed: the same reservation, to be confirmed.
	a := attempt(t, s, sale, item, 1, "o1", "n1")
	first := mustReserve(t, s, a)
	if first.Again {
		t.Fatalf("a first send answered Again: %+v", first)
	}
	r := sendAgain(t, s, a, "in flight")
	if !r.Again || r.Durable || r.Seq != first.Seq || !r.ReservedAt.Equal(first.ReservedAt) {
		t.Errorf("in flight: sent again = %+v; want Again, not Durable, seq %d at %v", r, first.Seq, first.ReservedAt)
	}
	// Claimed by the writer: durable.
	if v := claim(t, s, sale, store.ClaimItem{OrderID: "o1", Seq: first.Seq, UserID: 1}); v[0] != store.ClaimClaimed {
		t.Fatalf("claim = %v", v)
	}
	if r := sendAgain(t, s, a, "claimed"); !r.Again || !r.Durable || r.Seq != first.Seq {
		t.Errorf("claimed: sent again = %+v; want Again and Durable, seq %d", r, first.Seq)
	}
	// Written and settled: the shopper holds it in buyers; durable.
	if err := s.Settle(ctx, map[int64][]string{sale: {"o1"}}); err != nil {
		t.Fatal(err)
	}
	if r := sendAgain(t, s, a, "written"); !r.Again || !r.Durable {
		t.Errorf("written: sent again = %+v; want Again and Durable", r)
	}
	if got := stockOf(t, rdb, sale, item); got != 4 {
		t.Errorf("stock = %d, want 4 (one unit, however often the attempt is sent)", got)
	}
	if st := stateOf(t, s, sale); st.Seq != first.Seq {
		t.Errorf("counter = %d, want %d (no new reservation)", st.Seq, first.Seq)
	}
	// The same token on another item is another attempt: a used token.
	other := a
	other.OrderID = "o1-other-item"
	if _, err := s.Reserve(ctx, other); !errors.Is(err, store.ErrTokenAlreadyUsed) {
		t.Errorf("same token, another order id: %v, want ErrTokenAlreadyUsed", err)
	}
	return a
}

// sentAgainAfterItsRelease: a reservation released (its publish failed) is not made again when
// its attempt is sent again; the unit stays on sale.
func sentAgainAfterItsRelease(t *testing.T, s *store.Stock, rdb redis.UniversalClient, sale, item int64) {
	t.Helper()
	b := attempt(t, s, sale, item, 2, "o2", "n2")
	mustReserve(t, s, b)
	if out := release(t, s, shop.OrderRef{SaleID: sale, ItemID: item, UserID: 2, OrderID: "o2"}, shop.ReleaseUnsold); out != store.Released {
		t.Fatalf("release = %v", out)
	}
	if r, err := s.Reserve(context.Background(), b); !errors.Is(err, store.ErrTokenAlreadyUsed) {
		t.Errorf("released: sent again = %+v, %v; want ErrTokenAlreadyUsed (not reserved again)", r, err)
	}
	if got := stockOf(t, rdb, sale, item); got != 4 {
		t.Errorf("stock after the release and the resend = %d, want 4", got)
	}
	if _, ok := inFlightRaw(t, rdb, sale)["o2"]; ok {
		t.Errorf("the released reservation is in flight again")
	}
}
