package store_test

import (
	"context"
	"testing"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// A sharded sale's view keeps each shard's clock (read in that shard's MULTI) and names the
// shard of each reservation in flight, so the reconciliation ages a reservation by its own
// node's clock (RedisView.Age); InFlight and InFlightOlder name the shard too.
func TestShardedViewKeepsEachShardsClock(t *testing.T) {
	const k = 3
	s, _ := shardedStock(t, k)
	ctx := context.Background()
	const sale, item = 120, 1200
	snap := snapshot(t, s, sale, shop.LimitPerSale, item, 30)
	snap.Shards = k
	mustLoad(t, s, snap, 0)
	want := map[string]int{}
	for sh := range k {
		u := userOfShard(k, sh, 10)
		o := "o" + string(rune('a'+sh))
		mustReserve(t, s, attempt(t, s, sale, item, u, o, "n"+o))
		want[o] = sh
	}
	before := redisNow(t, s)
	v, err := s.View(ctx, sale, []int64{item}, nil)
	if err != nil {
		t.Fatal(err)
	}
	after := redisNow(t, s)
	if len(v.ShardNow) != k {
		t.Fatalf("view ShardNow = %v, want one clock per shard (%d)", v.ShardNow, k)
	}
	for sh, now := range v.ShardNow {
		if now.Before(before) || now.After(after) {
			t.Errorf("shard %d's clock %v, want Redis's clock in [%v, %v]", sh, now, before, after)
		}
	}
	if len(v.InFlight) != k {
		t.Fatalf("view in flight = %+v, want %d", v.InFlight, k)
	}
	for _, e := range v.InFlight {
		if e.Shard != want[e.OrderID] {
			t.Errorf("order %s in flight in shard %d, want %d", e.OrderID, e.Shard, want[e.OrderID])
		}
		if age := v.Age(e); age != v.ShardNow[e.Shard].Sub(e.ReservedAt) {
			t.Errorf("age of %s = %v, want by shard %d's clock", e.OrderID, age, e.Shard)
		}
	}
	fl, err := s.InFlight(ctx, sale)
	if err != nil {
		t.Fatal(err)
	}
	older, err := s.InFlightOlder(ctx, sale, -1)
	if err != nil {
		t.Fatal(err)
	}
	for _, list := range [][]store.InFlightEntry{fl, older} {
		if len(list) != k {
			t.Errorf("in flight = %+v, want %d", list, k)
		}
		for _, e := range list {
			if e.Shard != want[e.OrderID] {
				t.Errorf("order %s listed in shard %d, want %d", e.OrderID, e.Shard, want[e.OrderID])
			}
		}
	}
}
