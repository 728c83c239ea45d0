package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// dumpShard saves every key of one shard of a sale; restore puts the shard back as it was then
// (keys written since deleted): a Redis Cluster master that failed before its replica had them.
func dumpShard(t *testing.T, rdb redis.UniversalClient, sale int64, sh int) (restore func()) {
	t.Helper()
	ctx := context.Background()
	tag := store.ShardTag(sale, sh)
	keys, err := rdb.Keys(ctx, tag+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys of %s: %v %v", tag, keys, err)
	}
	dumps := map[string]string{}
	for _, key := range keys {
		d, err := rdb.Dump(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		dumps[key] = d
	}
	return func() {
		t.Helper()
		now, err := rdb.Keys(ctx, tag+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.Del(ctx, now...).Err(); err != nil {
			t.Fatal(err)
		}
		for key, d := range dumps {
			if err := rdb.Restore(ctx, key, 0, d).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// moveUnits runs a whole transfer (out, in, done).
func moveUnits(t *testing.T, s *store.Stock, sale int64, from, to int, item, n int64) store.Transfer {
	t.Helper()
	ctx := context.Background()
	tr, err := s.TransferOut(ctx, sale, from, to, item, n)
	if err != nil || tr.N != n {
		t.Fatalf("out %d->%d = %+v, %v", from, to, tr, err)
	}
	if r, err := s.CompleteTransfer(ctx, sale, tr); err != nil || r != store.TransferApplied {
		t.Fatalf("complete %d->%d = %d, %v", from, to, r, err)
	}
	return tr
}

// A donor that lost its out (units twice) and a receiver that lost its in (units gone) are each
// found: the shard's seq is below what the other shard recorded of it. Healthy transfers, both
// ways and repeated, are not taken for a loss.
func TestTransferSeqLossFindsALostStep(t *testing.T) {
	const k = 3
	s, rdb := shardedStock(t, k)
	ctx := context.Background()
	snap := snapshot(t, s, 82, shop.LimitPerSale, 820, 12)
	snap.Shards = k
	mustLoad(t, s, snap, 0) // [4 4 4]
	noLoss := noSeqLoss(t, s, 82, k)
	noLoss("after the load")
	moveUnits(t, s, 82, 1, 0, 820, 1)
	moveUnits(t, s, 82, 0, 1, 820, 2)
	moveUnits(t, s, 82, 2, 1, 820, 1)
	noLoss("after healthy transfers") // [3 6 3]
	donorThatLostItsOutIsFound(t, s, rdb, k)

	// Rebuilt (exact stock again), then the receiver (shard 1) loses its in: the donor's done
	// deleted the record, the units are nowhere.
	snap.Epoch = 2
	if ok, err := s.MarkLost(ctx, 82, 0, ""); err != nil || !ok {
		t.Fatalf("mark lost = %v, %v", ok, err)
	}
	mustLoad(t, s, snap, 0)
	noLoss("after the rebuild")
	receiverThatLostItsInIsFound(t, s, rdb, k)
	snap.Epoch = 3
	mustLoad(t, s, snap, 0)
	if got := levelsOf(t, rdb, 82, k, 820); fmt.Sprint(got) != "[4 4 4]" {
		t.Errorf("after the rebuild: %v, want [4 4 4]", got)
	}
	noLoss("after the second rebuild")
}

// noSeqLoss checks that TransferSeqLoss finds no loss in sale (of k shards); when names the
// moment.
func noSeqLoss(t *testing.T, s *store.Stock, sale int64, k int) func(when string) {
	return func(when string) {
		t.Helper()
		if l, found, err := s.TransferSeqLoss(context.Background(), sale, k); err != nil || found {
			t.Fatalf("%s: loss = %+v %v, %v; want none", when, l, found, err)
		}
	}
}

// donorThatLostItsOutIsFound: the donor (shard 2 of sale 82, at [3 6 3]) loses its out: it has
// the units back, the receiver has them too; TransferSeqLoss finds shard 2 behind.
func donorThatLostItsOutIsFound(t *testing.T, s *store.Stock, rdb redis.UniversalClient, k int) {
	t.Helper()
	restore := dumpShard(t, rdb, 82, 2)
	moveUnits(t, s, 82, 2, 0, 820, 2)
	restore()
	if got := levelsOf(t, rdb, 82, k, 820); fmt.Sprint(got) != "[5 6 3]" {
		t.Fatalf("after the donor lost out: %v, want [5 6 3] (2 units twice)", got)
	}
	l, found, err := s.TransferSeqLoss(context.Background(), 82, k)
	if err != nil || !found || l.Shard != 2 || l.SeenBy != 0 || l.Seq >= l.Recorded {
		t.Errorf("donor lost out: loss = %+v %v, %v; want shard 2 behind what shard 0 recorded", l, found, err)
	}
}

// receiverThatLostItsInIsFound: the receiver (shard 1 of sale 82, rebuilt at [4 4 4]) loses its
// in; TransferSeqLoss finds it behind, and so does the receiver's own next step: the donor
// hands over what it recorded of it, and the receiver behind it is marked lost with the whole
// sale; the record stays (the rebuild drops it).
func receiverThatLostItsInIsFound(t *testing.T, s *store.Stock, rdb redis.UniversalClient, k int) {
	t.Helper()
	ctx := context.Background()
	restore := dumpShard(t, rdb, 82, 1)
	moveUnits(t, s, 82, 0, 1, 820, 2)
	restore()
	if got := levelsOf(t, rdb, 82, k, 820); fmt.Sprint(got) != "[2 4 4]" {
		t.Fatalf("after the receiver lost in: %v, want [2 4 4] (2 units gone)", got)
	}
	l, found, err := s.TransferSeqLoss(ctx, 82, k)
	if err != nil || !found || l.Shard != 1 || l.SeenBy != 0 {
		t.Errorf("receiver lost in: loss = %+v %v, %v; want shard 1 behind what shard 0 recorded", l, found, err)
	}
	tr, err := s.TransferOut(ctx, 82, 0, 1, 820, 1)
	if err != nil || tr.N != 1 || tr.RecvSeq == 0 {
		t.Fatalf("out = %+v, %v; want 1 unit and the receiver's recorded seq", tr, err)
	}
	if r, err := s.CompleteTransfer(ctx, 82, tr); err != nil || r != store.TransferLoss {
		t.Errorf("in on a receiver behind = %d, %v; want TransferLoss", r, err)
	}
	for sh := range k {
		if lost, _ := rdb.HGet(ctx, store.MetaKeyOf(82, sh), "lost").Result(); lost != "1" {
			t.Errorf("shard %d not marked lost after the receiver's step found it behind", sh)
		}
	}
	if ts, err := s.Transfers(ctx, 82); err != nil || len(ts) != 1 {
		t.Errorf("records = %+v, %v; want the one kept", ts, err)
	}
}

// A reservation that borrowed hands back the lender's seq after its step: kept as the caller's
// floor of that shard, it makes the reserve script refuse in a lender that lost the step (a
// failover) at its next purchase, before the lender's own sales bring its seq back up past it.
func TestBorrowHandsBackTheLendersSeq(t *testing.T) {
	const k = 3
	s, rdb := shardedStock(t, k)
	ctx := context.Background()
	snap := snapshot(t, s, 83, shop.LimitPerSale, 830, 4)
	snap.Shards = k
	mustLoad(t, s, snap, 0) // [2 1 1]
	mustReserve(t, s, attempt(t, s, 83, 830, userOfShard(k, 1, 1), "o1", "n1"))
	restore := dumpShard(t, rdb, 83, 0)
	r := mustReserve(t, s, attempt(t, s, 83, 830, userOfShard(k, 1, 1000), "o2", "n2"))
	if !r.Borrowed || r.Lender != 0 || r.LenderSeq == 0 {
		t.Fatalf("reservation after a borrow = %+v; want units borrowed from shard 0 and its seq", r)
	}
	restore() // shard 0 lost its out: [2 0 1], 2 units twice
	a := attempt(t, s, 83, 830, userOfShard(k, 0, 2000), "o3", "n3")
	a.Floor = r.LenderSeq
	if _, err := s.Reserve(ctx, a); !errors.Is(err, store.ErrRedisWentBack) {
		t.Errorf("reserve in the lender that lost its step = %v, want ErrRedisWentBack", err)
	}
	if st := stateOf(t, s, 83); !st.Lost {
		t.Errorf("state = %+v, want lost", st)
	}
}
