package store_test

import (
	"context"
	"testing"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// A sharded sale's MarkLost under a guard checks every shard's guard before it marks any: one
// shard that moved on (a purchase since the reconciliation's reading) or that knows a newer
// lease holder leaves every shard alone, whichever shard it is.
func TestShardedMarkLostChecksEveryShardFirst(t *testing.T) {
	const k = 3
	s, rdb := shardedStock(t, k)
	ctx := context.Background()
	lostShards := func(sale int64) []bool { return shardsLost(t, rdb, sale, k) }
	none := func(sale int64, what string) {
		t.Helper()
		for sh, l := range lostShards(sale) {
			if l {
				t.Errorf("%s: shard %d marked lost", what, sh)
			}
		}
	}
	for moved := range k {
		sale := int64(100 + moved)
		snap := snapshot(t, s, sale, shop.LimitPerSale, 1000, 30)
		snap.Shards = k
		mustLoad(t, s, snap, 0)
		at := stateOf(t, s, sale).SeqRaw
		u := userOfShard(k, moved, 1)
		mustReserve(t, s, attempt(t, s, sale, 1000, u, "o1", "n1")) // shard `moved` moves on
		if ok, err := s.MarkLost(ctx, sale, 0, at); ok || err != nil {
			t.Errorf("shard %d moved on: mark lost at the old seqs = %v, %v; want not marked", moved, ok, err)
		}
		none(sale, "a stale atSeq")
		// At the current seqs it marks every shard.
		if ok, err := s.MarkLost(ctx, sale, 0, stateOf(t, s, sale).SeqRaw); !ok || err != nil {
			t.Errorf("mark lost at the current seqs = %v, %v", ok, err)
		}
		for sh, l := range lostShards(sale) {
			if !l {
				t.Errorf("shard %d not marked at the current seqs", sh)
			}
		}
	}

	// Fences: a shard that a newer lease holder (fence 7) acted on refuses fence 5, and then no
	// shard is marked or takes fence 5.
	for newer := range k {
		sale := int64(110 + newer)
		snap := snapshot(t, s, sale, shop.LimitPerSale, 1000, 30)
		snap.Shards = k
		mustLoad(t, s, snap, 0)
		if err := rdb.HSet(ctx, store.MetaKeyOf(sale, newer), "fence", "7").Err(); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.MarkLost(ctx, sale, 5, ""); ok || err != nil {
			t.Errorf("shard %d knows fence 7: mark lost with fence 5 = %v, %v; want refused", newer, ok, err)
		}
		none(sale, "an old fence")
		for sh := range k {
			if f, _ := rdb.HGet(ctx, store.MetaKeyOf(sale, sh), "fence").Result(); f == "5" {
				t.Errorf("shard %d took fence %q from a refused mark", sh, f)
			}
		}
		if ok, err := s.MarkLost(ctx, sale, 7, ""); !ok || err != nil {
			t.Errorf("mark lost with fence 7 = %v, %v", ok, err)
		}
	}
}
