package tests

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// usersOfShard returns n user ids from start on that the sale's k shards pin to shard sh.
func usersOfShard(k, sh, n int, start int64) []int64 {
	var out []int64
	for u := start; len(out) < n; u++ {
		if store.ShardOf(u, k) == sh {
			out = append(out, u)
		}
	}
	return out
}

// shardedSale creates a started sale whose stock is split into k shards.
func (h *harness) shardedSale(k int, limit string, quantities ...int) saleIDs {
	h.t.Helper()
	extra := map[string]any{"stockShards": k}
	if limit != "" {
		extra["purchaseLimit"] = limit
	}
	return h.createSaleWith(extra, time.Now().Add(-time.Second), quantities...)
}

// tryToken is purchaseToken that answers "" when the token is refused (every item sold out).
func (h *harness) tryToken(bearer string, saleID int64) string {
	c := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/captcha", saleID), bearer, nil)
	r := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", saleID), bearer, map[string]string{"captchaId": c.str("captchaId"), "answer": "test"})
	if r.Status != http.StatusOK {
		return ""
	}
	return r.str("purchaseToken")
}

// shardLevels reads an item's units in each of k shards.
func (h *harness) shardLevels(s saleIDs, k int, item int64) []int64 {
	h.t.Helper()
	out := make([]int64, k)
	for sh := range k {
		n, err := h.app.Redis.Get(context.Background(), store.StockKeyOf(s.sale, sh, item)).Int64()
		if err != nil {
			h.t.Fatalf("stock of item %d in shard %d: %v", item, sh, err)
		}
		out[sh] = n
	}
	return out
}

func sum(v []int64) int64 {
	var n int64
	for _, x := range v {
		n += x
	}
	return n
}

// drainShards waits until the queue has drained and no shard holds a reservation in flight.
func (h *harness) drainShards(s saleIDs, k int) {
	h.t.Helper()
	ctx := context.Background()
	testenv.Eventually(h.t, 30*time.Second, "the queue and every shard drained", func() error {
		backlog, err := h.app.Queue.Backlog(ctx)
		var flight int64
		for sh := range k {
			n, _ := h.app.Redis.HLen(ctx, store.InFlightKeyOf(s.sale, sh)).Result()
			flight += n
		}
		if err == nil && backlog == 0 && flight == 0 {
			return nil
		}
		return fmt.Errorf("backlog %d (err %v), in flight %d", backlog, err, flight)
	})
}

func TestClusterSlotOfKnownKeys(t *testing.T) {
	// Redis Cluster's specification: crc16("123456789") = 0x31C3; "foo" is in slot 12182 and a
	// hash tag decides the slot.
	if got := testenv.KeySlot("123456789"); got != 0x31C3%16384 {
		t.Fatalf("slot(123456789) = %d, want crc16 0x31c3 mod 16384", got)
	}
	if got := testenv.KeySlot("foo"); got != 12182 {
		t.Errorf("slot(foo) = %d, want 12182", got)
	}
	if testenv.KeySlot("{user1000}.following") != testenv.KeySlot("{user1000}.followers") {
		t.Error("keys of one hash tag are in different slots")
	}
	// K = 1 keeps today's keys byte for byte.
	if store.MetaKeyOf(7, 0) != store.MetaKey(7) || store.StockKeyOf(7, 0, 3) != store.StockKey(7, 3) || store.ShardTag(7, 0) != "{sale:7}" {
		t.Errorf("shard 0's keys differ from the unsharded ones: %s %s", store.MetaKeyOf(7, 0), store.StockKeyOf(7, 0, 3))
	}
	if got := store.SplitUnits(10, 4); fmt.Sprint(got) != "[3 3 2 2]" {
		t.Errorf("SplitUnits(10, 4) = %v, want [3 3 2 2]", got)
	}
}

// A sale of four shards: its keys spread over four cluster slots, every key of one shard in one
// slot. A crowd twice the units, pinned unevenly (a shard with few shoppers), buys both items
// concurrently, each shopper trying both items (per-sale limit): exactly the units are sold, at
// most one per shopper, the lonely shard lends its units to the others, and the sold-out flag
// comes only once every shard is empty.
func TestShardedSaleRush(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	const k = 4
	s := h.shardedSale(k, "", 40, 24)
	checkShardSlotsAndLevels(t, h, s, k)

	// 128 shoppers: 2 pinned to shard 3, the rest spread over shards 0 to 2.
	var users []int64
	users = append(users, usersOfShard(k, 3, 2, 10_000)...)
	for sh := range 3 {
		users = append(users, usersOfShard(k, sh, 42, 10_000)...)
	}
	r := rushShards(h, s, k, users)
	t.Logf("answers: %v", r.codes)
	h.drainShards(s, k)
	checkShardedRushSold(t, h, s, k, r, users[:2])
	checkShardSeqs(t, h, s, k, r.won)
	h.checkInvariants(s)
}

// checkShardSlotsAndLevels checks that every key of one shard is in one cluster slot, each
// shard in a slot of its own, and that each item's units were split evenly over the shards.
func checkShardSlotsAndLevels(t *testing.T, h *harness, s saleIDs, k int) {
	t.Helper()
	slots := map[int]int{}
	for sh := range k {
		slot := testenv.KeySlot(store.MetaKeyOf(s.sale, sh))
		for _, key := range []string{store.StockKeyOf(s.sale, sh, s.items[0]), store.BuyersKeyOf(s.sale, sh), store.InFlightKeyOf(s.sale, sh),
			store.GoneKeyOf(s.sale, sh), store.XferKeyOf(s.sale, sh), store.XferInKeyOf(s.sale, sh)} {
			if testenv.KeySlot(key) != slot {
				t.Errorf("shard %d: %s in slot %d, its meta in %d", sh, key, testenv.KeySlot(key), slot)
			}
		}
		slots[slot] = sh
	}
	if len(slots) != k {
		t.Errorf("the %d shards' keys are in %d distinct slots (%v), want %d", k, len(slots), slots, k)
	}
	for i, item := range s.items {
		levels := h.shardLevels(s, k, item)
		if want := [][]int64{{10, 10, 10, 10}, {6, 6, 6, 6}}[i]; fmt.Sprint(levels) != fmt.Sprint(want) {
			t.Errorf("item %d loaded as %v, want %v", item, levels, want)
		}
	}
}

// shardRush is what a rush of rushShards saw.
type shardRush struct {
	won          map[int64][]string // shopper -> orders acknowledged
	codes        map[string]int     // answer -> count
	soldOutEarly int                // times the local sold-out flag was up while a shard held units
}

// rushShards has the users buy, 16 at a time, each trying both items of the sale in turn (up to
// four attempts) until it holds a unit or the sale is sold out.
func rushShards(h *harness, s saleIDs, k int, users []int64) shardRush {
	var mu sync.Mutex
	won := map[int64][]string{} // shopper -> orders acknowledged
	codes := map[string]int{}
	soldOutEarly := 0
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			tok := h.token(u, auth.RoleShopper)
			for attempt := range 4 {
				item := s.items[(i+attempt)%2]
				pt := h.tryToken(tok, s.sale)
				if pt == "" {
					return // every item sold out
				}
				r := h.buy(tok, item, pt)
				mu.Lock()
				codes[fmt.Sprintf("%d %s", r.Status, r.str("error"))]++
				if r.Status == http.StatusAccepted {
					won[u] = append(won[u], r.str("orderId"))
				}
				if h.app.SoldOut.Is(item) {
					// the local flag: only once no shard holds a unit of the item
					if lv := h.shardLevels(s, k, item); sum(lv) > 0 {
						soldOutEarly++
					}
				}
				mu.Unlock()
				if r.Status == http.StatusConflict {
					return // holds a unit of the sale
				}
			}
		}()
	}
	wg.Wait()
	return shardRush{won: won, codes: codes, soldOutEarly: soldOutEarly}
}

// checkShardedRushSold checks that the rush sold exactly the units, at most one per shopper,
// that the lonely shoppers' shard lent its units out, and that no transfer is left in a log.
func checkShardedRushSold(t *testing.T, h *harness, s saleIDs, k int, r shardRush, lonelyUsers []int64) {
	t.Helper()
	ctx := context.Background()
	won, soldOutEarly := r.won, r.soldOutEarly
	total := 0
	for u, ids := range won {
		total += len(ids)
		if len(ids) > 1 {
			t.Errorf("shopper %d was acknowledged %d orders, want at most 1 (per-sale limit)", u, len(ids))
		}
	}
	if total != 64 {
		t.Errorf("acknowledged %d orders, want exactly the 64 units", total)
	}
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE sale_id = ? AND status IN ('PENDING','PAID')`, s.sale); got != 64 {
		t.Errorf("live orders = %d, want 64", got)
	}
	lonely := 0
	for _, u := range lonelyUsers {
		lonely += len(won[u])
	}
	for _, item := range s.items {
		if lv := h.shardLevels(s, k, item); sum(lv) != 0 {
			t.Errorf("item %d: %v left in the shards after the rush, want none", item, lv)
		}
		if !h.app.SoldOut.Is(item) {
			t.Errorf("item %d: not flagged sold out at the end", item)
		}
	}
	// Shard 3 held 16 units and its 2 shoppers bought at most 2: the others borrowed the rest.
	if lonely > 2 {
		t.Errorf("shard 3's shoppers won %d units", lonely)
	}
	applied := int64(0)
	for sh := range 3 {
		n, _ := h.app.Redis.SCard(ctx, store.XferInKeyOf(s.sale, sh)).Result()
		applied += n
	}
	if applied == 0 {
		t.Error("no shard borrowed units from another, want shard 3's units lent out")
	}
	for sh := range k {
		if n, _ := h.app.Redis.HLen(ctx, store.XferKeyOf(s.sale, sh)).Result(); n != 0 {
			t.Errorf("shard %d: %d transfers left in its log", sh, n)
		}
	}
	if soldOutEarly != 0 {
		t.Errorf("the local sold-out flag was up %d times while a shard still held units", soldOutEarly)
	}
}

// checkShardSeqs checks that the shards' counters and Postgres's highest seq per shard agree.
func checkShardSeqs(t *testing.T, h *harness, s saleIDs, k int, won map[int64][]string) {
	t.Helper()
	ctx := context.Background()
	st, err := h.app.Stock.State(ctx, s.sale)
	if err != nil || !st.Loaded || st.Lost || st.Shards != k {
		t.Fatalf("state = %+v, %v", st, err)
	}
	pgs, err := h.app.DB.MaxSeqOfShards(ctx, s.sale, k)
	if err != nil {
		t.Fatal(err)
	}
	// Which shards sold is up to the race (shard 2's shoppers come last, and the others may have
	// borrowed all its units by then): each shard with a live order must have its seq recorded.
	soldIn := map[int]int{}
	for u, ids := range won {
		soldIn[store.ShardOf(u, k)] += len(ids)
	}
	for sh, seq := range st.ShardSeqs() {
		if soldIn[sh] > 0 && pgs[sh] == 0 {
			t.Errorf("shard %d: %d orders, but postgres holds no seq of it", sh, soldIn[sh])
		}
		if seq < pgs[sh] {
			t.Errorf("shard %d: counter %d behind postgres %d", sh, seq, pgs[sh])
		}
	}
}

// Borrowing, one shopper at a time: four units, one per shard, all bought by shoppers of shard 0.
// Each purchase after the first borrows from another shard; the local sold-out flag stays down
// until the last unit is gone and only then goes up.
func TestShardedBorrowAndSoldOutFlag(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	const k = 4
	s := h.shardedSale(k, "", 4)
	item := s.items[0]
	users := usersOfShard(k, 0, 6, 20_000)
	for i, u := range users[:4] {
		tok := h.token(u, auth.RoleShopper)
		if r := h.buy(tok, item, h.purchaseToken(tok, s.sale)); r.Status != http.StatusAccepted {
			t.Fatalf("shopper %d (shard 0), purchase %d: %d %s, want 202 (borrowed)", u, i+1, r.Status, r.Raw)
		}
		lv := h.shardLevels(s, k, item)
		if sum(lv) != int64(3-i) {
			t.Errorf("after %d purchases: %v, want %d left", i+1, lv, 3-i)
		}
		if h.app.SoldOut.Is(item) {
			t.Errorf("after %d purchases (%v left): flagged sold out", i+1, lv)
		}
	}
	tok := h.token(users[4], auth.RoleShopper)
	if r := h.buy(tok, item, h.purchaseToken(tok, s.sale)); r.Status != http.StatusGone || r.str("error") != "SOLD_OUT" {
		t.Fatalf("fifth shopper: %d %s, want 410 SOLD_OUT", r.Status, r.Raw)
	}
	if !h.app.SoldOut.Is(item) {
		t.Error("every shard empty: not flagged sold out")
	}
	// the sold-out answer used the token: sent again it is refused, not borrowed for
	h.drainShards(s, k)
	h.checkInvariants(s)
}

// K = 1 is today's sale: one key set under {sale:S}, no transfer log, nothing per shard in
// Postgres.
func TestOneShardIsTheUnshardedLayout(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.liveSale(3)
	ctx := context.Background()
	if got := h.sqlInt(`SELECT stock_shards FROM sales WHERE id = ?`, s.sale); got != 1 {
		t.Errorf("stock_shards = %d, want 1 by default", got)
	}
	tok := h.token(1, auth.RoleShopper)
	if r := h.buy(tok, s.items[0], h.purchaseToken(tok, s.sale)); r.Status != http.StatusAccepted {
		t.Fatalf("buy: %d %s", r.Status, r.Raw)
	}
	h.drain(s)
	keys, _ := h.app.Redis.Keys(ctx, "{sale:*").Result()
	for _, key := range keys {
		if !strings.HasPrefix(key, store.ShardTag(s.sale, 0)+":") {
			t.Errorf("key %s outside {sale:%d}", key, s.sale)
		}
		if strings.Contains(key, ":xfer") {
			t.Errorf("key %s: a sale of one shard has no transfer log", key)
		}
	}
	if got := h.sqlInt(`SELECT count(*) FROM item_shard_seqs`); got != 0 {
		t.Errorf("item_shard_seqs has %d rows for a sale of one shard", got)
	}
	if got := h.redisStock(s, s.items[0]); got != 2 {
		t.Errorf("stock = %d, want 2", got)
	}
	for _, bad := range []any{0, 65, "4"} {
		r := h.do("POST", "/api/admin/sales", h.token(9000, auth.RoleMerchant), map[string]any{"name": "x",
			"startsAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "endsAt": time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339),
			"items": []map[string]any{{"name": "a", "priceCents": 1, "quantity": 1}}, "stockShards": bad})
		if r.Status != http.StatusBadRequest {
			t.Errorf("stockShards %v: %d %s, want 400", bad, r.Status, r.Raw)
		}
	}
	h.checkInvariants(s)
}

// A merchant's edit of a sharded sale: a decrease is taken from the shards holding units, an
// increase and an added item are split over the shards, and a pause reaches every shard (a
// shopper of any shard is refused at once).
func TestShardedSaleEdit(t *testing.T) {
	t.Parallel()
	// No background keeper: its warm-up pass may load the new sale at the same moment as the
	// creation does, and an edit landing between that load's snapshot and its Redis step fails
	// the sale closed until it is rebuilt (correct: TestEditDuringTheWarmUpIsNotLost); this test
	// is about edits of a sale Redis holds healthy, which the creation's own load makes sure of.
	h := newHarness(t, harnessOpts{noKeeper: true})
	const k = 4
	s := h.createSaleWith(map[string]any{"stockShards": k}, time.Now().Add(time.Minute), 8)
	item := s.items[0]
	merchant := h.token(9000, auth.RoleMerchant)
	id := fmt.Sprint(item)
	if r := h.patchSale(merchant, s.sale, map[string]any{"items": []map[string]any{{"itemId": id, "quantity": 5}}}); r.Status != http.StatusOK {
		t.Fatalf("decrease: %d %s", r.Status, r.Raw)
	}
	if lv := h.shardLevels(s, k, item); sum(lv) != 5 {
		t.Errorf("after decreasing to 5: %v", lv)
	}
	r := h.patchSale(merchant, s.sale, map[string]any{"items": []map[string]any{{"itemId": id, "quantity": 12}, {"name": "new", "priceCents": 1, "quantity": 6}}})
	if r.Status != http.StatusOK {
		t.Fatalf("increase and add: %d %s", r.Status, r.Raw)
	}
	if lv := h.shardLevels(s, k, item); sum(lv) != 12 {
		t.Errorf("after increasing to 12: %v", lv)
	}
	its := r.Body["items"].([]any)
	added, _ := strconv.ParseInt(its[1].(map[string]any)["itemId"].(string), 10, 64)
	if lv := h.shardLevels(s, k, added); fmt.Sprint(lv) != "[2 2 1 1]" {
		t.Errorf("added item of 6 units: %v, want [2 2 1 1]", lv)
	}
	// The stock JSON and the merchant's stock view sum the shards.
	st := h.do("GET", fmt.Sprintf("/api/flash-sales/%d/stock", s.sale), "", nil)
	if got := fmt.Sprint(st.Body["items"]); st.Status != http.StatusOK || !strings.Contains(got, "stock:12") || !strings.Contains(got, "stock:6") {
		t.Errorf("stock JSON: %d %s, want 12 and 6", st.Status, st.Raw)
	}
	adm := h.do("GET", fmt.Sprintf("/api/admin/sales/%d/stock", s.sale), merchant, nil)
	if adm.Status != http.StatusOK || !strings.Contains(adm.Raw, `"displayed":12`) || !strings.Contains(adm.Raw, `"displayed":6`) || strings.Contains(adm.Raw, `"reconciled":false`) {
		t.Errorf("admin stock: %d %s, want displayed 12 and 6, reconciled", adm.Status, adm.Raw)
	}
	if r := h.saleAction(merchant, s.sale, "pause"); r.Status != http.StatusOK {
		t.Fatalf("pause: %d %s", r.Status, r.Raw)
	}
	for sh := range k {
		if v, _ := h.app.Redis.HGet(context.Background(), store.MetaKeyOf(s.sale, sh), "paused").Result(); v != "1" {
			t.Errorf("shard %d: paused = %q, want 1", sh, v)
		}
	}
	if r := h.saleAction(merchant, s.sale, "resume"); r.Status != http.StatusOK {
		t.Fatalf("resume: %d %s", r.Status, r.Raw)
	}
	for sh := range k {
		if v, _ := h.app.Redis.HGet(context.Background(), store.MetaKeyOf(s.sale, sh), "paused").Result(); v != "0" {
			t.Errorf("shard %d after resume: paused = %q, want 0", sh, v)
		}
	}
	h.checkInvariants(s)
}

// Two instances on one Redis, Postgres and NATS sell a sharded sale at once, both borrowing and
// both running the keeper: exactly the units are sold, one per shopper, and the books balance.
func TestShardedSaleTwoInstances(t *testing.T) {
	t.Parallel()
	a := newHarness(t, harnessOpts{})
	b := newHarness(t, harnessOpts{shared: a})
	const k = 3
	s := a.shardedSale(k, shop.LimitPerItem, 30)
	var users []int64
	users = append(users, usersOfShard(k, 0, 50, 70_000)...)
	users = append(users, usersOfShard(k, 1, 10, 70_000)...)
	var mu sync.Mutex
	won := map[int64]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 12)
	for i, u := range users {
		h := a
		if i%2 == 1 {
			h = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			tok := h.token(u, auth.RoleShopper)
			for range 3 {
				pt := h.tryToken(tok, s.sale)
				if pt == "" {
					return
				}
				r := h.buy(tok, s.items[0], pt)
				if r.Status == http.StatusAccepted {
					mu.Lock()
					won[u]++
					mu.Unlock()
				}
				if r.Status == http.StatusAccepted || r.Status == http.StatusConflict {
					return
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for u, n := range won {
		total += n
		if n > 1 {
			t.Errorf("shopper %d won %d units", u, n)
		}
	}
	if total != 30 {
		t.Errorf("sold %d, want the 30 units (shard 2 has no shopper: all of its units lent)", total)
	}
	a.drainShards(s, k)
	a.mu.Lock()
	a.acked = append(a.acked, b.acked...)
	a.mu.Unlock()
	a.checkInvariants(s)
}
