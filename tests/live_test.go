package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/catalog"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// liveBody is GET /api/admin/sales/{saleId}/live as the dashboard reads it.
type liveBody struct {
	Sale struct {
		SaleID   string  `json:"saleId"`
		Name     string  `json:"name"`
		Status   string  `json:"status"`
		StartsAt string  `json:"startsAt"`
		EndsAt   string  `json:"endsAt"`
		Paused   bool    `json:"paused"`
		LoadedAt *string `json:"loadedAt"`
	} `json:"sale"`
	Items []struct {
		ItemID    string  `json:"itemId"`
		Quantity  int64   `json:"quantity"`
		Displayed int64   `json:"displayed"`
		Frozen    int64   `json:"frozen"`
		InFlight  int64   `json:"inFlight"`
		Pending   int64   `json:"pending"`
		Paid      int64   `json:"paid"`
		Expired   int64   `json:"expired"`
		Cancelled int64   `json:"cancelled"`
		Real      int64   `json:"real"`
		SoldOut   bool    `json:"soldOut"`
		LoadedAt  *string `json:"loadedAt"`
	} `json:"items"`
	Reconciliation struct {
		State  string `json:"state"`
		Loaded bool   `json:"loaded"`
		Checks []struct {
			Name   string  `json:"name"`
			ItemID *string `json:"itemId"`
			OK     bool    `json:"ok"`
			Detail string  `json:"detail"`
		} `json:"checks"`
	} `json:"reconciliation"`
	Funnel struct {
		Requests  int64            `json:"requests"`
		Refused   map[string]int64 `json:"refused"`
		Accepted  int64            `json:"accepted"`
		Written   int64            `json:"written"`
		Paid      int64            `json:"paid"`
		Expired   int64            `json:"expired"`
		Cancelled int64            `json:"cancelled"`
	} `json:"funnel"`
	Series []struct {
		T        int64 `json:"t"`
		Accepted int64 `json:"accepted"`
		Refused  int64 `json:"refused"`
	} `json:"series"`
	Writer struct {
		LagSeconds float64 `json:"lagSeconds"`
		QueueDepth *uint64 `json:"queueDepth"`
	} `json:"writer"`
}

func (h *harness) live(bearer string, saleID int64) (liveBody, response) {
	h.t.Helper()
	r := h.do("GET", fmt.Sprintf("/api/admin/sales/%d/live", saleID), bearer, nil)
	var v liveBody
	if r.Status == http.StatusOK {
		if err := json.Unmarshal([]byte(r.Raw), &v); err != nil {
			h.t.Fatalf("live view: %v in %s", err, r.Raw)
		}
		if r.Header.Get("Cache-Control") != "no-store" {
			h.t.Errorf("live view Cache-Control = %q, want no-store", r.Header.Get("Cache-Control"))
		}
	}
	return v, r
}

// liveUntil polls the live view (as the dashboard does) until ok holds, and fails after 10 s.
func (h *harness) liveUntil(bearer string, saleID int64, what string, ok func(liveBody) bool) liveBody {
	h.t.Helper()
	return testenv.EventuallyValue(h.t, 10*time.Second, "live view showing "+what, func() (liveBody, error) {
		v, r := h.live(bearer, saleID)
		if r.Status != http.StatusOK {
			h.t.Fatalf("live view: %d %s", r.Status, r.Raw)
		}
		if !ok(v) {
			return v, fmt.Errorf("it shows %s", r.Raw)
		}
		return v, nil
	})
}

// The live view counts known traffic exactly (across the per-instance counters flushed to Redis),
// shows frozen, paid and real move as orders are written, paid and cancelled, and is the merchant's
// alone.
func TestLiveViewFunnelAndStock(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noWriter: true})
	merchant := h.token(9000, auth.RoleMerchant)
	s := h.liveSale(3)

	v, r := h.live(merchant, s.sale)
	if r.Status != http.StatusOK {
		t.Fatalf("live view: %d %s", r.Status, r.Raw)
	}
	if v.Sale.SaleID != strconv.FormatInt(s.sale, 10) || v.Sale.Status != catalog.LiveRunning || v.Sale.Paused ||
		v.Sale.LoadedAt == nil || len(v.Items) != 1 || v.Items[0].LoadedAt == nil || v.Items[0].Quantity != 3 ||
		v.Items[0].Displayed != 3 || v.Items[0].Real != 3 || v.Items[0].Frozen != 0 || v.Reconciliation.State != catalog.ReconcileOK ||
		v.Funnel.Requests != 0 || len(v.Funnel.Refused) != len(catalog.RefusalReasons) || len(v.Series) != 0 {
		t.Fatalf("live view of a fresh sale: %s", r.Raw)
	}

	// Known traffic, every outcome once (the writer is off: accepted orders stay in flight).
	accepted := knownTraffic(t, h, merchant, s)

	// The counts reach Redis within about a second; the reservations are in flight, unwritten.
	v = h.liveUntil(merchant, s.sale, "8 requests", func(v liveBody) bool { return v.Funnel.Requests >= 8 })
	checkFunnelBeforeTheWriter(t, v)
	v = h.liveUntil(merchant, s.sale, "a writer lag", func(v liveBody) bool { return v.Writer.LagSeconds >= 0.5 })
	if v.Reconciliation.State == catalog.ReconcileViolation {
		t.Errorf("reconciliation with orders in flight: %+v", v.Reconciliation)
	}

	checkLiveViewIsTheMerchants(t, h, merchant, s)

	// The writer writes them: frozen stays (pending now), nothing in flight, no lag, queue empty.
	h.app.Start(context.Background(), true, false)
	h.drain(s)
	v = h.liveUntil(merchant, s.sale, "three written", func(v liveBody) bool { return v.Funnel.Written == 3 && v.Items[0].InFlight == 0 })
	if it := v.Items[0]; it.Pending != 3 || it.Frozen != 3 || it.Paid != 0 || it.Real != 3 || v.Writer.LagSeconds != 0 ||
		v.Writer.QueueDepth == nil || *v.Writer.QueueDepth != 0 {
		t.Errorf("after the writer: item %+v, writer %+v", it, v.Writer)
	}

	payOneCancelOne(t, h, merchant, s, accepted)
	v = h.liveUntil(merchant, s.sale, "reconciled", func(v liveBody) bool { return v.Reconciliation.State == catalog.ReconcileOK })
	for _, c := range v.Reconciliation.Checks {
		if !c.OK || c.Detail == "" {
			t.Errorf("check %+v after the queue drained", c)
		}
	}
	h.checkInvariants(s)
}

// payOneCancelOne: paid, the live view shows frozen one lower, paid one, real one lower;
// cancelled, its unit goes back on display.
func payOneCancelOne(t *testing.T, h *harness, merchant string, s saleIDs, accepted map[int64]string) {
	t.Helper()
	shopper := func(u int64) string { return h.token(u, auth.RoleShopper) }
	var v liveBody
	// Paid: frozen one lower, paid one, real one lower.
	if r := h.do("POST", "/api/flash-sales/orders/"+accepted[1]+"/pay", shopper(1), nil); r.Status != http.StatusOK {
		t.Fatalf("pay: %d %s", r.Status, r.Raw)
	}
	v = h.liveUntil(merchant, s.sale, "one paid", func(v liveBody) bool { return v.Funnel.Paid == 1 })
	if it := v.Items[0]; it.Frozen != 2 || it.Paid != 1 || it.Real != 2 || it.Pending != 2 {
		t.Errorf("after one payment: %+v; want frozen 2, paid 1, real 2", it)
	}
	// Cancelled: its unit goes back on display.
	if r := h.do("POST", "/api/flash-sales/orders/"+accepted[2]+"/cancel", shopper(2), nil); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Raw)
	}
	v = h.liveUntil(merchant, s.sale, "one cancelled", func(v liveBody) bool { return v.Funnel.Cancelled == 1 && v.Items[0].Displayed == 1 })
	if it := v.Items[0]; it.Frozen != 1 || it.Paid != 1 || it.Real != 2 || it.Cancelled != 1 || it.SoldOut || v.Funnel.Written != 3 {
		t.Errorf("after a cancel: %+v, funnel %+v", it, v.Funnel)
	}
}

// knownTraffic sends every outcome once (the writer is off: accepted orders stay in flight):
// three accepted, a duplicate, a bad token, a wrong captcha, one while paused, one sold out. It
// returns the accepted orders by shopper.
func knownTraffic(t *testing.T, h *harness, merchant string, s saleIDs) map[int64]string {
	t.Helper()
	item := s.items[0]
	shopper := func(u int64) string { return h.token(u, auth.RoleShopper) }
	accepted := map[int64]string{}
	buyOK := func(u int64) {
		t.Helper()
		r := h.buy(shopper(u), item, h.purchaseToken(shopper(u), s.sale))
		if r.Status != http.StatusAccepted {
			t.Fatalf("shopper %d: %d %s", u, r.Status, r.Raw)
		}
		accepted[u] = r.str("orderId")
	}
	buyOK(1)
	buyOK(2)
	wantAdminCode(t, "second purchase", h.buy(shopper(1), item, h.purchaseToken(shopper(1), s.sale)), http.StatusConflict, shop.CodeAlreadyPurchased)
	wantAdminCode(t, "bad token", h.buy(shopper(5), item, "not-a-token"), http.StatusForbidden, shop.CodeInvalidPurchaseToken)
	c := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/captcha", s.sale), shopper(7), nil)
	wantAdminCode(t, "wrong captcha", h.do("POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", s.sale), shopper(7),
		map[string]string{"captchaId": c.str("captchaId"), "answer": "wrong"}), http.StatusForbidden, shop.CodeCaptchaFailed)
	tok6 := h.purchaseToken(shopper(6), s.sale)
	if r := h.saleAction(merchant, s.sale, "pause"); r.Status != http.StatusOK {
		t.Fatalf("pause: %d %s", r.Status, r.Raw)
	}
	h.liveUntil(merchant, s.sale, "the pause", func(v liveBody) bool { return v.Sale.Paused && v.Sale.Status == catalog.LivePaused })
	wantAdminCode(t, "purchase while paused", h.buy(shopper(6), item, tok6), http.StatusServiceUnavailable, shop.CodePaused)
	if r := h.saleAction(merchant, s.sale, "resume"); r.Status != http.StatusOK {
		t.Fatalf("resume: %d %s", r.Status, r.Raw)
	}
	buyOK(3)
	// the last unit went: the next shopper is refused at the purchase-token step
	wantAdminCode(t, "sold out", h.tokenAttempt(shopper(4), s.sale), http.StatusGone, shop.CodeSoldOut)
	return accepted
}

// checkFunnelBeforeTheWriter checks the live view once the counts reached Redis, the
// reservations in flight, unwritten: each outcome counted once, the series in time order within
// the last minute, the item frozen and sold out, a queue depth.
func checkFunnelBeforeTheWriter(t *testing.T, v liveBody) {
	t.Helper()
	wantRefused := map[string]int64{catalog.RefusedSoldOut: 1, catalog.RefusedDuplicate: 1, catalog.RefusedRateLimited: 0,
		catalog.RefusedBadToken: 1, catalog.RefusedCaptcha: 1, catalog.RefusedPaused: 1, catalog.RefusedOther: 0}
	if v.Funnel.Requests != 8 || v.Funnel.Accepted != 3 || v.Funnel.Written != 0 || v.Funnel.Paid != 0 {
		t.Errorf("funnel = %+v; want 8 requests, 3 accepted, none written", v.Funnel)
	}
	for reason, n := range wantRefused {
		if got, ok := v.Funnel.Refused[reason]; !ok || got != n {
			t.Errorf("refused %s = %d (present %v), want %d", reason, got, ok, n)
		}
	}
	var sumA, sumR int64
	for i, p := range v.Series {
		sumA, sumR = sumA+p.Accepted, sumR+p.Refused
		if i > 0 && p.T <= v.Series[i-1].T {
			t.Errorf("series not in time order: %+v", v.Series)
		}
		if p.T < time.Now().Add(-time.Minute).Unix() || p.T > time.Now().Unix() {
			t.Errorf("series second %d is not within the last minute", p.T)
		}
	}
	if sumA != 3 || sumR != 5 {
		t.Errorf("series totals accepted %d, refused %d; want 3 and 5: %+v", sumA, sumR, v.Series)
	}
	it := v.Items[0]
	if it.InFlight != 3 || it.Frozen != 3 || it.Pending != 0 || it.Displayed != 0 || !it.SoldOut || it.Real != 3 {
		t.Errorf("item before the writer ran = %+v; want 3 in flight and frozen, displayed 0, sold out, real 3", it)
	}
	if v.Writer.QueueDepth == nil || *v.Writer.QueueDepth == 0 {
		t.Errorf("queue depth %v with three orders unwritten", v.Writer.QueueDepth)
	}
}

// checkLiveViewIsTheMerchants: another merchant, a shopper, an unknown sale and a bad id get no
// live view.
func checkLiveViewIsTheMerchants(t *testing.T, h *harness, merchant string, s saleIDs) {
	t.Helper()
	shopper := func(u int64) string { return h.token(u, auth.RoleShopper) }
	// Another merchant, a shopper, an unknown sale, a bad id.
	if _, r := h.live(h.token(9001, auth.RoleMerchant), s.sale); r.Status != http.StatusNotFound || r.str("error") != string(shop.CodeNotFound) {
		t.Errorf("another merchant's live view: %d %s", r.Status, r.Raw)
	}
	if _, r := h.live(shopper(1), s.sale); r.Status != http.StatusForbidden {
		t.Errorf("a shopper's live view: %d %s", r.Status, r.Raw)
	}
	if _, r := h.live(merchant, s.sale+1000); r.Status != http.StatusNotFound || r.str("error") != string(shop.CodeNotFound) {
		t.Errorf("an unknown sale's live view: %d %s", r.Status, r.Raw)
	}
	if r := h.do("GET", "/api/admin/sales/x1/live", merchant, nil); r.Status != http.StatusBadRequest || r.str("error") != string(shop.CodeInvalidInput) {
		t.Errorf("a bad sale id: %d %s", r.Status, r.Raw)
	}
}

// Two instances count into one funnel: each counts in memory and flushes to the same hash.
func TestLiveFunnelAcrossInstances(t *testing.T) {
	t.Parallel()
	a := newHarness(t, harnessOpts{})
	b := newHarness(t, harnessOpts{shared: a})
	merchant := a.token(9000, auth.RoleMerchant)
	s := a.liveSale(2)
	wantAdminCode(t, "bad token on b", b.buy(a.token(200, auth.RoleShopper), s.items[0], "x"), http.StatusForbidden, shop.CodeInvalidPurchaseToken)
	hs := []*harness{a, b, b}
	tokens := make([]string, len(hs)) // all taken before the sell-out: the third is refused at its purchase
	for i, h := range hs {
		tokens[i] = h.purchaseToken(a.token(int64(100+i), auth.RoleShopper), s.sale)
	}
	for i, h := range hs {
		want := []int{http.StatusAccepted, http.StatusAccepted, http.StatusGone}[i]
		if r := h.buy(a.token(int64(100+i), auth.RoleShopper), s.items[0], tokens[i]); r.Status != want {
			t.Fatalf("purchase %d: %d %s, want %d", i, r.Status, r.Raw, want)
		}
	}
	v := a.liveUntil(merchant, s.sale, "4 requests", func(v liveBody) bool { return v.Funnel.Requests >= 4 })
	if v.Funnel.Requests != 4 || v.Funnel.Accepted != 2 || v.Funnel.Refused[catalog.RefusedSoldOut] != 1 || v.Funnel.Refused[catalog.RefusedBadToken] != 1 {
		t.Errorf("funnel over two instances = %+v; want 4 requests: 2 accepted, 1 sold out, 1 bad token", v.Funnel)
	}
	// The second instance serves the same totals.
	b.liveUntil(merchant, s.sale, "the same totals on b", func(w liveBody) bool { return w.Funnel.Requests == 4 && w.Funnel.Accepted == 2 })
	a.checkInvariants(s)
}

// A sale is loaded FLASHSALE_WARM_AHEAD before its start: at once when created or edited closer,
// by the warm button on demand; loadedAt says so in the live and stock views.
func TestLiveWarmUpTiming(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	merchant := h.token(9000, auth.RoleMerchant)
	far := h.createSale(time.Now().Add(20*time.Minute), 2)
	near := h.createSale(time.Now().Add(5*time.Minute), 2)
	later := h.createSale(time.Now().Add(30*time.Minute), 1)
	stockLoaded := func(saleID int64) any {
		r := h.do("GET", fmt.Sprintf("/api/admin/sales/%d/stock", saleID), merchant, nil)
		return itemsOf(r)[0]["loadedAt"]
	}

	if h.meta(near.sale, "loadedAt") == "" || stockLoaded(near.sale) == nil {
		t.Errorf("a sale 5 minutes ahead is not loaded at creation")
	}
	v, _ := h.live(merchant, near.sale)
	if v.Sale.LoadedAt == nil || v.Items[0].LoadedAt == nil || v.Sale.Status != catalog.LiveScheduled || v.Reconciliation.State != catalog.ReconcileOK {
		t.Errorf("live view of the near sale: %+v", v)
	}
	// The keeper passes every 200 ms here: give it a few, the far sale stays out of Redis.
	time.Sleep(time.Second)
	checkNotLoadedYet(t, h, merchant, stockLoaded, far, later)
	// Before the start, tokens and purchases answer as they always did.
	checkTooEarly(t, h, far, near)

	// The warm button loads the far one now; the live view shows it at once.
	if r := h.saleAction(merchant, far.sale, "warm"); r.Status != http.StatusOK {
		t.Fatalf("warm: %d %s", r.Status, r.Raw)
	}
	if h.redisStock(far, far.items[0]) != 2 || stockLoaded(far.sale) == nil {
		t.Errorf("after warm: stock %d, loadedAt %v", h.redisStock(far, far.items[0]), stockLoaded(far.sale))
	}
	if v, r := h.live(merchant, far.sale); v.Sale.LoadedAt == nil || v.Items[0].LoadedAt == nil || v.Items[0].Displayed != 2 {
		t.Errorf("live view after warm: %s", r.Raw)
	}
	// An edit that brings the start within the window loads it at once.
	if r := h.patchSale(merchant, later.sale, map[string]any{"startsAt": time.Now().Add(3 * time.Minute).UTC().Format(time.RFC3339)}); r.Status != http.StatusOK {
		t.Fatalf("edit: %d %s", r.Status, r.Raw)
	}
	if h.meta(later.sale, "loadedAt") == "" || h.redisStock(later, later.items[0]) != 1 {
		t.Errorf("a sale edited to start in 3 minutes is not loaded")
	}
	h.checkInvariants(far)
	h.checkInvariants(near)
	h.checkInvariants(later)
}

// checkNotLoadedYet checks that the sales are not in Redis and that the stock and live views
// say so.
func checkNotLoadedYet(t *testing.T, h *harness, merchant string, stockLoaded func(int64) any, sales ...saleIDs) {
	t.Helper()
	for _, s := range sales {
		if st, err := h.app.Stock.State(context.Background(), s.sale); err != nil || st.Loaded {
			t.Errorf("sale %d, 20+ minutes ahead, is loaded (%v)", s.sale, err)
		}
		if got := stockLoaded(s.sale); got != nil {
			t.Errorf("stock view loadedAt of sale %d = %v, want null", s.sale, got)
		}
		v, r := h.live(merchant, s.sale)
		if v.Sale.LoadedAt != nil || v.Items[0].LoadedAt != nil || v.Items[0].Displayed != -1 || v.Reconciliation.State != catalog.ReconcileOK ||
			v.Reconciliation.Loaded {
			t.Errorf("live view of a sale not loaded yet: %s", r.Raw)
		}
	}
}

// checkTooEarly checks that a token request and a purchase before the start of each sale answer
// 425 NOT_STARTED, loaded or not.
func checkTooEarly(t *testing.T, h *harness, sales ...saleIDs) {
	t.Helper()
	u := h.token(42, auth.RoleShopper)
	for _, s := range sales {
		c := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/captcha", s.sale), u, nil)
		r := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", s.sale), u, map[string]string{"captchaId": c.str("captchaId"), "answer": "test"})
		if r.Status != http.StatusTooEarly || r.str("error") != string(shop.CodeNotStarted) || r.Header.Get("Retry-After") == "" {
			t.Errorf("token before the start of sale %d: %d %s", s.sale, r.Status, r.Raw)
		}
		wantAdminCode(t, "purchase before the start", h.buy(u, s.items[0], "x"), http.StatusTooEarly, shop.CodeNotStarted)
	}
}

// The keeper loads a sale by itself when its start comes within FLASHSALE_WARM_AHEAD, before the
// start, even while the queue is not drained.
func TestKeeperWarmsUpAhead(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{env: map[string]string{"FLASHSALE_WARM_AHEAD": "5s"}})
	start := time.Now().Add(10 * time.Second).Truncate(time.Second) // the API takes whole seconds
	s := h.createSale(start, 4)
	ctx := context.Background()
	if st, err := h.app.Stock.State(ctx, s.sale); err != nil || st.Loaded {
		t.Fatalf("a sale 10 s ahead with a 5 s warm-up is loaded at creation (%v)", err)
	}
	testenv.Eventually(t, time.Until(start), "the keeper loaded the sale before its start", func() error {
		st, err := h.app.Stock.State(ctx, s.sale)
		if err != nil || !st.Loaded {
			return fmt.Errorf("state %+v, %v", st, err)
		}
		if time.Now().After(start) || st.LoadedAt.Before(start.Add(-5*time.Second-500*time.Millisecond)) {
			t.Errorf("loaded at %v, want within 5 s before the start %v", st.LoadedAt, start)
		}
		return nil
	})
	if n, _ := h.app.Redis.Get(ctx, store.StockKey(s.sale, s.items[0])).Int64(); n != 4 {
		t.Errorf("stock after the warm-up = %d, want 4", n)
	}
	time.Sleep(time.Until(start))
	u := h.token(7, auth.RoleShopper)
	if r := h.buy(u, s.items[0], h.purchaseToken(u, s.sale)); r.Status != http.StatusAccepted {
		t.Errorf("purchase after the start: %d %s", r.Status, r.Raw)
	}
	h.checkInvariants(s)
}

// An edit made while a load is between its Postgres snapshot and its write to Redis (the sale not
// in Redis yet, so Redis cannot take the edit) must not leave Redis with the sale as it was
// before the edit: the load sees the epoch the edit bumped, fails the sale closed, and the keeper
// rebuilds it from Postgres with the edit when its warm-up is due.
func TestEditDuringTheWarmUpIsNotLost(t *testing.T) {
	var h *harness
	var sale atomic.Int64
	edited := false
	merchant := ""
	h = newHarness(t, harnessOpts{beforeRedisLoad: func(saleID int64) {
		if saleID != sale.Load() || edited {
			return
		}
		edited = true
		r := h.do("PATCH", fmt.Sprintf("/api/admin/sales/%d", saleID), merchant, map[string]any{
			"items": []map[string]any{{"itemId": strconv.FormatInt(h.sqlInt(`SELECT min(id) FROM items WHERE sale_id = ?`, saleID), 10), "quantity": 2}},
		})
		if r.Status != http.StatusOK {
			t.Errorf("edit during the load: %d %s", r.Status, r.Raw)
		}
	}})
	merchant = h.token(9000, auth.RoleMerchant)
	s := h.createSale(time.Now().Add(20*time.Minute), 5) // beyond the warm-up: not loaded
	ctx := context.Background()
	if st, err := h.app.Stock.State(ctx, s.sale); err != nil || st.Loaded {
		t.Fatalf("the sale is loaded before its warm-up (%v)", err)
	}
	sale.Store(s.sale)
	if r := h.do("POST", fmt.Sprintf("/api/admin/sales/%d/warm", s.sale), merchant, nil); r.Status != http.StatusOK {
		t.Fatalf("warm: %d %s", r.Status, r.Raw)
	}
	if !edited {
		t.Fatal("the load did not pass through the window between snapshot and Redis")
	}
	// Redis does not sell the sale as it was before the edit: it is failed closed ...
	if st, err := h.app.Stock.State(ctx, s.sale); err != nil || (st.Loaded && !st.Lost && h.redisStock(s, s.items[0]) != 2) {
		t.Fatalf("after an edit during the load, redis holds the sale healthy with the old quantity (%v)", err)
	}
	// ... and rebuilt from Postgres, with the edit, once its warm-up is due (the start moved
	// within FLASHSALE_WARM_AHEAD here).
	start := time.Now().Add(5 * time.Minute).UTC()
	if r := h.do("PATCH", fmt.Sprintf("/api/admin/sales/%d", s.sale), merchant, map[string]any{
		"startsAt": start.Format(time.RFC3339), "endsAt": start.Add(time.Hour).Format(time.RFC3339),
	}); r.Status != http.StatusOK {
		t.Fatalf("move the start: %d %s", r.Status, r.Raw)
	}
	testenv.Eventually(t, 15*time.Second, "the sale back in redis, healthy, with the edit, after the warm-up", func() error {
		st, err := h.app.Stock.State(ctx, s.sale)
		if err != nil || !st.Loaded || st.Lost {
			return fmt.Errorf("loaded %v, lost %v, %v", st.Loaded, st.Lost, err)
		}
		if n := h.redisStock(s, s.items[0]); n != 2 {
			return fmt.Errorf("redis holds %d units of the item, want the edited 2", n)
		}
		return nil
	})
	h.checkInvariants(s)
}
