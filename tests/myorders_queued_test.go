package tests

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/pipeline"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// "My orders" lists the caller's acknowledged orders at once, QUEUED ones included (issue 18,
// item 11): before the writer has written them, they are listed as QUEUED from Redis (the
// shopper's buyers entries and the orders' in-flight entries), in a per-sale sale, a per-item
// sale and a sharded sale whose shopper is pinned to shard 2, newest first, with item, sale,
// price and currency; only the first page carries them; a just-written order that is still in
// flight is listed once, as Postgres has it. The listing costs one pipelined Redis round trip
// and no Postgres query per request beyond its page, and works while Redis lost its script
// cache or refuses writes. Before, the list stayed empty until the writer wrote the orders.
// queuedListing is the state of TestMyOrdersListsQueuedOrders: its sales, its shoppers' bearer
// tokens and the orders they placed (alice's a1, b0, b1, c0, l0; bob's; carol's 21).
type queuedListing struct {
	t                                      *testing.T
	h                                      *harness
	ctx                                    context.Context
	sales                                  []saleIDs
	perSale, perItem, sharded, paged, late saleIDs
	alice, bob, carol                      string
	aliceWant, carols                      []string
	bobs, a1, b0, b1, c0, l0               string
}

func TestMyOrdersListsQueuedOrders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, harnessOpts{noWriter: true, env: map[string]string{"FLASHSALE_KEEPER_INTERVAL": "1h"}})
	perSale := h.liveSale(5, 5)
	perItem := h.createSaleWith(map[string]any{"purchaseLimit": "per-item"}, time.Now().Add(-time.Second), 5, 5)
	const k = 3
	sharded := h.shardedSale(k, "", 9)
	many := make([]int, 22)
	for i := range many {
		many[i] = 1
	}
	paged := h.createSaleWith(map[string]any{"purchaseLimit": "per-item"}, time.Now().Add(-time.Second), many...)
	sales := []saleIDs{perSale, perItem, sharded, paged}

	aliceID := usersOfShard(k, 2, 1, 5000)[0] // in the sharded sale, her keys are shard 2's
	alice, bob, carol := h.token(aliceID, auth.RoleShopper), h.token(4001, auth.RoleShopper), h.token(6001, auth.RoleShopper)
	// The list of sales that can hold a QUEUED order is read once a second; a sale created
	// (and bought) on this instance since is looked at all the same.
	if r := h.do("GET", "/api/flash-sales/orders", alice, nil); r.Status != http.StatusOK || !strings.Contains(r.Raw, `"orders":[]`) {
		t.Fatalf("alice's orders before she buys: %d %s", r.Status, r.Raw)
	}
	late := h.liveSale(3)
	sales = append(sales, late)
	l0 := h.buyQueued(alice, late, late.items[0])
	if r := h.do("GET", "/api/flash-sales/orders", alice, nil); !strings.Contains(r.Raw, l0) {
		t.Errorf("alice's order in a sale created a moment ago is not listed: %s", r.Raw)
	}
	bobs := h.buyQueued(bob, perSale, perSale.items[0])
	a1 := h.buyQueued(alice, perSale, perSale.items[1])
	b0 := h.buyQueued(alice, perItem, perItem.items[0])
	b1 := h.buyQueued(alice, perItem, perItem.items[1])
	c0 := h.buyQueued(alice, sharded, sharded.items[0])
	var carols []string
	for _, it := range paged.items[:21] {
		carols = append(carols, h.buyQueued(carol, paged, it))
	}
	aliceWant := []string{c0, b1, b0, a1, l0} // newest first
	c := &queuedListing{t: t, h: h, ctx: ctx, sales: sales, perSale: perSale, perItem: perItem, sharded: sharded, paged: paged, late: late,
		alice: alice, bob: bob, carol: carol, aliceWant: aliceWant, carols: carols, bobs: bobs, a1: a1, b0: b0, b1: b1, c0: c0, l0: l0}

	c.checkQueuedListed()

	c.checkLookupCost()

	c.lookupSurvivesLostScriptsAndRefusals()

	c.writerWritesThem()

	c.pageCarolsQueuedFirst()

	h.app.Start(ctx, true, false)
	for _, s := range c.sales {
		h.checkInvariants(s)
	}
}

// buyQueued buys the item with a fresh purchase token and returns the order id; each purchase
// gets a reservation time of its own.
func (h *harness) buyQueued(tok string, s saleIDs, item int64) string {
	t := h.t
	t.Helper()
	r := h.buy(tok, item, h.purchaseToken(tok, s.sale))
	if r.Status != http.StatusAccepted {
		t.Fatalf("buy item %d: %d %s", item, r.Status, r.Raw)
	}
	time.Sleep(3 * time.Millisecond) // each a reservation time of its own
	return r.str("orderId")
}

// checkQueuedListed: nothing is written (no writer): every order is QUEUED, listed at once,
// newest first, by sale, and only the shopper's own.
func (c *queuedListing) checkQueuedListed() {
	t, h, perSale, perItem, sharded, late, alice, bob, carol, aliceWant, carols, bobs, a1, b0, b1, c0, l0 := c.t, c.h, c.perSale, c.perItem, c.sharded, c.late, c.alice, c.bob, c.carol, c.aliceWant, c.carols, c.bobs, c.a1, c.b0, c.b1, c.c0, c.l0
	t.Helper()
	// Nothing is written (no writer): every order is QUEUED, listed at once.
	item := map[string]struct {
		sale  saleIDs
		index int
	}{a1: {perSale, 1}, b0: {perItem, 0}, b1: {perItem, 1}, c0: {sharded, 0}, l0: {late, 0}}
	got, next := h.listMyOrders(alice, "")
	if !slices.Equal(orderIDsOf(got), aliceWant) || next != "" {
		t.Fatalf("alice's orders before any is written: %v (next %q), want %v, newest first, on one page", orderIDsOf(got), next, aliceWant)
	}
	for _, e := range got {
		w := item[e.OrderID]
		at, err := time.Parse(time.RFC3339Nano, e.CreatedAt)
		if e.Status != "QUEUED" || e.ItemID != strconv.FormatInt(w.sale.items[w.index], 10) || e.SaleID != strconv.FormatInt(w.sale.sale, 10) ||
			e.ItemName != fmt.Sprintf("item %d", w.index) || e.PriceCents != int64(1000+w.index) || e.Currency != "CNY" ||
			e.SaleName != "test sale" || e.PayBy != nil || err != nil || time.Since(at) > time.Minute || time.Since(at) < 0 {
			t.Errorf("queued entry %+v: want QUEUED, item %d of sale %d (\"item %d\", %d CNY), no payBy, placed when reserved",
				e, w.sale.items[w.index], w.sale.sale, w.index, 1000+w.index)
		}
	}
	if got, _ := h.listMyOrders(alice, fmt.Sprintf("?saleId=%d", perItem.sale)); !slices.Equal(orderIDsOf(got), []string{b1, b0}) {
		t.Errorf("alice's orders of the per-item sale: %v, want %v", orderIDsOf(got), []string{b1, b0})
	}
	if got, _ := h.listMyOrders(bob, ""); !slices.Equal(orderIDsOf(got), []string{bobs}) {
		t.Errorf("bob's orders: %v, want only his own %s", orderIDsOf(got), bobs)
	}
	if got, next := h.listMyOrders(carol, ""); len(got) != 21 || got[0].OrderID != carols[20] || got[20].OrderID != carols[0] || next != "" {
		t.Errorf("carol's 21 queued orders: %d listed (next %q), want all 21, newest first", len(got), next)
	}
}

// checkLookupCost: one pipeline of one script call per sale that can hold a QUEUED order, and no
// Postgres query per request beyond the page (the sales are read once a second at most).
func (c *queuedListing) checkLookupCost() {
	t, h, sales, alice, aliceWant := c.t, c.h, c.sales, c.alice, c.aliceWant
	t.Helper()
	// The cost: one pipeline of one script call per sale that can hold a QUEUED order, and no
	// Postgres query per request beyond the page (the sales are read once a second at most).
	held := &heldCounter{}
	h.app.Redis.AddHook(held)
	if got, _ := h.listMyOrders(alice, ""); len(got) != len(aliceWant) {
		t.Fatalf("alice's orders with the counter on: %v", orderIDsOf(got))
	}
	if p, c, single := held.pipelines.Load(), held.calls.Load(), held.single.Load(); p != 1 || c != int64(len(sales)) || single != 0 {
		t.Errorf("one listing sent %d pipelines with %d lookups (%d alone), want 1 pipeline of %d (one per sale)", p, c, single, len(sales))
	}
	var queries atomic.Int64
	count := func(*gorm.DB) { queries.Add(1) }
	cb := h.app.DB.Gorm().Callback()
	if err := cb.Query().After("gorm:query").Register("test:myorders_query", count); err != nil {
		t.Fatal(err)
	}
	if err := cb.Row().After("gorm:row").Register("test:myorders_row", count); err != nil {
		t.Fatal(err)
	}
	const polls = 60
	start := time.Now()
	for range polls {
		if got, _ := h.listMyOrders(alice, ""); len(got) != len(aliceWant) {
			t.Fatalf("a poll listed %v", orderIDsOf(got))
		}
	}
	if n, most := queries.Load(), int64(polls)+int64(time.Since(start)/time.Second)+2; n > most {
		t.Errorf("%d polls of my orders in %v cost %d Postgres queries, want at most %d (the page each, the sales once a second)",
			polls, time.Since(start).Round(time.Millisecond), n, most)
	}
}

// lookupSurvivesLostScriptsAndRefusals: Redis lost its scripts (a restart, a failover): the lookup
// loads it again; a Redis that refuses writes still answers the lookup: it only reads.
func (c *queuedListing) lookupSurvivesLostScriptsAndRefusals() {
	t, h, ctx, alice, aliceWant := c.t, c.h, c.ctx, c.alice, c.aliceWant
	t.Helper()
	// Redis lost its scripts (a restart, a failover): the lookup loads it again.
	if err := h.app.Redis.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.listMyOrders(alice, ""); !slices.Equal(orderIDsOf(got), aliceWant) {
		t.Errorf("after SCRIPT FLUSH: %v, want %v", orderIDsOf(got), aliceWant)
	}
	// A Redis that refuses writes still answers the lookup: it only reads.
	for _, r := range []testenv.Refusal{testenv.RefuseOOM, testenv.RefuseReadOnly} {
		lift := h.redis.Refuse(t, r)
		if got, _ := h.listMyOrders(alice, ""); !slices.Equal(orderIDsOf(got), aliceWant) || got[0].Status != "QUEUED" {
			t.Errorf("while Redis refuses writes (%s): %v, want %v QUEUED", r, orderIDsOf(got), aliceWant)
		}
		lift()
	}
}

// writerWritesThem: the writer writes them: the same orders, now PENDING, each once; and written
// but not settled yet, listed once, as Postgres has it.
func (c *queuedListing) writerWritesThem() {
	t, h, ctx, sales, sharded, alice, aliceWant, c0 := c.t, c.h, c.ctx, c.sales, c.sharded, c.alice, c.aliceWant, c.c0
	t.Helper()
	// The writer writes them: the same orders, now PENDING, each once.
	wctx, stop := context.WithCancel(ctx)
	w := pipeline.NewWriter(pipeline.WriterConfig{Workers: 1, Batch: 100, MaxWait: 200 * time.Millisecond}, h.app.Queue, h.app.DB, h.app.Stock, h.app.SoldOut, h.app.Metrics, h.app.Log)
	stopped := make(chan struct{})
	// The raw in-flight entry of c0, to put back below as the writer leaves it between its
	// commit and its settle.
	raw, err := h.app.Redis.HGet(ctx, store.InFlightKeyOf(sharded.sale, 2), c0).Result()
	if err != nil {
		t.Fatalf("c0's in-flight entry in shard 2: %v", err)
	}
	go func() {
		defer close(stopped)
		_ = w.Run(wctx)
	}()
	for _, s := range sales {
		h.drain(s)
	}
	stop()
	<-stopped
	got, _ := h.listMyOrders(alice, "")
	if !slices.Equal(orderIDsOf(got), aliceWant) {
		t.Fatalf("alice's orders once written: %v, want %v", orderIDsOf(got), aliceWant)
	}
	for _, e := range got {
		if e.Status != "PENDING" || e.PayBy == nil {
			t.Errorf("written entry %+v: want PENDING with payBy", e)
		}
	}
	// Written and not settled yet (the writer settles after its commit): listed once, as
	// Postgres has it.
	if err := h.app.Redis.HSet(ctx, store.InFlightKeyOf(sharded.sale, 2), c0, strings.TrimSuffix(raw, ":c")+":c").Err(); err != nil {
		t.Fatal(err)
	}
	got, _ = h.listMyOrders(alice, "")
	if err := h.app.Redis.HDel(ctx, store.InFlightKeyOf(sharded.sale, 2), c0).Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(orderIDsOf(got), aliceWant) || got[0].Status != "PENDING" {
		t.Errorf("a written order still in flight: %v (first %s), want %v, each once, c0 PENDING", orderIDsOf(got), got[0].Status, aliceWant)
	}
}

// pageCarolsQueuedFirst: with the writer stopped, carol's 22nd order is QUEUED: the first page lists
// it first and then Postgres's 20 newest; the next page has only Postgres's orders.
func (c *queuedListing) pageCarolsQueuedFirst() {
	t, h, paged, carol, carols := c.t, c.h, c.paged, c.carol, c.carols
	t.Helper()
	// With the writer stopped, carol's 22nd order is QUEUED: the first page lists it first and
	// then Postgres's 20 newest; the next page has only Postgres's orders.
	last := h.buyQueued(carol, paged, paged.items[21])
	page1, next := h.listMyOrders(carol, "")
	if len(page1) != 21 || page1[0].OrderID != last || page1[0].Status != "QUEUED" || next == "" {
		t.Fatalf("carol's first page: %d orders, first %+v, next %q; want 21, the queued %s first, and a next page", len(page1), page1[0], next, last)
	}
	for i, e := range page1[1:] {
		if want := carols[20-i]; e.OrderID != want || e.Status != "PENDING" {
			t.Errorf("carol's first page [%d] = %s %s, want %s PENDING", i+1, e.OrderID, e.Status, want)
		}
	}
	page2, next2 := h.listMyOrders(carol, "?cursor="+next)
	if !slices.Equal(orderIDsOf(page2), []string{carols[0]}) || page2[0].Status != "PENDING" || next2 != "" {
		t.Errorf("carol's second page: %v (next %q), want only %s, PENDING, no QUEUED entry", orderIDsOf(page2), next2, carols[0])
	}
}

// myOrderEntry is one entry of "my orders", as the API answers it.
type myOrderEntry struct {
	OrderID, ItemID, SaleID, Status, ItemName, Currency, SaleName, CreatedAt string
	PriceCents                                                               int64
	PayBy                                                                    *string
}

// listMyOrders is one page of "my orders" of the shopper (query: "?saleId=…", "?cursor=…" or
// ""), and the cursor of the next page.
func (h *harness) listMyOrders(tok, query string) ([]myOrderEntry, string) {
	t := h.t
	t.Helper()
	r := h.do("GET", "/api/flash-sales/orders"+query, tok, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("my orders%s: %d %s", query, r.Status, r.Raw)
	}
	var out []myOrderEntry
	for _, o := range r.Body["orders"].([]any) {
		m := o.(map[string]any)
		e := myOrderEntry{OrderID: jsonStr(m["orderId"]), ItemID: jsonStr(m["itemId"]), SaleID: jsonStr(m["saleId"]), Status: jsonStr(m["status"]),
			ItemName: jsonStr(m["itemName"]), Currency: jsonStr(m["currency"]), SaleName: jsonStr(m["saleName"]), CreatedAt: jsonStr(m["createdAt"])}
		if n, ok := m["priceCents"].(float64); ok {
			e.PriceCents = int64(n)
		}
		if p, ok := m["payBy"].(string); ok {
			e.PayBy = &p
		}
		out = append(out, e)
	}
	return out, r.str("next")
}

// orderIDsOf is the order ids of the entries, in order.
func orderIDsOf(es []myOrderEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.OrderID
	}
	return out
}

func jsonStr(v any) string { s, _ := v.(string); return s }

// heldCounter counts the lookups of "my orders" (a two-key script over a buyers hash and an
// in-flight hash) sent to Redis: in pipelines, and alone.
type heldCounter struct {
	pipelines, calls, single atomic.Int64
}

func isHeldLookup(c redis.Cmder) bool {
	a := c.Args()
	if len(a) < 5 || (c.Name() != "evalsha" && c.Name() != "eval") || fmt.Sprint(a[2]) != "2" {
		return false
	}
	return strings.HasSuffix(fmt.Sprint(a[3]), ":buyers") && strings.HasSuffix(fmt.Sprint(a[4]), ":inflight")
}

func (c *heldCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *heldCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isHeldLookup(cmd) {
			c.single.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *heldCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, cmd := range cmds {
			if isHeldLookup(cmd) {
				n++
			}
		}
		if n > 0 {
			c.pipelines.Add(1)
			c.calls.Add(int64(n))
		}
		return next(ctx, cmds)
	}
}

// On a Redis Cluster the QUEUED lookup reaches every master holding one of the shopper's sales
// (one pipeline: one round trip per node), the script loaded on each of them by the first
// listing: a sale on each of three masters, one of them sharded with the shopper's shard on
// another master than its shard 0, all listed QUEUED before the writer writes them, then PENDING.
func TestMyOrdersQueuedOnRedisCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testenv.NewRedisCluster(t, 3, 0)
	h := newHarness(t, harnessOpts{noWriter: true, redisURL: c.URL(), env: map[string]string{"FLASHSALE_KEEPER_INTERVAL": "1h"}})
	const k = 2
	user := usersOfShard(k, 1, 1, 7000)[0]
	sales := salesOnThreeMasters(t, h, c, k)
	tok := h.token(user, auth.RoleShopper)
	var want []string
	for _, s := range sales {
		r := h.buy(tok, s.items[0], h.purchaseToken(tok, s.sale))
		if r.Status != http.StatusAccepted {
			t.Fatalf("buy in sale %d: %d %s", s.sale, r.Status, r.Raw)
		}
		want = append([]string{r.str("orderId")}, want...)
		time.Sleep(3 * time.Millisecond)
	}
	listed := func(status string) {
		t.Helper()
		r := h.do("GET", "/api/flash-sales/orders", tok, nil)
		var got []string
		for _, o := range r.Body["orders"].([]any) {
			m := o.(map[string]any)
			if m["status"] != status {
				t.Errorf("entry %v: want %s", m, status)
			}
			got = append(got, jsonStr(m["orderId"]))
		}
		if r.Status != http.StatusOK || !slices.Equal(got, want) {
			t.Errorf("my orders on the cluster: %d %v, want %v %s", r.Status, got, want, status)
		}
	}
	listed("QUEUED")
	h.app.Start(ctx, true, false)
	for _, s := range sales {
		h.drain(s)
	}
	listed("PENDING")
	for _, s := range sales {
		h.checkInvariants(s)
	}
}

// salesOnThreeMasters creates a sale of k shards with shard 1 on another master than shard 0, and
// more sales until the first shard of each is on another of the three masters.
func salesOnThreeMasters(t *testing.T, h *harness, c *testenv.RedisCluster, k int) []saleIDs {
	master := func(s saleIDs, sh int) string { return c.MustMasterOf(t, store.MetaKeyOf(s.sale, sh)).Addr }
	var sharded saleIDs
	for i := 0; ; i++ {
		if i == 40 {
			t.Fatal("40 sharded sales: none had its shard 1 on another master than its shard 0")
		}
		if sharded = h.shardedSale(k, "", 4); master(sharded, 0) != master(sharded, 1) {
			break
		}
	}
	sales := []saleIDs{sharded}
	on := map[string]bool{master(sharded, 1): true}
	for i := 0; len(on) < 3; i++ {
		if i == 40 {
			t.Fatal("40 sales did not land on three masters")
		}
		if s := h.liveSale(4); !on[master(s, 0)] {
			on[master(s, 0)] = true
			sales = append(sales, s)
		}
	}
	return sales
}
