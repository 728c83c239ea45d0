package store_test

import (
	"context"
	"errors"
	"testing"

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
			ctx := context.Background()
			const sale, item = 21, 210
			mustLoad(t, s, snapshot(t, s, sale, limit, item, 5), 0)
			again := func(a store.Attempt, what string) store.Reservation {
				t.Helper()
				r, err := s.Reserve(ctx, a)
				if err != nil {
					t.Fatalf("%s: sent again = %+v, %v; want its reservation", what, r, err)
				}
				return r
			}

			// In flight, not claimed: the same reservation, to be confirmed.
			a := attempt(t, s, sale, item, 1, "o1", "n1")
			first := mustReserve(t, s, a)
			if first.Again {
				t.Fatalf("a first send answered Again: %+v", first)
			}
			r := again(a, "in flight")
			if !r.Again || r.Durable || r.Seq != first.Seq || !r.ReservedAt.Equal(first.ReservedAt) {
				t.Errorf("in flight: sent again = %+v; want Again, not Durable, seq %d at %v", r, first.Seq, first.ReservedAt)
			}
			// Claimed by the writer: durable.
			if v := claim(t, s, sale, store.ClaimItem{OrderID: "o1", Seq: first.Seq, UserID: 1}); v[0] != store.ClaimClaimed {
				t.Fatalf("claim = %v", v)
			}
			if r := again(a, "claimed"); !r.Again || !r.Durable || r.Seq != first.Seq {
				t.Errorf("claimed: sent again = %+v; want Again and Durable, seq %d", r, first.Seq)
			}
			// Written and settled: the shopper holds it in buyers; durable.
			if err := s.Settle(ctx, map[int64][]string{sale: {"o1"}}); err != nil {
				t.Fatal(err)
			}
			if r := again(a, "written"); !r.Again || !r.Durable {
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

			// Released (its publish failed): not made again, the unit stays on sale.
			b := attempt(t, s, sale, item, 2, "o2", "n2")
			mustReserve(t, s, b)
			if out := release(t, s, shop.OrderRef{SaleID: sale, ItemID: item, UserID: 2, OrderID: "o2"}, shop.ReleaseUnsold); out != store.Released {
				t.Fatalf("release = %v", out)
			}
			if r, err := s.Reserve(ctx, b); !errors.Is(err, store.ErrTokenAlreadyUsed) {
				t.Errorf("released: sent again = %+v, %v; want ErrTokenAlreadyUsed (not reserved again)", r, err)
			}
			if got := stockOf(t, rdb, sale, item); got != 4 {
				t.Errorf("stock after the release and the resend = %d, want 4", got)
			}
			if _, ok := inFlightRaw(t, rdb, sale)["o2"]; ok {
				t.Errorf("the released reservation is in flight again")
			}

			// Expired or cancelled and its unit returned (the shopper left buyers): not durable
			// any more, not made again.
			if out := release(t, s, shop.OrderRef{SaleID: sale, ItemID: item, UserID: 1, OrderID: "o1"}, shop.ReturnUnit); out != store.Released {
				t.Fatalf("return = %v", out)
			}
			if r, err := s.Reserve(ctx, a); !errors.Is(err, store.ErrTokenAlreadyUsed) {
				t.Errorf("returned: sent again = %+v, %v; want ErrTokenAlreadyUsed", r, err)
			}
			if got := stockOf(t, rdb, sale, item); got != 5 {
				t.Errorf("stock = %d, want 5", got)
			}
		})
	}
}
