package tests

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/purchase"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// Issue 9's sale administration: PATCH, pause, resume, end and warm.

func (h *harness) patchSale(bearer string, saleID int64, body any) response {
	h.t.Helper()
	return h.do("PATCH", fmt.Sprintf("/api/admin/sales/%d", saleID), bearer, body)
}

func (h *harness) saleAction(bearer string, saleID int64, action string) response {
	h.t.Helper()
	return h.do("POST", fmt.Sprintf("/api/admin/sales/%d/%s", saleID, action), bearer, nil)
}

func (h *harness) meta(saleID int64, field string) string {
	h.t.Helper()
	v, _ := h.app.Redis.HGet(context.Background(), store.MetaKey(saleID), field).Result()
	return v
}

func wantAdminCode(t *testing.T, what string, r response, status int, code shop.Code) {
	t.Helper()
	if r.Status != status || r.str("error") != string(code) || r.str("message") == "" {
		t.Errorf("%s: %d %s; want %d %s with a message", what, r.Status, r.Raw, status, code)
	}
}

func itemsOf(r response) []map[string]any {
	var out []map[string]any
	its, _ := r.Body["items"].([]any)
	for _, it := range its {
		out = append(out, it.(map[string]any))
	}
	return out
}

func TestAdminEditUpcomingSale(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	merchant := h.token(9000, auth.RoleMerchant)
	// Within FLASHSALE_WARM_AHEAD: loaded at creation, so Redis follows the edits below.
	start := time.Now().Add(5 * time.Minute).Truncate(time.Second)
	s := h.createSaleWith(map[string]any{"description": "first", "items": []map[string]any{
		{"name": "a", "priceCents": 100, "quantity": 5, "imageUrl": "https://img.example/a.png"},
		{"name": "b", "priceCents": 200, "quantity": 3}}}, start, 5, 3)
	a, b := s.items[0], s.items[1]
	if got := h.do("GET", fmt.Sprintf("/api/flash-sales/%d", s.sale), "", nil); got.str("description") != "first" ||
		itemsOf(got)[0]["imageUrl"] != "https://img.example/a.png" {
		t.Errorf("created sale = %s; want its description and image", got.Raw)
	}

	checkRefusedEditsChangeNothing(t, h, merchant, s, start)

	// Every field at once, before the start.
	newStart := start.Add(time.Hour)
	r := h.patchSale(merchant, s.sale, map[string]any{
		"name": "renamed", "description": "now with words", "startsAt": newStart.UTC().Format(time.RFC3339),
		"endsAt": newStart.Add(2 * time.Hour).UTC().Format(time.RFC3339), "paymentWindowSeconds": 120,
		"purchaseLimit": "per-item", "currency": "USD",
		"items": []map[string]any{
			{"itemId": strconv.FormatInt(a, 10), "quantity": 8, "name": "a2", "priceCents": 150, "imageUrl": ""},
			{"name": "c", "priceCents": 300, "quantity": 4, "imageUrl": "https://img.example/c.png"},
		},
	})
	if r.Status != http.StatusOK {
		t.Fatalf("edit: %d %s", r.Status, r.Raw)
	}
	its := itemsOf(r)
	if r.str("name") != "renamed" || r.str("description") != "now with words" || r.str("startsAt") != newStart.UTC().Format(time.RFC3339) ||
		r.Body["paymentWindowSeconds"] != float64(120) || r.str("purchaseLimit") != "per-item" || r.str("currency") != "USD" ||
		len(its) != 3 || its[0]["name"] != "a2" || its[0]["quantity"] != float64(8) || its[0]["imageUrl"] != nil ||
		its[1]["itemId"] != strconv.FormatInt(b, 10) || its[2]["name"] != "c" || its[2]["imageUrl"] != "https://img.example/c.png" {
		t.Fatalf("edited sale = %s", r.Raw)
	}
	c, _ := strconv.ParseInt(its[2]["itemId"].(string), 10, 64)
	s.items = append(s.items, c)
	// Redis follows: stock deltas, the added item's key, the meta the reserve script reads.
	if ga, gb, gc := h.redisStock(s, a), h.redisStock(s, b), h.redisStock(s, c); ga != 8 || gb != 3 || gc != 4 {
		t.Errorf("redis stock a, b, c = %d, %d, %d; want 8, 3, 4", ga, gb, gc)
	}
	if st, lim := h.meta(s.sale, "starts"), h.meta(s.sale, "limit"); st != strconv.FormatInt(newStart.UnixMilli(), 10) || lim != "per-item" {
		t.Errorf("meta starts, limit = %s, %s; want %d, per-item", st, lim, newStart.UnixMilli())
	}
	if got := h.do("GET", fmt.Sprintf("/api/flash-sales/%d", s.sale), "", nil); got.str("name") != "renamed" || got.str("description") != "now with words" {
		t.Errorf("GET after the edit = %s", got.Raw)
	}
	// A lower quantity, nothing sold: fine.
	if r := h.patchSale(merchant, s.sale, map[string]any{"items": []map[string]any{{"itemId": strconv.FormatInt(b, 10), "quantity": 1}}}); r.Status != http.StatusOK {
		t.Fatalf("lower quantity: %d %s", r.Status, r.Raw)
	}
	if got := h.redisStock(s, b); got != 1 {
		t.Errorf("redis stock b = %d, want 1", got)
	}
	h.checkInvariants(s)
}

// checkRefusedEditsChangeNothing: refusals change nothing, not even their valid fields (bad
// values, 51 items, another merchant's sale).
func checkRefusedEditsChangeNothing(t *testing.T, h *harness, merchant string, s saleIDs, start time.Time) {
	t.Helper()
	a := s.items[0]
	// Refusals change nothing, not even their valid fields.
	bad := []map[string]any{
		{"name": "x", "purchaseLimit": "per-shopper"},
		{"name": "x", "endsAt": start.Add(-time.Minute).UTC().Format(time.RFC3339)},
		{"name": "x", "endsAt": start.Add(31 * 24 * time.Hour).UTC().Format(time.RFC3339)},
		{"name": "x", "paymentWindowSeconds": 0},
		{"name": "x", "currency": "GBP"},
		{"name": "  "},
		{"name": "x", "description": strings.Repeat("d", 2001)},
		{"name": "x", "items": []map[string]any{{"itemId": strconv.FormatInt(a, 10), "quantity": 0}}},
		{"name": "x", "items": []map[string]any{{"itemId": strconv.FormatInt(a, 10), "priceCents": -1}}},
		{"name": "x", "items": []map[string]any{{"itemId": strconv.FormatInt(a, 10), "imageUrl": "http://img.example/a.png"}}},
		{"name": "x", "items": []map[string]any{{"itemId": "999999999", "quantity": 2}}},
		{"name": "x", "items": []map[string]any{{"name": "no price", "quantity": 2}}},
		{"name": "x", "startsAt": "tomorrow"},
	}
	for i, body := range bad {
		wantAdminCode(t, fmt.Sprintf("bad edit %d", i), h.patchSale(merchant, s.sale, body), http.StatusBadRequest, shop.CodeInvalidInput)
	}
	var many []map[string]any
	for i := 0; i < 49; i++ {
		many = append(many, map[string]any{"name": fmt.Sprintf("n%d", i), "priceCents": 1, "quantity": 1})
	}
	wantAdminCode(t, "51 items", h.patchSale(merchant, s.sale, map[string]any{"items": many}), http.StatusBadRequest, shop.CodeInvalidInput)
	wantAdminCode(t, "another merchant's sale", h.patchSale(h.token(9001, auth.RoleMerchant), s.sale, map[string]any{"name": "mine"}),
		http.StatusNotFound, shop.CodeNotFound)
	if got := h.do("GET", fmt.Sprintf("/api/flash-sales/%d", s.sale), "", nil); got.str("name") != "test sale" {
		t.Errorf("after refusals the sale is %s", got.Raw)
	}
}

func TestAdminEditStartedSale(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	merchant := h.token(9000, auth.RoleMerchant)
	s := h.liveSale(3, 2)
	a := s.items[0]
	id := func(n int64) string { return strconv.FormatInt(n, 10) }

	wantAdminCode(t, "move a started sale's start", h.patchSale(merchant, s.sale, map[string]any{"startsAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}),
		http.StatusConflict, shop.CodeSaleStarted)
	wantAdminCode(t, "currency of a started sale", h.patchSale(merchant, s.sale, map[string]any{"currency": "EUR"}), http.StatusConflict, shop.CodeSaleStarted)
	wantAdminCode(t, "limit of a started sale", h.patchSale(merchant, s.sale, map[string]any{"purchaseLimit": "per-item"}), http.StatusConflict, shop.CodeSaleStarted)
	wantAdminCode(t, "add to a started sale", h.patchSale(merchant, s.sale, map[string]any{"items": []map[string]any{{"name": "x", "priceCents": 1, "quantity": 1}}}),
		http.StatusConflict, shop.CodeSaleStarted)

	// Two units of a sold: its quantity cannot go below 2.
	for u := int64(1); u <= 2; u++ {
		tok := h.token(u, auth.RoleShopper)
		if r := h.buy(tok, a, h.purchaseToken(tok, s.sale)); r.Status != http.StatusAccepted {
			t.Fatalf("buy: %d %s", r.Status, r.Raw)
		}
	}
	h.drain(s)
	wantAdminCode(t, "below units sold", h.patchSale(merchant, s.sale, map[string]any{"items": []map[string]any{{"itemId": id(a), "quantity": 1}}}),
		http.StatusConflict, shop.CodeQuantityTooLow)

	checkInFlightHoldsTheQuantity(t, h, merchant, s)

	// Raising a sold-out item's quantity: Redis follows and a purchase works.
	tok := h.token(5, auth.RoleShopper)
	if r := h.buy(tok, a, h.purchaseToken(tok, s.sale)); r.Status != http.StatusAccepted {
		t.Fatalf("third unit: %d %s", r.Status, r.Raw)
	}
	tok6 := h.token(6, auth.RoleShopper)
	wantAdminCode(t, "sold out", h.buy(tok6, a, h.purchaseToken(tok6, s.sale)), http.StatusGone, shop.CodeSoldOut)
	if r := h.patchSale(merchant, s.sale, map[string]any{"items": []map[string]any{{"itemId": id(a), "quantity": 5}}}); r.Status != http.StatusOK {
		t.Fatalf("raise quantity: %d %s", r.Status, r.Raw)
	}
	if got := h.redisStock(s, a); got != 2 {
		t.Errorf("redis stock a after raising to 5 with 3 sold = %d, want 2", got)
	}
	if r := h.buy(tok6, a, h.purchaseToken(tok6, s.sale)); r.Status != http.StatusAccepted {
		t.Fatalf("buy after raising the quantity: %d %s", r.Status, r.Raw)
	}
	h.checkInvariants(s)
}

// checkInFlightHoldsTheQuantity: both units of item b held by reservations in flight (not in
// Postgres yet): b cannot go to 1, and the refused edit changes nothing; the reservations are
// released after.
func checkInFlightHoldsTheQuantity(t *testing.T, h *harness, merchant string, s saleIDs) {
	t.Helper()
	b := s.items[1]
	id := func(n int64) string { return strconv.FormatInt(n, 10) }
	// Both units of b held by reservations in flight (not in Postgres yet): b cannot go to 1.
	ctx := context.Background()
	exp, _ := h.app.Stock.Now(ctx)
	var held []shop.OrderRef
	for u := int64(3); u <= 4; u++ {
		oid := purchase.NewOrderID(b, time.Now())
		at := store.Attempt{SaleID: s.sale, ItemID: b, UserID: u, OrderID: oid, Nonce: "adm" + id(u), TokenExpires: exp.Add(time.Minute)}
		if _, err := h.app.Stock.Reserve(ctx, at); err != nil {
			t.Fatal(err)
		}
		held = append(held, shop.OrderRef{SaleID: s.sale, ItemID: b, UserID: u, OrderID: oid})
	}
	wantAdminCode(t, "below units held in flight", h.patchSale(merchant, s.sale, map[string]any{"name": "changed", "items": []map[string]any{{"itemId": id(b), "quantity": 1}}}),
		http.StatusConflict, shop.CodeQuantityTooLow)
	if got := h.redisStock(s, b); got != 0 {
		t.Errorf("refused edit moved b's redis stock to %d", got)
	}
	if n := h.sqlInt(`SELECT count(*) FROM sales WHERE id = ? AND name = 'changed'`, s.sale); n != 0 {
		t.Errorf("refused edit saved the name")
	}
	for _, ref := range held {
		if _, err := h.app.Stock.Release(ctx, ref, shop.ReleaseUnsold); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAdminPauseResumeOnTwoInstances(t *testing.T) {
	t.Parallel()
	h1 := newHarness(t, harnessOpts{})
	h2 := newHarness(t, harnessOpts{shared: h1})
	merchant := h1.token(9000, auth.RoleMerchant)
	s := h1.liveSale(5)
	item := s.items[0]
	u1, u2 := h1.token(1, auth.RoleShopper), h1.token(2, auth.RoleShopper)
	// Tokens issued before the pause (each instance has the sale in its catalog cache now).
	t1, t2 := h1.purchaseToken(u1, s.sale), h2.purchaseToken(u2, s.sale)

	if r := h1.saleAction(merchant, s.sale, "pause"); r.Status != http.StatusOK || r.Body["paused"] != true {
		t.Fatalf("pause: %d %s", r.Status, r.Raw)
	}
	wantAdminCode(t, "purchase on instance 1 while paused", h1.buy(u1, item, t1), http.StatusServiceUnavailable, shop.CodePaused)
	wantAdminCode(t, "purchase on instance 2 while paused", h2.buy(u2, item, t2), http.StatusServiceUnavailable, shop.CodePaused)
	for i, h := range []*harness{h1, h2} {
		c := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/captcha", s.sale), u1, nil)
		r := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", s.sale), u1, map[string]string{"captchaId": c.str("captchaId"), "answer": "test"})
		wantAdminCode(t, fmt.Sprintf("purchase token on instance %d while paused", i+1), r, http.StatusServiceUnavailable, shop.CodePaused)
	}
	if r := h1.do("GET", fmt.Sprintf("/api/admin/sales/%d/stock", s.sale), merchant, nil); r.Body["paused"] != true {
		t.Errorf("merchant stock view while paused = %s", r.Raw)
	}
	wantAdminCode(t, "another merchant pauses", h1.saleAction(h1.token(9001, auth.RoleMerchant), s.sale, "resume"), http.StatusNotFound, shop.CodeNotFound)

	if r := h2.saleAction(merchant, s.sale, "resume"); r.Status != http.StatusOK || r.Body["paused"] != nil {
		t.Fatalf("resume: %d %s", r.Status, r.Raw)
	}
	// The paused refusals did not use the tokens.
	if r := h1.buy(u1, item, t1); r.Status != http.StatusAccepted {
		t.Errorf("purchase on instance 1 after resume: %d %s", r.Status, r.Raw)
	}
	if r := h2.buy(u2, item, t2); r.Status != http.StatusAccepted {
		t.Errorf("purchase on instance 2 after resume: %d %s", r.Status, r.Raw)
	}
	if r := h1.do("GET", fmt.Sprintf("/api/admin/sales/%d/stock", s.sale), merchant, nil); r.Body["paused"] != false {
		t.Errorf("merchant stock view after resume = %s", r.Raw)
	}
	h2.drain(s)
	h1.checkInvariants(s)
}

func TestAdminEndAndWarm(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	merchant := h.token(9000, auth.RoleMerchant)
	s := h.liveSale(2)
	u := h.token(1, auth.RoleShopper)
	tok := h.purchaseToken(u, s.sale)
	r := h.saleAction(merchant, s.sale, "end")
	if r.Status != http.StatusOK || r.str("status") != shop.SaleEnded {
		t.Fatalf("end: %d %s", r.Status, r.Raw)
	}
	if ends, _ := strconv.ParseInt(h.meta(s.sale, "ends"), 10, 64); ends > time.Now().UnixMilli() {
		t.Errorf("meta ends = %d, after now", ends)
	}
	wantAdminCode(t, "purchase after end", h.buy(u, s.items[0], tok), http.StatusGone, shop.CodeSaleEnded)
	h.checkInvariants(s)

	// Warm: a sale whose Redis state is gone is loaded again at once.
	w := h.createSale(time.Now().Add(time.Hour), 4)
	ctx := context.Background()
	h.app.Redis.Del(ctx, store.MetaKey(w.sale), store.StockKey(w.sale, w.items[0]))
	wantAdminCode(t, "another merchant warms", h.saleAction(h.token(9001, auth.RoleMerchant), w.sale, "warm"), http.StatusNotFound, shop.CodeNotFound)
	if r := h.saleAction(merchant, w.sale, "warm"); r.Status != http.StatusOK || r.str("saleId") != strconv.FormatInt(w.sale, 10) {
		t.Fatalf("warm: %d %s", r.Status, r.Raw)
	}
	if h.meta(w.sale, "loadedAt") == "" || h.redisStock(w, w.items[0]) != 4 {
		t.Errorf("after warm: meta %q, stock %d", h.meta(w.sale, "loadedAt"), h.redisStock(w, w.items[0]))
	}
	h.checkInvariants(w)
}

// A merchant's change on one instance reaches the others' caches at once (a notice over NATS),
// not after their catalog TTL (5 s) or the paused flag's (1 s): a rename shows on the other
// instance, and a resume there lets shoppers in right away.
func TestSaleChangeNoticeReachesOtherInstances(t *testing.T) {
	t.Parallel()
	h1 := newHarness(t, harnessOpts{})
	h2 := newHarness(t, harnessOpts{shared: h1})
	merchant := h1.token(9000, auth.RoleMerchant)
	s := h1.liveSale(5)
	path := fmt.Sprintf("/api/flash-sales/%d", s.sale)
	if r := h2.do("GET", path, "", nil); r.Status != http.StatusOK || r.str("name") == "" {
		t.Fatalf("sale on instance 2: %d %s", r.Status, r.Raw)
	}
	if r := h1.patchSale(merchant, s.sale, map[string]any{"name": "Renamed on instance 1"}); r.Status != http.StatusOK {
		t.Fatalf("rename: %d %s", r.Status, r.Raw)
	}
	// within waits for a notice between instances, which should take milliseconds
	within := func(what string, d time.Duration, ok func() bool) {
		t.Helper()
		testenv.EventuallyEvery(t, d, 10*time.Millisecond, what, testenv.Until(ok, "not yet"))
	}
	within("the rename on instance 2", time.Second, func() bool { return h2.do("GET", path, "", nil).str("name") == "Renamed on instance 1" })

	u := h1.token(1, auth.RoleShopper)
	tokenOn := func(h *harness) response {
		c := h.do("POST", path+"/captcha", u, nil)
		return h.do("POST", path+"/purchase-token", u, map[string]string{"captchaId": c.str("captchaId"), "answer": "test"})
	}
	if r := h1.saleAction(merchant, s.sale, "pause"); r.Status != http.StatusOK {
		t.Fatalf("pause: %d %s", r.Status, r.Raw)
	}
	within("the pause on instance 2", time.Second, func() bool { return tokenOn(h2).Status == http.StatusServiceUnavailable })
	wantAdminCode(t, "purchase token on instance 2 while paused", tokenOn(h2), http.StatusServiceUnavailable, shop.CodePaused)
	// instance 2 has just read "paused" from Redis and trusts it for a second: the resume's
	// notice, not that second, lets the shopper in
	if r := h1.saleAction(merchant, s.sale, "resume"); r.Status != http.StatusOK {
		t.Fatalf("resume: %d %s", r.Status, r.Raw)
	}
	within("the resume on instance 2", 500*time.Millisecond, func() bool { return tokenOn(h2).Status == http.StatusOK })
	h1.checkInvariants(s)
}
