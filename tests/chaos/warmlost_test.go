//go:build linux

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/testenv"
)

// merchantCall sends a merchant request to instance i, asking again while it answers 503 (Redis
// restarting under a wipe) or nothing, up to d; it returns the first other answer.
func (c *cluster) merchantCall(i int, method, path string, body any, d time.Duration) (answer, error) {
	bearer := c.merchantToken()
	var ans answer
	err := testenv.Poll(d, 250*time.Millisecond, func() error {
		var err error
		ans, err = c.do(i, method, path, bearer, body)
		if err == nil && ans.status == http.StatusServiceUnavailable {
			err = fmt.Errorf("%d %s", ans.status, ans.raw)
		}
		return err
	})
	if err != nil {
		return ans, fmt.Errorf("%s %s: still no answer but 503: %v", method, path, err)
	}
	return ans, nil
}

// scenarioWarmLost (19d): a rush of 1,200 shoppers for 2,000 units; a second in, the writers are
// held back (lockOrders), so acknowledged orders pile up in the queue; then Redis loses the sale
// (the same wipe as scenario 07: on one server restarted empty, on the cluster the sale's master
// and replica restarted empty). With the queue still holding orders the merchant presses Warm
// (instance 1) and cuts item 0 to a quantity between what Postgres counts and what is sold
// (instance 2): both must answer 409 QUEUE_NOT_DRAINED and change nothing, the live view must say
// what the rebuild waits for, and Redis must hold no rebuilt sale for as long as the writers are
// held back, past the rebuild delay. Then the writers are let go: the keeper must rebuild the
// sale by itself (a new load epoch) with every queued order in Postgres; the shoppers whose orders
// were queued at the loss buy again and are told 409 ALREADY_PURCHASED naming their order; the
// same cut is now refused as QUANTITY_TOO_LOW (the units are sold), a cut that leaves room is
// taken, Warm answers 200, and a second wave of shoppers buys.
func scenarioWarmLost(t *testing.T, r *result) {
	c := newCluster(t, clusterOpts{})
	s := c.createSale(time.Now().Add(-time.Second), 0, 1000, 1000)
	l := newLedger()
	shoppers := shoppersFor(s, 1, 1200)
	itemOf := itemOfShoppers(shoppers)
	done := c.goRun(l, s, shoppers, loadOpts{attempts: 20, retryPause: 300 * time.Millisecond})
	time.Sleep(time.Second)
	release := c.lockOrders(t)
	heldAt := time.Now()
	item0 := s.items[0]
	pgSold0 := c.soldInPostgres(t, item0)
	// acknowledged orders of item 0 (the ledger's, by shopper) and how many Postgres lacks
	acked0 := ackedOfItem(l, itemOf, item0)
	testenv.Eventually(t, time.Until(heldAt.Add(20*time.Second)), "a backlog of 40 orders with the writers held back", func() error {
		if a := acked0(); a-pgSold0 < 40 {
			return fmt.Errorf("%d orders of item 0 acknowledged, %d in postgres (answers %v)", a, pgSold0, l.status)
		}
		return nil
	})
	epochBefore := c.saleField(s.id, "epoch")
	wiped := c.redis.wipe(t, s.id)
	lostAt := time.Now()
	ackedAtLoss := l.ackedBefore(lostAt)
	queuedAtLoss := c.unwrittenAtLoss(t, ackedAtLoss)

	warm := c.warmRefused(t, r, s, len(queuedAtLoss))
	// ... and cuts item 0 to a quantity Postgres alone would allow but the queued orders do not.
	a0 := acked0()
	cut := pgSold0 + (a0-pgSold0)/2
	cutBody := map[string]any{"items": []map[string]any{{"itemId": strconv.FormatInt(item0, 10), "quantity": cut}}}
	patch, err := c.merchantCall(2, "PATCH", fmt.Sprintf("/api/admin/sales/%d", s.id), cutBody, 60*time.Second)
	if err != nil || patch.status != http.StatusConflict || patch.str("error") != string(shop.CodeQueueNotDrained) {
		r.Violations++
		t.Errorf("cut item 0 to %d (postgres counts %d sold, %d acknowledged) with orders queued: %d %s (%v), want 409 QUEUE_NOT_DRAINED",
			cut, pgSold0, a0, patch.status, patch.raw, err)
	}
	waits := c.checkRefusedEditsWait(t, r, s)

	c.checkNoRebuildWhileHeld(t, r, s, epochBefore, lostAt, len(queuedAtLoss))
	release()
	releasedAt := time.Now()
	r.Faults = fmt.Sprintf("writers held back (orders locked in SHARE mode) for %.1f s; Redis lost the sale with %d acknowledged orders queued (%s); merchant Warm and a quantity cut meanwhile",
		releasedAt.Sub(heldAt).Seconds(), len(queuedAtLoss), wiped)

	c.checkRebuiltOnceDrained(t, r, s, epochBefore, queuedAtLoss, releasedAt)

	again := c.buyAgainQueuedAtLoss(t, r, l, s, queuedAtLoss, itemOf)
	<-done

	tooLow, roomy := checkCutsAfterTheRebuild(t, r, c, s, cutBody, cut)
	// a second wave buys from the rebuilt sale
	second := c.waveBuys(t, r, l, s, shoppersFor(s, 100001, 200), "the second wave, from the rebuilt sale")
	c.instancesAlive(t, r, "during the scenario")
	c.finish(t, r, l, s)
	r.Note = fmt.Sprintf("warm %d %s; cut of item 0 to %d (postgres %d sold, %d acknowledged) %d %s; live view rebuildWaitsFor %.0f; buyers of queued orders buying again %v; after the rebuild the same cut %d %s, a cut to 990 %d, warm 200; second wave %d answered 202; ",
		warm.status, warm.str("error"), cut, pgSold0, a0, patch.status, patch.str("error"), waits, again, tooLow.status, tooLow.str("error"), roomy.status, second) + r.Note
}

// itemOfShoppers maps each shopper to the item it buys.
func itemOfShoppers(shoppers []shopper) map[int64]int64 {
	itemOf := map[int64]int64{}
	for _, sh := range shoppers {
		itemOf[sh.user] = sh.item
	}
	return itemOf
}

// soldInPostgres is the item's sold count in Postgres.
func (c *cluster) soldInPostgres(t *testing.T, item0 int64) int64 {
	var pgSold0 int64
	if err := c.sql.Raw(`SELECT sold FROM items WHERE id = ?`, item0).Scan(&pgSold0).Error; err != nil {
		t.Fatal(err)
	}
	return pgSold0
}

// warmRefused has the merchant press Warm on the lost sale while the queue holds orders: it must
// be refused (409 QUEUE_NOT_DRAINED).
func (c *cluster) warmRefused(t *testing.T, r *result, s sale, queued int) answer {
	// The merchant presses Warm.
	warm, err := c.merchantCall(1, "POST", fmt.Sprintf("/api/admin/sales/%d/warm", s.id), nil, 60*time.Second)
	if err != nil || warm.status != http.StatusConflict || warm.str("error") != string(shop.CodeQueueNotDrained) {
		r.Violations++
		t.Errorf("warm a lost sale with %d orders queued: %d %s (%v), want 409 QUEUE_NOT_DRAINED", queued, warm.status, warm.raw, err)
	}
	return warm
}

// checkRebuiltOnceDrained waits for the keeper to rebuild the sale by itself once the queue
// drains, and checks that every order queued at the loss is in Postgres by then.
func (c *cluster) checkRebuiltOnceDrained(t *testing.T, r *result, s sale, epochBefore string, queuedAtLoss []string, releasedAt time.Time) {
	ctx := context.Background()
	// The queue drains; the keeper rebuilds the sale by itself.
	c.waitRebuilt(t, s.id, epochBefore, 90*time.Second, "the sale rebuilt after the writers were let go")
	rebuiltIn := time.Since(releasedAt)
	// rebuilt only once drained: every order queued at the loss is in Postgres now
	if have, err := c.db.ExistingOrders(ctx, queuedAtLoss); err != nil || len(have) != len(queuedAtLoss) {
		r.Violations++
		t.Errorf("at the rebuild, %d of the %d orders queued at the loss were in postgres (%v)", len(have), len(queuedAtLoss), err)
	}
	r.Durable = fmt.Sprintf("rebuilt %.1fs after the writers were let go", rebuiltIn.Seconds())
}

// ackedOfItem counts the orders of the item acknowledged so far (the ledger's, by shopper).
func ackedOfItem(l *ledger, itemOf map[int64]int64, item0 int64) func() int64 {
	return func() int64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		n := int64(0)
		for _, u := range l.acked {
			if itemOf[u] == item0 {
				n++
			}
		}
		return n
	}
}

// unwrittenAtLoss is the orders acknowledged at the loss that Postgres does not hold: those the
// queue held; none is a failure (the writers were not held back).
func (c *cluster) unwrittenAtLoss(t *testing.T, ackedAtLoss []string) []string {
	ctx := context.Background()
	have, err := c.db.ExistingOrders(ctx, ackedAtLoss)
	if err != nil {
		t.Fatal(err)
	}
	var queuedAtLoss []string
	for _, id := range ackedAtLoss {
		if _, ok := have[id]; !ok {
			queuedAtLoss = append(queuedAtLoss, id)
		}
	}
	if len(queuedAtLoss) == 0 {
		t.Fatalf("every acknowledged order was in postgres at the loss: the writers were not held back")
	}
	return queuedAtLoss
}

// checkRefusedEditsWait checks that the refused cut changed nothing in Postgres and that the live
// view says what the rebuild waits for; it returns that (rebuildWaitsFor).
func (c *cluster) checkRefusedEditsWait(t *testing.T, r *result, s sale) float64 {
	item0 := s.items[0]
	var qty int64
	if err := c.sql.Raw(`SELECT quantity FROM items WHERE id = ?`, item0).Scan(&qty).Error; err != nil || qty != 1000 {
		r.Violations++
		t.Errorf("item 0's quantity after the refused cut: %d (%v), want 1000", qty, err)
	}
	// The live view says what the rebuild waits for.
	lv, err := c.do(0, "GET", fmt.Sprintf("/api/admin/sales/%d/live", s.id), c.merchantToken(), nil)
	rec, _ := lv.body["reconciliation"].(map[string]any)
	waits, _ := rec["rebuildWaitsFor"].(float64)
	if err != nil || lv.status != http.StatusOK || waits <= 0 {
		r.Violations++
		t.Errorf("live view with orders queued: rebuildWaitsFor %v (%v %d %s), want > 0", rec["rebuildWaitsFor"], err, lv.status, lv.raw)
	}
	return waits
}

// checkNoRebuildWhileHeld checks that Redis holds no rebuilt sale while the queue holds orders,
// past the rebuild delay (the publish timeout and a second after the loss was seen) and two
// seconds more.
func (c *cluster) checkNoRebuildWhileHeld(t *testing.T, r *result, s sale, epochBefore string, lostAt time.Time, queued int) {
	// Redis holds no rebuilt sale while the queue holds orders, past the rebuild delay (the
	// publish timeout and a second after the loss was seen) and two seconds more.
	publishTimeout, _ := time.ParseDuration(c.env["FLASHSALE_PUBLISH_TIMEOUT"])
	holdUntil := lostAt.Add(publishTimeout + 3*time.Second)
	for time.Now().Before(holdUntil) {
		if e := c.saleField(s.id, "epoch"); e != "" && e != epochBefore && c.saleField(s.id, "lost") != "1" {
			r.Violations++
			t.Errorf("the sale was rebuilt (epoch %s, %s before) while the writers were held back with %d orders queued", e, epochBefore, queued)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// buyAgainQueuedAtLoss has the shoppers whose orders were queued at the loss (up to 30) buy
// again: each must be told 409 ALREADY_PURCHASED naming that order. It returns the answers by
// status.
func (c *cluster) buyAgainQueuedAtLoss(t *testing.T, r *result, l *ledger, s sale, queuedAtLoss []string, itemOf map[int64]int64) map[int]int {
	// The shoppers whose orders were queued at the loss cannot buy again.
	owner := map[string]int64{}
	l.mu.Lock()
	for _, id := range queuedAtLoss {
		owner[id] = l.acked[id]
	}
	l.mu.Unlock()
	again := map[int]int{}
	for k, id := range queuedAtLoss[:min(30, len(queuedAtLoss))] {
		u := owner[id]
		// 503 (an instance not caught up with the rebuild yet) is fail closed: asked again
		st, ans, _ := c.probeBuyWhile503(k%3, func(int) int64 { return u }, itemOf[u], s.id, 15*time.Second)
		again[st]++
		switch {
		case st == http.StatusConflict && ans.str("error") == string(shop.CodeAlreadyPurchased) && ans.str("orderId") == id:
			l.mu.Lock()
			l.named[id] = true
			l.mu.Unlock()
		case st == http.StatusAccepted:
			r.Violations++
			t.Errorf("shopper %d, whose order %s was queued at the loss, bought again after the rebuild: %s", u, id, ans.raw)
			l.mu.Lock()
			l.acked[ans.str("orderId")] = u
			l.ackedAt[ans.str("orderId")] = time.Now()
			l.mu.Unlock()
		default:
			r.Violations++
			t.Errorf("shopper %d, whose order %s was queued at the loss, buys again: %d %s, want 409 ALREADY_PURCHASED naming it", u, id, st, ans.raw)
		}
	}
	return again
}

// checkCutsAfterTheRebuild checks, the queue drained and the sale rebuilt, that the same cut is
// judged against every order and refused (409 QUANTITY_TOO_LOW), that a cut leaving room is
// taken, and that Warm answers 200; it returns the answers to the two cuts.
func checkCutsAfterTheRebuild(t *testing.T, r *result, c *cluster, s sale, cutBody map[string]any, cut int64) (answer, answer) {
	item0 := s.items[0]
	// Drained and rebuilt: the same cut is judged against every order, and refused for them.
	tooLow, err := c.merchantCall(2, "PATCH", fmt.Sprintf("/api/admin/sales/%d", s.id), cutBody, 30*time.Second)
	if err != nil || tooLow.status != http.StatusConflict || tooLow.str("error") != string(shop.CodeQuantityTooLow) {
		r.Violations++
		t.Errorf("the same cut to %d after the rebuild: %d %s (%v), want 409 QUANTITY_TOO_LOW", cut, tooLow.status, tooLow.raw, err)
	}
	roomy, err := c.merchantCall(2, "PATCH", fmt.Sprintf("/api/admin/sales/%d", s.id),
		map[string]any{"items": []map[string]any{{"itemId": strconv.FormatInt(item0, 10), "quantity": 990}}}, 30*time.Second)
	if err != nil || roomy.status != http.StatusOK {
		r.Violations++
		t.Errorf("cut item 0 to 990 after the rebuild: %d %s (%v), want 200", roomy.status, roomy.raw, err)
	}
	if w, err := c.merchantCall(1, "POST", fmt.Sprintf("/api/admin/sales/%d/warm", s.id), nil, 30*time.Second); err != nil || w.status != http.StatusOK {
		r.Violations++
		t.Errorf("warm the rebuilt sale: %d %s (%v), want 200", w.status, w.raw, err)
	}
	return tooLow, roomy
}

// waveBuys runs a wave of shoppers and returns how many it bought; a wave that buys nothing is a
// violation (the sale did not recover).
func (c *cluster) waveBuys(t *testing.T, r *result, l *ledger, s sale, shoppers []shopper, what string) int {
	t.Helper()
	before := len(l.ackedIDs())
	c.run(l, s, shoppers, loadOpts{attempts: 10, retryPause: 300 * time.Millisecond})
	n := len(l.ackedIDs()) - before
	if n == 0 {
		r.Violations++
		t.Errorf("%s bought nothing (answers %v)", what, l.status)
	}
	return n
}
