package tests

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// The sale page sends a purchase again when its answer was lost: the same purchase token to the
// same item. The resend is answered as the first send was, 202 with the same order id, whatever
// became of the reservation meanwhile: still in flight (not yet written: the resend queues it
// again and claims it, so nothing can release it any more), written (the shopper holds it). No
// second unit is taken and one order is written. The same token on another item of the sale is
// still a used token. Per-sale and per-item limits, and a sale of three stock shards.
func TestResendAfterLostAnswer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		extra map[string]any
	}{
		{"per-sale", nil},
		{"per-item", map[string]any{"purchaseLimit": "per-item"}},
		{"3 shards", map[string]any{"stockShards": 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			resendAfterLostAnswer(t, c.extra)
		})
	}
}

// resendAfterLostAnswer: a purchase whose answer was lost is sent again with the same token, while
// in flight and once written, on a sale made with the extra settings: the same order each time,
// one unit, one order.
func resendAfterLostAnswer(t *testing.T, extra map[string]any) {
	h := newHarness(t, harnessOpts{noWriter: true})
	s := h.createSaleWith(extra, time.Now().Add(-time.Second), 3, 3)
	alice := h.token(1, auth.RoleShopper)
	pt := h.purchaseToken(alice, s.sale)
	first := h.buy(alice, s.items[0], pt) // its answer is lost on the way to the shopper
	if first.Status != http.StatusAccepted {
		t.Fatalf("first send: %d %s", first.Status, first.Raw)
	}
	id := first.str("orderId")

	// In flight, not written yet (no writer runs): the resend answers the same.
	for i := range 2 {
		r := h.buy(alice, s.items[0], pt)
		if r.Status != http.StatusAccepted || r.str("orderId") != id || r.str("status") != "QUEUED" {
			t.Fatalf("resend %d while in flight: %d %s, want 202 QUEUED with order %s", i+1, r.Status, r.Raw, id)
		}
	}
	flight, err := h.app.Stock.InFlight(context.Background(), s.sale)
	if err != nil || len(flight) != 1 || flight[0].OrderID != id || !flight[0].Claimed {
		t.Errorf("in flight after the resends: %+v, %v; want only %s, claimed (no release can take it)", flight, err, id)
	}
	if got := shardStock(t, h, s, s.items[0]); got != 2 {
		t.Errorf("units left of the item = %d, want 2 (one unit, however often the attempt is sent)", got)
	}
	// The same token on another item: a used token, as before.
	if r := h.buy(alice, s.items[1], pt); r.Status != http.StatusForbidden || r.str("error") != "INVALID_PURCHASE_TOKEN" {
		t.Errorf("the token on another item: %d %s, want 403 INVALID_PURCHASE_TOKEN", r.Status, r.Raw)
	}

	// Written (the queue carried the order twice or more): one order, PENDING, and the
	// resend still answers the same.
	h.app.Start(context.Background(), true, false)
	h.drain(s)
	if r := h.buy(alice, s.items[0], pt); r.Status != http.StatusAccepted || r.str("orderId") != id {
		t.Errorf("resend once written: %d %s, want 202 with order %s", r.Status, r.Raw, id)
	}
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE user_id = 1`); got != 1 {
		t.Errorf("orders of the shopper = %d, want 1", got)
	}
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE id = ? AND status = 'PENDING'`, id); got != 1 {
		t.Errorf("order %s PENDING in postgres: %d rows, want 1", id, got)
	}
	if o := h.do("GET", "/api/flash-sales/orders/"+id, alice, nil); o.Status != http.StatusOK || o.str("status") != "PENDING" {
		t.Errorf("the order's status: %d %s, want PENDING", o.Status, o.Raw)
	}
	uniqueAcked(h)
	h.checkInvariants(s)
}

// uniqueAcked keeps each acknowledged order id once: a resend answered 202 with the id of the
// first send, and the invariant check counts the ids it is given.
func uniqueAcked(h *harness) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	ids := h.acked[:0]
	for _, id := range h.acked {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	h.acked = ids
}

// shardStock is the units left of an item over every stock shard of its sale.
func shardStock(t *testing.T, h *harness, s saleIDs, item int64) int64 {
	t.Helper()
	levels, err := h.app.Stock.Levels(context.Background(), s.sale, []int64{item})
	if err != nil {
		t.Fatal(err)
	}
	return levels[0]
}

// A first send whose reservation was released (its publish failed: 503, nothing reserved) is not
// made again by a resend: the token stays used (403), the unit stays on sale, and no order is
// written for it. Order ids are tied to the token, so the resend names the released
// reservation; it must not bring it back.
func TestResendOfAReleasedAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{env: map[string]string{"FLASHSALE_PUBLISH_TIMEOUT": "1s"}})
	s := h.liveSale(5)
	alice := h.token(1, auth.RoleShopper)
	pt := h.purchaseToken(alice, s.sale)

	h.app.NATSServer.Shutdown()
	h.app.NATSServer.WaitForShutdown()
	if r := h.buy(alice, s.items[0], pt); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("purchase with NATS down: %d %s, want 503", r.Status, r.Raw)
	}
	token, err := store.ReadEmbeddedNATSToken(h.natsDir)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := store.StartNATS(h.natsDir, h.cfg.NATSPort, true, token)
	if err != nil {
		t.Fatalf("restart nats: %v", err)
	}
	h.app.NATSServer = ns
	// up to 10 s to reconnect; the checks below say it if the queue never came back
	_ = testenv.Poll(10*time.Second, testenv.PollInterval, testenv.Until(h.app.Queue.IsConnected, "not reconnected"))

	r := h.buy(alice, s.items[0], pt)
	if r.Status != http.StatusForbidden || r.str("error") != "INVALID_PURCHASE_TOKEN" {
		t.Errorf("resend of the released attempt: %d %s, want 403 INVALID_PURCHASE_TOKEN", r.Status, r.Raw)
	}
	if got := h.redisStock(s, s.items[0]); got != 5 {
		t.Errorf("redis stock = %d, want 5 (the released unit not taken again)", got)
	}
	time.Sleep(time.Second) // anything buffered during the outage reaches the writer
	h.drain(s)
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE user_id = 1 AND status <> 'FAILED'`); got != 0 {
		t.Errorf("live orders of the shopper = %d, want 0", got)
	}
	// A new attempt buys.
	if r := h.buy(alice, s.items[0], h.purchaseToken(alice, s.sale)); r.Status != http.StatusAccepted {
		t.Errorf("a new attempt: %d %s, want 202", r.Status, r.Raw)
	}
	h.checkInvariants(s)
}

// Two sends of one attempt at the same moment (a page that gave up waiting while the first was
// still on its way): one unit, one order, and both are answered 202 with the same order id, or
// one of them 503 while the other's answer stands (never two orders, never a 202 without one).
func TestResendRacingTheFirstSend(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.liveSale(50)
	const shoppers = 20
	type answer struct {
		status  int
		id, raw string
	}
	answers := make([][2]answer, shoppers)
	done := make(chan struct{})
	for u := range shoppers {
		tok := h.token(int64(100+u), auth.RoleShopper)
		pt := h.purchaseToken(tok, s.sale)
		for k := range 2 {
			go func() {
				defer func() { done <- struct{}{} }()
				r := h.buy(tok, s.items[0], pt)
				answers[u][k] = answer{r.Status, r.str("orderId"), r.Raw}
			}()
		}
	}
	for range 2 * shoppers {
		<-done
	}
	h.drain(s)
	for u, a := range answers {
		var ids []string
		for _, x := range a {
			switch x.status {
			case http.StatusAccepted:
				ids = append(ids, x.id)
			case http.StatusServiceUnavailable:
			default:
				t.Errorf("shopper %d: %d %s, want 202 (or 503)", 100+u, x.status, x.raw)
			}
		}
		if len(ids) == 0 || (len(ids) == 2 && ids[0] != ids[1]) {
			t.Errorf("shopper %d: answers %+v, want 202 with one order id", 100+u, a)
		}
	}
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE item_id = ? AND status = 'PENDING'`, s.items[0]); got != shoppers {
		t.Errorf("orders = %d, want %d (one per shopper)", got, shoppers)
	}
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE item_id = ? AND status = 'FAILED'`, s.items[0]); got != 0 {
		t.Errorf("FAILED orders = %d, want 0", got)
	}
	if got := h.redisStock(s, s.items[0]); got != 50-shoppers {
		t.Errorf("redis stock = %d, want %d", got, 50-shoppers)
	}
	uniqueAcked(h)
	h.checkInvariants(s)
}

// A reserve whose reply is lost where the Redis client does not retry (its retries spent) has an
// unknown outcome. The purchase asks the same attempt once more, which the script answers for
// what the first call did: here a reservation, which is queued and claimed, 202. Releasing it
// instead, as before order ids were tied to the token, could undo the reservation of an earlier
// send of the same attempt that had answered 202.
func TestReserveUnknownOutcomeAskedAgain(t *testing.T) {
	t.Parallel()
	rs := testenv.Redis(t)
	proxy := newLossyProxy(t, rs.Addr)
	h := newHarness(t, harnessOpts{redisURL: "redis://" + proxy.ln.Addr().String() + "/0?max_retries=-1"})
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
		t.Fatalf("purchase whose reserve reply was lost: %d %s, want 202", r.Status, r.Raw)
	}
	if again := h.buy(alice, s.items[0], pt); again.Status != http.StatusAccepted || again.str("orderId") != r.str("orderId") {
		t.Errorf("resend: %d %s, want 202 with order %s", again.Status, again.Raw, r.str("orderId"))
	}
	h.drain(s)
	if got := h.redisStock(s, s.items[0]); got != 2 {
		t.Errorf("redis stock = %d, want 2", got)
	}
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE id = ? AND status = 'PENDING'`, r.str("orderId")); got != 1 {
		t.Errorf("order %s PENDING: %d rows, want 1", r.str("orderId"), got)
	}
	uniqueAcked(h)
	h.checkInvariants(s)
}
