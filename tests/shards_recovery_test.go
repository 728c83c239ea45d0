package tests

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// A process killed between a transfer's two steps (the donor's only, as tests/chaos's kill would
// leave it): the units are in the donor's log, not in any stock; the reconciliation counts them
// in transit and the keeper adds them to the receiver, once.
func TestShardTransferInterruptedIsCompletedByKeeper(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	const k = 4
	s := h.shardedSale(k, "", 8)
	item := s.items[0]
	ctx := context.Background()
	tr, err := h.app.Stock.TransferOut(ctx, s.sale, 1, 0, item, 2)
	if err != nil || tr.N != 2 {
		t.Fatalf("transfer out: %+v %v", tr, err)
	}
	// Whether or not the keeper has completed it yet, every unit is accounted for.
	v, err := h.app.Stock.View(ctx, s.sale, []int64{item}, nil)
	if err != nil || v.Levels[item] != 8 {
		t.Errorf("view levels = %v (in transit %v), %v; want 8 in all", v.Levels, v.InTransit, err)
	}
	testenv.Eventually(t, 10*time.Second, "the keeper completed the transfer", func() error {
		if n, _ := h.app.Redis.HLen(ctx, store.XferKeyOf(s.sale, 1)).Result(); n != 0 {
			return fmt.Errorf("%d records left", n)
		}
		return nil
	})
	if lv := h.shardLevels(s, k, item); fmt.Sprint(lv) != "[4 0 2 2]" {
		t.Errorf("after the keeper: %v, want [4 0 2 2]", lv)
	}
	// Completing it again (a second keeper, the killed process's retry) adds nothing.
	if r, err := h.app.Stock.CompleteTransfer(ctx, s.sale, tr); err != nil || r != store.TransferAgain {
		t.Errorf("second completion = %d, %v; want TransferAgain", r, err)
	}
	if lv := h.shardLevels(s, k, item); sum(lv) != 8 {
		t.Errorf("after a second completion: %v, want 8 in all", lv)
	}
	// A transfer from an earlier load is stale once the sale was rebuilt: never added.
	stale := store.Transfer{ID: "stale", From: 2, To: 3, ItemID: item, N: 2, Epoch: tr.Epoch - 1}
	if r, err := h.app.Stock.CompleteTransfer(ctx, s.sale, stale); err != nil || r != store.TransferStale {
		t.Errorf("stale transfer = %d, %v; want TransferStale", r, err)
	}
	if lv := h.shardLevels(s, k, item); sum(lv) != 8 {
		t.Errorf("after a stale transfer: %v, want 8 in all", lv)
	}
	h.checkInvariants(s)
}

// An expired and a cancelled order of a sharded sale give their unit back to their shopper's
// shard, and free the shopper there.
func TestShardedExpiryAndCancelReturnToTheShard(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	const k = 4
	s := h.createSaleWith(map[string]any{"stockShards": k, "paymentWindowSeconds": 1}, time.Now().Add(-time.Second), 8)
	item := s.items[0]
	ctx := context.Background()
	expirer := usersOfShard(k, 2, 1, 30_000)[0]
	canceller := usersOfShard(k, 1, 1, 30_000)[0]

	et := h.token(expirer, auth.RoleShopper)
	if r := h.buy(et, item, h.purchaseToken(et, s.sale)); r.Status != http.StatusAccepted {
		t.Fatalf("buy: %d %s", r.Status, r.Raw)
	}
	if lv := h.shardLevels(s, k, item); fmt.Sprint(lv) != "[2 2 1 2]" {
		t.Errorf("after shard 2's purchase: %v, want [2 2 1 2]", lv)
	}
	h.drainShards(s, k)
	testenv.Eventually(t, 15*time.Second, "the order expired back into shard 2", func() error {
		if h.sqlInt(`SELECT count(*) FROM orders WHERE sale_id = ? AND status = 'EXPIRED'`, s.sale) == 0 || h.shardLevels(s, k, item)[2] != 2 {
			return fmt.Errorf("levels %v", h.shardLevels(s, k, item))
		}
		return nil
	})
	if n, _ := h.app.Redis.HLen(ctx, store.BuyersKeyOf(s.sale, 2)).Result(); n != 0 {
		t.Errorf("shard 2 still lists %d buyers after the expiry", n)
	}

	ct := h.token(canceller, auth.RoleShopper)
	r := h.buy(ct, item, h.purchaseToken(ct, s.sale))
	if r.Status != http.StatusAccepted {
		t.Fatalf("buy: %d %s", r.Status, r.Raw)
	}
	h.drainShards(s, k)
	if c := h.do("POST", "/api/flash-sales/orders/"+r.str("orderId")+"/cancel", ct, nil); c.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", c.Status, c.Raw)
	}
	if lv := h.shardLevels(s, k, item); fmt.Sprint(lv) != "[2 2 2 2]" {
		t.Errorf("after the cancel: %v, want [2 2 2 2]", lv)
	}
	gone, err := h.app.Redis.SIsMember(ctx, store.GoneKeyOf(s.sale, 1), r.str("orderId")).Result()
	if err != nil || !gone {
		t.Errorf("the cancelled order is not a tombstone in shard 1: %v %v", gone, err)
	}
	// Both shoppers may buy again.
	for _, tok := range []string{et, ct} {
		if r := h.buy(tok, item, h.purchaseToken(tok, s.sale)); r.Status != http.StatusAccepted {
			t.Errorf("buy again: %d %s", r.Status, r.Raw)
		}
	}
	h.drainShards(s, k)
	h.checkInvariants(s)
}

// One shard of a sharded sale loses its last writes (a failover to a replica that lacked them,
// played by restoring that shard's keys as they were earlier): the loss is detected, the whole
// sale fails closed, and the rebuild from Postgres restores every shard at one epoch; the
// shoppers whose orders the shard forgot are still buyers, and the rest sells out exactly.
func TestShardedPartialLossRebuildsEveryShard(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	const k = 4
	const units = 40
	s := h.shardedSale(k, "", units)
	item := s.items[0]
	ctx := context.Background()
	buy := func(users []int64) int { return h.buyEach(s, item, users) }
	if n := buy(usersOfShard(k, 2, 3, 40_000)); n != 3 {
		t.Fatalf("first purchases: %d accepted, want 3", n)
	}
	h.drainShards(s, k)
	// What shard 2 holds now is what survives the "failover".
	dumps := dumpShard(t, h, s.sale, 2)
	forgotten := usersOfShard(k, 2, 4, 50_000)
	if n := buy(forgotten); n != 4 {
		t.Fatalf("purchases the shard will forget: %d accepted, want 4", n)
	}
	h.drainShards(s, k)
	epoch := h.sqlInt(`SELECT redis_epoch FROM sales WHERE id = ?`, s.sale)
	restoreShard(t, h, s.sale, 2, dumps)
	// The keeper finds shard 2's counter behind the highest seq Postgres holds for it (or a
	// shard-2 purchase finds it below this instance's floor): the sale fails closed, then it is
	// rebuilt once the queue has drained.
	testenv.Eventually(t, 20*time.Second, "the sale rebuilt after shard 2's loss", func() error {
		st, err := h.app.Stock.State(ctx, s.sale)
		if err == nil && st.Loaded && !st.Lost && st.Epoch > epoch {
			return nil
		}
		return fmt.Errorf("state %+v %v", st, err)
	})
	checkOneEpoch(t, h, s.sale, k)
	if lv := h.shardLevels(s, k, item); sum(lv) != units-7 {
		t.Errorf("after the rebuild: %v, want %d in all", lv, units-7)
	}
	// A shopper whose order shard 2 forgot is a buyer again (from Postgres): 409, not a second unit.
	tok := h.token(forgotten[0], auth.RoleShopper)
	if r := h.buy(tok, item, h.purchaseToken(tok, s.sale)); r.Status != http.StatusConflict {
		t.Errorf("a shopper shard 2 forgot buys again: %d %s, want 409", r.Status, r.Raw)
	}
	// The rest sells out exactly.
	var rest []int64
	for sh := range k {
		rest = append(rest, usersOfShard(k, sh, 12, 60_000)...)
	}
	if n := buy(rest); n != units-7 {
		t.Errorf("after the rebuild: %d accepted, want the %d units left", n, units-7)
	}
	h.drainShards(s, k)
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE sale_id = ? AND status IN ('PENDING','PAID')`, s.sale); got != units {
		t.Errorf("live orders = %d, want %d", got, units)
	}
	h.checkInvariants(s)
}

// buyEach has each of the users try to buy one unit of the item, and returns how many were
// accepted.
func (h *harness) buyEach(s saleIDs, item int64, users []int64) int {
	n := 0
	for _, u := range users {
		tok := h.token(u, auth.RoleShopper)
		if pt := h.tryToken(tok, s.sale); pt != "" && h.buy(tok, item, pt).Status == http.StatusAccepted {
			n++
		}
	}
	return n
}

// dumpShard is every key of one shard of the sale, dumped (DUMP) to be restored later.
func dumpShard(t *testing.T, h *harness, sale int64, sh int) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := h.app.Redis.Keys(ctx, store.ShardTag(sale, sh)+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("shard %d's keys: %v %v", sh, keys, err)
	}
	dumps := map[string]string{}
	for _, key := range keys {
		d, err := h.app.Redis.Dump(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		dumps[key] = d
	}
	return dumps
}

// restoreShard puts one shard of the sale back as dumpShard found it: its keys now are deleted,
// the dumped ones restored.
func restoreShard(t *testing.T, h *harness, sale int64, sh int, dumps map[string]string) {
	t.Helper()
	ctx := context.Background()
	now, _ := h.app.Redis.Keys(ctx, store.ShardTag(sale, sh)+"*").Result()
	h.app.Redis.Del(ctx, now...)
	for key, d := range dumps {
		if err := h.app.Redis.Restore(ctx, key, 0, d).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// checkOneEpoch checks that the k shards of the sale are at one epoch.
func checkOneEpoch(t *testing.T, h *harness, sale int64, k int) {
	t.Helper()
	var epochs []string
	for sh := range k {
		e, _ := h.app.Redis.HGet(context.Background(), store.MetaKeyOf(sale, sh), "epoch").Result()
		epochs = append(epochs, e)
	}
	for _, e := range epochs[1:] {
		if e != epochs[0] {
			t.Errorf("shards at epochs %v after the rebuild, want one", epochs)
		}
	}
}
