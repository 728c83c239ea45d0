package store_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

func TestAdjustStockMetaAndPause(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	const sale, a, b, added = 90, 1, 2, 3

	adjustNotLoadedDoesNothing(t, s, rdb, sale, a)
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, a, 3, b, 2), 0)
	mustReserve(t, s, attempt(t, s, sale, a, 7, "o1", "n1")) // a: 2 left, one held in flight
	adjustBelowLeftChangesNothing(t, s, rdb, sale, a, b, added)
	adjustWithinLeftAppliesAll(t, s, rdb, sale, a, b, added)
	pauseRefusesAndResumeReserves(t, s, rdb, sale, b)

	// A rebuild keeps the pause (the snapshot carries it from Postgres).
	snap := snapshot(t, s, sale+1, shop.LimitPerSale, a, 1)
	snap.Paused = true
	mustLoad(t, s, snap, 0)
	if _, err := s.Reserve(context.Background(), attempt(t, s, sale+1, a, 7, "o3", "n3")); !errors.Is(err, store.ErrPaused) {
		t.Errorf("reserve in a sale loaded paused: %v, want ErrPaused", err)
	}
}

// adjustNotLoadedDoesNothing: an edit of a sale not loaded does nothing and creates nothing (the
// load reads Postgres).
func adjustNotLoadedDoesNothing(t *testing.T, s *store.Stock, rdb redis.UniversalClient, sale, a int64) {
	t.Helper()
	res, err := s.Adjust(context.Background(), store.Adjustment{SaleID: sale, Meta: map[string]string{"paused": "1"},
		Stock: []store.StockAdjust{{ItemID: a, Delta: 5}}})
	if err != nil || res.Applied {
		t.Fatalf("adjust of a sale not loaded = %+v, %v; want not applied", res, err)
	}
	if keys := allKeys(t, rdb); len(keys) != 0 {
		t.Fatalf("adjust of a sale not loaded created %v", keys)
	}
}

// adjustBelowLeftChangesNothing: a decrease past the units left (the held one included) changes
// nothing at all.
func adjustBelowLeftChangesNothing(t *testing.T, s *store.Stock, rdb redis.UniversalClient, sale, a, b, added int64) {
	t.Helper()
	ctx := context.Background()
	n := int64(4)
	res, err := s.Adjust(ctx, store.Adjustment{SaleID: sale, Meta: map[string]string{"limit": shop.LimitPerItem},
		Stock: []store.StockAdjust{{ItemID: b, Delta: 1}, {ItemID: a, Delta: -3}, {ItemID: added, Initial: &n}}})
	if !errors.Is(err, store.ErrAdjustTooLow) || res.ItemID != a || res.Left != 2 {
		t.Fatalf("adjust below the units left = %+v, %v; want ErrAdjustTooLow for item %d with 2 left", res, err, a)
	}
	if got := stockOf(t, rdb, sale, b); got != 2 {
		t.Errorf("refused adjust moved item b to %d, want 2", got)
	}
	if v, _ := rdb.HGet(ctx, store.MetaKey(sale), "limit").Result(); v != shop.LimitPerSale {
		t.Errorf("refused adjust set limit %q", v)
	}
	if _, err := rdb.Get(ctx, store.StockKey(sale, added)).Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("refused adjust created the added item's stock: %v", err)
	}
}

// adjustWithinLeftAppliesAll: within what is left, every delta, the added item and the meta
// fields are applied at once.
func adjustWithinLeftAppliesAll(t *testing.T, s *store.Stock, rdb redis.UniversalClient, sale, a, b, added int64) {
	t.Helper()
	ctx := context.Background()
	n := int64(4)
	ends := redisNow(t, s).Add(2 * time.Hour).UnixMilli()
	res, err := s.Adjust(ctx, store.Adjustment{SaleID: sale, Meta: map[string]string{"ends": strconv.FormatInt(ends, 10)},
		Stock: []store.StockAdjust{{ItemID: a, Delta: -2}, {ItemID: b, Delta: 10}, {ItemID: added, Initial: &n}}})
	if err != nil || !res.Applied {
		t.Fatalf("adjust = %+v, %v; want applied", res, err)
	}
	if ga, gb, gn := stockOf(t, rdb, sale, a), stockOf(t, rdb, sale, b), stockOf(t, rdb, sale, added); ga != 0 || gb != 12 || gn != 4 {
		t.Errorf("stock a, b, added = %d, %d, %d; want 0, 12, 4", ga, gb, gn)
	}
	if v, _ := rdb.HGet(ctx, store.MetaKey(sale), "ends").Int64(); v != ends {
		t.Errorf("meta ends = %d, want %d", v, ends)
	}
}

// pauseRefusesAndResumeReserves: paused, the reserve script refuses before the token is used;
// resumed, it reserves.
func pauseRefusesAndResumeReserves(t *testing.T, s *store.Stock, rdb redis.UniversalClient, sale, b int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Adjust(ctx, store.Adjustment{SaleID: sale, Meta: map[string]string{"paused": "1"}}); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Paused(ctx, sale); err != nil || !p {
		t.Fatalf("Paused = %v, %v; want true", p, err)
	}
	at := attempt(t, s, sale, b, 8, "o2", "n2")
	if r, err := s.Reserve(ctx, at); !errors.Is(err, store.ErrPaused) {
		t.Fatalf("reserve while paused = %+v, %v; want ErrPaused", r, err)
	}
	if _, err := rdb.Get(ctx, tokenKey(sale, "n2")).Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("a paused refusal used the token: %v", err)
	}
	if _, err := s.Adjust(ctx, store.Adjustment{SaleID: sale, Meta: map[string]string{"paused": "0"}}); err != nil {
		t.Fatal(err)
	}
	if r := mustReserve(t, s, at); r.Left != 11 {
		t.Errorf("reserve after resume left %d, want 11", r.Left)
	}
}
