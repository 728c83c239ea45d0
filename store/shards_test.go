package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// shardedStock is newStock whose sales all have k shards.
func shardedStock(t *testing.T, k int) (*store.Stock, redis.UniversalClient) {
	t.Helper()
	s, rdb, _ := newStockOf(t, kShards(k))
	return s, rdb
}

func userOfShard(k, sh int, from int64) int64 {
	for u := from; ; u++ {
		if store.ShardOf(u, k) == sh {
			return u
		}
	}
}

func levelsOf(t *testing.T, rdb redis.UniversalClient, sale int64, k int, item int64) []int64 {
	t.Helper()
	out := make([]int64, k)
	for sh := range k {
		n, err := rdb.Get(context.Background(), store.StockKeyOf(sale, sh, item)).Int64()
		if err != nil {
			t.Fatalf("stock of shard %d: %v", sh, err)
		}
		out[sh] = n
	}
	return out
}

func TestShardOfIsFixedAndSpread(t *testing.T) {
	counts := make([]int, 4)
	for u := int64(1); u <= 4000; u++ {
		sh := store.ShardOf(u, 4)
		if sh != store.ShardOf(u, 4) || sh < 0 || sh >= 4 {
			t.Fatalf("ShardOf(%d, 4) = %d", u, sh)
		}
		counts[sh]++
	}
	for sh, n := range counts {
		if n < 800 || n > 1200 {
			t.Errorf("shard %d pins %d of 4000 shoppers, want about 1000 (%v)", sh, n, counts)
		}
	}
	if store.ShardOf(12345, 1) != 0 {
		t.Error("one shard: not shard 0")
	}
}

// A load splits each item's units evenly (remainder to the lowest shards) and puts each buyer in
// their shard's hash; every shard holds the same epoch and its own counter.
func TestShardedLoadSplitsAndPins(t *testing.T) {
	const k = 4
	s, rdb := shardedStock(t, k)
	ctx := context.Background()
	snap := snapshot(t, s, 70, shop.LimitPerItem, 700, 10, 701, 3)
	snap.Shards = k
	u1, u3 := userOfShard(k, 1, 1), userOfShard(k, 3, 1)
	snap.Buyers[store.BuyerMember(shop.LimitPerItem, 700, u1)] = "o1"
	snap.Buyers[store.BuyerMember(shop.LimitPerItem, 701, u3)] = "o3"
	snap.Gone = []string{"g1"}
	mustLoad(t, s, snap, 0)
	if got := levelsOf(t, rdb, 70, k, 700); fmt.Sprint(got) != "[3 3 2 2]" {
		t.Errorf("item 700: %v, want [3 3 2 2]", got)
	}
	if got := levelsOf(t, rdb, 70, k, 701); fmt.Sprint(got) != "[1 1 1 0]" {
		t.Errorf("item 701: %v, want [1 1 1 0]", got)
	}
	for sh := range k {
		n, _ := rdb.HLen(ctx, store.BuyersKeyOf(70, sh)).Result()
		want := int64(0)
		if sh == 1 || sh == 3 {
			want = 1
		}
		if n != want {
			t.Errorf("shard %d: %d buyers, want %d", sh, n, want)
		}
		if ok, _ := rdb.SIsMember(ctx, store.GoneKeyOf(70, sh), "g1").Result(); !ok {
			t.Errorf("shard %d: the pending return's tombstone is missing", sh)
		}
	}
	st := stateOf(t, s, 70)
	if !st.Loaded || st.Lost || st.Shards != k || len(st.ShardSeqs()) != k || st.Epoch != 1 {
		t.Errorf("state = %+v", st)
	}
	if lv, err := s.Levels(ctx, 70, []int64{700, 701, 702}); err != nil || !slices.Equal(lv, []int64{10, 3, -1}) {
		t.Errorf("levels = %v, %v; want [10 3 -1]", lv, err)
	}
	if b := buyersOf(t, s, 70); len(b) != 2 {
		t.Errorf("buyers = %v, want both shards' buyers", b)
	}
	// A second load of the same epoch, or any while every shard is healthy, does nothing.
	if ok, err := s.Load(ctx, snap, 0); err != nil || ok {
		t.Errorf("reload of a healthy sale = %v, %v", ok, err)
	}
}

// The shopper's shard runs dry: the reserve borrows from the shard holding the most (its token is
// not used by the empty shard's answer) and reserves in the shopper's shard. Sold out is final
// only when every shard is empty.
func TestShardedReserveBorrows(t *testing.T) {
	const k = 2
	s, rdb := shardedStock(t, k)
	ctx := context.Background()
	snap := snapshot(t, s, 71, shop.LimitPerSale, 710, 3)
	snap.Shards = k
	mustLoad(t, s, snap, 0) // [2 1]
	var users []int64
	for u := int64(1); len(users) < 4; u++ {
		if store.ShardOf(u, k) == 1 {
			users = append(users, u)
		}
	}
	r := mustReserve(t, s, attempt(t, s, 71, 710, users[0], "o1", "n1"))
	if r.Borrowed || r.Shard != 1 || r.Left != 0 {
		t.Errorf("first reserve = %+v, want shard 1, no borrow, 0 left", r)
	}
	r = mustReserve(t, s, attempt(t, s, 71, 710, users[1], "o2", "n2"))
	if !r.Borrowed {
		t.Errorf("second reserve = %+v, want borrowed", r)
	}
	if got := levelsOf(t, rdb, 71, k, 710); fmt.Sprint(got) != "[1 0]" {
		t.Errorf("after the borrow: %v, want [1 0] (half of shard 0's 2 moved, 1 reserved)", got)
	}
	mustReserve(t, s, attempt(t, s, 71, 710, users[2], "o3", "n3"))
	res, err := s.Reserve(ctx, attempt(t, s, 71, 710, users[3], "o5", "n5"))
	if !errors.Is(err, store.ErrSoldOut) || !res.AllEmpty {
		t.Errorf("every shard empty: %+v, %v; want sold out everywhere", res, err)
	}
	// The refusal used the token (a retry with another order id is refused).
	if _, err := s.Reserve(ctx, attempt(t, s, 71, 710, users[3], "o6", "n5")); !errors.Is(err, store.ErrTokenAlreadyUsed) {
		t.Errorf("token of a sold-out answer reused: %v, want used", err)
	}
	// A release goes back to the shopper's shard; the lookups read every shard.
	mustRelease := func(o shop.OrderRef) {
		if out, err := s.Release(ctx, o, shop.ReleaseUnsold); err != nil || out != store.Released {
			t.Fatalf("release %s: %v %v", o.OrderID, out, err)
		}
	}
	mustRelease(shop.OrderRef{SaleID: 71, ItemID: 710, UserID: users[0], OrderID: "o1"})
	if got := levelsOf(t, rdb, 71, k, 710); fmt.Sprint(got) != "[0 1]" {
		t.Errorf("after a release in shard 1: %v, want [0 1]", got)
	}
	if e, ok, err := s.InFlightOrder(ctx, 71, "o2"); err != nil || !ok || e.UserID != users[1] {
		t.Errorf("in-flight lookup over the shards: %+v %v %v", e, ok, err)
	}
	if fl, err := s.InFlight(ctx, 71); err != nil || len(fl) != 2 {
		t.Errorf("in flight = %v, %v; want o2 and o3", fl, err)
	}
}

// The transfer log: units taken from a donor are in transit (counted by the view) until the
// receiver takes them, once; a transfer from before a rebuild is never added; the rebuild drops
// the logs.
func TestShardTransferLog(t *testing.T) {
	const k = 3
	s, rdb := shardedStock(t, k)
	ctx := context.Background()
	snap := snapshot(t, s, 72, shop.LimitPerSale, 720, 9)
	snap.Shards = k
	mustLoad(t, s, snap, 0) // [3 3 3]
	tr, err := s.TransferOut(ctx, 72, 2, 0, 720, 5)
	if err != nil || tr.N != 3 {
		t.Fatalf("transfer out = %+v, %v; want the 3 units shard 2 holds", tr, err)
	}
	v, err := s.View(ctx, 72, []int64{720}, nil)
	if err != nil || v.Levels[720] != 9 || v.InTransit[720] != 3 {
		t.Errorf("view while in transit: levels %v, in transit %v, %v; want 9 and 3", v.Levels, v.InTransit, err)
	}
	if ts, err := s.Transfers(ctx, 72); err != nil || len(ts) != 1 || ts[0].Applied || ts[0].To != 0 || ts[0].N != 3 {
		t.Errorf("transfers = %+v, %v", ts, err)
	}
	if n, err := s.CompleteTransfers(ctx, 72); err != nil || n != 1 {
		t.Errorf("complete = %d, %v; want 1", n, err)
	}
	if got := levelsOf(t, rdb, 72, k, 720); fmt.Sprint(got) != "[6 3 0]" {
		t.Errorf("after completing: %v, want [6 3 0]", got)
	}
	if r, err := s.CompleteTransfer(ctx, 72, tr); err != nil || r != store.TransferAgain {
		t.Errorf("completing twice = %d, %v; want TransferAgain", r, err)
	}
	if got := levelsOf(t, rdb, 72, k, 720); fmt.Sprint(got) != "[6 3 0]" {
		t.Errorf("after completing twice: %v, want [6 3 0]", got)
	}
	lostSaleDropsAHalfDoneTransfer(t, s, rdb, snap, k)
}

// lostSaleDropsAHalfDoneTransfer: a lost sale (snap, of k shards, [6 3 0] of item 720) lends
// nothing; a rebuild drops a half-done transfer, and the late receiver's step is refused as
// stale.
func lostSaleDropsAHalfDoneTransfer(t *testing.T, s *store.Stock, rdb redis.UniversalClient, snap store.Snapshot, k int) {
	t.Helper()
	ctx := context.Background()
	half, err := s.TransferOut(ctx, 72, 0, 1, 720, 2)
	if err != nil || half.N != 2 {
		t.Fatalf("transfer out = %+v, %v", half, err)
	}
	if ok, err := s.MarkLost(ctx, 72, 0, ""); err != nil || !ok {
		t.Fatalf("mark lost = %v, %v", ok, err)
	}
	for sh := range k {
		if lost, _ := rdb.HGet(ctx, store.MetaKeyOf(72, sh), "lost").Result(); lost != "1" {
			t.Errorf("shard %d not marked lost", sh)
		}
	}
	if tr, err := s.TransferOut(ctx, 72, 1, 0, 720, 1); err != nil || tr.N != 0 {
		t.Errorf("a lost shard lent %d units (%v)", tr.N, err)
	}
	if r, err := s.CompleteTransfer(ctx, 72, half); err != nil || r != store.TransferHeld {
		t.Errorf("receiver lost: %d, %v; want TransferHeld (record kept)", r, err)
	}
	snap.Epoch = 2
	mustLoad(t, s, snap, time.Minute)
	if ts, err := s.Transfers(ctx, 72); err != nil || len(ts) != 0 {
		t.Errorf("transfers after the rebuild = %+v, %v; want none", ts, err)
	}
	if r, err := s.CompleteTransfer(ctx, 72, half); err != nil || r != store.TransferStale {
		t.Errorf("a transfer of the old load = %d, %v; want TransferStale", r, err)
	}
	if got := levelsOf(t, rdb, 72, k, 720); fmt.Sprint(got) != "[3 3 3]" {
		t.Errorf("after the rebuild: %v, want [3 3 3]", got)
	}
}

// A shard's claim that finds an order's seq above that shard's counter marks the whole sale
// lost; a shard that went back in time under a purchase does too.
func TestShardedLossFailsTheSaleClosed(t *testing.T) {
	const k = 3
	s, rdb := shardedStock(t, k)
	ctx := context.Background()
	snap := snapshot(t, s, 73, shop.LimitPerSale, 730, 30)
	snap.Shards = k
	mustLoad(t, s, snap, 0)
	u := userOfShard(k, 2, 1)
	r := mustReserve(t, s, attempt(t, s, 73, 730, u, "o1", "n1"))
	if got, err := s.Claim(ctx, 73, []store.ClaimItem{{OrderID: "o1", Seq: r.Seq, UserID: u}}); err != nil || !slices.Equal(got, []int{store.ClaimClaimed}) {
		t.Fatalf("claim = %v, %v", got, err)
	}
	if st := stateOf(t, s, 73); st.Lost {
		t.Fatalf("healthy claim marked the sale lost: %+v", st)
	}
	if _, err := s.Claim(ctx, 73, []store.ClaimItem{{OrderID: "ghost", Seq: r.Seq + 10, UserID: u}}); err != nil {
		t.Fatal(err)
	}
	for sh := range k {
		if lost, _ := rdb.HGet(ctx, store.MetaKeyOf(73, sh), "lost").Result(); lost != "1" {
			t.Errorf("shard %d not marked lost after shard 2's claim found a loss", sh)
		}
	}
	// Rebuilt, then shard 0 goes back in time under a purchase of its shopper.
	snap.Epoch = 2
	mustLoad(t, s, snap, 0)
	u0 := userOfShard(k, 0, 1)
	a := attempt(t, s, 73, 730, u0, "o2", "n2")
	a.Floor = 1 << 50
	if _, err := s.Reserve(ctx, a); !errors.Is(err, store.ErrRedisWentBack) {
		t.Fatalf("reserve below the floor: %v", err)
	}
	if st := stateOf(t, s, 73); !st.Lost {
		t.Errorf("state after shard 0 went back = %+v, want lost", st)
	}
	for sh := range k {
		if lost, _ := rdb.HGet(ctx, store.MetaKeyOf(73, sh), "lost").Result(); lost != "1" {
			t.Errorf("shard %d not marked lost after shard 0 went back", sh)
		}
	}
}

// Two loads of a sharded sale interleaved (another instance's newer load got to a shard first):
// the shards hold different loads, so the load marks the whole sale lost for the next rebuild
// rather than serve a mix of two snapshots.
func TestShardedLoadsInterleavedFailClosed(t *testing.T) {
	const k = 3
	s, rdb := shardedStock(t, k)
	ctx := context.Background()
	snap := snapshot(t, s, 74, shop.LimitPerSale, 740, 9)
	snap.Shards = k
	mustLoad(t, s, snap, 0)
	if ok, err := s.MarkLost(ctx, 74, 0, ""); err != nil || !ok {
		t.Fatalf("mark lost = %v, %v", ok, err)
	}
	// A newer load (epoch 5) already rebuilt shard 1.
	if err := rdb.HSet(ctx, store.MetaKeyOf(74, 1), "epoch", "5", "lost", "0").Err(); err != nil {
		t.Fatal(err)
	}
	snap.Epoch = 2
	ok, err := s.Load(ctx, snap, 0)
	if err != nil || ok {
		t.Errorf("interleaved load = %v, %v; want not loaded", ok, err)
	}
	for sh := range k {
		if lost, _ := rdb.HGet(ctx, store.MetaKeyOf(74, sh), "lost").Result(); lost != "1" {
			t.Errorf("shard %d not marked lost after an interleaved load", sh)
		}
	}
	// The next rebuild (a newer epoch than any shard holds) loads every shard.
	snap.Epoch = 6
	mustLoad(t, s, snap, 0)
	if st := stateOf(t, s, 74); !st.Loaded || st.Lost || st.Epoch != 6 {
		t.Errorf("after the next rebuild: %+v", st)
	}
}
