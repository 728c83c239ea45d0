package store_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

func TestView(t *testing.T) {
	t.Parallel()
	s, _ := newStock(t)
	ctx := context.Background()
	const sale, a, b = 60, 600, 601
	snap := snapshot(t, s, sale, shop.LimitPerSale, a, 3, b, 1)
	snap.Epoch = 2
	snap.Buyers = map[string]string{"9": "p9"}
	snap.Gone = []string{"g0"}
	mustLoad(t, s, snap, 0)
	r1 := mustReserve(t, s, attempt(t, s, sale, a, 1, "o1", "n1"))
	mustReserve(t, s, attempt(t, s, sale, b, 2, "o2", "n2"))
	release(t, s, shop.OrderRef{SaleID: sale, ItemID: b, UserID: 2, OrderID: "o2"}, shop.ReleaseUnsold)
	claim(t, s, sale, store.ClaimItem{OrderID: "o1", Seq: r1.Seq})

	before := redisNow(t, s)
	v, err := s.View(ctx, sale, []int64{a, b, 602}, []string{"o1", "o2", "g0"})
	if err != nil {
		t.Fatal(err)
	}
	after := redisNow(t, s)
	st := stateOf(t, s, sale)
	if v.State != st || !v.State.Loaded || v.State.Epoch != 2 || v.State.Seq != r1.Seq+1 {
		t.Errorf("view state = %+v, want %+v", v.State, st)
	}
	if want := map[int64]int64{a: 2, b: 1, 602: -1}; !maps.Equal(v.Levels, want) {
		t.Errorf("view levels = %v, want %v", v.Levels, want)
	}
	if v.Buyers != 2 { // p9 loaded, o1 reserved; o2's shopper was freed
		t.Errorf("view buyers = %d, want 2", v.Buyers)
	}
	if want := []store.InFlightEntry{{OrderID: "o1", ItemID: a, UserID: 1, ReservedAt: r1.ReservedAt, Seq: r1.Seq, Claimed: true}}; !slices.Equal(v.InFlight, want) {
		t.Errorf("view in flight = %+v, want %+v", v.InFlight, want)
	}
	if want := map[string]bool{"o1": false, "o2": true, "g0": true}; !maps.Equal(v.Gone, want) {
		t.Errorf("view gone = %v, want %v", v.Gone, want)
	}
	if v.Now.Before(before) || v.Now.After(after) {
		t.Errorf("view time %v, want Redis's clock in [%v, %v]", v.Now, before, after)
	}

	// A sale Redis does not hold reads as not loaded, every level missing.
	v, err = s.View(ctx, 61, []int64{a}, nil)
	if err != nil || v.State.Loaded || v.Levels[a] != -1 || v.Buyers != 0 || len(v.InFlight) != 0 || len(v.Gone) != 0 {
		t.Errorf("view of a sale not loaded = %+v, %v", v, err)
	}
	if st := stateOf(t, s, 61); st != (store.SaleState{}) {
		t.Errorf("state of a sale not loaded = %+v", st)
	}
}

func TestLevels(t *testing.T) {
	t.Parallel()
	s, _ := newStock(t)
	ctx := context.Background()
	const sale = 62
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, 1, 7, 2, 0), 0)
	levels, err := s.Levels(ctx, sale, []int64{3, 1, 2, 4})
	if want := []int64{-1, 7, 0, -1}; err != nil || !slices.Equal(levels, want) {
		t.Errorf("levels = %v, %v; want %v", levels, err, want)
	}
	// Another sale's item of the same id is another key.
	levels, err = s.Levels(ctx, sale+1, []int64{1})
	if want := []int64{-1}; err != nil || !slices.Equal(levels, want) {
		t.Errorf("levels of another sale = %v, %v; want %v", levels, err, want)
	}
}
