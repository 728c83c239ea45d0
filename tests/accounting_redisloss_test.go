package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

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
	testenv.Eventually(t, 10*time.Second, "the sale rebuilt after the loss", func() error {
		st, err := h.app.Stock.State(context.Background(), s.sale)
		if err == nil && st.Loaded && !st.Lost && st.Epoch > 1 {
			return nil
		}
		return fmt.Errorf("state %+v %v", st, err)
	})
	if r := h.buy(replayer, s.items[0], replayTok); r.Status != http.StatusForbidden {
		t.Errorf("a token issued before the rebuild, replayed after it: %d %s, want 403", r.Status, r.Raw)
	}

	codes, forgotten := rushAfterTheRestart(h, s)
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

// rushAfterTheRestart is the rush going on right after the restart: 120 new shoppers and the 30
// whose orders Redis forgot try (again); the first answers are 503 until the rebuild, then
// selling resumes. It returns the count of each answer, and of those the forgotten shoppers got.
func rushAfterTheRestart(h *harness, s saleIDs) (codes, forgotten map[string]int) {
	codes = map[string]int{}
	forgotten = map[string]int{} // answers to the shoppers whose orders Redis forgot
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
			if i < 120 {
				// the forgotten shoppers ask first: the token budget hands out tokens within the
				// units left and 10%, so a crowd ahead of them could leave them none to be
				// answered 409 with
				time.Sleep(300 * time.Millisecond)
			}
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
	return codes, forgotten
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
	repaired := func() error {
		if got := h.redisStock(s, s.items[0]); got != 6 {
			return fmt.Errorf("stock %d, want 6", got)
		}
		return nil
	}
	if err := testenv.Poll(15*time.Second, 100*time.Millisecond, repaired); err != nil {
		out, _ := h.reconcile(s.sale)
		t.Fatalf("the reconciliation did not repair the planted mismatch: %v\n%s", err, out)
	}
	// Selling resumes on the repaired stock.
	tok := h.token(999, auth.RoleShopper)
	testenv.Eventually(t, time.Until(deadline), "a purchase after the repair accepted", func() error {
		r := h.buy(tok, s.items[0], h.purchaseToken(tok, s.sale))
		if r.Status != http.StatusAccepted && r.Status != http.StatusServiceUnavailable {
			t.Fatalf("buy after the repair: %d %s", r.Status, r.Raw)
		}
		if r.Status != http.StatusAccepted {
			return fmt.Errorf("buy: %d %s", r.Status, r.Raw)
		}
		return nil
	})
	h.checkInvariants(s)
}
