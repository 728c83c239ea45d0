package tests

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/pipeline"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// Unpaid orders expire within a few seconds of their deadline, with three instances' jobs
// running at once, and each unit goes back exactly once. The payment window is the sale's own,
// counted from when the order was written.
func TestExpiryReturnsEachUnitOnceWithThreeInstances(t *testing.T) {
	t.Parallel()
	a := newHarness(t, harnessOpts{noWriter: true})
	b := newHarness(t, harnessOpts{shared: a, noWriter: true})
	c := newHarness(t, harnessOpts{shared: a, noWriter: true})
	s := a.createSaleWith(map[string]any{"paymentWindowSeconds": 2}, time.Now().Add(-time.Second), 40)
	if r := a.do("GET", fmt.Sprintf("/api/flash-sales/%d", s.sale), "", nil); r.Body["paymentWindowSeconds"] != float64(2) || r.str("purchaseLimit") != "per-sale" {
		t.Errorf("sale answer: %s, want paymentWindowSeconds 2 and purchaseLimit per-sale", r.Raw)
	}
	orders := a.buyN(s, s.items[0], 1000, 30)
	if len(orders) != 30 {
		t.Fatalf("accepted %d of 30", len(orders))
	}
	// The writer starts late: the window must count from the write, not the reservation.
	time.Sleep(2500 * time.Millisecond)
	a.app.Start(context.Background(), true, false)
	a.drain(s)
	writtenAt := time.Now()
	user, id := anyOrder(orders)
	o := a.do("GET", "/api/flash-sales/orders/"+id, a.token(user, auth.RoleShopper), nil)
	if o.str("status") != "PENDING" {
		t.Fatalf("order after a writer backlog longer than the window: %s, want PENDING (window counts from the write)", o.Raw)
	}
	deadline := time.Now().Add(15 * time.Second)
	testenv.Eventually(t, 15*time.Second, "every order expired after its deadline", func() error {
		if n := a.sqlInt(`SELECT count(*) FROM orders WHERE item_id = ? AND status = 'EXPIRED'`, s.items[0]); n != 30 {
			return fmt.Errorf("%d of 30 expired", n)
		}
		return nil
	})
	if took := time.Since(writtenAt); took > 8*time.Second {
		t.Errorf("expiry took %s after the orders were written with a 2 s window", took)
	}
	testenv.Eventually(t, time.Until(deadline), "every return applied", noReturnsPending(a))
	time.Sleep(time.Second) // more passes of all three keepers must not return any unit again
	checkExpiredOnce(t, s, orders, a, b, c)
}

// checkExpiredOnce checks, on all three instances, that each unit of the expired orders went
// back once, that an expired order cannot be paid and that its shopper may buy again.
func checkExpiredOnce(t *testing.T, s saleIDs, orders map[int64]string, a, b, c *harness) {
	t.Helper()
	user, id := anyOrder(orders)
	if got := a.redisStock(s, s.items[0]); got != 40 {
		t.Errorf("redis stock after expiry = %d, want 40 (every unit back exactly once)", got)
	}
	if got := a.sqlInt(`SELECT sold FROM items WHERE id = ?`, s.items[0]); got != 0 {
		t.Errorf("sold after expiry = %d, want 0", got)
	}
	o := b.do("GET", "/api/flash-sales/orders/"+id, b.token(user, auth.RoleShopper), nil)
	if o.str("status") != "EXPIRED" {
		t.Errorf("order after its deadline: %s, want EXPIRED", o.Raw)
	}
	if p := c.do("POST", "/api/flash-sales/orders/"+id+"/pay", c.token(user, auth.RoleShopper), nil); p.Status != http.StatusConflict || p.str("error") != "EXPIRED" {
		t.Errorf("pay an expired order: %d %s, want 409 EXPIRED", p.Status, p.Raw)
	}
	// The expired shopper may buy again: the unit and the shopper are free.
	tok := a.token(user, auth.RoleShopper)
	if r := c.buy(tok, s.items[0], c.purchaseToken(tok, s.sale)); r.Status != http.StatusAccepted {
		t.Errorf("the expired shopper buys again: %d %s, want 202", r.Status, r.Raw)
	}
	a.mu.Lock()
	a.acked = append(a.acked, c.acked...)
	a.mu.Unlock()
	a.checkInvariants(s)
}

// anyOrder is one of the orders buyN made: its shopper and its id.
func anyOrder(orders map[int64]string) (user int64, id string) {
	for user, id = range orders {
		break
	}
	return user, id
}

// noReturnsPending is the condition that no stock return is left to apply.
func noReturnsPending(h *harness) func() error {
	return func() error {
		if n := h.sqlInt(`SELECT count(*) FROM stock_returns`); n != 0 {
			return fmt.Errorf("%d returns still pending", n)
		}
		return nil
	}
}

// Payment and expiry racing on 500 orders: each order ends PAID or EXPIRED, exactly one of them,
// and what the shopper was answered is what the order is.
func TestPayVersusExpireRace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{env: map[string]string{"FLASHSALE_KEEPER_INTERVAL": "50ms"}})
	const n = 500
	s := h.createSaleWith(map[string]any{"paymentWindowSeconds": 2}, time.Now().Add(-time.Second), n)
	orders := h.buyN(s, s.items[0], 20000, n)
	if len(orders) != n {
		t.Fatalf("accepted %d of %d", len(orders), n)
	}
	h.drain(s)
	answers := payAroundTheDeadline(t, h, orders)
	deadline := time.Now().Add(10 * time.Second)
	testenv.Eventually(t, 10*time.Second, "no order PENDING after its deadline", func() error {
		if n := h.sqlInt(`SELECT count(*) FROM orders WHERE status = 'PENDING' AND item_id = ?`, s.items[0]); n > 0 {
			return fmt.Errorf("%d orders still PENDING", n)
		}
		return nil
	})
	paid, expired := 0, 0
	for id, a := range answers {
		var status string
		h.sql().Raw(`SELECT status FROM orders WHERE id = ?`, id).Scan(&status)
		switch {
		case a.status == http.StatusOK && status == "PAID":
			paid++
		case a.status == http.StatusConflict && a.code == "EXPIRED" && status == "EXPIRED":
			expired++
		default:
			t.Errorf("order %s: answered %d %s, but it is %s", id, a.status, a.code, status)
		}
	}
	if paid == 0 || expired == 0 {
		t.Errorf("paid %d, expired %d: the race was not exercised on both sides", paid, expired)
	}
	// the stock check below says it if the returns are not all applied by the deadline
	_ = testenv.Poll(time.Until(deadline), testenv.PollInterval, noReturnsPending(h))
	if got := h.redisStock(s, s.items[0]); got != int64(expired) {
		t.Errorf("redis stock = %d, want %d (one unit back per expired order)", got, expired)
	}
	t.Logf("paid %d, expired %d", paid, expired)
	h.checkInvariants(s)
}

// payAnswer is what a payment was answered: the status and the error code.
type payAnswer struct {
	status int
	code   string
}

// payAroundTheDeadline pays each order somewhere in the 400 ms around its deadline, 64 at a
// time, and returns each order's answer.
func payAroundTheDeadline(t *testing.T, h *harness, orders map[int64]string) map[string]payAnswer {
	answers := map[string]payAnswer{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for user, id := range orders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var payBy time.Time
			err := h.sql().Raw(`SELECT pay_by FROM orders WHERE id = ?`, id).Scan(&payBy).Error
			if err != nil {
				t.Error(err)
				return
			}
			// Pay somewhere in the 400 ms around the deadline, while the keeper expires.
			at := payBy.Add(time.Duration(int64(user)%400-200) * time.Millisecond)
			time.Sleep(time.Until(at))
			sem <- struct{}{}
			p := h.do("POST", "/api/flash-sales/orders/"+id+"/pay", h.token(user, auth.RoleShopper), nil)
			<-sem
			mu.Lock()
			answers[id] = payAnswer{p.Status, p.str("error")}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return answers
}

// Cancel: a PENDING order of its shopper becomes CANCELLED and its unit goes back once; any other
// state answers 409 NOT_CANCELLABLE naming it.
func TestCancelOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noWriter: true})
	s := h.liveSale(5)
	alice, bob := h.token(1, auth.RoleShopper), h.token(2, auth.RoleShopper)
	r := h.buy(alice, s.items[0], h.purchaseToken(alice, s.sale))
	id := r.str("orderId")
	if c := h.do("POST", "/api/flash-sales/orders/"+id+"/cancel", alice, nil); c.Status != http.StatusConflict || c.str("error") != "NOT_CANCELLABLE" || !strings.Contains(c.str("message"), "QUEUED") {
		t.Errorf("cancel while queued: %d %s, want 409 NOT_CANCELLABLE naming QUEUED", c.Status, c.Raw)
	}
	h.app.Start(context.Background(), true, false)
	h.drain(s)
	if c := h.do("POST", "/api/flash-sales/orders/"+id+"/cancel", bob, nil); c.Status != http.StatusNotFound {
		t.Errorf("another shopper cancels: %d %s, want 404", c.Status, c.Raw)
	}
	c := h.do("POST", "/api/flash-sales/orders/"+id+"/cancel", alice, nil)
	if c.Status != http.StatusOK || c.str("status") != "CANCELLED" {
		t.Fatalf("cancel: %d %s, want 200 CANCELLED", c.Status, c.Raw)
	}
	if got := h.redisStock(s, s.items[0]); got != 5 {
		t.Errorf("redis stock after cancel = %d, want 5", got)
	}
	if c := h.do("POST", "/api/flash-sales/orders/"+id+"/cancel", alice, nil); c.Status != http.StatusConflict || !strings.Contains(c.str("message"), "CANCELLED") {
		t.Errorf("cancel twice: %d %s, want 409 NOT_CANCELLABLE naming CANCELLED", c.Status, c.Raw)
	}
	if got := h.redisStock(s, s.items[0]); got != 5 {
		t.Errorf("redis stock after a second cancel = %d, want 5 (the unit returns once)", got)
	}
	if p := h.do("POST", "/api/flash-sales/orders/"+id+"/pay", alice, nil); p.Status != http.StatusConflict || p.str("error") != "NOT_PAYABLE" {
		t.Errorf("pay a cancelled order: %d %s, want 409 NOT_PAYABLE", p.Status, p.Raw)
	}
	// A paid order cannot be cancelled.
	r = h.buy(bob, s.items[0], h.purchaseToken(bob, s.sale))
	h.drain(s)
	h.do("POST", "/api/flash-sales/orders/"+r.str("orderId")+"/pay", bob, nil)
	if c := h.do("POST", "/api/flash-sales/orders/"+r.str("orderId")+"/cancel", bob, nil); c.Status != http.StatusConflict || c.str("error") != "NOT_CANCELLABLE" || !strings.Contains(c.str("message"), "PAID") {
		t.Errorf("cancel a paid order: %d %s, want 409 NOT_CANCELLABLE naming PAID", c.Status, c.Raw)
	}
	// The cancelled shopper can buy again.
	if r := h.buy(alice, s.items[0], h.purchaseToken(alice, s.sale)); r.Status != http.StatusAccepted {
		t.Errorf("buy again after cancelling: %d %s", r.Status, r.Raw)
	}
	h.checkInvariants(s)
}

// A unit return that Redis acknowledged and then lost (its last second of writes gone) is applied
// again: the row is deleted only once a later pass finds the tombstone still there.
func TestReturnLostByRedisIsAppliedAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.liveSale(5)
	alice := h.token(1, auth.RoleShopper)
	r := h.buy(alice, s.items[0], h.purchaseToken(alice, s.sale))
	h.drain(s)
	id := r.str("orderId")
	if c := h.do("POST", "/api/flash-sales/orders/"+id+"/cancel", alice, nil); c.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", c.Status, c.Raw)
	}
	ctx := context.Background()
	// Redis loses the return's writes at once: the tombstone, the unit and the freed buyer.
	h.app.Redis.SRem(ctx, store.GoneKey(s.sale), id)
	h.app.Redis.Decr(ctx, store.StockKey(s.sale, s.items[0]))
	h.app.Redis.HSet(ctx, store.BuyersKey(s.sale), "1", id)
	if got := h.sqlInt(`SELECT count(*) FROM stock_returns`); got != 1 {
		t.Fatalf("return rows right after the cancel = %d, want 1 (kept until Redis has surely synced it)", got)
	}
	testenv.Eventually(t, 15*time.Second, "the lost return applied again", func() error {
		if stock, rows := h.redisStock(s, s.items[0]), h.sqlInt(`SELECT count(*) FROM stock_returns`); rows != 0 || stock != 5 {
			return fmt.Errorf("stock %d, rows %d", stock, rows)
		}
		return nil
	})
	time.Sleep(time.Second) // more passes: never twice
	if got := h.redisStock(s, s.items[0]); got != 5 {
		t.Errorf("redis stock = %d, want 5", got)
	}
	if ok, _ := h.app.Redis.HExists(ctx, store.BuyersKey(s.sale), "1").Result(); ok {
		t.Error("the shopper of the cancelled order is still a buyer")
	}
	h.checkInvariants(s)
}

// A return on a sale Redis lost waits for the rebuild, which counts it: never applied on top of
// the rebuilt count.
func TestReturnWaitsForTheRebuild(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.liveSale(5)
	alice := h.token(1, auth.RoleShopper)
	r := h.buy(alice, s.items[0], h.purchaseToken(alice, s.sale))
	h.drain(s)
	ctx := context.Background()
	if _, err := h.app.Stock.MarkLost(ctx, s.sale, 0, ""); err != nil {
		t.Fatal(err)
	}
	if c := h.do("POST", "/api/flash-sales/orders/"+r.str("orderId")+"/cancel", alice, nil); c.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", c.Status, c.Raw)
	}
	testenv.Eventually(t, 15*time.Second, "rebuilt, and the return settled", func() error {
		st, err := h.app.Stock.State(ctx, s.sale)
		if err == nil && st.Loaded && !st.Lost && h.sqlInt(`SELECT count(*) FROM stock_returns`) == 0 {
			return nil
		}
		return fmt.Errorf("state %+v %v", st, err)
	})
	if got := h.redisStock(s, s.items[0]); got != 5 {
		t.Errorf("redis stock after the rebuild = %d, want 5 (the unit counted once)", got)
	}
	h.checkInvariants(s)
}

// An order written but not yet settled in Redis (the writer between its commit and its settle)
// is paid and cancelled by what Postgres holds, and the answers say so.
func TestPayAnOrderWrittenButNotSettled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noWriter: true})
	s := h.liveSale(5)
	alice := h.token(1, auth.RoleShopper)
	r := h.buy(alice, s.items[0], h.purchaseToken(alice, s.sale))
	id := r.str("orderId")
	committed, release := make(chan struct{}), make(chan struct{})
	w := pipeline.NewWriter(pipeline.WriterConfig{Batch: 100}, h.app.Queue, h.app.DB, h.app.Stock, h.app.SoldOut, nil, h.app.Log)
	var once sync.Once
	w.AfterCommit = func() error {
		once.Do(func() { close(committed); <-release })
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.Run(ctx)
	<-committed
	p := h.do("POST", "/api/flash-sales/orders/"+id+"/pay", alice, nil)
	close(release)
	if p.Status != http.StatusOK || p.str("status") != "PAID" {
		t.Errorf("pay while the writer has committed but not settled: %d %s, want 200 PAID", p.Status, p.Raw)
	}
	h.drain(s)
	if o := h.do("GET", "/api/flash-sales/orders/"+id, alice, nil); o.str("status") != "PAID" {
		t.Errorf("order after: %s, want PAID", o.Raw)
	}
	cancel()
	h.checkInvariants(s)
}
