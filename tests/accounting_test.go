package tests

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/store"
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
	got, pages := myOrderPages(t, h, alice, s.sale)
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

// myOrderPages follows "my orders" page by page for the shopper, checking that each entry is
// of the sale and complete, and returns the order ids in the order listed and the page count.
func myOrderPages(t *testing.T, h *harness, shopper string, sale int64) (got []string, pages int) {
	t.Helper()
	cursor := ""
	for {
		path := "/api/flash-sales/orders"
		if cursor != "" {
			path += "?cursor=" + cursor
		}
		p := h.do("GET", path, shopper, nil)
		if p.Status != http.StatusOK {
			t.Fatalf("my orders: %d %s", p.Status, p.Raw)
		}
		pages++
		for _, o := range p.Body["orders"].([]any) {
			m := o.(map[string]any)
			got = append(got, m["orderId"].(string))
			if m["status"] != "PENDING" || m["itemName"] == "" || m["saleId"] != strconv.FormatInt(sale, 10) || m["currency"] != "CNY" || m["payBy"] == nil {
				t.Errorf("order entry %v lacks status, item, sale, currency or payBy", m)
			}
		}
		cursor = p.str("next")
		if cursor == "" {
			break
		}
	}
	return got, pages
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
	h.sql().Raw(`SELECT status, coalesce(failure, '') FROM orders WHERE id = ?`, second.str("orderId")).Row().Scan(&status, &failure)
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
