package tests

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/purchase"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// A sold-out flag set on one instance is seen by another within 100 ms, refusals then cost no
// Redis call, and the flag clears everywhere when a unit returns.
func TestSoldOutFlagAcrossInstances(t *testing.T) {
	t.Parallel()
	a := newHarness(t, harnessOpts{})
	b := newHarness(t, harnessOpts{shared: a})
	s := a.liveSale(1)
	item := s.items[0]
	alice, bob := a.token(1, auth.RoleShopper), a.token(2, auth.RoleShopper)

	ptBobA, ptBobB := a.purchaseToken(bob, s.sale), b.purchaseToken(bob, s.sale)
	r := a.buy(alice, item, a.purchaseToken(alice, s.sale))
	if r.Status != http.StatusAccepted {
		t.Fatalf("buy the only unit: %d %s", r.Status, r.Raw)
	}
	if b.app.SoldOut.Is(item) {
		t.Fatalf("instance b believes the item sold out before anyone was refused")
	}
	if r := a.buy(bob, item, ptBobA); r.Status != http.StatusGone || r.str("error") != "SOLD_OUT" {
		t.Fatalf("second buyer on a: %d %s, want 410 SOLD_OUT", r.Status, r.Raw)
	}
	testenv.EventuallyEvery(t, 100*time.Millisecond, time.Millisecond, "instance b learns the item sold out",
		testenv.Until(func() bool { return b.app.SoldOut.Is(item) }, "not flagged"))

	// With Redis down, instance b still refuses at once: the refusal never reaches Redis.
	a.redis.Stop(t)
	if r := b.buy(bob, item, ptBobB); r.Status != http.StatusGone || r.str("error") != "SOLD_OUT" {
		t.Errorf("sold-out refusal with redis down: %d %s, want 410 (no redis call)", r.Status, r.Raw)
	}
	a.redis.Start(t)

	other := checkTokenRefusedFirst(t, a, b, s, bob)

	// A unit returns (an orphan released by a's keeper path): the flag clears on both at once.
	a.drain(s)
	returnAnOrphanUnit(t, a, s)
	a.app.SoldOut.Returned(item)
	testenv.EventuallyEvery(t, 100*time.Millisecond, time.Millisecond, "the flag cleared on both instances", func() error {
		if fa, fb := a.app.SoldOut.Is(item), b.app.SoldOut.Is(item); fa || fb {
			return fmt.Errorf("still up: on a %v, on b %v", fa, fb)
		}
		return nil
	})
	if r := b.buy(bob, item, b.purchaseToken(bob, s.sale)); r.Status != http.StatusAccepted {
		t.Errorf("buy the returned unit on b: %d %s, want 202", r.Status, r.Raw)
	}
	a.checkInvariants(s)
	a.checkInvariants(other)
}

// checkTokenRefusedFirst: the sale is sold out: the token request answers 410 before the captcha,
// and before the body is read (a malformed one changes nothing: the crowd after a sell-out costs no
// JSON decoding); on a sale still selling, the same body is a 400. It returns that other sale.
func checkTokenRefusedFirst(t *testing.T, a, b *harness, s saleIDs, bob string) saleIDs {
	t.Helper()
	// The sale is sold out: the token request answers 410 before the captcha.
	if r := b.do("POST", "/api/flash-sales/"+strconv.FormatInt(s.sale, 10)+"/purchase-token", bob, map[string]string{"captchaId": "x", "answer": "wrong"}); r.Status != http.StatusGone || r.str("error") != "SOLD_OUT" {
		t.Errorf("token request on a sold-out sale: %d %s, want 410 SOLD_OUT", r.Status, r.Raw)
	}
	// … before the body is read: a malformed one changes nothing (the crowd after a sell-out
	// costs no JSON decoding); on a sale still selling, the same body is a 400.
	if r := b.do("POST", "/api/flash-sales/"+strconv.FormatInt(s.sale, 10)+"/purchase-token", bob, `{"captchaId": `); r.Status != http.StatusGone || r.str("error") != "SOLD_OUT" {
		t.Errorf("token request with a malformed body on a sold-out sale: %d %s, want 410 SOLD_OUT", r.Status, r.Raw)
	}
	other := a.liveSale(1)
	if r := b.do("POST", "/api/flash-sales/"+strconv.FormatInt(other.sale, 10)+"/purchase-token", bob, `{"captchaId": `); r.Status != http.StatusBadRequest || r.str("error") != "INVALID_INPUT" {
		t.Errorf("token request with a malformed body on a live sale: %d %s, want 400 INVALID_INPUT", r.Status, r.Raw)
	}
	return other
}

// returnAnOrphanUnit gives a unit back the way the keeper does with an orphan: one more unit,
// reserved by nobody's order, then released unsold.
func returnAnOrphanUnit(t *testing.T, a *harness, s saleIDs) {
	t.Helper()
	item := s.items[0]
	orphan := purchase.NewOrderID(item, time.Now())
	a.app.DB.Gorm().Exec(`UPDATE items SET quantity = 2 WHERE id = ?`, item)
	a.app.Redis.Incr(context.Background(), store.StockKey(s.sale, item))
	if _, err := a.app.Stock.Reserve(context.Background(), store.Attempt{SaleID: s.sale, ItemID: item, UserID: 3, OrderID: orphan, Nonce: "n",
		TokenExpires: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.app.Stock.Release(context.Background(), shop.OrderRef{SaleID: s.sale, ItemID: item, UserID: 3, OrderID: orphan}, shop.ReleaseUnsold); err != nil {
		t.Fatal(err)
	}
}
