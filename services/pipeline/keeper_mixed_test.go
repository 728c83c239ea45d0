package pipeline

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// While another instance's rebuild is under way, some shards hold the new epoch (healthy) and
// the others are still lost at the old one: the keeper waits a pass before marking them (a load
// takes milliseconds), so it does not mark the fresh shards lost and make that load fail; seen
// at two passes in a row, the mix is marked lost. One shard lost at the same epoch as the
// others still marks them all at once.
func TestKeeperLeavesALoadUnderWayAlone(t *testing.T) {
	const k, sale = 3, int64(5)
	// A redis-server of the test's own; the store's client of it, as the program opens one (this
	// package imports no engine client, even in its tests).
	rdb, err := store.OpenRedis(t.Context(), testenv.Redis(t).URL(), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	s := store.NewStock(rdb, func(context.Context, int64) (int, error) { return k, nil })
	ctx := context.Background()
	if _, err := s.Load(ctx, store.Snapshot{SaleID: sale, Epoch: 1, Limit: shop.LimitPerSale, StartsAt: time.Now(), EndsAt: time.Now().Add(time.Hour),
		Left: map[int64]int64{50: 9}, Buyers: map[string]string{}, Shards: k}, 0); err != nil {
		t.Fatal(err)
	}
	kp := &Keeper{stock: s, partial: map[int64]bool{}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	lostOf := func() []string {
		out := make([]string, k)
		for sh := range k {
			out[sh], _ = rdb.HGet(ctx, store.MetaKeyOf(sale, sh), "lost").Result()
		}
		return out
	}
	pass := func() {
		t.Helper()
		st, err := s.State(ctx, sale)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kp.shardsBehind(ctx, sale, st, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.MarkLost(ctx, sale, 0, ""); err != nil {
		t.Fatal(err)
	}
	// The other instance's load has written shard 0 at epoch 2 so far.
	if err := rdb.HSet(ctx, store.MetaKeyOf(sale, 0), "epoch", "2", "lost", "0").Err(); err != nil {
		t.Fatal(err)
	}
	pass()
	if got := lostOf(); got[0] == "1" {
		t.Errorf("a keeper pass during a load marked the fresh shard lost: %v", got)
	}
	// Still so at the next pass: a load that died halfway, marked lost for the next rebuild.
	pass()
	if got := lostOf(); got[0] != "1" || got[1] != "1" || got[2] != "1" {
		t.Errorf("a mix of epochs seen twice: lost %v, want every shard", got)
	}
	// One shard lost among healthy shards of one epoch: every shard marked at the first pass.
	for sh := range k {
		rdb.HSet(ctx, store.MetaKeyOf(sale, sh), "epoch", "3", "lost", "0")
	}
	rdb.HSet(ctx, store.MetaKeyOf(sale, 1), "lost", "1")
	kp.partial = map[int64]bool{}
	pass()
	if got := lostOf(); got[0] != "1" || got[1] != "1" || got[2] != "1" {
		t.Errorf("one shard lost: lost %v, want every shard at once", got)
	}
}
