package tests

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// A hot sale split into three shards on a Redis Cluster of three masters: each shard's keys live
// on another master, so the sale's purchases spread over three Redis processes. The shoppers are
// all pinned to shards 0 and 1, so the sale only sells out if those shards borrow shard 2's units
// across masters (a transfer between two nodes, never one script). Two instances sell; at the
// end exactly the units were sold, one per shopper, each 202 is one order in Postgres, and the
// invariants hold.
func TestRedisClusterShardedSale(t *testing.T) {
	t.Parallel()
	c := testenv.NewRedisCluster(t, 3, 1)
	a := newHarness(t, harnessOpts{redisURL: c.URL()})
	b := newHarness(t, harnessOpts{redisURL: c.URL(), shared: a})
	const k, units = 3, 30

	// A sale whose three shards land on three different masters (the tags hash differently per
	// sale id: try a few).
	s := saleOnThreeMasters(t, a, c, k, units)
	item := s.items[0]
	if lv := a.shardLevels(s, k, item); sum(lv) != units || lv[2] == 0 {
		t.Fatalf("loaded as %v, want %d units over 3 shards", lv, units)
	}

	// 60 shoppers, 30 pinned to each of shards 0 and 1, half through each instance.
	users := append(usersOfShard(k, 0, 30, 50_000), usersOfShard(k, 1, 30, 50_000)...)
	won, codes := rushOnTwoInstances(t, a, b, s, users)
	t.Logf("answers by status: %v", codes)
	a.drainShards(s, k)

	if len(won) != units {
		t.Errorf("%d shoppers acknowledged, want exactly the %d units", len(won), units)
	}
	if lv := a.shardLevels(s, k, item); sum(lv) != 0 {
		t.Errorf("left in the shards: %v, want none", lv)
	}
	checkBorrowedAcrossMasters(t, a, s, k)
	for u, id := range won {
		if got := a.sqlInt(`SELECT count(*) FROM orders WHERE id = ?::uuid AND user_id = ? AND status IN ('PENDING','PAID')`, id, u); got != 1 {
			t.Errorf("order %s of shopper %d: %d live rows in postgres, want 1", id, u, got)
		}
	}
	if got := a.sqlInt(`SELECT count(*) FROM orders WHERE sale_id = ? AND status IN ('PENDING','PAID')`, s.sale); got != units {
		t.Errorf("live orders = %d, want %d", got, units)
	}
	if !a.app.SoldOut.Is(item) {
		t.Error("the item is not flagged sold out on the first instance")
	}
	a.checkInvariants(s)
}

// saleOnThreeMasters creates sharded sales until one has its three shards on three different
// masters (the tags hash differently per sale id), with each shard's keys on its master.
func saleOnThreeMasters(t *testing.T, a *harness, c *testenv.RedisCluster, k, units int) saleIDs {
	t.Helper()
	ctx := context.Background()
	var s saleIDs
	for i := 0; ; i++ {
		if i == 60 {
			t.Fatal("60 sharded sales: none had its 3 shards on 3 masters")
		}
		s = a.shardedSale(k, "", units)
		masters := map[string]int{}
		for sh := range k {
			masters[c.MustMasterOf(t, store.MetaKeyOf(s.sale, sh)).Addr] = sh
		}
		if len(masters) == k {
			t.Logf("sale %d: shards on masters %v", s.sale, masters)
			break
		}
	}
	for sh := range k {
		m := c.MustMasterOf(t, store.MetaKeyOf(s.sale, sh))
		if n, err := m.Do(ctx, "exists", store.MetaKeyOf(s.sale, sh), store.StockKeyOf(s.sale, sh, s.items[0])); err != nil || n != int64(2) {
			t.Fatalf("shard %d's keys on its master %s: %v, %v; want both there", sh, m.Addr, n, err)
		}
	}
	return s
}

// rushOnTwoInstances has the users buy the sale's item, 12 at a time, half through each instance;
// it returns the order each acknowledged shopper got, and the answers by status (0: no token, sold
// out already).
func rushOnTwoInstances(t *testing.T, a, b *harness, s saleIDs, users []int64) (map[int64]string, map[int]int) {
	item := s.items[0]
	var mu sync.Mutex
	won := map[int64]string{}
	codes := map[int]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 12)
	for i, u := range users {
		h := []*harness{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			tok := h.token(u, auth.RoleShopper)
			pt := h.tryToken(tok, s.sale)
			if pt == "" {
				mu.Lock()
				codes[0]++ // no token: sold out already
				mu.Unlock()
				return
			}
			r := h.buy(tok, item, pt)
			mu.Lock()
			defer mu.Unlock()
			codes[r.Status]++
			if r.Status == http.StatusAccepted {
				if won[u] != "" {
					t.Errorf("shopper %d acknowledged twice", u)
				}
				won[u] = r.str("orderId")
			}
		}()
	}
	wg.Wait()
	return won, codes
}

// checkBorrowedAcrossMasters: shard 2 had no shopper: every unit it held was borrowed by shard 0
// or 1, across masters, and no transfer is left in a log.
func checkBorrowedAcrossMasters(t *testing.T, a *harness, s saleIDs, k int) {
	t.Helper()
	ctx := context.Background()
	// Shard 2 had no shopper: every unit it held was borrowed by shard 0 or 1, across masters.
	applied := int64(0)
	for sh := range 2 {
		n, err := a.app.Redis.SCard(ctx, store.XferInKeyOf(s.sale, sh)).Result()
		if err != nil {
			t.Fatal(err)
		}
		applied += n
	}
	if applied == 0 {
		t.Error("no transfer reached shard 0 or 1, want shard 2's units borrowed")
	}
	for sh := range k {
		if n, _ := a.app.Redis.HLen(ctx, store.XferKeyOf(s.sale, sh)).Result(); n != 0 {
			t.Errorf("shard %d: %d transfers left in its log", sh, n)
		}
	}
}
