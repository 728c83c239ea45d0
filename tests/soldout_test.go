package tests

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/purchase"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// The last unit reserved refuses purchase tokens at once, before anyone is refused a purchase:
// the next shopper is refused at the token step, on the instance that sold it and, within
// 100 ms, on another; the shopper who took it sending the same attempt again still gets its
// 202. A purchase refused then sets the purchase flag, seen by another instance within 100 ms;
// refusals then cost no Redis call, and the flags clear everywhere when a unit returns.
func TestSoldOutFlagAcrossInstances(t *testing.T) {
	t.Parallel()
	a := newHarness(t, harnessOpts{})
	b := newHarness(t, harnessOpts{shared: a})
	s := a.liveSale(2)
	item := s.items[0]
	alice, bob, carol := a.token(1, auth.RoleShopper), a.token(2, auth.RoleShopper), a.token(5, auth.RoleShopper)

	// Bob holds one token (the token budget lets 2 units have at most 3 out at once).
	ptBob := a.purchaseToken(bob, s.sale)
	if r := a.buy(carol, item, a.purchaseToken(carol, s.sale)); r.Status != http.StatusAccepted {
		t.Fatalf("buy the first unit: %d %s", r.Status, r.Raw)
	}
	rt := b.tokenAttempt(alice, s.sale)
	if rt.Status != http.StatusOK {
		t.Fatalf("a purchase token with a unit left: %d %s", rt.Status, rt.Raw)
	}
	ptAlice := rt.str("purchaseToken")
	r := a.buy(alice, item, ptAlice)
	if r.Status != http.StatusAccepted {
		t.Fatalf("buy the last unit: %d %s", r.Status, r.Raw)
	}
	testenv.EventuallyEvery(t, 100*time.Millisecond, time.Millisecond, "both instances refuse purchase tokens", func() error {
		for name, h := range map[string]*harness{"a": a, "b": b} {
			if r := h.tokenAttempt(h.token(4, auth.RoleShopper), s.sale); r.Status != http.StatusGone || r.str("error") != "SOLD_OUT" {
				return fmt.Errorf("a purchase token on %s after the last unit went: %d %s, want 410 SOLD_OUT", name, r.Status, r.Raw)
			}
		}
		return nil
	})
	if again := a.buy(alice, item, ptAlice); again.Status != http.StatusAccepted || again.str("orderId") != r.str("orderId") {
		t.Errorf("the last unit's attempt sent again: %d %s, want 202 with order %s", again.Status, again.Raw, r.str("orderId"))
	}
	if a.app.SoldOut.Is(item) || b.app.SoldOut.Is(item) {
		t.Fatalf("purchases refused from the flag before Redis refused one")
	}
	if r := a.buy(bob, item, ptBob); r.Status != http.StatusGone || r.str("error") != "SOLD_OUT" {
		t.Fatalf("second buyer on a: %d %s, want 410 SOLD_OUT", r.Status, r.Raw)
	}
	testenv.EventuallyEvery(t, 100*time.Millisecond, time.Millisecond, "instance b learns the item sold out",
		testenv.Until(func() bool { return b.app.SoldOut.Is(item) }, "not flagged"))

	// With Redis down, instance b still refuses at once: the refusal never reaches Redis.
	a.redis.Stop(t)
	if r := b.buy(bob, item, ptBob); r.Status != http.StatusGone || r.str("error") != "SOLD_OUT" {
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
	checkRefusedBeforeIdentity(t, b, s, other)
	return other
}

// checkRefusedBeforeIdentity: the sold-out answers come before the caller's identity is
// verified (the gates: no JWT checked for the crowd), with no token, a forged one or a merchant's,
// and are counted; a sale still selling asks for the identity first (401, 403 for a merchant).
func checkRefusedBeforeIdentity(t *testing.T, h *harness, soldOut, selling saleIDs) {
	t.Helper()
	before := counterValue(h.app.Metrics.Purchases.WithLabelValues(string(shop.CodeSoldOut)))
	for _, bearer := range []string{"", "not-a-jwt", h.token(9001, auth.RoleMerchant)} {
		if r := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", soldOut.sale), bearer, nil); r.Status != http.StatusGone || r.str("error") != "SOLD_OUT" {
			t.Errorf("token request on a sold-out sale, bearer %.10q: %d %s, want 410 SOLD_OUT before the identity", bearer, r.Status, r.Raw)
		}
		if r := h.do("POST", fmt.Sprintf("/api/flash-sales/items/%d/purchase", soldOut.items[0]), bearer, nil, "X-Purchase-Token", "x"); r.Status != http.StatusGone || r.str("error") != "SOLD_OUT" {
			t.Errorf("purchase of a sold-out item, bearer %.10q: %d %s, want 410 SOLD_OUT before the identity", bearer, r.Status, r.Raw)
		}
	}
	if got := counterValue(h.app.Metrics.Purchases.WithLabelValues(string(shop.CodeSoldOut))) - before; got != 3 {
		t.Errorf("purchases counted SOLD_OUT by the gate: %v, want 3", got)
	}
	for _, c := range []struct {
		bearer, code string
		status       int
	}{{"", "UNAUTHENTICATED", 401}, {"not-a-jwt", "UNAUTHENTICATED", 401}, {h.token(9001, auth.RoleMerchant), "MERCHANTS_CANNOT_BUY", 403}} {
		if r := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", selling.sale), c.bearer, map[string]string{"captchaId": "x", "answer": "test"}); r.Status != c.status || r.str("error") != c.code {
			t.Errorf("token request on a selling sale, bearer %.10q: %d %s, want %d %s", c.bearer, r.Status, r.Raw, c.status, c.code)
		}
		if r := h.do("POST", fmt.Sprintf("/api/flash-sales/items/%d/purchase", selling.items[0]), c.bearer, nil, "X-Purchase-Token", "x"); r.Status != c.status || r.str("error") != c.code {
			t.Errorf("purchase on a selling sale, bearer %.10q: %d %s, want %d %s", c.bearer, r.Status, r.Raw, c.status, c.code)
		}
	}
}

// returnAnOrphanUnit gives a unit back the way the keeper does with an orphan: one more unit,
// reserved by nobody's order, then released unsold.
func returnAnOrphanUnit(t *testing.T, a *harness, s saleIDs) {
	t.Helper()
	item := s.items[0]
	orphan := purchase.NewOrderID(item, time.Now())
	a.sql().Exec(`UPDATE items SET quantity = quantity + 1 WHERE id = ?`, item)
	a.app.Redis.Incr(context.Background(), store.StockKey(s.sale, item))
	if _, err := a.app.Stock.Reserve(context.Background(), store.Attempt{SaleID: s.sale, ItemID: item, UserID: 3, OrderID: orphan, Nonce: "n",
		TokenExpires: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.app.Stock.Release(context.Background(), shop.OrderRef{SaleID: s.sale, ItemID: item, UserID: 3, OrderID: orphan}, shop.ReleaseUnsold); err != nil {
		t.Fatal(err)
	}
}

// tokenAttempt solves the test captcha and asks for a purchase token, whatever the answer.
func (h *harness) tokenAttempt(bearer string, saleID int64) response {
	h.t.Helper()
	c := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/captcha", saleID), bearer, nil)
	if c.Status != http.StatusOK {
		return c
	}
	return h.do("POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", saleID), bearer, map[string]string{"captchaId": c.str("captchaId"), "answer": "test"})
}

// Purchase tokens follow the stock: after the last unit, a crowd asking for tokens for two and a
// half seconds is refused SOLD_OUT at the token step, none handed a token (once a second, the
// flag's life, one request reads the stock in Redis before answering); and a unit that comes back
// without its notice is found by the next such read, and bought.
func TestTokensFollowTheStock(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.liveSale(3)
	for i := range int64(3) {
		tok := h.token(100+i, auth.RoleShopper)
		if r := h.buy(tok, s.items[0], h.purchaseToken(tok, s.sale)); r.Status != http.StatusAccepted {
			t.Fatalf("buy unit %d: %d %s", i, r.Status, r.Raw)
		}
	}

	var issued, refused atomic.Int64
	deadline := time.Now().Add(2500 * time.Millisecond)
	var wg sync.WaitGroup
	for w := range int64(8) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := int64(0); time.Now().Before(deadline); n++ {
				r := h.tokenAttempt(h.token(1000+w*100000+n, auth.RoleShopper), s.sale)
				switch {
				case r.Status == http.StatusOK:
					issued.Add(1)
				case r.Status == http.StatusGone && r.str("error") == "SOLD_OUT":
					refused.Add(1)
				default:
					t.Errorf("a token request after the sell-out: %d %s", r.Status, r.Raw)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("after the sell-out: %d purchase tokens handed out, %d refused SOLD_OUT", issued.Load(), refused.Load())
	if issued.Load() != 0 || refused.Load() < 40 {
		t.Errorf("after the sell-out, %d tokens handed out and %d refused in 2.5 s: want none (the one let through each second reads the stock first), and the crowd refused", issued.Load(), refused.Load())
	}

	returnAnOrphanUnit(t, h, s) // a unit back in Redis, its notice never sent
	n := int64(0)
	testenv.Eventually(t, 10*time.Second, "a shopper finds and buys the unit that came back", func() error {
		n++
		tok := h.token(900000+n, auth.RoleShopper)
		r := h.tokenAttempt(tok, s.sale)
		if r.Status != http.StatusOK {
			return fmt.Errorf("token: %d %s", r.Status, r.Raw)
		}
		if b := h.buy(tok, s.items[0], r.str("purchaseToken")); b.Status != http.StatusAccepted {
			return fmt.Errorf("buy: %d %s", b.Status, b.Raw)
		}
		return nil
	})
	h.drain(s)
	h.checkInvariants(s)
}
