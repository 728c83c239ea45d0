package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/pipeline"
	"github.com/flashsale/flashsale/services/purchase"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// buyN has n distinct shoppers (ids from base) each buy one unit of item and returns the order
// ids answered 202, by shopper.
func (h *harness) buyN(s saleIDs, item int64, base int64, n int) map[int64]string {
	h.t.Helper()
	out := map[int64]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := base + int64(i)
			tok := h.token(user, auth.RoleShopper)
			r := h.buy(tok, item, h.purchaseToken(tok, s.sale))
			if r.Status == http.StatusAccepted {
				mu.Lock()
				out[user] = r.str("orderId")
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

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
	var user int64
	var id string
	for user, id = range orders {
		break
	}
	o := a.do("GET", "/api/flash-sales/orders/"+id, a.token(user, auth.RoleShopper), nil)
	if o.str("status") != "PENDING" {
		t.Fatalf("order after a writer backlog longer than the window: %s, want PENDING (window counts from the write)", o.Raw)
	}
	deadline := time.Now().Add(15 * time.Second)
	for a.sqlInt(`SELECT count(*) FROM orders WHERE item_id = ? AND status = 'EXPIRED'`, s.items[0]) != 30 {
		if time.Now().After(deadline) {
			t.Fatalf("orders not all expired 15 s after their deadline")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if took := time.Since(writtenAt); took > 8*time.Second {
		t.Errorf("expiry took %s after the orders were written with a 2 s window", took)
	}
	for a.sqlInt(`SELECT count(*) FROM stock_returns`) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("returns still pending")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // more passes of all three keepers must not return any unit again
	if got := a.redisStock(s, s.items[0]); got != 40 {
		t.Errorf("redis stock after expiry = %d, want 40 (every unit back exactly once)", got)
	}
	if got := a.sqlInt(`SELECT sold FROM items WHERE id = ?`, s.items[0]); got != 0 {
		t.Errorf("sold after expiry = %d, want 0", got)
	}
	o = b.do("GET", "/api/flash-sales/orders/"+id, b.token(user, auth.RoleShopper), nil)
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
	type answer struct {
		status int
		code   string
	}
	answers := map[string]answer{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for user, id := range orders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var payBy time.Time
			err := h.app.DB.Gorm().Raw(`SELECT pay_by FROM orders WHERE id = ?`, id).Scan(&payBy).Error
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
			answers[id] = answer{p.Status, p.str("error")}
			mu.Unlock()
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for h.sqlInt(`SELECT count(*) FROM orders WHERE status = 'PENDING' AND item_id = ?`, s.items[0]) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("orders still PENDING 10 s after their deadline")
		}
		time.Sleep(50 * time.Millisecond)
	}
	paid, expired := 0, 0
	for id, a := range answers {
		var status string
		h.app.DB.Gorm().Raw(`SELECT status FROM orders WHERE id = ?`, id).Scan(&status)
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
	for h.sqlInt(`SELECT count(*) FROM stock_returns`) != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := h.redisStock(s, s.items[0]); got != int64(expired) {
		t.Errorf("redis stock = %d, want %d (one unit back per expired order)", got, expired)
	}
	t.Logf("paid %d, expired %d", paid, expired)
	h.checkInvariants(s)
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

// "My orders" lists the caller's orders newest first, paged; a 409 ALREADY_PURCHASED names the
// order the shopper holds, so a lost answer never loses the order.
func TestMyOrdersAndAlreadyPurchased(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	qs := make([]int, 25)
	for i := range qs {
		qs[i] = 3
	}
	s := h.createSaleWith(map[string]any{"purchaseLimit": "per-item"}, time.Now().Add(-time.Second), qs...)
	alice := h.token(7, auth.RoleShopper)
	var ids []string
	for _, it := range s.items {
		r := h.buy(alice, it, h.purchaseToken(alice, s.sale))
		if r.Status != http.StatusAccepted {
			t.Fatalf("buy item %d: %d %s", it, r.Status, r.Raw)
		}
		ids = append(ids, r.str("orderId"))
		time.Sleep(2 * time.Millisecond)
	}
	h.drain(s)
	r := h.buy(alice, s.items[3], h.purchaseToken(alice, s.sale))
	if r.Status != http.StatusConflict || r.str("error") != "ALREADY_PURCHASED" || r.str("orderId") != ids[3] {
		t.Errorf("buy a held item again: %d %s, want 409 ALREADY_PURCHASED with orderId %s", r.Status, r.Raw, ids[3])
	}
	var got []string
	cursor := ""
	pages := 0
	for {
		path := "/api/flash-sales/orders"
		if cursor != "" {
			path += "?cursor=" + cursor
		}
		p := h.do("GET", path, alice, nil)
		if p.Status != http.StatusOK {
			t.Fatalf("my orders: %d %s", p.Status, p.Raw)
		}
		pages++
		for _, o := range p.Body["orders"].([]any) {
			m := o.(map[string]any)
			got = append(got, m["orderId"].(string))
			if m["status"] != "PENDING" || m["itemName"] == "" || m["saleId"] != strconv.FormatInt(s.sale, 10) || m["currency"] != "CNY" || m["payBy"] == nil {
				t.Errorf("order entry %v lacks status, item, sale, currency or payBy", m)
			}
		}
		cursor = p.str("next")
		if cursor == "" {
			break
		}
	}
	if pages != 2 || len(got) != 25 {
		t.Errorf("my orders: %d orders on %d pages, want 25 on 2", len(got), pages)
	}
	for i := range got {
		if want := ids[len(ids)-1-i]; i < len(got) && got[i] != want {
			t.Errorf("my orders[%d] = %s, want %s (newest first)", i, got[i], want)
			break
		}
	}
	if p := h.do("GET", "/api/flash-sales/orders", h.token(8, auth.RoleShopper), nil); p.Status != http.StatusOK || len(p.Body["orders"].([]any)) != 0 {
		t.Errorf("another shopper's list: %s, want empty", p.Raw)
	}
	if p := h.do("GET", "/api/flash-sales/orders?cursor=bogus", alice, nil); p.Status != http.StatusBadRequest || p.str("error") != "INVALID_INPUT" {
		t.Errorf("bad cursor: %d %s, want 400 INVALID_INPUT", p.Status, p.Raw)
	}
	h.checkInvariants(s)
}

// A purchase token is one attempt in its sale, whatever item it is sent to; one unit per shopper
// in the sale is the default rule, enforced in Redis and, as the last line, in Postgres.
func TestOneTokenOneAttemptAndPerSaleLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	perItem := h.createSaleWith(map[string]any{"purchaseLimit": "per-item"}, time.Now().Add(-time.Second), 5, 5)
	alice := h.token(1, auth.RoleShopper)
	pt := h.purchaseToken(alice, perItem.sale)
	if r := h.buy(alice, perItem.items[0], pt); r.Status != http.StatusAccepted {
		t.Fatalf("first use: %d %s", r.Status, r.Raw)
	}
	if r := h.buy(alice, perItem.items[1], pt); r.Status != http.StatusForbidden || r.str("error") != "INVALID_PURCHASE_TOKEN" {
		t.Errorf("the used token on another item of the sale: %d %s, want 403 INVALID_PURCHASE_TOKEN", r.Status, r.Raw)
	}
	if r := h.buy(alice, perItem.items[1], h.purchaseToken(alice, perItem.sale)); r.Status != http.StatusAccepted {
		t.Errorf("per-item limit, second item with a new token: %d %s, want 202", r.Status, r.Raw)
	}

	perSale := h.liveSale(5, 5) // the default: one unit per shopper in the whole sale
	first := h.buy(alice, perSale.items[0], h.purchaseToken(alice, perSale.sale))
	if first.Status != http.StatusAccepted {
		t.Fatalf("per-sale first: %d %s", first.Status, first.Raw)
	}
	r := h.buy(alice, perSale.items[1], h.purchaseToken(alice, perSale.sale))
	if r.Status != http.StatusConflict || r.str("error") != "ALREADY_PURCHASED" || r.str("orderId") != first.str("orderId") {
		t.Errorf("per-sale limit, another item: %d %s, want 409 ALREADY_PURCHASED naming %s", r.Status, r.Raw, first.str("orderId"))
	}
	h.drain(perSale)
	// Postgres is the last line: with Redis's buyer entry gone (as after a loss), the second
	// order reaches the writer and the per-sale unique index refuses it.
	h.app.Redis.HDel(context.Background(), store.BuyersKey(perSale.sale), "1")
	second := h.buy(alice, perSale.items[1], h.purchaseToken(alice, perSale.sale))
	if second.Status != http.StatusAccepted {
		t.Fatalf("with the buyer entry removed: %d %s", second.Status, second.Raw)
	}
	h.drain(perSale)
	var status, failure string
	h.app.DB.Gorm().Raw(`SELECT status, coalesce(failure, '') FROM orders WHERE id = ?`, second.str("orderId")).Row().Scan(&status, &failure)
	if status != "FAILED" || !strings.Contains(failure, "already holds") {
		t.Errorf("second order of the sale: %s %q, want FAILED (already holds a live order)", status, failure)
	}
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE sale_id = ? AND user_id = 1 AND status IN ('PENDING','PAID')`, perSale.sale); got != 1 {
		t.Errorf("live orders of the shopper in the per-sale sale = %d, want 1", got)
	}
	// Redis's buyer entry names the order the shopper really holds, not the refused one.
	if r := h.buy(alice, perSale.items[1], h.purchaseToken(alice, perSale.sale)); r.Status != http.StatusConflict || r.str("orderId") != first.str("orderId") {
		t.Errorf("buy again after the refused duplicate: %d %s, want 409 naming the live order %s", r.Status, r.Raw, first.str("orderId"))
	}
	h.mu.Lock()
	h.acked = []string{first.str("orderId"), second.str("orderId")}
	h.mu.Unlock()
	h.checkInvariants(perSale)
}

// lossyProxy forwards a Redis connection and, once armed, swallows the next reply of the reserve
// script (an array of four starting with an integer): the reply is lost on the way back, as on a
// network timeout, after Redis ran the script.
type lossyProxy struct {
	ln      net.Listener
	target  string
	armed   atomic.Bool
	dropped atomic.Int64
}

func newLossyProxy(t *testing.T, target string) *lossyProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lossyProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *lossyProxy) serve(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	go func() { _, _ = io.Copy(s, c); s.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if bytes.HasPrefix(buf[:n], []byte("*4\r\n:")) && p.armed.CompareAndSwap(true, false) {
				p.dropped.Add(1)
				continue // lost: the client times out and retries on a new connection
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A reserve whose reply is lost is retried by the Redis client; the retry is the same attempt and
// gets the same answer, so the shopper gets the order and no unit is stranded.
func TestReserveReplyLost(t *testing.T) {
	t.Parallel()
	rs := testenv.Redis(t)
	proxy := newLossyProxy(t, rs.Addr)
	h := newHarness(t, harnessOpts{redisURL: "redis://" + proxy.ln.Addr().String() + "/0"})
	h.redis = rs
	s := h.liveSale(3)
	alice := h.token(1, auth.RoleShopper)
	pt := h.purchaseToken(alice, s.sale)
	proxy.armed.Store(true)
	r := h.buy(alice, s.items[0], pt)
	if proxy.dropped.Load() != 1 {
		t.Fatalf("the proxy dropped %d replies, want 1", proxy.dropped.Load())
	}
	if r.Status != http.StatusAccepted {
		t.Fatalf("purchase whose first reply was lost: %d %s, want 202 (the retry gets the same answer)", r.Status, r.Raw)
	}
	h.drain(s)
	if got := h.redisStock(s, s.items[0]); got != 2 {
		t.Errorf("redis stock = %d, want 2 (one unit taken, none stranded)", got)
	}
	h.checkInvariants(s)
}

// A Redis restarted from an append-only file that lost its last writes (an OS crash with
// appendfsync everysec, or a promoted replica) still has the keys but not the latest
// reservations: the loss is detected, the sale fails closed, is rebuilt from Postgres after the
// queue drains, and resumes. Every 202 ends in Postgres and no unit is sold twice.
func TestRedisPartialLoss(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	const units = 100
	s := h.liveSale(units)
	before := h.buyN(s, s.items[0], 1000, 30)
	h.drain(s)
	snapshot := h.redis.CopyData(t) // what survives the crash
	lost := h.buyN(s, s.items[0], 2000, 30)
	h.drain(s)
	if len(before) != 30 || len(lost) != 30 {
		t.Fatalf("accepted %d and %d, want 30 and 30", len(before), len(lost))
	}
	// A token used in the lost second (its use mark is lost with it), kept to replay.
	replayer := h.token(2000, auth.RoleShopper)
	replayTok := h.purchaseToken(replayer, s.sale)
	if r := h.buy(replayer, s.items[0], replayTok); r.Status != http.StatusConflict {
		t.Fatalf("setup: %d %s", r.Status, r.Raw)
	}
	h.redis.Restore(t, snapshot)
	// The first purchase after the restart finds the loss (this instance saw a higher counter),
	// unless the keeper found it first (Redis's counter behind Postgres's) and rebuilt the sale,
	// voiding the tokens issued before: 503 or 403, never a second unit for this shopper.
	if r := h.buy(replayer, s.items[0], replayTok); r.Status != http.StatusServiceUnavailable && r.Status != http.StatusForbidden {
		t.Errorf("first purchase after the restart: %d %s, want 503 (loss detected, fail closed) or 403 (already rebuilt)", r.Status, r.Raw)
	}
	deadline0 := time.Now().Add(10 * time.Second)
	for {
		st, err := h.app.Stock.State(context.Background(), s.sale)
		if err == nil && st.Loaded && !st.Lost && st.Epoch > 1 {
			break
		}
		if time.Now().After(deadline0) {
			t.Fatalf("the sale was not rebuilt after the loss: %+v %v", st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := h.buy(replayer, s.items[0], replayTok); r.Status != http.StatusForbidden {
		t.Errorf("a token issued before the rebuild, replayed after it: %d %s, want 403", r.Status, r.Raw)
	}

	// The rush goes on right after the restart: 120 new shoppers and the 30 whose orders Redis
	// forgot try (again); the first answers are 503 until the rebuild, then selling resumes.
	codes := map[string]int{}
	forgotten := map[string]int{} // answers to the shoppers whose orders Redis forgot
	var mu sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(20 * time.Second)
	for i := range 150 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user := int64(3000 + i)
			if i >= 120 {
				user = int64(2000 + i - 120) // a shopper Redis forgot
			}
			tok := h.token(user, auth.RoleShopper)
			for time.Now().Before(deadline) {
				c := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/captcha", s.sale), tok, nil)
				pt := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", s.sale), tok, map[string]string{"captchaId": c.str("captchaId"), "answer": "test"})
				if pt.Status != http.StatusOK {
					mu.Lock()
					codes[fmt.Sprintf("token %d %s", pt.Status, pt.str("error"))]++
					mu.Unlock()
					if pt.Status == http.StatusGone {
						return
					}
					time.Sleep(100 * time.Millisecond)
					continue
				}
				r := h.buy(tok, s.items[0], pt.str("purchaseToken"))
				mu.Lock()
				codes[fmt.Sprintf("%d %s", r.Status, r.str("error"))]++
				if i >= 120 && r.Status != http.StatusServiceUnavailable {
					forgotten[fmt.Sprintf("%d %s", r.Status, r.str("error"))]++
				}
				mu.Unlock()
				if r.Status != http.StatusServiceUnavailable {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	t.Logf("answers after the restart: %v", codes)
	if forgotten["202 "] != 0 || forgotten["409 ALREADY_PURCHASED"] == 0 {
		t.Errorf("the shoppers whose orders Redis forgot were answered %v: want no 202 (buyers rebuilt from Postgres) and some 409", forgotten)
	}
	if codes["202 "] != units-60 {
		t.Errorf("202 answers after the restart = %d, want %d (the units Postgres had left)", codes["202 "], units-60)
	}
	h.drain(s)
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE item_id = ? AND status IN ('PENDING','PAID')`, s.items[0]); got != units {
		t.Errorf("live orders = %d, want %d (sold out exactly)", got, units)
	}
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE item_id = ? AND status = 'FAILED'`, s.items[0]); got != 0 {
		t.Errorf("FAILED orders = %d, want 0 (no 202 turned into a refusal)", got)
	}
	h.checkInvariants(s)
}

// Two instances on one Redis with their own embedded NATS would be two queues: the second refuses
// to start and says what to do; once the first has stopped, it starts.
func TestSecondEmbeddedNATSRefused(t *testing.T) {
	t.Parallel()
	a := newHarness(t, harnessOpts{})
	env := mergeEnv(a.env, map[string]string{
		"FLASHSALE_DATA_DIR":  t.TempDir(),
		"FLASHSALE_NATS_PORT": strconv.Itoa(testenv.FreePort(t)),
	})
	cfg, err := app.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	_, err = app.New(context.Background(), cfg, log)
	if !errors.Is(err, store.ErrEmbeddedNATSLive) || !strings.Contains(err.Error(), "FLASHSALE_NATS_URL") {
		t.Fatalf("second embedded NATS on the same Redis: %v, want a refusal naming FLASHSALE_NATS_URL", err)
	}
	a.srv.Close()
	a.app.Close() // drops the registration
	b, err := app.New(context.Background(), cfg, log)
	if err != nil {
		t.Fatalf("embedded NATS after the first instance stopped: %v", err)
	}
	b.Close()
}

// A message the writer can never write goes to the dead-letter stream, is counted, and the
// backlog returns to zero; the sale goes on.
func TestPoisonMessageDeadLettered(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.liveSale(5)
	ctx := context.Background()
	deadBefore, _ := h.app.Queue.DeadCount(ctx)
	// A well-formed envelope Postgres can never take (a reservation time out of its range) next
	// to one that is not JSON at all.
	poison, _ := json.Marshal(store.Envelope{Orders: []store.QueuedOrder{{
		OrderID: purchase.NewOrderID(s.items[0], time.Now()), SaleID: s.sale, ItemID: s.items[0], UserID: 99, Seq: 1,
		ReservedAt: 1 << 62}}})
	if err := h.app.Queue.PublishRaw(ctx, "poison-1", poison); err != nil {
		t.Fatal(err)
	}
	if err := h.app.Queue.PublishRaw(ctx, "poison-2", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	alice := h.token(1, auth.RoleShopper)
	if r := h.buy(alice, s.items[0], h.purchaseToken(alice, s.sale)); r.Status != http.StatusAccepted {
		t.Fatalf("buy beside the poison: %d %s", r.Status, r.Raw)
	}
	h.drain(s) // the backlog returns to zero
	dead, err := h.app.Queue.DeadCount(ctx)
	if err != nil || dead-deadBefore != 2 {
		t.Errorf("dead letters = %d (%v), want 2 more", dead-deadBefore, err)
	}
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE status = 'PENDING'`); got != 1 {
		t.Errorf("PENDING orders = %d, want 1 (the real one)", got)
	}
	h.checkInvariants(s)
}

// Writer workers writing batches that touch the same items in different orders, while orders
// expire, never deadlock: every transaction locks items in id order.
func TestWriterNoDeadlocks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noWriter: true, env: map[string]string{"FLASHSALE_WRITER_WORKERS": "8", "FLASHSALE_WRITER_BATCH": "4"}})
	s := h.createSaleWith(map[string]any{"purchaseLimit": "per-item", "paymentWindowSeconds": 1}, time.Now().Add(-time.Second), 400, 400, 400, 400, 400)
	var wg sync.WaitGroup
	for i := range 600 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := h.token(int64(5000+i), auth.RoleShopper)
			// each shopper buys three items, in an order of its own
			for k := range 3 {
				it := s.items[(i+k*(1+i%4))%len(s.items)]
				h.buy(tok, it, h.purchaseToken(tok, s.sale))
			}
		}()
	}
	wg.Wait()
	var before int64
	h.app.DB.Gorm().Raw(`SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&before)
	h.app.Start(context.Background(), true, false)
	h.drain(s)
	time.Sleep(1500 * time.Millisecond) // the expiry of the first written overlaps the last writes
	var after int64
	h.app.DB.Gorm().Raw(`SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&after)
	if after != before {
		t.Errorf("deadlocks in Postgres during the writes and expiries: %d", after-before)
	}
	var m dto.Metric
	if err := h.app.Metrics.WriterRetries.WithLabelValues("40P01").Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetCounter().GetValue(); n != 0 {
		t.Errorf("writer batches retried after a deadlock: %v", n)
	}
	h.checkInvariants(s)
}

// The start second is Redis's: an instance whose clock runs ahead cannot sell before it.
func TestStartSecondOnRedisClock(t *testing.T) {
	t.Parallel()
	fast := newHarness(t, harnessOpts{skew: 10 * time.Second})
	start := time.Now().Add(4 * time.Second).Truncate(time.Second)
	s := fast.createSale(start, 5)
	alice := fast.token(1, auth.RoleShopper)
	pt := fast.purchaseToken(alice, s.sale) // the fast instance believes the sale has started
	r := fast.buy(alice, s.items[0], pt)
	if r.Status != http.StatusTooEarly || r.str("error") != "NOT_STARTED" {
		t.Errorf("purchase before the start on a fast instance: %d %s, want 425 NOT_STARTED", r.Status, r.Raw)
	}
	time.Sleep(time.Until(start.Add(300 * time.Millisecond)))
	if r := fast.buy(alice, s.items[0], fast.purchaseToken(alice, s.sale)); r.Status != http.StatusAccepted {
		t.Errorf("purchase after the start: %d %s, want 202", r.Status, r.Raw)
	}
	fast.checkInvariants(s)
}

// `flashsale reconcile` exits 0 on a sale whose stores agree and 1 on a planted mismatch, which
// the reconciliation job (under its lease) then repairs from Postgres once it persists.
func TestReconcileCommandAndRepair(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{env: map[string]string{"FLASHSALE_RECONCILE_INTERVAL": "200ms"}})
	s := h.liveSale(10)
	h.buyN(s, s.items[0], 100, 4)
	h.drain(s)
	out, err := h.reconcile(s.sale)
	if err != nil || !strings.Contains(out, "every invariant holds") {
		t.Fatalf("reconcile on a healthy sale: %v\n%s", err, out)
	}
	// Plant a mismatch: a unit too many in Redis.
	h.app.Redis.IncrBy(context.Background(), store.StockKey(s.sale, s.items[0]), 1)
	out, err = h.reconcile(s.sale)
	if !errors.Is(err, app.ErrViolations) || !strings.Contains(out, "VIOLATED conservation") {
		t.Fatalf("reconcile with a planted mismatch: %v, want exit 1 with a conservation violation\n%s", err, out)
	}
	deadline := time.Now().Add(15 * time.Second)
	for h.redisStock(s, s.items[0]) != 6 {
		if time.Now().After(deadline) {
			out, _ := h.reconcile(s.sale)
			t.Fatalf("the reconciliation did not repair the planted mismatch\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Selling resumes on the repaired stock.
	tok := h.token(999, auth.RoleShopper)
	for r := h.buy(tok, s.items[0], h.purchaseToken(tok, s.sale)); r.Status != http.StatusAccepted; r = h.buy(tok, s.items[0], h.purchaseToken(tok, s.sale)) {
		if time.Now().After(deadline) || r.Status != http.StatusServiceUnavailable {
			t.Fatalf("buy after the repair: %d %s", r.Status, r.Raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.checkInvariants(s)
}

// "My orders" narrowed to one sale, as the sale page asks for it.
func TestMyOrdersOfOneSale(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	a, b := h.liveSale(5), h.liveSale(5)
	alice := h.token(1, auth.RoleShopper)
	ra := h.buy(alice, a.items[0], h.purchaseToken(alice, a.sale))
	rb := h.buy(alice, b.items[0], h.purchaseToken(alice, b.sale))
	h.drain(a)
	h.drain(b)
	p := h.do("GET", fmt.Sprintf("/api/flash-sales/orders?saleId=%d", b.sale), alice, nil)
	list, _ := p.Body["orders"].([]any)
	if p.Status != http.StatusOK || len(list) != 1 || list[0].(map[string]any)["orderId"] != rb.str("orderId") {
		t.Errorf("orders of sale %d: %d %s, want only %s (not %s)", b.sale, p.Status, p.Raw, rb.str("orderId"), ra.str("orderId"))
	}
	if p := h.do("GET", "/api/flash-sales/orders?saleId=abc", alice, nil); p.Status != http.StatusBadRequest {
		t.Errorf("saleId=abc: %d, want 400", p.Status)
	}
	h.mu.Lock()
	h.acked = []string{rb.str("orderId")}
	h.mu.Unlock()
	h.checkInvariants(b)
}

// A writer that dies holding a batch (fetched, never written nor acknowledged) delays those
// orders by one ack wait at most: another instance's writer writes them then, not 30 s later.
func TestDeadWriterStallsNoOneLong(t *testing.T) {
	t.Parallel()
	a := newHarness(t, harnessOpts{noWriter: true, env: map[string]string{"FLASHSALE_WRITER_ACK_WAIT": "2s"}})
	b := newHarness(t, harnessOpts{shared: a, noWriter: true, env: map[string]string{"FLASHSALE_WRITER_ACK_WAIT": "2s"}})
	s := a.liveSale(50)
	orders := a.buyN(s, s.items[0], 100, 20)
	// The dead writer: it took every message and will never answer for them.
	taken, err := a.app.Queue.FetchOrders(context.Background(), 1000, time.Second, 0)
	if err != nil || len(taken) == 0 {
		t.Fatalf("fetch as the dying writer: %d messages, %v", len(taken), err)
	}
	died := time.Now()
	b.app.Start(context.Background(), true, false)
	for a.sqlInt(`SELECT count(*) FROM orders WHERE item_id = ?`, s.items[0]) < int64(len(orders)) {
		if time.Since(died) > 8*time.Second {
			t.Fatalf("orders held by a dead writer not written 8 s later (ack wait 2 s)")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("written %.1f s after the writer died", time.Since(died).Seconds())
	a.checkInvariants(s)
}

// A live writer whose Postgres is slow keeps its batch: in-progress acks stop the queue from
// handing it to another worker meanwhile.
func TestSlowBatchIsNotRedelivered(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noWriter: true, env: map[string]string{"FLASHSALE_WRITER_ACK_WAIT": "1s"}})
	s := h.liveSale(10)
	h.buyN(s, s.items[0], 100, 5)
	slow := pipeline.NewWriter(pipeline.WriterConfig{Workers: 2, Batch: 100, AckWait: time.Second}, h.app.Queue, h.app.DB, h.app.Stock, h.app.SoldOut, h.app.Metrics, h.app.Log)
	var once sync.Once
	slow.AfterCommit = func() error {
		once.Do(func() { time.Sleep(3500 * time.Millisecond) }) // three ack waits and more
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go slow.Run(ctx)
	h.drain(s)
	var m dto.Metric
	if err := h.app.Metrics.Written.WithLabelValues("redelivered").Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetCounter().GetValue(); n != 0 {
		t.Errorf("orders redelivered while their batch was being written: %v", n)
	}
	cancel()
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
	deadline := time.Now().Add(15 * time.Second)
	for h.sqlInt(`SELECT count(*) FROM stock_returns`) != 0 || h.redisStock(s, s.items[0]) != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("the lost return was not applied again: stock %d, rows %d", h.redisStock(s, s.items[0]), h.sqlInt(`SELECT count(*) FROM stock_returns`))
		}
		time.Sleep(100 * time.Millisecond)
	}
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
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, err := h.app.Stock.State(ctx, s.sale)
		if err == nil && st.Loaded && !st.Lost && h.sqlInt(`SELECT count(*) FROM stock_returns`) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not rebuilt, or the return never settled: %+v %v", st, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
