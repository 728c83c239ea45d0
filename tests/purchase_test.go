package tests

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/pipeline"
	"github.com/flashsale/flashsale/services/purchase"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// The seed's race: 1,000 distinct shoppers against 100 units through the HTTP API. Each holds a
// purchase token first: the sale's second item (1,000 units nobody buys here) gives its token
// budget room for all of them (tokens go out within the units left and 10%).
func TestRaceThousandShoppersHundredUnits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.liveSale(100, 1000)
	const shoppers = 1000

	tokens := make([]string, shoppers)
	ptokens := make([]string, shoppers)
	for i := range shoppers {
		tokens[i] = h.token(int64(100000+i), auth.RoleShopper)
		ptokens[i] = h.purchaseToken(tokens[i], s.sale)
	}
	codes := map[int]int{}
	errs := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range shoppers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := h.buy(tokens[i], s.items[0], ptokens[i])
			mu.Lock()
			codes[r.Status]++
			errs[r.str("error")]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()

	if got, want := codes[http.StatusAccepted], 100; got != want {
		t.Errorf("202 answers = %d, want %d (all codes %v)", got, want, codes)
	}
	if got, want := codes[http.StatusGone], 900; got != want || errs["SOLD_OUT"] != 900 {
		t.Errorf("410 answers = %d (SOLD_OUT %d), want %d (all codes %v)", got, errs["SOLD_OUT"], want, codes)
	}
	h.drain(s)
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE item_id = ? AND status IN ('PENDING','PAID')`, s.items[0]); got != 100 {
		t.Errorf("live orders in postgres = %d, want 100", got)
	}
	if got := h.sqlInt(`SELECT sold FROM items WHERE id = ?`, s.items[0]); got != 100 {
		t.Errorf("sold = %d, want 100", got)
	}
	if got := h.redisStock(s, s.items[0]); got != 0 {
		t.Errorf("redis stock = %d, want 0", got)
	}
	h.checkInvariants(s)
}

// One shopper clicking 20 times at once, each click with its own purchase token (the second item's
// units give the token budget room for 20).
func TestSameShopperTwentyClicks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.liveSale(10, 20)
	tok := h.token(42, auth.RoleShopper)
	ptokens := make([]string, 20)
	for i := range ptokens {
		ptokens[i] = h.purchaseToken(tok, s.sale)
	}
	codes := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, pt := range ptokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := h.buy(tok, s.items[0], pt)
			mu.Lock()
			codes[fmt.Sprintf("%d %s", r.Status, r.str("error"))]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes["202 "] != 1 || codes["409 ALREADY_PURCHASED"] != 19 {
		t.Errorf("answers = %v, want one 202 and 19 409 ALREADY_PURCHASED", codes)
	}
	h.drain(s)
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE user_id = 42`); got != 1 {
		t.Errorf("orders of the shopper = %d, want 1", got)
	}
	h.checkInvariants(s)
}

// A purchase token is single use, bound to its shopper and its sale, and short-lived. The same
// attempt sent again (same token, same item) is not a second use: it is answered as the first.
func TestPurchaseTokenRules(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{env: map[string]string{"FLASHSALE_PURCHASE_TOKEN_TTL": "1s"}})
	s := h.liveSale(10, 10)
	other := h.liveSale(10)
	alice, bob := h.token(1, auth.RoleShopper), h.token(2, auth.RoleShopper)

	pt := h.purchaseToken(alice, s.sale)
	first := h.buy(alice, s.items[0], pt)
	if first.Status != http.StatusAccepted {
		t.Fatalf("first use: %d %s", first.Status, first.Raw)
	}
	r := h.buy(alice, s.items[0], pt)
	if r.Status != http.StatusAccepted || r.str("orderId") != first.str("orderId") {
		t.Errorf("the same attempt again: %d %s, want 202 with order %s", r.Status, r.Raw, first.str("orderId"))
	}
	r = h.buy(alice, s.items[1], pt)
	if r.Status != http.StatusForbidden || r.str("error") != "INVALID_PURCHASE_TOKEN" {
		t.Errorf("second use, on another item: %d %s, want 403 INVALID_PURCHASE_TOKEN", r.Status, r.Raw)
	}
	uniqueAcked(h)

	cases := []struct {
		name   string
		bearer string
		item   int64
		token  string
	}{
		{"another shopper's token", bob, s.items[1], h.purchaseToken(alice, s.sale)},
		{"a token of another sale", alice, s.items[1], h.purchaseToken(alice, other.sale)},
		{"no token", alice, s.items[1], ""},
		{"garbage", alice, s.items[1], "not-a-token"},
		{"tampered", alice, s.items[1], tamper(h.purchaseToken(alice, s.sale))},
	}
	for _, c := range cases {
		r := h.buy(c.bearer, c.item, c.token)
		if r.Status != http.StatusForbidden || r.str("error") != "INVALID_PURCHASE_TOKEN" {
			t.Errorf("%s: %d %s, want 403 INVALID_PURCHASE_TOKEN", c.name, r.Status, r.Raw)
		}
	}
	expired := h.purchaseToken(bob, s.sale)
	time.Sleep(1100 * time.Millisecond)
	if r := h.buy(bob, s.items[1], expired); r.Status != http.StatusForbidden || r.str("error") != "INVALID_PURCHASE_TOKEN" {
		t.Errorf("expired token: %d %s, want 403 INVALID_PURCHASE_TOKEN", r.Status, r.Raw)
	}
	h.checkInvariants(s)
	h.checkInvariants(other)
}

func tamper(tok string) string {
	b := []byte(tok)
	if b[3] == 'A' {
		b[3] = 'B'
	} else {
		b[3] = 'A'
	}
	return string(b)
}

// Before the start: the token request answers 425 with Retry-After; after the end, 410.
func TestSaleWindow(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.createSale(time.Now().Add(90*time.Second), 5)
	alice := h.token(1, auth.RoleShopper)
	c := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/captcha", s.sale), alice, nil)
	if c.Status != http.StatusOK || c.str("captchaId") == "" {
		t.Fatalf("captcha during the countdown: %d %s", c.Status, c.Raw)
	}
	r := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", s.sale), alice, map[string]string{"captchaId": c.str("captchaId"), "answer": "test"})
	if r.Status != http.StatusTooEarly || r.str("error") != "NOT_STARTED" {
		t.Fatalf("token before start: %d %s, want 425 NOT_STARTED", r.Status, r.Raw)
	}
	if ra := r.Header.Get("Retry-After"); ra != "90" && ra != "89" {
		t.Errorf("Retry-After = %q, want about 90", ra)
	}
	// A sale that ends in a moment.
	c2 := h.do("POST", "/api/admin/sales", h.token(9000, auth.RoleMerchant), map[string]any{
		"name": "short", "startsAt": time.Now().Add(-time.Second).UTC().Format(time.RFC3339),
		"endsAt": time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano),
		"items":  []map[string]any{{"name": "x", "priceCents": 1, "quantity": 1}},
	})
	if c2.Status != http.StatusCreated {
		t.Fatalf("create a short sale: %d %s", c2.Status, c2.Raw)
	}
	ended := c2.str("saleId")
	time.Sleep(1600 * time.Millisecond)
	r = h.do("POST", "/api/flash-sales/"+ended+"/purchase-token", alice, map[string]string{"captchaId": "x", "answer": "test"})
	if r.Status != http.StatusGone || r.str("error") != "SALE_ENDED" {
		t.Errorf("token after the end: %d %s, want 410 SALE_ENDED", r.Status, r.Raw)
	}
	r = h.do("POST", "/api/flash-sales/"+ended+"/purchase-token", alice, map[string]string{"captchaId": "x", "answer": "wrong"})
	if r.Status != http.StatusGone {
		t.Errorf("an ended sale answers before the captcha: %d %s", r.Status, r.Raw)
	}
	h.checkInvariants(s)
}

// Order status goes QUEUED → PENDING; payment is idempotent; another shopper sees 404.
func TestOrderLifecycleAndPayment(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noWriter: true})
	s := h.liveSale(3)
	alice, bob := h.token(1, auth.RoleShopper), h.token(2, auth.RoleShopper)
	r := h.buy(alice, s.items[0], h.purchaseToken(alice, s.sale))
	if r.Status != http.StatusAccepted || r.str("status") != "QUEUED" {
		t.Fatalf("buy: %d %s", r.Status, r.Raw)
	}
	id := r.str("orderId")
	o := h.do("GET", "/api/flash-sales/orders/"+id, alice, nil)
	if o.Status != http.StatusOK || o.str("status") != "QUEUED" || o.Body["payBy"] != nil {
		t.Errorf("queued order: %d %s, want QUEUED without payBy", o.Status, o.Raw)
	}
	if p := h.do("POST", "/api/flash-sales/orders/"+id+"/pay", alice, nil); p.Status != http.StatusConflict || p.str("error") != "NOT_PAYABLE" {
		t.Errorf("pay while queued: %d %s, want 409 NOT_PAYABLE", p.Status, p.Raw)
	}
	h.app.Start(context.Background(), true, false)
	h.drain(s)
	o = h.do("GET", "/api/flash-sales/orders/"+id, alice, nil)
	if o.Status != http.StatusOK || o.str("status") != "PENDING" || o.str("payBy") == "" || o.str("itemId") == "" {
		t.Errorf("written order: %d %s, want PENDING with payBy", o.Status, o.Raw)
	}
	payBy, err := time.Parse(time.RFC3339, o.str("payBy"))
	if err != nil || payBy.Before(time.Now().Add(9*time.Minute)) {
		t.Errorf("payBy = %q, want about 10 minutes ahead", o.str("payBy"))
	}
	if g := h.do("GET", "/api/flash-sales/orders/"+id, bob, nil); g.Status != http.StatusNotFound || g.str("error") != "NOT_FOUND" {
		t.Errorf("another shopper's order: %d %s, want 404", g.Status, g.Raw)
	}
	if p := h.do("POST", "/api/flash-sales/orders/"+id+"/pay", bob, nil); p.Status != http.StatusNotFound {
		t.Errorf("another shopper pays: %d %s, want 404", p.Status, p.Raw)
	}
	for i := range 2 {
		p := h.do("POST", "/api/flash-sales/orders/"+id+"/pay", alice, nil)
		if p.Status != http.StatusOK || p.str("status") != "PAID" {
			t.Errorf("pay #%d: %d %s, want 200 PAID", i+1, p.Status, p.Raw)
		}
	}
	// A payment window that has closed: 409 EXPIRED, and the order is EXPIRED with its unit back
	// (the answer and the state agree, at once).
	r = h.buy(bob, s.items[0], h.purchaseToken(bob, s.sale))
	h.drain(s)
	h.sql().Exec(`UPDATE orders SET pay_by = now() - interval '1 second' WHERE id = ?`, r.str("orderId"))
	if p := h.do("POST", "/api/flash-sales/orders/"+r.str("orderId")+"/pay", bob, nil); p.Status != http.StatusConflict || p.str("error") != "EXPIRED" {
		t.Errorf("pay after the window: %d %s, want 409 EXPIRED", p.Status, p.Raw)
	}
	if o := h.do("GET", "/api/flash-sales/orders/"+r.str("orderId"), bob, nil); o.str("status") != "EXPIRED" || o.Body["payBy"] != nil {
		t.Errorf("order after paying too late: %s, want EXPIRED", o.Raw)
	}
	checkAdminStockAfterPayAndExpiry(t, h, s)
	if o := h.do("GET", fmt.Sprintf("/api/admin/sales/%d/stock", s.sale), h.token(9001, auth.RoleMerchant), nil); o.Status != http.StatusNotFound {
		t.Errorf("another merchant's sale: %d, want 404", o.Status)
	}
	h.checkInvariants(s)
}

// checkAdminStockAfterPayAndExpiry checks the merchant's stock view of the item after one order
// paid and one expired: quantity 3, displayed 2, paid 1, real 2, expired 1, reconciled.
func checkAdminStockAfterPayAndExpiry(t *testing.T, h *harness, s saleIDs) {
	t.Helper()
	st := h.do("GET", fmt.Sprintf("/api/admin/sales/%d/stock", s.sale), h.token(9000, auth.RoleMerchant), nil)
	items, _ := st.Body["items"].([]any)
	if st.Status != http.StatusOK || len(items) != 1 {
		t.Fatalf("admin stock: %d %s", st.Status, st.Raw)
	}
	it := items[0].(map[string]any)
	want := map[string]float64{"quantity": 3, "displayed": 2, "paid": 1, "frozen": 0, "real": 2, "expired": 1, "pending": 0}
	for k, v := range want {
		if it[k] != v {
			t.Errorf("admin stock %s = %v, want %v (%s)", k, it[k], v, st.Raw)
		}
	}
	if it["reconciled"] != true {
		t.Errorf("admin stock reconciled = %v, want true", it["reconciled"])
	}
}

// NATS unavailable during a purchase: 503, the unit is back in Redis, and no order appears
// later, even once NATS is back and anything it buffered has been delivered.
func TestNATSUnavailable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{env: map[string]string{"FLASHSALE_PUBLISH_TIMEOUT": "1s"}})
	s := h.liveSale(5)
	alice := h.token(1, auth.RoleShopper)
	pt := h.purchaseToken(alice, s.sale)

	h.app.NATSServer.Shutdown()
	h.app.NATSServer.WaitForShutdown()
	r := h.buy(alice, s.items[0], pt)
	if r.Status != http.StatusServiceUnavailable || r.str("error") != "UNAVAILABLE" {
		t.Fatalf("purchase with NATS down: %d %s, want 503 UNAVAILABLE", r.Status, r.Raw)
	}
	if got := h.redisStock(s, s.items[0]); got != 5 {
		t.Errorf("redis stock after the failed publish = %d, want 5", got)
	}
	if ok, _ := h.app.Redis.HExists(context.Background(), store.BuyersKey(s.sale), "1").Result(); ok {
		t.Errorf("the shopper is still a buyer after the failed publish")
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
	// up to 10 s to reconnect; the drain below says it if the queue never came back
	_ = testenv.Poll(10*time.Second, testenv.PollInterval, testenv.Until(h.app.Queue.IsConnected, "not reconnected"))
	time.Sleep(time.Second) // anything buffered during the outage reaches the writer
	h.drain(s)
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE item_id = ? AND status <> 'FAILED'`, s.items[0]); got != 0 {
		t.Errorf("orders after the failed purchase = %d, want 0", got)
	}
	// Selling resumes.
	if r := h.buy(alice, s.items[0], h.purchaseToken(alice, s.sale)); r.Status != http.StatusAccepted {
		t.Errorf("purchase after NATS is back: %d %s", r.Status, r.Raw)
	}
	h.checkInvariants(s)
}

// The writer stopped after commit and before ack, then restarted: redelivery writes no duplicate.
func TestWriterCrashAfterCommitBeforeAck(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noWriter: true, env: map[string]string{"FLASHSALE_WRITER_ACK_WAIT": "1s"}})
	s := h.liveSale(20)
	for i := range 10 {
		tok := h.token(int64(500+i), auth.RoleShopper)
		if r := h.buy(tok, s.items[0], h.purchaseToken(tok, s.sale)); r.Status != http.StatusAccepted {
			t.Fatalf("buy: %d %s", r.Status, r.Raw)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := pipeline.WriterConfig{Batch: 100}
	crashing := pipeline.NewWriter(cfg, h.app.Queue, h.app.DB, h.app.Stock, h.app.SoldOut, nil, h.app.Log)
	commits := 0
	crashing.AfterCommit = func() error { commits++; return fmt.Errorf("killed after commit") }
	if err := crashing.Run(ctx); err != nil {
		t.Fatalf("crashing writer: %v", err)
	}
	if commits != 1 {
		t.Fatalf("commits before the crash = %d, want 1", commits)
	}
	if got := h.sqlInt(`SELECT count(*) FROM orders`); got != 10 {
		t.Fatalf("orders committed before the crash = %d, want 10", got)
	}
	backlog, _ := h.app.Queue.Backlog(ctx)
	if backlog == 0 {
		t.Fatalf("the crashed batch was acknowledged")
	}
	restarted := pipeline.NewWriter(cfg, h.app.Queue, h.app.DB, h.app.Stock, h.app.SoldOut, nil, h.app.Log)
	go restarted.Run(ctx)
	h.drain(s)
	if got := h.sqlInt(`SELECT count(*) FROM orders`); got != 10 {
		t.Errorf("orders after redelivery = %d, want 10", got)
	}
	if got := h.sqlInt(`SELECT sold FROM items WHERE id = ?`, s.items[0]); got != 10 {
		t.Errorf("sold after redelivery = %d, want 10", got)
	}
	cancel()
	h.checkInvariants(s)
}

// A message Postgres refuses (quantity lowered under Redis's feet) is dead-lettered, its
// reservation released, and nothing is oversold.
func TestRefusedOrderIsDeadLettered(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noWriter: true})
	s := h.liveSale(5)
	var orders []string
	for i := range 5 {
		tok := h.token(int64(700+i), auth.RoleShopper)
		r := h.buy(tok, s.items[0], h.purchaseToken(tok, s.sale))
		if r.Status != http.StatusAccepted {
			t.Fatalf("buy: %d %s", r.Status, r.Raw)
		}
		orders = append(orders, r.str("orderId"))
	}
	h.sql().Exec(`UPDATE items SET quantity = 3 WHERE id = ?`, s.items[0])
	h.app.Start(context.Background(), true, false)
	h.drain(s)

	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE status = 'PENDING'`); got != 3 {
		t.Errorf("PENDING orders = %d, want 3", got)
	}
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE status = 'FAILED'`); got != 2 {
		t.Errorf("FAILED orders = %d, want 2", got)
	}
	if got := h.sqlInt(`SELECT sold FROM items WHERE id = ?`, s.items[0]); got != 3 {
		t.Errorf("sold = %d, want 3", got)
	}
	dead, err := h.app.Queue.DeadCount(context.Background())
	if err != nil || dead != 2 {
		t.Errorf("dead letters = %d (%v), want 2", dead, err)
	}
	failed := 0
	for i, id := range orders {
		o := h.do("GET", "/api/flash-sales/orders/"+id, h.token(int64(700+i), auth.RoleShopper), nil)
		if o.str("status") == "FAILED" {
			failed++
		}
	}
	if failed != 2 {
		t.Errorf("shoppers seeing FAILED = %d, want 2", failed)
	}
	h.checkInvariants(s)
}

// Redis unreachable: purchases answer 503 and never fall through to Postgres; Redis's data
// lost: 503 until the keeper rebuilds it from Postgres, then selling resumes correctly.
func TestRedisFailClosed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.liveSale(10)
	alice, bob, carol := h.token(1, auth.RoleShopper), h.token(2, auth.RoleShopper), h.token(3, auth.RoleShopper)
	if r := h.buy(alice, s.items[0], h.purchaseToken(alice, s.sale)); r.Status != http.StatusAccepted {
		t.Fatalf("buy: %d %s", r.Status, r.Raw)
	}
	h.drain(s)
	ptBob := h.purchaseToken(bob, s.sale)

	h.redis.Kill(t)
	if r := h.buy(bob, s.items[0], ptBob); r.Status != http.StatusServiceUnavailable || r.str("error") != "UNAVAILABLE" {
		t.Errorf("purchase with redis down: %d %s, want 503 UNAVAILABLE", r.Status, r.Raw)
	}
	if got := h.sqlInt(`SELECT count(*) FROM orders`); got != 1 {
		t.Errorf("orders while redis is down = %d, want 1", got)
	}

	h.redis.Wipe(t) // back, but empty
	r := h.buy(bob, s.items[0], h.purchaseToken(bob, s.sale))
	if r.Status != http.StatusServiceUnavailable && r.Status != http.StatusAccepted {
		t.Errorf("purchase on an empty redis: %d %s, want 503 (or 202 once rebuilt)", r.Status, r.Raw)
	}
	testenv.Eventually(t, 10*time.Second, "the keeper rebuilt redis from postgres", func() error {
		if lv, err := h.app.Stock.Levels(context.Background(), s.sale, s.items); err != nil || lv[0] < 0 {
			return fmt.Errorf("levels %v, %v", lv, err)
		}
		return nil
	})
	if r := h.buy(alice, s.items[0], h.purchaseToken(alice, s.sale)); r.Status != http.StatusConflict {
		t.Errorf("alice buys again after the rebuild: %d %s, want 409 (buyers rebuilt)", r.Status, r.Raw)
	}
	if r := h.buy(carol, s.items[0], h.purchaseToken(carol, s.sale)); r.Status != http.StatusAccepted {
		t.Errorf("carol buys after the rebuild: %d %s, want 202", r.Status, r.Raw)
	}
	h.checkInvariants(s)
}

// A reservation whose instance died before publishing returns to stock, exactly once.
func TestOrphanReservationReturns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{env: map[string]string{"FLASHSALE_ORPHAN_AGE": "1s"}})
	s := h.liveSale(2)
	ctx := context.Background()
	now := time.Now()
	orphan := purchase.NewOrderID(s.items[0], now)
	if _, err := h.app.Stock.Reserve(ctx, store.Attempt{SaleID: s.sale, ItemID: s.items[0], UserID: 77, OrderID: orphan, Nonce: "n1",
		TokenExpires: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if got := h.redisStock(s, s.items[0]); got != 1 {
		t.Fatalf("stock after the orphan reservation = %d, want 1", got)
	}
	testenv.Eventually(t, 10*time.Second, "the orphan returned to stock", func() error {
		if got := h.redisStock(s, s.items[0]); got != 2 {
			return fmt.Errorf("stock %d, want 2", got)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // more keeper passes must not return it twice
	if got := h.redisStock(s, s.items[0]); got != 2 {
		t.Errorf("stock after several keeper passes = %d, want 2", got)
	}
	h.checkInvariants(s)
}

// A merchant never buys (issue: merchants do not buy): a merchant's token is refused the sale's
// captcha, a purchase token and the purchase itself with 403 MERCHANTS_CANNOT_BUY, even on a
// valid purchase token, and nothing is reserved; a shopper still buys the same item.
func TestMerchantsCannotBuy(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.liveSale(1)
	merchant, shopper := h.token(9000, auth.RoleMerchant), h.token(7, auth.RoleShopper)
	refused := func(what string, r response) {
		t.Helper()
		if r.Status != http.StatusForbidden || r.str("error") != string(shop.CodeMerchantsCannotBuy) {
			t.Errorf("%s with a merchant's token: %d %s, want 403 MERCHANTS_CANNOT_BUY", what, r.Status, r.Raw)
		}
	}
	refused("captcha", h.do("POST", fmt.Sprintf("/api/flash-sales/%d/captcha", s.sale), merchant, nil))
	refused("purchase token", h.do("POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", s.sale), merchant,
		map[string]string{"captchaId": "any", "answer": "test"}))
	// Even with a valid purchase token (a shopper's, replayed), the merchant's purchase is refused
	// before the token is looked at, and the token stays unspent.
	pt := h.purchaseToken(shopper, s.sale)
	refused("purchase", h.buy(merchant, s.items[0], pt))
	if n := h.redisStock(s, s.items[0]); n != 1 {
		t.Errorf("stock after the merchant's refused purchase = %d, want 1 (nothing reserved)", n)
	}
	if r := h.buy(shopper, s.items[0], pt); r.Status != http.StatusAccepted {
		t.Fatalf("the shopper buys: %d %s, want 202", r.Status, r.Raw)
	}
	h.drain(s)
	if n := h.sqlInt(`SELECT count(*) FROM orders WHERE item_id = ? AND user_id = 9000`, s.items[0]); n != 0 {
		t.Errorf("%d orders of the merchant, want 0", n)
	}
	h.checkInvariants(s)
}
