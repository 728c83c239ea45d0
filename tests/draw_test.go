package tests

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"sort"
	"strconv"
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

// drawShopper is one shopper of a draw test: their bearer, purchase token, and what came of it.
type drawShopper struct {
	user    int64
	bearer  string
	ptoken  string
	orderID string
	answer  response
}

// drawShoppers signs n shoppers in (user ids from first) and fetches each a purchase token, 32 at
// a time, once the sale has started.
func drawShoppers(h *harness, saleID, first int64, n int) []*drawShopper {
	h.t.Helper()
	return drawShoppersFetching(h, first, n, func(sh *drawShopper) { sh.ptoken = h.purchaseToken(sh.bearer, saleID) })
}

// drawShoppersAsFound is drawShoppers for a sale without a fair start, where the token budget
// hands out tokens within the units and 10%: a shopper refused a token (410 SOLD_OUT) has none
// and buys nothing.
func drawShoppersAsFound(h *harness, saleID, first int64, n int) []*drawShopper {
	h.t.Helper()
	return drawShoppersFetching(h, first, n, func(sh *drawShopper) {
		r := h.tokenAttempt(sh.bearer, saleID)
		switch {
		case r.Status == http.StatusOK:
			sh.ptoken = r.str("purchaseToken")
		case r.Status != http.StatusGone || r.str("error") != "SOLD_OUT":
			h.t.Errorf("purchase token: %d %s, want 200 or 410 SOLD_OUT", r.Status, r.Raw)
		}
	})
}

// drawShoppersFetching signs n shoppers in (user ids from first) and runs fetch for each, 32 at
// a time.
func drawShoppersFetching(h *harness, first int64, n int, fetch func(*drawShopper)) []*drawShopper {
	out := make([]*drawShopper, n)
	for i := range out {
		u := first + int64(i)
		out[i] = &drawShopper{user: u, bearer: h.token(u, auth.RoleShopper)}
	}
	parallel(32, len(out), func(i int) { fetch(out[i]) })
	return out
}

// parallel runs fn(0..n-1) on k goroutines. A goroutine that fails the test (t.Fatal ends it)
// leaves the rest to the others, and none waits for it: the test ends with its failure, not a hang.
func parallel(k, n int, fn func(i int)) {
	var wg sync.WaitGroup
	var next atomic.Int64
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// enterDraw has every shopper buy itemID inside the draw window, round robin over the
// instances, and fails the test unless each is answered 202 with draw: true.
func enterDraw(t *testing.T, itemID int64, shoppers []*drawShopper, via ...*harness) {
	t.Helper()
	parallel(16, len(shoppers), func(i int) {
		sh := shoppers[i]
		sh.answer = via[i%len(via)].buy(sh.bearer, itemID, sh.ptoken)
		sh.orderID = sh.answer.str("orderId")
	})
	for _, sh := range shoppers {
		if sh.answer.Status != http.StatusAccepted || sh.answer.Body["draw"] != true {
			t.Fatalf("purchase in the window: %d %s, want 202 draw: true", sh.answer.Status, sh.answer.Raw)
		}
	}
}

// finalStatus polls a shopper's order until the draw decided it.
func finalStatus(h *harness, s *drawShopper) map[string]any {
	h.t.Helper()
	return testenv.EventuallyValue(h.t, 30*time.Second, "order "+s.orderID+" decided", func() (map[string]any, error) {
		r := h.do("GET", "/api/flash-sales/orders/"+s.orderID, s.bearer, nil)
		if r.Status != http.StatusOK {
			return nil, fmt.Errorf("order: %d %s", r.Status, r.Raw)
		}
		if r.str("status") == "QUEUED" {
			return nil, fmt.Errorf("still QUEUED")
		}
		return r.Body, nil
	})
}

// TestFairStartDraw: purchases in a sale's first moments enter a draw (202 draw: true, QUEUED),
// one entry per shopper; once the window closes the units go to exactly as many entrants as
// there are units, every other entrant ends NOT_SELECTED with a sentence saying it was a draw;
// after the window the sale sells first come, first served; the merchant's /draw record lists
// every entry with its rank; the invariants hold.
func TestFairStartDraw(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	starts := time.Now().Add(1500 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	s := h.createSaleWith(map[string]any{"fairStartMillis": 3000}, starts, 5)
	merchant := h.token(9000, auth.RoleMerchant)
	r := h.do("GET", fmt.Sprintf("/api/flash-sales/%d", s.sale), "", nil)
	if r.Body["fairStartMillis"] != float64(3000) {
		t.Fatalf("sale answer: fairStartMillis %v, want 3000: %s", r.Body["fairStartMillis"], r.Raw)
	}
	// Before the window: the commitment is published, the seed is not.
	commitment := r.str("drawCommitment")
	if len(commitment) != 64 || strings.ToLower(commitment) != commitment || r.Body["drawSeed"] != nil {
		t.Fatalf("sale answer before the window: drawCommitment %q, drawSeed %v; want 64 lowercase hex digits and no seed", commitment, r.Body["drawSeed"])
	}
	time.Sleep(time.Until(starts))
	shoppers := drawShoppers(h, s.sale, 500, 20)
	parallel(20, len(shoppers), func(i int) {
		sh := shoppers[i]
		sh.answer = h.buy(sh.bearer, s.items[0], sh.ptoken)
		sh.orderID = sh.answer.str("orderId")
	})
	if time.Since(starts) >= 3*time.Second {
		t.Fatalf("the entries took %v: not all inside the window; the machine is too slow for this test", time.Since(starts))
	}
	for _, sh := range shoppers {
		if sh.answer.Status != http.StatusAccepted || sh.answer.Body["draw"] != true || sh.answer.str("status") != "QUEUED" {
			t.Fatalf("purchase in the window: %d %s, want 202 QUEUED draw: true", sh.answer.Status, sh.answer.Raw)
		}
	}
	// While the window is open: the entry is QUEUED with draw: true; a second entry of the same
	// shopper names the first; the same attempt sent again answers as the first did.
	first := shoppers[0]
	if r := h.do("GET", "/api/flash-sales/orders/"+first.orderID, first.bearer, nil); r.str("status") != "QUEUED" || r.Body["draw"] != true {
		t.Errorf("entry while the window is open: %d %s, want QUEUED draw: true", r.Status, r.Raw)
	}
	if r := h.buy(first.bearer, s.items[0], h.purchaseToken(first.bearer, s.sale)); r.Status != http.StatusConflict ||
		r.str("error") != "ALREADY_PURCHASED" || r.str("orderId") != first.orderID {
		t.Errorf("second entry: %d %s, want 409 ALREADY_PURCHASED naming %s", r.Status, r.Raw, first.orderID)
	}
	if r := h.buy(first.bearer, s.items[0], first.ptoken); r.Status != http.StatusAccepted || r.str("orderId") != first.orderID || r.Body["draw"] != true {
		t.Errorf("the same attempt sent again: %d %s, want 202 with the same order and draw: true", r.Status, r.Raw)
	}
	checkUndecidedDraw(t, h, s, merchant, commitment)
	// After the window: a late shopper's purchase waits for the draw (503 with Retry-After while
	// entries answered in the window may still be on their way to the queue) and then is served
	// first come, first served: sold out here (5 units, 20 entrants).
	time.Sleep(time.Until(starts.Add(3 * time.Second)))
	late := drawShoppers(h, s.sale, 900, 1)[0]
	testenv.EventuallyEvery(t, 20*time.Second, 500*time.Millisecond, "the purchase after the window served once the draw is decided", func() error {
		r := h.buy(late.bearer, s.items[0], late.ptoken)
		if r.Status == http.StatusServiceUnavailable && r.str("error") == "UNAVAILABLE" && r.Header.Get("Retry-After") != "" {
			return fmt.Errorf("%d %s", r.Status, r.Raw)
		}
		if r.Status != http.StatusGone || r.str("error") != "SOLD_OUT" {
			t.Fatalf("purchase after the window: %d %s, want 410 SOLD_OUT (the draw gave every unit)", r.Status, r.Raw)
		}
		return nil
	})
	won, lost := 0, 0
	for _, sh := range shoppers {
		b := finalStatus(h, sh)
		switch b["status"] {
		case "PENDING":
			won++
			if b["draw"] != true || b["payBy"] == nil {
				t.Errorf("a winner's order: %v, want draw: true and a payBy", b)
			}
		case "NOT_SELECTED":
			lost++
			if msg, _ := b["message"].(string); msg == "" {
				t.Errorf("a NOT_SELECTED order carries no message: %v", b)
			}
		default:
			t.Errorf("order %s ended %v", sh.orderID, b["status"])
		}
	}
	if won != 5 || lost != 15 {
		t.Errorf("draw: %d won, %d not selected; want 5 and 15", won, lost)
	}
	d := h.do("GET", fmt.Sprintf("/api/admin/sales/%d/draw", s.sale), merchant, nil)
	if d.Status != http.StatusOK || d.Body["windowMillis"] != float64(3000) || d.Body["entries"] != float64(20) ||
		d.Body["winners"] != float64(5) || d.Body["closedAt"] == nil || d.Body["decided"] != true || d.Body["pauses"] != float64(1) {
		t.Errorf("draw record: %d %s, want windowMillis 3000, 20 entries, 5 winners, closedAt, decided, 1 pause", d.Status, d.Raw)
	}
	for _, bad := range []string{"bogus", strings.Repeat("x", 300)} {
		if r := h.do("GET", fmt.Sprintf("/api/admin/sales/%d/draw?cursor=%s", s.sale, bad), merchant, nil); r.Status != http.StatusBadRequest || r.str("error") != "INVALID_INPUT" {
			t.Errorf("draw record with a cursor not given out: %d %s, want 400 INVALID_INPUT", r.Status, r.Raw)
		}
	}
	rec, _ := d.Body["record"].([]any)
	if len(rec) != 20 {
		t.Fatalf("draw record lists %d entries, want 20", len(rec))
	}
	for i, x := range rec {
		e := x.(map[string]any)
		if rank, _ := e["rank"].(float64); rank != float64(i+1) {
			t.Errorf("record line %d: rank %v, want %d (places 1 to 20, best first)", i, e["rank"], i+1)
		}
		if (i < 5) != (e["won"] == true) {
			t.Errorf("record line %d: won %v; the 5 best ranks win", i, e["won"])
		}
	}
	checkRevealedDraw(t, h, s, commitment, 20, 5)
	h.checkInvariants(s)
	if n := h.sqlInt(`SELECT count(*) FROM orders WHERE sale_id = ? AND status = 'ENTERED'`, s.sale); n != 0 {
		t.Errorf("%d entries left undecided", n)
	}
}

// TestDrawAcrossInstancesAndShards: a sale split into 4 Redis stock shards, entered through two
// instances; nobody buys after the window, so the keeper closes the draw. The decision is taken
// in Postgres alone first (as an instance killed right after it leaves it), and a winner cancels
// before any shard applied it: the unit's return waits for the apply instead of being overwritten
// by it. Then the keeper applies the draw to every shard, the returned unit is sold first come,
// first served, and the invariants hold.
func TestDrawAcrossInstancesAndShards(t *testing.T) {
	a := newHarness(t, harnessOpts{noKeeper: true})
	b := newHarness(t, harnessOpts{shared: a, noKeeper: true})
	starts := time.Now().Add(1500 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	s := a.createSaleWith(map[string]any{"fairStartMillis": 2500, "stockShards": 4}, starts, 7)
	if err := a.app.KeeperPass(context.Background()); err != nil { // loads the sale into Redis
		t.Logf("keeper pass: %v", err)
	}
	time.Sleep(time.Until(starts))
	shoppers := drawShoppers(a, s.sale, 700, 30)
	enterDraw(t, s.items[0], shoppers, a, b)
	time.Sleep(time.Until(starts.Add(2500 * time.Millisecond)))
	ctx := context.Background()
	testenv.Eventually(t, 10*time.Second, "every entry written", func() error {
		if n := a.sqlInt(`SELECT count(*) FROM orders WHERE sale_id = ? AND status = 'ENTERED'`, s.sale); n != 30 {
			return fmt.Errorf("%d of 30 written", n)
		}
		return nil
	})
	dec, now, err := a.app.DB.CloseDraw(ctx, s.sale) // decided in Postgres; no shard has applied it
	if err != nil || !now || len(dec.Winners) != 7 {
		t.Fatalf("close draw: %v (now %v, %d winners), want 7 winners decided now", err, now, len(dec.Winners))
	}
	var winner *drawShopper
	for _, sh := range shoppers {
		if sh.orderID == dec.Winners[0].OrderID {
			winner = sh
		}
	}
	if r := a.do("POST", "/api/flash-sales/orders/"+winner.orderID+"/cancel", winner.bearer, nil); r.Status != http.StatusOK {
		t.Fatalf("a winner's cancel before the apply: %d %s", r.Status, r.Raw)
	}
	merchant := a.token(9000, auth.RoleMerchant)
	raise := map[string]any{"items": []map[string]any{{"itemId": strconv.FormatInt(s.items[0], 10), "quantity": 8}}}
	if r := b.do("PATCH", fmt.Sprintf("/api/admin/sales/%d", s.sale), merchant, raise); r.Status != http.StatusServiceUnavailable {
		t.Errorf("a quantity change between the decision and the apply: %d %s, want 503 (the apply would set the stock over it)", r.Status, r.Raw)
	}
	for range 3 { // returns, then the draw's apply, then returns again
		if err := b.app.KeeperPass(ctx); err != nil {
			t.Logf("keeper pass: %v", err)
		}
	}
	left := int64(0)
	for sh := range 4 {
		n, err := a.app.Redis.Get(ctx, store.StockKeyOf(s.sale, sh, s.items[0])).Int64()
		if err != nil {
			t.Fatalf("stock of shard %d: %v", sh, err)
		}
		left += n
	}
	if left != 1 {
		t.Errorf("redis stock (all shards) after the draw and one winner's cancel: %d, want 1", left)
	}
	if r := b.do("PATCH", fmt.Sprintf("/api/admin/sales/%d", s.sale), merchant, raise); r.Status != http.StatusOK {
		t.Errorf("a quantity change once the draw is applied: %d %s, want 200", r.Status, r.Raw)
	}
	won, lost := 0, 0
	for _, sh := range shoppers {
		switch finalStatus(a, sh)["status"] {
		case "PENDING", "CANCELLED":
			won++
		case "NOT_SELECTED":
			lost++
		}
	}
	if won != 7 || lost != 23 {
		t.Errorf("draw: %d won, %d not selected; want 7 and 23", won, lost)
	}
	late := drawShoppers(b, s.sale, 990, 1)[0]
	if r := b.buy(late.bearer, s.items[0], late.ptoken); r.Status != http.StatusAccepted || r.Body["draw"] == true {
		t.Errorf("a purchase after the draw, of the unit a winner gave back: %d %s, want 202 without draw", r.Status, r.Raw)
	}
	a.mu.Lock()
	a.acked = append(a.acked, b.acked...)
	a.mu.Unlock()
	a.checkInvariants(s)
}

// TestDrawSurvivesRedisLossInTheWindow: Redis loses the sale's keys (entrants and entries
// included) in the middle of its draw window. The keeper rebuilds it from Postgres, marked as
// having lost its entries; shoppers go on entering, one of the first ones a second time (Redis no
// longer knows their entry). The draw then waits for the writers to pass the queue's position at
// the window's end instead of trusting Redis's list, and decides every entry: the units to the best ranks, the
// second entry not drawn whatever its rank, every entrant one outcome; the invariants hold.
func TestDrawSurvivesRedisLossInTheWindow(t *testing.T) {
	h := newHarness(t, harnessOpts{env: map[string]string{"FLASHSALE_ORPHAN_AGE": "3s"}})
	starts := time.Now().Add(1500 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	s := h.createSaleWith(map[string]any{"fairStartMillis": 9000}, starts, 5)
	time.Sleep(time.Until(starts))
	enter := func(shoppers []*drawShopper) { enterDraw(t, s.items[0], shoppers, h) }
	first := drawShoppers(h, s.sale, 300, 12)
	enter(first)
	ctx := context.Background()
	keys, err := h.app.Redis.Keys(ctx, fmt.Sprintf("{sale:%d}*", s.sale)).Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("the sale's keys: %v %v", keys, err)
	}
	if err := h.app.Redis.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, "the sale rebuilt, its entries marked lost", func() error {
		if v := h.app.Redis.HGet(ctx, fmt.Sprintf("{sale:%d}:meta", s.sale), "entrylost").Val(); v != "1" {
			return fmt.Errorf("entrylost %q", v)
		}
		return nil
	})
	if time.Since(starts) > 7*time.Second {
		t.Fatalf("the rebuild took until %v after the start: the second wave would miss the window", time.Since(starts))
	}
	second := drawShoppers(h, s.sale, 400, 8)
	again := drawShoppers(h, s.sale, first[0].user, 1)[0] // the first shopper again, with a new token
	enter(append(second, again))
	if again.orderID == first[0].orderID {
		t.Fatalf("the second entry has the first one's order id")
	}
	all := append(append(first, second...), again)
	won, lost := 0, 0
	for _, sh := range all {
		switch finalStatus(h, sh)["status"] {
		case "PENDING":
			won++
		case "NOT_SELECTED":
			lost++
		}
	}
	if won != 5 || lost != len(all)-5 {
		t.Errorf("draw: %d won, %d not selected; want 5 and %d", won, lost, len(all)-5)
	}
	if b := finalStatus(h, again); b["status"] != "NOT_SELECTED" {
		t.Errorf("a shopper's second entry: %v, want NOT_SELECTED (only the first entry is drawn)", b)
	}
	h.checkInvariants(s)
}

// checkUndecidedDraw: while the draw is undecided (its window open here, the entries in) nobody
// sees ranks or names, the merchant included; a quantity change is refused with 409
// DRAW_IN_PROGRESS and changes nothing; a pause (an emergency stop) is taken and counted.
func checkUndecidedDraw(t *testing.T, h *harness, s saleIDs, merchant, commitment string) {
	t.Helper()
	pub := testenv.EventuallyValue(t, 10*time.Second, "the 20 entries written", func() (response, error) {
		r := h.do("GET", fmt.Sprintf("/api/flash-sales/%d/draw", s.sale), "", nil)
		if r.Body["entries"] != float64(20) {
			return r, fmt.Errorf("%d %s", r.Status, r.Raw)
		}
		return r, nil
	})
	if pub.Status != http.StatusOK || pub.Body["decided"] != false ||
		pub.str("commitment") != commitment || pub.Body["seed"] != nil || strings.Contains(pub.Raw, "orderId") {
		t.Errorf("public draw while undecided: %d %s, want decided false, 20 entries, the commitment, no seed, no entry", pub.Status, pub.Raw)
	}
	adm := h.do("GET", fmt.Sprintf("/api/admin/sales/%d/draw", s.sale), merchant, nil)
	if rec, _ := adm.Body["record"].([]any); adm.Status != http.StatusOK || adm.Body["decided"] != false || adm.Body["entries"] != float64(20) ||
		len(rec) != 0 || adm.Body["seed"] != nil || strings.Contains(adm.Raw, "username") {
		t.Errorf("merchant's draw while undecided: %d %s, want counts only", adm.Status, adm.Raw)
	}
	id := strconv.FormatInt(s.items[0], 10)
	for _, body := range []map[string]any{
		{"items": []map[string]any{{"itemId": id, "quantity": 6}}},
		{"items": []map[string]any{{"itemId": id, "quantity": 4}}},
	} {
		if r := h.patchSale(merchant, s.sale, body); r.Status != http.StatusConflict || r.str("error") != "DRAW_IN_PROGRESS" {
			t.Errorf("quantity change while the draw is undecided: %d %s, want 409 DRAW_IN_PROGRESS", r.Status, r.Raw)
		}
	}
	if q := h.sqlInt(`SELECT sum(quantity) FROM items WHERE sale_id = ?`, s.sale); q != 5 {
		t.Errorf("after the refused changes the sale has %d units, want 5", q)
	}
	if r := h.saleAction(merchant, s.sale, "pause"); r.Status != http.StatusOK {
		t.Errorf("pause while the draw is undecided: %d %s, want 200 (an emergency stop stays possible)", r.Status, r.Raw)
	}
	if r := h.saleAction(merchant, s.sale, "resume"); r.Status != http.StatusOK {
		t.Errorf("resume: %d %s", r.Status, r.Raw)
	}
}

// checkRevealedDraw: once decided, the sale reveals its seed (its SHA-256 the commitment given
// before the window), the public record lists every entry by order id with its rank and outcome
// and no shopper, recomputing it from the seed gives the same ranks and winners, and
// `flashsale verify-draw` says so (and says no to a commitment that is not the one published).
func checkRevealedDraw(t *testing.T, h *harness, s saleIDs, commitment string, entries, units int) {
	t.Helper()
	sale := testenv.EventuallyValue(t, 10*time.Second, "the sale answer reveals the seed", func() (response, error) {
		r := h.do("GET", fmt.Sprintf("/api/flash-sales/%d", s.sale), "", nil)
		if r.str("drawSeed") == "" {
			return r, fmt.Errorf("%s", r.Raw)
		}
		return r, nil
	})
	seed, err := hex.DecodeString(sale.str("drawSeed"))
	if sum := sha256.Sum256(seed); err != nil || hex.EncodeToString(sum[:]) != commitment || sale.str("drawCommitment") != commitment {
		t.Fatalf("revealed seed %q: its SHA-256 is not the commitment %s given before the window", sale.str("drawSeed"), commitment)
	}
	pub := h.do("GET", fmt.Sprintf("/api/flash-sales/%d/draw", s.sale), "", nil)
	list, _ := pub.Body["entries"].([]any)
	if pub.Status != http.StatusOK || pub.Body["decided"] != true || pub.str("seed") != sale.str("drawSeed") || len(list) != entries ||
		strings.Contains(pub.Raw, "username") || strings.Contains(pub.Raw, "userId") {
		t.Fatalf("public draw once decided: %d %s, want decided, the seed, %d entries, no shopper", pub.Status, pub.Raw, entries)
	}
	// recomputed here, from the contract's words: HMAC-SHA256 under the seed of the order id
	type entry struct {
		id, outcome string
		rank        float64
		key         []byte
	}
	var es []entry
	for _, x := range list {
		e := x.(map[string]any)
		m := hmac.New(sha256.New, seed)
		m.Write([]byte(e["orderId"].(string)))
		rank, _ := e["rank"].(float64)
		es = append(es, entry{e["orderId"].(string), e["outcome"].(string), rank, m.Sum(nil)})
	}
	sort.Slice(es, func(i, j int) bool { return bytes.Compare(es[i].key, es[j].key) < 0 })
	for i, e := range es {
		want := "NOT_SELECTED"
		if i < units {
			want = "WON"
		}
		if e.rank != float64(i+1) || e.outcome != want {
			t.Errorf("entry %s: rank %v %s, recomputed from the seed: rank %d %s", e.id, e.rank, e.outcome, i+1, want)
		}
	}
	var out strings.Builder
	if err := app.Run(context.Background(), []string{"verify-draw", "-url", h.srv.URL, "-commitment", commitment, strconv.FormatInt(s.sale, 10)},
		func(string) string { return "" }, &out); err != nil || !strings.Contains(out.String(), "OK") {
		t.Errorf("verify-draw: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := app.Run(context.Background(), []string{"verify-draw", "-url", h.srv.URL, "-commitment", strings.Repeat("0", 64), strconv.FormatInt(s.sale, 10)},
		func(string) string { return "" }, &out); err == nil || !strings.Contains(out.String(), "DIFFERENCE") {
		t.Errorf("verify-draw with a commitment that is not the published one: %v\n%s, want a difference and an error", err, out.String())
	}
}
