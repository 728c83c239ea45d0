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

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/flashsale/flashsale/services/auth"
)

// The sale page resends a purchase whose answer was lost, and the resend's answer is the first
// send's: the page shows the order as bought at once (issue 18, item 5; the resend used to get
// 403, a used token, and the page said the token was invalid while the order existed). And when
// the item sold out meanwhile, the resend meets this instance's sold-out flag, which answers
// before the attempt is looked up: the page does not take that for the first send's answer but
// looks for the order, and finds it.
func TestE2EResendAfterLostAnswer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	h := newHarness(t, harnessOpts{})
	browserCtx := startE2EBrowser(t, ctx)
	openE2ETab(t, browserCtx, "warm-up")
	v := e2eViewports[0]

	t.Run("resend answered 202", func(t *testing.T) {
		s := h.createSaleWith(map[string]any{"purchaseLimit": "per-sale"}, time.Now().Add(-time.Second), 5)
		b := openShopperTab(t, browserCtx, v, "shopper whose first answer is lost")
		sends := loseFirstPurchaseAnswer(t, b, nil)
		uid := resendShopper(t, h, b, s, "resend_a")
		b.waitFor("the page says the unit is reserved and shows the order", 30*time.Second,
			`e.messages.includes('Got it! Your unit is reserved and the order is queued.') && window.__shop.orders().length === 1`)
		id := resendCheckOrder(t, h, b, s, uid)
		if n := sends.count(); n < 2 {
			t.Errorf("the page sent the purchase %d times, want the first and at least one resend", n)
		}
		if tokens := sends.tokens(); len(tokens) < 2 || tokens[0] == "" || tokens[1] != tokens[0] {
			t.Errorf("purchase tokens sent %v: want the same token resent", tokens)
		}
		t.Logf("order %s, %d sends", id, sends.count())
		b.checkConsole()
		uniqueAcked(h)
		h.checkInvariants(s)
	})

	t.Run("resend meets the sold-out flag", func(t *testing.T) {
		s := h.createSaleWith(map[string]any{"purchaseLimit": "per-sale"}, time.Now().Add(-time.Second), 1)
		b := openShopperTab(t, browserCtx, v, "shopper who took the last unit")
		// Before the first answer is lost, another shopper is refused: the instance now knows
		// the item sold out and answers the resend from its flag.
		other := h.token(777001, auth.RoleShopper)
		otherToken := h.purchaseToken(other, s.sale) // before the last unit: after it, no token is handed out
		stop := make(chan struct{})
		defer close(stop)
		sends := loseFirstPurchaseAnswer(t, b, func() {
			if r := h.buy(other, s.items[0], otherToken); r.Status != http.StatusGone {
				t.Errorf("another shopper after the last unit: %d %s, want 410", r.Status, r.Raw)
			}
			// The flag holds a second (then one request asks Redis again); the page's resend
			// comes later than that on a loaded machine. More shoppers refused meanwhile keep it
			// up, as in a real crowd: each refusal marks it again.
			go func() {
				tick := time.NewTicker(200 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						h.app.SoldOut.Mark(s.items[0])
					}
				}
			}()
		})
		uid := resendShopper(t, h, b, s, "resend_b")
		b.waitFor("the page finds the order that went through", 40*time.Second,
			`e.messages.includes('Your purchase of item 0 went through after all: the order is below.') && window.__shop.orders().length === 1`)
		resendCheckOrder(t, h, b, s, uid)
		if n := sends.count(); n < 2 {
			t.Errorf("the page sent the purchase %d times, want a resend", n)
		}
		b.checkConsole()
		h.checkInvariants(s)
	})
}

// resendShopper registers a shopper on the sale page, solves the captcha and clicks Buy on the
// sale's first item; it returns the shopper's id.
func resendShopper(t *testing.T, h *harness, b *e2eTab, s saleIDs, name string) int64 {
	t.Helper()
	itemJS := strconv.FormatInt(s.items[0], 10)
	b.openSalePage(fmt.Sprintf("%s/sales/%d", h.srv.URL, s.sale))
	uid := b.register(name+"_"+strconv.FormatInt(time.Now().UnixNano()%1e9, 36), "a shopper with a bad network")
	b.solveCaptcha()
	b.waitFor("Buy is live", 10*time.Second, `!e.buy(`+itemJS+`).disabled`)
	b.do("click Buy", chromedp.Click(e2eBuyButton(s.items[0])))
	return uid
}

// resendCheckOrder checks the shopper has exactly one order, PENDING once written, and that the
// page's order box shows it; it returns its id.
func resendCheckOrder(t *testing.T, h *harness, b *e2eTab, s saleIDs, uid int64) string {
	t.Helper()
	h.drain(s)
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE user_id = ?`, uid); got != 1 {
		t.Fatalf("user %d has %d orders after one click, want 1", uid, got)
	}
	var id string
	if err := h.sql().Raw(`SELECT id::text FROM orders WHERE user_id = ? AND status = 'PENDING'`, uid).Scan(&id).Error; err != nil || id == "" {
		t.Fatalf("the shopper's PENDING order: %q, %v", id, err)
	}
	if box := b.boxOrders(); len(box) != 1 || box[0].ID != id {
		t.Errorf("the order box shows %+v, want order %s", box, id)
	}
	h.mu.Lock()
	h.acked = append(h.acked, id)
	h.mu.Unlock()
	return id
}

// purchaseSends is what a tab sent to the purchase route.
type purchaseSends struct {
	mu   sync.Mutex
	toks []string
}

func (p *purchaseSends) count() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.toks) }

func (p *purchaseSends) tokens() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.toks...)
}

// loseFirstPurchaseAnswer lets every purchase of the tab reach the server and fails the first
// one's answer on the way back (a connection reset, after the server answered), running before
// first, if not nil; every later answer comes back.
func loseFirstPurchaseAnswer(t *testing.T, b *e2eTab, before func()) *purchaseSends {
	t.Helper()
	sends := &purchaseSends{}
	paused := chromedp.Events(b.ctx, fetch.RequestPaused)
	patterns := []*fetch.RequestPattern{{URLPattern: "*/api/flash-sales/items/*/purchase", RequestStage: fetch.RequestStageResponse}}
	if _, err := chromedp.Call(b.ctx, fetch.Enable, fetch.EnableParams{Patterns: patterns}); err != nil {
		t.Fatalf("%s: intercept the purchase: %v", b.name, err)
	}
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			tok := ""
			for k, v := range ev.Request.Headers {
				if strings.EqualFold(k, "X-Purchase-Token") {
					tok, _ = v.(string)
				}
			}
			sends.mu.Lock()
			sends.toks = append(sends.toks, tok)
			first := len(sends.toks) == 1
			sends.mu.Unlock()
			if first {
				if before != nil {
					before()
				}
				_, _ = chromedp.Call(b.ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonConnectionReset})
				continue
			}
			_, _ = chromedp.Call(b.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		}
	}()
	return sends
}
