package tests

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/catalog"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// The whole purchase path on a Redis Cluster of three masters with a replica each: three sales
// whose keys live on three different masters, two instances (captcha issued on one, answered on
// the other), one per shopper in a sale, sold out, the queue to Postgres, pay, cancel and expiry
// each giving the unit back to the right shard, the rate limiter shared through the cluster, the
// live view, and the invariants of every sale at the end.
func TestRedisClusterPurchasePath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testenv.NewRedisCluster(t, 3, 1)
	env := map[string]string{"FLASHSALE_RATE_LIMITS": "on", "FLASHSALE_CAPTCHA": "image"}
	a := newHarness(t, harnessOpts{redisURL: c.URL(), env: env})
	b := newHarness(t, harnessOpts{redisURL: c.URL(), env: env, shared: a})
	if _, ok := a.app.Redis.(*redis.ClusterClient); !ok {
		t.Fatalf("FLASHSALE_REDIS_URL=%s opened a %T, want a cluster client", c.URL(), a.app.Redis)
	}
	merchant := a.token(9000, auth.RoleMerchant)
	limits := map[string]any{"rateLimits": map[string]int{"userPerSecond": 50, "ipPerSecond": 10000}}

	// Sales whose hash tags land on three different masters.
	sales := salesOnThreeMastersOf(t, a, c, limits)
	for i, s := range sales {
		// Every key of the sale is on its master itself (one slot: no redirection, no CROSSSLOT).
		m := c.MustMasterOf(t, store.MetaKey(s.sale))
		n, err := m.Do(ctx, "exists", store.MetaKey(s.sale), store.StockKey(s.sale, s.items[0]), store.StockKey(s.sale, s.items[1]))
		if err != nil || n != int64(3) {
			t.Fatalf("sale %d's keys on its master %s: %v, %v; want all 3 there", s.sale, m.Addr, n, err)
		}
		rcSaleFlow(t, a, b, s, int64(1000*(i+1)))
		if n, err := m.Do(ctx, "hlen", store.BuyersKey(s.sale)); err != nil || n != int64(3) {
			t.Errorf("sale %d: buyers on its master %s = %v, %v; want 3 (alice, carol, bob)", s.sale, m.Addr, n, err)
		}
	}

	// The live view reads each sale in one MULTI and its funnel from its own node.
	v := a.liveUntil(merchant, sales[1].sale, "the funnel flushed", func(v liveBody) bool { return v.Funnel.Accepted >= 5 })
	if v.Funnel.Accepted != 5 || v.Funnel.Refused[catalog.RefusedDuplicate] != 1 || v.Reconciliation.State == "violation" {
		t.Errorf("live view of sale %d: funnel %+v, reconciliation %s; want 5 accepted, 1 duplicate", sales[1].sale, v.Funnel, v.Reconciliation.State)
	}

	checkRateLimitsShared(t, a, b, merchant)

	for _, s := range sales {
		a.checkInvariants(s)
	}
}

// salesOnThreeMastersOf creates sales (with the given settings) until three have their hash tags
// on three different masters, and returns those three.
func salesOnThreeMastersOf(t *testing.T, a *harness, c *testenv.RedisCluster, limits map[string]any) []saleIDs {
	t.Helper()
	var sales []saleIDs
	masters := map[*testenv.RedisClusterNode]bool{}
	for i := 0; len(sales) < 3 && i < 40; i++ {
		s := a.createSaleWith(limits, time.Now().Add(-time.Second), 2, 1)
		if m := c.MustMasterOf(t, store.MetaKey(s.sale)); !masters[m] {
			masters[m] = true
			sales = append(sales, s)
		}
	}
	if len(sales) < 3 {
		t.Fatalf("40 sales landed on %d masters, want 3", len(masters))
	}
	return sales
}

// checkRateLimitsShared: the rate limits are shared through the cluster: a burst of twice the rate
// split over the two instances passes each one's local bucket, and Redis refuses the next.
func checkRateLimitsShared(t *testing.T, a, b *harness, merchant string) {
	t.Helper()
	ctx := context.Background()
	// The rate limits are shared through the cluster: a burst of twice the rate split over the two
	// instances passes each one's local bucket, and Redis refuses the next.
	r := a.do("POST", "/api/admin/sales", merchant, map[string]any{
		"name": "limited", "startsAt": time.Now().Add(-time.Second).UTC().Format(time.RFC3339),
		"endsAt":     time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"items":      []map[string]any{{"name": "x", "priceCents": 1, "quantity": 5}},
		"rateLimits": map[string]int{"userPerSecond": 2, "ipPerSecond": 1000},
	})
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Raw)
	}
	limited := r.str("saleId")
	alice := a.token(1, auth.RoleShopper)
	for i, h := range []*harness{a, b, a, b} {
		if r := h.do("POST", "/api/flash-sales/"+limited+"/captcha", alice, nil); r.Status != http.StatusOK {
			t.Fatalf("request %d within the burst: %d %s", i+1, r.Status, r.Raw)
		}
	}
	r = a.do("POST", "/api/flash-sales/"+limited+"/captcha", alice, nil)
	wantAdminCode(t, "over the limit", r, http.StatusTooManyRequests, shop.CodeRateLimited)
	if n, err := a.app.Redis.Exists(ctx, "rate:rl:u:"+limited+":1").Result(); err != nil || n != 1 {
		t.Errorf("the shopper's bucket in the cluster: %d, %v", n, err)
	}
}

// rcSaleFlow runs one sale (items of 2 and 1 units, one per shopper in the sale) through every
// step of an order: shoppers are base+1..base+5; tokens come from b, purchases go to a.
func rcSaleFlow(t *testing.T, a, b *harness, s saleIDs, base int64) {
	t.Helper()
	shopper := func(n int64) string { return a.token(base+n, auth.RoleShopper) }
	alice, bob, carol, dave, erin := shopper(1), shopper(2), shopper(3), shopper(4), shopper(5)
	buy := func(bearer string, item int64) response {
		t.Helper()
		return a.buy(bearer, item, rcImageToken(t, b, bearer, s.sale))
	}
	want := func(what string, r response, status int) string {
		t.Helper()
		if r.Status != status {
			t.Fatalf("sale %d: %s: %d %s, want %d", s.sale, what, r.Status, r.Raw, status)
		}
		return r.str("orderId")
	}
	aliceOrder := want("alice buys", buy(alice, s.items[0]), http.StatusAccepted)
	wantAdminCode(t, "alice buys a second item of the sale", buy(alice, s.items[1]), http.StatusConflict, shop.CodeAlreadyPurchased)
	bobOrder := want("bob buys", buy(bob, s.items[0]), http.StatusAccepted)
	wantAdminCode(t, "carol after the item sold out", buy(carol, s.items[0]), http.StatusGone, shop.CodeSoldOut)
	erinToken := rcImageToken(t, b, erin, s.sale) // before the last unit: after it, no token is handed out
	daveOrder := want("dave buys", buy(dave, s.items[1]), http.StatusAccepted)
	wantAdminCode(t, "erin after the item sold out", a.buy(erin, s.items[1], erinToken), http.StatusGone, shop.CodeSoldOut)
	a.drain(s)
	for _, id := range []string{aliceOrder, bobOrder, daveOrder} {
		if n := a.sqlInt(`SELECT count(*) FROM orders WHERE id = ? AND status = 'PENDING'`, id); n != 1 {
			t.Fatalf("sale %d: order %s not PENDING in Postgres after the queue drained", s.sale, id)
		}
	}
	if p := a.do("POST", "/api/flash-sales/orders/"+aliceOrder+"/pay", alice, nil); p.Status != http.StatusOK || p.str("status") != "PAID" {
		t.Fatalf("pay: %d %s", p.Status, p.Raw)
	}
	if c := a.do("POST", "/api/flash-sales/orders/"+bobOrder+"/cancel", bob, nil); c.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", c.Status, c.Raw)
	}
	a.sql().Exec(`UPDATE orders SET pay_by = now() - interval '1 second' WHERE id = ?`, daveOrder)
	// The cancel and the expiry (the keeper's) give each unit back to the sale's master.
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("sale %d: units back after a cancel and an expiry", s.sale), func() error {
		if s0, s1 := a.redisStock(s, s.items[0]), a.redisStock(s, s.items[1]); s0 != 1 || s1 != 1 {
			return fmt.Errorf("stock %d and %d, want 1 and 1", s0, s1)
		}
		return nil
	})
	if o := a.do("GET", "/api/flash-sales/orders/"+daveOrder, dave, nil); o.str("status") != "EXPIRED" {
		t.Errorf("sale %d: dave's order %s, want EXPIRED", s.sale, o.Raw)
	}
	// The returned units sell again: to carol (refused earlier as sold out; the instances' flag
	// clears when a unit goes back) and to bob, free to buy again after his cancel.
	testenv.Eventually(t, 5*time.Second, fmt.Sprintf("sale %d: carol buys a returned unit", s.sale), func() error {
		r := buy(carol, s.items[0])
		if r.Status != http.StatusAccepted && r.Status != http.StatusGone {
			t.Fatalf("sale %d: carol buys a returned unit: %d %s", s.sale, r.Status, r.Raw)
		}
		if r.Status != http.StatusAccepted {
			return fmt.Errorf("%d %s", r.Status, r.Raw)
		}
		return nil
	})
	want("bob buys again after his cancel", buy(bob, s.items[1]), http.StatusAccepted)
	a.drain(s)
}

// rcImageToken solves the image captcha on h (reading the answer where the server keeps it, in
// the cluster) and fetches a purchase token.
func rcImageToken(t *testing.T, h *harness, bearer string, saleID int64) string {
	t.Helper()
	c := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/captcha", saleID), bearer, nil)
	if c.Status != http.StatusOK {
		t.Fatalf("captcha: %d %s", c.Status, c.Raw)
	}
	v, err := h.app.Redis.Get(context.Background(), "captcha:"+c.str("captchaId")).Result()
	if err != nil {
		t.Fatalf("captcha answer in the cluster: %v", err)
	}
	_, answer, _ := strings.Cut(v, "|")
	path := fmt.Sprintf("/api/flash-sales/%d/purchase-token", saleID)
	r := h.do("POST", path, bearer, map[string]string{"captchaId": c.str("captchaId"), "answer": answer})
	if r.Status != http.StatusOK {
		t.Fatalf("purchase token: %d %s", r.Status, r.Raw)
	}
	// The answer works once, on whichever instance.
	if again := h.do("POST", path, bearer, map[string]string{"captchaId": c.str("captchaId"), "answer": answer}); again.Status != http.StatusForbidden {
		t.Errorf("a replayed captcha answer: %d %s, want 403", again.Status, again.Raw)
	}
	return r.str("purchaseToken")
}

// The master holding a sale is killed with SIGKILL during a rush, after its replica fell behind:
// the replica is paused (SIGSTOP), a filler larger than the socket buffers is written so that the
// replication stream queues in the master, and shoppers buy meanwhile. Their reservations are
// acknowledged (202: the queue has them) but never reach the replica, which is promoted once the
// master is gone: Redis lost them, deterministically. Postgres is the defence: the loss is
// detected, the sale fails closed, is rebuilt from Postgres, and selling resumes; at the end every
// 202 is in Postgres once, nothing is oversold, nobody holds two units, no unit is stranded, and
// `flashsale reconcile` is clean.
// failoverPerItem is the units of each of the two items of the failover's sale.
const failoverPerItem = 100

// failoverRush is the state of TestRedisClusterMasterFailoverDuringARush: the cluster, the sale
// on the master that dies, its replica, the filler key that blocks replication, and what the
// waves of shoppers were answered.
type failoverRush struct {
	t                     *testing.T
	h                     *harness
	c                     *testenv.RedisCluster
	ctx                   context.Context
	s                     saleIDs
	meta, filler          string
	master, replica, heir *testenv.RedisClusterNode
	mu                    sync.Mutex
	outcome, again        map[int64]string // shopper -> final answer ("202 order", "409", "410")
	unavailable           atomic.Int64     // 503s met on the way
	second                []int64          // the second wave, whose writes Redis loses
	seqBefore, seqAtKill  int64
}

// rush has the users buy until answered, 12 at a time, and records their final answers in into.
func (fr *failoverRush) rush(users []int64, into map[int64]string) {
	var wg sync.WaitGroup
	work := make(chan int64)
	for range 12 {
		wg.Go(func() {
			for u := range work {
				res := rcBuyUntilAnswered(fr.h, u, fr.s, &fr.unavailable)
				fr.mu.Lock()
				into[u] = res
				fr.mu.Unlock()
			}
		})
	}
	for _, u := range users {
		work <- u
	}
	close(work)
	wg.Wait()
}

// userRange is n shopper ids from from on.
func userRange(from, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(from + i)
	}
	return out
}

func TestRedisClusterMasterFailoverDuringARush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := testenv.NewRedisCluster(t, 3, 1)
	h := newHarness(t, harnessOpts{redisURL: c.URL()})
	const perItem = failoverPerItem
	s := h.liveSale(perItem, perItem)
	meta := store.MetaKey(s.sale)
	master := c.MustMasterOf(t, meta)
	replicas, err := c.ReplicasOf(ctx, master)
	if err != nil || len(replicas) != 1 {
		t.Fatalf("replicas of %s: %v, %v", master.Addr, replicas, err)
	}
	replica := replicas[0]
	filler := ""
	for i := 0; filler == ""; i++ {
		if k := fmt.Sprintf("filler:%d", i); c.MustMasterOf(t, k) == master {
			filler = k
		}
	}

	outcome := map[int64]string{} // shopper -> final answer ("202 order", "409", "410")
	again := map[int64]string{}   // the second wave's shoppers trying again after the failover
	fr := &failoverRush{t: t, h: h, c: c, ctx: ctx, s: s, meta: meta, master: master, replica: replica, filler: filler,
		outcome: outcome, again: again}

	fr.firstWave()
	fr.secondWaveReplicatedNowhere()
	fr.killTheMasterDuringAThirdWave()
	fr.checkLossCaught()
	fr.checkSoldExactlyOut()

	// The old master comes back as the replica of its successor.
	c.MustRestart(t, master)
	if reps, err := c.ReplicasOf(ctx, fr.heir); err != nil || len(reps) != 1 || reps[0] != master {
		t.Errorf("replicas of %s after the old master's restart: %v, %v", fr.heir.Addr, reps, err)
	}
}

// firstWave: a first wave buys 60 units; the replica catches up.
func (fr *failoverRush) firstWave() {
	t, h, c, ctx, meta, outcome := fr.t, fr.h, fr.c, fr.ctx, fr.meta, fr.outcome
	t.Helper()
	// 1. A first wave buys 60 units; the replica catches up.
	fr.rush(userRange(1, 60), outcome)
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	fr.seqBefore, _ = h.app.Redis.HGet(ctx, meta, "seq").Int64()

}

// secondWaveReplicatedNowhere: the replica stops reading; the filler fills the sockets; a second
// wave buys 40 units, acknowledged by the queue, replicated nowhere.
func (fr *failoverRush) secondWaveReplicatedNowhere() {
	t, h, c, ctx, meta, filler, replica, outcome := fr.t, fr.h, fr.c, fr.ctx, fr.meta, fr.filler, fr.replica, fr.outcome
	t.Helper()
	// 2. The replica stops reading; the filler fills the sockets; a second wave buys 40 units,
	// acknowledged by the queue, replicated nowhere.
	if err := c.Pause(replica); err != nil {
		t.Fatal(err)
	}
	if err := h.app.Redis.Set(ctx, filler, strings.Repeat("x", 24<<20), 0).Err(); err != nil {
		c.Resume(replica)
		t.Fatal(err)
	}
	fr.second = userRange(1001, 40)
	second := fr.second
	fr.rush(second, outcome)
	fr.seqAtKill, _ = h.app.Redis.HGet(ctx, meta, "seq").Int64()

}

// killTheMasterDuringAThirdWave: the master dies; the replica wakes up and is promoted without the
// second wave, while a third wave (more shoppers than units left) and the second wave again rush.
func (fr *failoverRush) killTheMasterDuringAThirdWave() {
	t, h, c, ctx, filler, master, replica, outcome, again, second := fr.t, fr.h, fr.c, fr.ctx, fr.filler, fr.master, fr.replica, fr.outcome, fr.again, fr.second
	t.Helper()
	// 3. The master dies; the replica wakes up and is promoted without the second wave.
	c.MustKill(t, master)
	if err := c.Resume(replica); err != nil {
		t.Fatal(err)
	}
	third := userRange(2001, 150) // more shoppers than the 100 units left
	done := make(chan struct{})
	go func() { // they rush while the cluster fails over and the sale is rebuilt
		defer close(done)
		var wg sync.WaitGroup
		wg.Go(func() { fr.rush(third, outcome) })
		// The second wave's shoppers try again (a new token each): their buyer entries are gone
		// from Redis with the lost writes, and only the rebuild from Postgres brings them back.
		wg.Go(func() { fr.rush(second, again) })
		wg.Wait()
	}()
	fr.heir = c.MustWaitFailover(t, master)
	heir := fr.heir
	if heir != replica {
		t.Fatalf("%s took over the sale's slot, want its replica %s", heir.Addr, replica.Addr)
	}
	if role, err := heir.Do(ctx, "role"); err != nil || fmt.Sprint(role.([]any)[0]) != "master" {
		t.Fatalf("ROLE of the promoted replica %s: %v, %v", heir.Addr, role, err)
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the shoppers of the third wave got no answer within 60 s")
	}
	if n, err := h.app.Redis.StrLen(ctx, filler).Result(); err != nil || n != 0 {
		t.Errorf("the filler on the promoted replica: %d bytes (%v); want none, the write was lost", n, err)
	}
}

// checkLossCaught: the loss was caught: counted by a detector, and the sale rebuilt from Postgres
// (epoch > 1).
func (fr *failoverRush) checkLossCaught() {
	t, h, s, seqBefore, seqAtKill := fr.t, fr.h, fr.s, fr.seqBefore, fr.seqAtKill
	t.Helper()
	// The loss was caught: counted by a detector, and the sale rebuilt from Postgres (epoch > 1).
	detected := map[string]float64{}
	for _, by := range []string{"reserve", "unknown_order", "keeper"} {
		m := &dto.Metric{}
		if err := h.app.Metrics.RedisLoss.WithLabelValues(by).Write(m); err == nil && m.GetCounter().GetValue() > 0 {
			detected[by] = m.GetCounter().GetValue()
		}
	}
	epoch := h.sqlInt(`SELECT redis_epoch FROM sales WHERE id = ?`, s.sale)
	t.Logf("counter %d before the pause, %d at the kill; loss detected by %v; sale epoch %d; %d answers 503 on the way",
		seqBefore, seqAtKill, detected, epoch, fr.unavailable.Load())
	if seqAtKill <= seqBefore {
		t.Fatalf("the second wave reserved nothing (counter %d -> %d): no write could be lost", seqBefore, seqAtKill)
	}
	if len(detected) == 0 || epoch < 2 {
		t.Errorf("the lost writes went unnoticed: detectors %v, epoch %d", detected, epoch)
	}

}

// checkSoldExactlyOut: every shopper got a final answer, no one two units, and the sale sold exactly
// out; a second-wave shopper trying again never gets a second unit, its buyer entry given back by
// the rebuild from Postgres; every 202 is a PENDING order, once.
func (fr *failoverRush) checkSoldExactlyOut() {
	t, h, ctx, s, outcome, again, second := fr.t, fr.h, fr.ctx, fr.s, fr.outcome, fr.again, fr.second
	t.Helper()
	// Every shopper got a final answer, no one two units, and the sale sold exactly out.
	acked := 0
	for u, res := range outcome {
		switch {
		case strings.HasPrefix(res, "202"):
			acked++
		case res == "409" || res == "410":
		default:
			t.Errorf("shopper %d: final answer %s", u, res)
		}
	}
	// A second-wave shopper trying again never gets a second unit: 409 (they hold one), or 410
	// when the third wave had sold the sale out by then (the sold-out refusal comes first). Either
	// way the rebuild from Postgres must have given them back their buyer entry.
	for _, u := range second {
		if res := again[u]; res != "409" && res != "410" {
			t.Errorf("second-wave shopper %d trying again after the failover: %s, want 409 (they hold a unit) or 410", u, res)
		}
		if held, err := h.app.Redis.HGet(ctx, store.BuyersKey(s.sale), strconv.FormatInt(u, 10)).Result(); err != nil || held == "" {
			t.Errorf("second-wave shopper %d is no buyer in Redis after the rebuild (%q, %v): their lost entry was not restored", u, held, err)
		}
	}
	if acked != 2*failoverPerItem {
		t.Errorf("%d shoppers hold a unit, want all %d units sold", acked, 2*failoverPerItem)
	}
	h.checkInvariants(s)
	h.mu.Lock()
	ids := append([]string(nil), h.acked...)
	h.mu.Unlock()
	if n := h.sqlInt(`SELECT count(*) FROM orders WHERE id IN ? AND status = 'PENDING'`, ids); n != int64(len(ids)) || len(ids) != 2*failoverPerItem {
		t.Errorf("%d answers 202, %d of them PENDING orders in Postgres; want %d, each once", len(ids), n, 2*failoverPerItem)
	}

}

// rcBuyUntilAnswered has shopper u buy one unit of the sale (the first item, the second when the
// first is sold out), with a fresh token per attempt, trying again after a 503 (fail closed), until
// a final answer: "202 ORDER", "409" or "410". It gives up after 45 s.
func rcBuyUntilAnswered(h *harness, u int64, s saleIDs, unavailable *atomic.Int64) string {
	bearer := h.token(u, auth.RoleShopper)
	item := 0
	deadline := time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) {
		c := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/captcha", s.sale), bearer, nil)
		if c.Status != http.StatusOK {
			unavailable.Add(1)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		tk := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", s.sale), bearer,
			map[string]string{"captchaId": c.str("captchaId"), "answer": "test"})
		if tk.Status == http.StatusGone && tk.str("error") == string(shop.CodeSoldOut) {
			return "410" // every item sold out: refused at the token step
		}
		if tk.Status != http.StatusOK {
			unavailable.Add(1)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		r := h.buy(bearer, s.items[item], tk.str("purchaseToken"))
		switch {
		case r.Status == http.StatusAccepted:
			return "202 " + r.str("orderId")
		case r.Status == http.StatusConflict && r.str("error") == string(shop.CodeAlreadyPurchased):
			return "409"
		case r.Status == http.StatusGone && item == 0:
			item = 1
		case r.Status == http.StatusGone:
			return "410"
		case r.Status == http.StatusServiceUnavailable:
			unavailable.Add(1)
			time.Sleep(100 * time.Millisecond)
		case r.Status == http.StatusForbidden && r.str("error") == string(shop.CodeInvalidPurchaseToken):
			// a token issued before the rebuild is void: take a new one
		default:
			return fmt.Sprintf("%d %s", r.Status, r.Raw)
		}
	}
	return "no answer in 45 s"
}
