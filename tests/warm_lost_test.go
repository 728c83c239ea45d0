package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/testenv"
)

// A merchant action never rebuilds a sale Redis lost while its queue still holds orders: Warm
// answers 409 QUEUE_NOT_DRAINED and leaves Redis alone, a quantity cut that Postgres alone would
// allow (the queued orders are not in it yet) is refused the same way, and the live view says what
// the rebuild waits for. Once the writer has drained the queue the keeper rebuilds the sale by
// itself, counting every queued order: no unit is sold twice and no buyer buys twice. Before the
// fix, Warm rebuilt at once from an incomplete Postgres: the queued orders' units were on sale
// again and their buyers could buy again.
func TestWarmAndEditOnALostSaleWaitForTheQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, harnessOpts{noWriter: true})
	merchant := h.token(9000, auth.RoleMerchant)
	s := h.liveSale(4)
	queued := buyQueued(h, s, 3)

	h.redis.Wipe(t) // Redis lost everything; three orders are still in the queue only

	if r := h.saleAction(merchant, s.sale, "warm"); r.Status != http.StatusConflict || r.str("error") != string(shop.CodeQueueNotDrained) ||
		r.Header.Get("Retry-After") == "" {
		t.Fatalf("warm a lost sale with a backlog: %d %s, want 409 QUEUE_NOT_DRAINED with Retry-After", r.Status, r.Raw)
	}
	if st, err := h.app.Stock.State(ctx, s.sale); err != nil || st.Loaded {
		t.Fatalf("after the refused warm, Redis holds the sale: %+v (err %v), want it not rebuilt", st, err)
	}
	// Postgres says nothing is sold, but three units are: 4 -> 2 would leave the third order no room.
	r := h.patchSale(merchant, s.sale, map[string]any{"items": []map[string]any{{"itemId": strconv.FormatInt(s.items[0], 10), "quantity": 2}}})
	if r.Status != http.StatusConflict || r.str("error") != string(shop.CodeQueueNotDrained) {
		t.Fatalf("lower a lost sale's quantity with a backlog: %d %s, want 409 QUEUE_NOT_DRAINED", r.Status, r.Raw)
	}
	if q := h.sqlInt(`SELECT quantity FROM items WHERE id = ?`, s.items[0]); q != 4 {
		t.Fatalf("quantity after the refused edit: %d, want 4", q)
	}
	checkLiveViewSaysRebuildWaits(t, h, merchant, s)

	// The writer drains the queue; the keeper rebuilds the sale by itself, counting the orders.
	h.app.Start(ctx, true, false)
	waitUntil(t, 30e9, "the keeper's rebuild", func() bool {
		st, err := h.app.Stock.State(ctx, s.sale)
		return err == nil && st.Loaded && !st.Lost
	})
	if got := h.redisStock(s, s.items[0]); got != 1 {
		t.Errorf("rebuilt stock = %d, want 1 (4 less the 3 queued orders)", got)
	}
	for i, id := range queued {
		if st := h.orderOf(id); st != "PENDING" {
			t.Errorf("queued order %s: %s, want PENDING", id, st)
		}
		bearer := h.token(int64(7000+i), auth.RoleShopper)
		if r := h.buy(bearer, s.items[0], h.purchaseToken(bearer, s.sale)); r.Status != http.StatusConflict {
			t.Errorf("buyer %d buys again after the rebuild: %d %s, want 409 ALREADY_PURCHASED", i, r.Status, r.Raw)
		}
	}
	warmChangesNothingAndTheLastUnitSellsOnce(t, h, merchant, s)
	// With the queue drained, the cut is judged on a complete Postgres: 4 units sold, 3 is too low.
	h.drain(s)
	r = h.patchSale(merchant, s.sale, map[string]any{"items": []map[string]any{{"itemId": strconv.FormatInt(s.items[0], 10), "quantity": 3}}})
	if r.Status != http.StatusConflict || r.str("error") != string(shop.CodeQuantityTooLow) {
		t.Errorf("lower below what is sold: %d %s, want 409 QUANTITY_TOO_LOW", r.Status, r.Raw)
	}
	h.checkInvariants(s)
}

// warmChangesNothingAndTheLastUnitSellsOnce: Warm on the rebuilt sale changes nothing; the last
// unit sells once.
func warmChangesNothingAndTheLastUnitSellsOnce(t *testing.T, h *harness, merchant string, s saleIDs) {
	t.Helper()
	// Warm on the rebuilt sale changes nothing; the last unit sells once.
	if r := h.saleAction(merchant, s.sale, "warm"); r.Status != http.StatusOK {
		t.Errorf("warm a healthy sale: %d %s", r.Status, r.Raw)
	}
	a, b := h.token(7100, auth.RoleShopper), h.token(7101, auth.RoleShopper)
	bToken := h.purchaseToken(b, s.sale) // before the last unit: after it, no token is handed out
	if r := h.buy(a, s.items[0], h.purchaseToken(a, s.sale)); r.Status != http.StatusAccepted {
		t.Errorf("buy the last unit: %d %s", r.Status, r.Raw)
	}
	if r := h.buy(b, s.items[0], bToken); r.Status != http.StatusGone {
		t.Errorf("buy past the last unit: %d %s, want 410", r.Status, r.Raw)
	}
}

// checkLiveViewSaysRebuildWaits: the live view says what the rebuild waits for: the queued
// messages (rebuildWaitsFor > 0).
func checkLiveViewSaysRebuildWaits(t *testing.T, h *harness, merchant string, s saleIDs) {
	t.Helper()
	// The live view says what the rebuild waits for.
	lr := h.do("GET", fmt.Sprintf("/api/admin/sales/%d/live", s.sale), merchant, nil)
	var live struct {
		Reconciliation struct {
			RebuildWaitsFor *uint64 `json:"rebuildWaitsFor"`
		} `json:"reconciliation"`
	}
	if err := json.Unmarshal([]byte(lr.Raw), &live); err != nil || lr.Status != http.StatusOK {
		t.Fatalf("live view: %d %s", lr.Status, lr.Raw)
	}
	if w := live.Reconciliation.RebuildWaitsFor; w == nil || *w == 0 {
		t.Errorf("live view's rebuildWaitsFor = %v, want the queued messages (> 0): %s", w, lr.Raw)
	}
}

// A first load that fails on Redis (the sale created while Redis refused writes) is retried at
// the keeper's next pass, even while another sale's orders keep the queue busy: before its start
// no reservation of it can exist, so Postgres is complete. Before, the failed load had taken an
// epoch, the sale counted as "loaded before", and its load waited for the queue to drain, which a
// rush of another sale can put off until the start has passed.
func TestFailedFirstLoadRetriedBeforeTheStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, harnessOpts{noWriter: true})
	busy := h.liveSale(5)
	buyQueued(h, busy, 2) // the queue holds orders: no drain until the writer runs

	// Read-only (a failover under way): the load script's first write is refused. (Out of memory
	// would not do: a script that has written once, as the load does with its DEL, is let finish.)
	lift := h.redis.Refuse(t, testenv.RefuseReadOnly)
	s := h.createSale(time.Now().Add(2*time.Minute), 3) // its warm-up at creation fails
	if st, err := h.app.Stock.State(ctx, s.sale); err != nil || st.Loaded {
		t.Fatalf("loaded while Redis refused writes: %+v (err %v)", st, err)
	}
	if e := h.sqlInt(`SELECT redis_epoch FROM sales WHERE id = ?`, s.sale); e == 0 {
		t.Fatalf("the failed load took no epoch: the case this test is about does not arise")
	}
	lift()
	waitUntil(t, 15*time.Second, "the keeper to load the sale with the queue still busy", func() bool {
		st, err := h.app.Stock.State(ctx, s.sale)
		return err == nil && st.Loaded && !st.Lost
	})
	if b, err := h.app.Queue.Backlog(ctx); err != nil || b == 0 {
		t.Fatalf("backlog %d (err %v): the queue drained, so this proves nothing", b, err)
	}
	if got := h.redisStock(s, s.items[0]); got != 3 {
		t.Errorf("loaded stock = %d, want 3", got)
	}
	h.app.Start(ctx, true, false)
	h.checkInvariants(busy)
	h.checkInvariants(s)
}
