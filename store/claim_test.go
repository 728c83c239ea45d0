package store_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

func TestClaim(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item = 30, 300
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, 5), 0)
	seqs := map[string]int64{}
	for i, o := range []string{"a", "b", "c"} {
		seqs[o] = mustReserve(t, s, attempt(t, s, sale, item, int64(i+1), o, "n"+o)).Seq
	}
	release(t, s, shop.OrderRef{SaleID: sale, ItemID: item, UserID: 2, OrderID: "b"}, shop.ReleaseUnsold)
	raw := inFlightRaw(t, rdb, sale)

	got := claim(t, s, sale,
		store.ClaimItem{OrderID: "a", Seq: seqs["a"]},
		store.ClaimItem{OrderID: "b", Seq: seqs["b"]},
		store.ClaimItem{OrderID: "never", Seq: 1},
		store.ClaimItem{OrderID: "c", Seq: seqs["c"]})
	if want := []int{store.ClaimClaimed, store.ClaimGone, store.ClaimUnknown, store.ClaimClaimed}; !slices.Equal(got, want) {
		t.Errorf("claim = %v, want %v", got, want)
	}
	after := inFlightRaw(t, rdb, sale)
	if want := map[string]string{"a": raw["a"] + ":c", "c": raw["c"] + ":c"}; !maps.Equal(after, want) {
		t.Errorf("in flight after claim = %v, want %v", after, want)
	}
	// Claiming twice is harmless and does not stack the mark.
	if got := claim(t, s, sale, store.ClaimItem{OrderID: "a", Seq: seqs["a"]}); !slices.Equal(got, []int{store.ClaimClaimed}) {
		t.Errorf("second claim = %v", got)
	}
	if v := inFlightRaw(t, rdb, sale)["a"]; v != raw["a"]+":c" {
		t.Errorf("in-flight value after a second claim = %q", v)
	}
	list, err := s.InFlight(ctx, sale)
	if err != nil || len(list) != 2 {
		t.Fatalf("InFlight = %v, %v", list, err)
	}
	for _, e := range list {
		if !e.Claimed || e.Seq != seqs[e.OrderID] || e.ItemID != item {
			t.Errorf("in flight %+v: want claimed, seq %d", e, seqs[e.OrderID])
		}
	}
	if got := claim(t, s, sale); len(got) != 0 {
		t.Errorf("claim of nothing = %v", got)
	}
	if st := stateOf(t, s, sale); st.Lost {
		t.Errorf("claims at or below the counter marked the sale lost")
	}
	if got := stockOf(t, rdb, sale, item); got != 3 {
		t.Errorf("stock = %d, want 3", got)
	}
}

func TestClaimSeqAboveCounter(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	const sale, item = 31, 310
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, 5), 0)
	r := mustReserve(t, s, attempt(t, s, sale, item, 1, "a", "na"))
	// A batch that holds an order Redis forgot, with a seq it never reached.
	got := claim(t, s, sale, store.ClaimItem{OrderID: "a", Seq: r.Seq}, store.ClaimItem{OrderID: "ghost", Seq: r.Seq + 1})
	if want := []int{store.ClaimClaimed, store.ClaimUnknown}; !slices.Equal(got, want) {
		t.Errorf("claim = %v, want %v", got, want)
	}
	if st := stateOf(t, s, sale); !st.Lost || st.Seq != r.Seq {
		t.Errorf("state = %+v; want lost at seq %d", st, r.Seq)
	}
	if _, err := s.Reserve(context.Background(), attempt(t, s, sale, item, 2, "b", "nb")); !errors.Is(err, store.ErrStockUnknown) {
		t.Errorf("reserve after the claim found a loss: %v, want ErrStockUnknown", err)
	}
	if got := stockOf(t, rdb, sale, item); got != 4 {
		t.Errorf("stock = %d, want 4", got)
	}
}

func TestClaimNotLoaded(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	got := claim(t, s, 32, store.ClaimItem{OrderID: "x", Seq: 5}, store.ClaimItem{OrderID: "y", Seq: 1 << 40})
	if want := []int{store.ClaimUnknown, store.ClaimUnknown}; !slices.Equal(got, want) {
		t.Errorf("claim on a sale not loaded = %v, want %v", got, want)
	}
	if keys := allKeys(t, rdb); len(keys) != 0 {
		t.Errorf("claim on a sale not loaded created %v", keys)
	}
}
