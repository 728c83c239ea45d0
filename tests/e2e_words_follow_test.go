package tests

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The sale page's message about an order follows the order: "confirmed: pay before the
// deadline" gives way to "expired" when the payment window closes with the page left open, in
// the order's own words, not beside an order list that says otherwise (both languages: the
// Chinese sentence is held by the page's dictionary test).
func TestE2EMessageFollowsTheOrder(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	h := newHarness(t, harnessOpts{})
	s := h.createSaleWith(map[string]any{"paymentWindowSeconds": 3}, time.Now().Add(-time.Second), 5)
	b := openShopperTab(t, startE2EBrowser(t, ctx), e2eViewport{"phone", 390, 844, true}, "left open")
	b.openSalePage(fmt.Sprintf("%s/sales/%d", h.srv.URL, s.sale))
	b.register("follow_"+strconv.FormatInt(time.Now().UnixNano()%1e9, 36), "a shopper's password")
	b.solveCaptcha()
	b.do("click Buy", chromedp.Click(e2eBuyButton(s.items[0])))
	// Waited for in its final state; the confirmation, transient by design (three seconds), is
	// read from the messages the page recorded.
	b.waitFor("the order expired, and the message with it", 30*time.Second,
		`window.__shop.orders().length === 1 && window.__shop.orders()[0].status === 'EXPIRED'
		&& e.text(e.q('message')) === 'Your order of item 0 expired: the payment window closed and the unit went back on sale.'
		&& window.__e2e.messages.includes('Your order of item 0 is confirmed: pay before the deadline below, or the unit goes back on sale.')`)
	h.mu.Lock()
	h.acked = append(h.acked, b.boxOrders()[0].ID)
	h.mu.Unlock()
	b.checkConsole()
	h.drain(s)
	h.checkInvariants(s)
}
