package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// unitsOf sums an item's units in every shard and in the transfer records not yet taken in.
func unitsOf(t *testing.T, s *store.Stock, rdb redis.UniversalClient, sale int64, k int, item int64) int64 {
	t.Helper()
	total := int64(0)
	for _, n := range levelsOf(t, rdb, sale, k, item) {
		total += n
	}
	ts, err := s.Transfers(context.Background(), sale)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ts {
		if !x.Applied && x.ItemID == item {
			total += x.N
		}
	}
	return total
}

// The donor's step runs once per transfer id: run again (go-redis resends a script whose reply
// it lost) before or after the transfer completed, it takes nothing more and answers the same.
func TestTransferOutOncePerID(t *testing.T) {
	const k = 3
	s, rdb := shardedStock(t, k)
	ctx := context.Background()
	snap := snapshot(t, s, 80, shop.LimitPerSale, 800, 12)
	snap.Shards = k
	mustLoad(t, s, snap, 0) // [4 4 4]
	first, err := store.TransferOutWithID(s, ctx, "x1", 80, 1, 0, 800, 2)
	if err != nil || first.N != 2 {
		t.Fatalf("out = %+v, %v; want 2 units", first, err)
	}
	again, err := store.TransferOutWithID(s, ctx, "x1", 80, 1, 0, 800, 2)
	if err != nil || again != first {
		t.Errorf("out resent = %+v, %v; want the first answer %+v", again, err, first)
	}
	if got := levelsOf(t, rdb, 80, k, 800); fmt.Sprint(got) != "[4 2 4]" {
		t.Errorf("after out twice: %v, want [4 2 4]", got)
	}
	if r, err := s.CompleteTransfer(ctx, 80, again); err != nil || r != store.TransferApplied {
		t.Fatalf("complete = %d, %v", r, err)
	}
	// Resent after done (the keeper completed the record meanwhile): a no-op too.
	late, err := store.TransferOutWithID(s, ctx, "x1", 80, 1, 0, 800, 2)
	if err != nil || late.N != first.N || late.Epoch != first.Epoch {
		t.Errorf("out resent after done = %+v, %v; want %+v", late, err, first)
	}
	if r, err := s.CompleteTransfer(ctx, 80, late); err != nil || r != store.TransferAgain {
		t.Errorf("complete after the late resend = %d, %v; want TransferAgain", r, err)
	}
	if got := levelsOf(t, rdb, 80, k, 800); fmt.Sprint(got) != "[6 2 4]" {
		t.Errorf("after the late resend: %v, want [6 2 4]", got)
	}
	if n := unitsOf(t, s, rdb, 80, k, 800); n != 12 {
		t.Errorf("units in shards and in transit = %d, want 12", n)
	}
	// Another id is another transfer.
	if tr, err := s.TransferOut(ctx, 80, 1, 0, 800, 1); err != nil || tr.N != 1 {
		t.Errorf("a new transfer = %+v, %v; want 1 unit", tr, err)
	}
}

// go-redis resends a script when the connection closes before its reply: the donor's step runs
// twice in Redis, and still takes its units once (before the fix the second run took n more
// and overwrote the record: n units in no stock key and no record).
func TestTransferOutResentOnEOFTakesOnce(t *testing.T) {
	const k = 3
	rs := testenv.Redis(t)
	rdb, err := store.OpenRedis(context.Background(), rs.URL(), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	s := store.NewStock(rdb, kShards(k))
	ctx := context.Background()
	snap := snapshot(t, s, 81, shop.LimitPerSale, 810, 12)
	snap.Shards = k
	mustLoad(t, s, snap, 0) // [4 4 4]

	opt, err := redis.ParseURL(rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	p := newReplyDropper(t, opt.Addr, []byte("evalsha")) // adjust_resend_test.go
	opt.Addr = p.addr
	flaky := redis.NewClient(opt)
	t.Cleanup(func() { flaky.Close() })
	fs := store.NewStock(flaky, kShards(k))
	if _, err := fs.TransferOut(ctx, 81, 1, 0, 810, 0); err != nil { // loads the script (no NOSCRIPT later)
		t.Fatal(err)
	}
	calls := func() string {
		info, _ := rdb.Info(ctx, "commandstats").Result()
		return info
	}
	before := calls()
	p.drops.Store(1)
	tr, err := fs.TransferOut(ctx, 81, 2, 0, 810, 2)
	if p.drops.Load() != 0 {
		t.Fatal("the proxy dropped no reply")
	}
	if calls() == before {
		t.Fatal("no command reached Redis")
	}
	if err != nil {
		t.Fatalf("out = %v (go-redis did not resend)", err)
	}
	if tr.N != 2 {
		t.Errorf("out = %+v; want 2 units", tr)
	}
	if got := levelsOf(t, rdb, 81, k, 810); fmt.Sprint(got) != "[4 4 2]" {
		t.Errorf("after the resent out: %v, want [4 4 2]", got)
	}
	if n := unitsOf(t, s, rdb, 81, k, 810); n != 12 {
		t.Errorf("units in shards and in transit = %d, want 12 (%d stranded)", n, 12-n)
	}
	if _, err := fs.CompleteTransfer(ctx, 81, tr); err != nil {
		t.Fatal(err)
	}
	if got := levelsOf(t, rdb, 81, k, 810); fmt.Sprint(got) != "[6 4 2]" {
		t.Errorf("after completing: %v, want [6 4 2]", got)
	}
}
