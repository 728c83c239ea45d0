package tests

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale/testenv"
)

// TestE2EPaymentPages walks payment as a shopper does, at 1280 px and on a 390-pixel phone: the
// order page's Pay opens the payment provider's page (the simulated provider's, standing in for
// Stripe Checkout's), Pay there returns to the order page, which says Paid once the confirmation is
// in. A second order's checkout closes with the order (the provider's page says so), and a payment
// confirmed after that is refunded: the order page says it in plain words.
func TestE2EPaymentPages(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	h := newHarness(t, harnessOpts{})
	browserCtx := startE2EBrowser(t, ctx)
	dir := e2eShotDir(t)
	for _, v := range []e2eViewport{{"desktop", 1280, 900, false}, {"phone", 390, 844, true}} {
		t.Run(v.name, func(t *testing.T) {
			s := h.createSaleWith(map[string]any{"purchaseLimit": "per-item"}, time.Now().Add(-time.Second), 5, 5)
			saleURL := fmt.Sprintf("%s/sales/%d", h.srv.URL, s.sale)
			b := openShopperTab(t, browserCtx, v, "shopper")
			b.openSalePage(saleURL)
			b.register("payer_"+v.name[:1]+"_"+strconv.FormatInt(time.Now().UnixNano()%1e9, 36), "a shopper's password")
			ids := make([]string, 2)
			for i, item := range s.items {
				b.solveCaptcha() // a purchase token per purchase
				b.do("buy item "+strconv.Itoa(i), chromedp.Click(e2eBuyButton(item)))
				b.waitFor("the order awaits payment", 20*time.Second, fmt.Sprintf(
					`window.__shop.orders().length === %d && window.__shop.orders().every((o) => o.status === 'PENDING')`, i+1))
				ids[i] = b.boxOrders()[0].ID
				h.mu.Lock()
				h.acked = append(h.acked, ids[i])
				h.mu.Unlock()
			}

			// The order page: Pay, the provider's page, Pay, back on the order page: Paid.
			b.do("open the first order", chromedp.Navigate(h.srv.URL+"/orders/"+ids[1]))
			b.waitFor("the order page, awaiting payment", 10*time.Second,
				`e.text(e.q('order-status')) === 'Awaiting payment' && /^Pay by /.test(e.text(e.q('pay-by'))) && e.shown(e.q('pay-button'))`)
			b.do("Pay", chromedp.Click(e2eTestID("pay-button")))
			b.waitAcross("the provider's page", 10*time.Second,
				`location.pathname.startsWith('/pay/simulated/') && e.text(e.q('simpay-amount')) === '¥10.01' && e.shown(e.q('simpay-pay')) && e.q('simpay').hasAttribute('data-ready')`)
			if over := e2eEval[[]string](b, "what is wider than the screen", e2eWiderThanScreen); len(over) > 0 {
				b.errorf("the provider's page sticks out of the screen: %q", over)
			}
			b.screenshot(dir, "payment-provider-"+v.name+".png", "")
			b.do("Pay on the provider's page", chromedp.Click(e2eTestID("simpay-pay")))
			b.waitAcross("back on the order page, paid", 10*time.Second,
				`location.pathname === '/orders/`+ids[1]+`' && e.q('order-status').getAttribute('data-status') === 'PAID'
				&& e.text(e.q('order-status')) === 'Paid' && e.text(e.q('order-note')) === 'Paid. Thank you for your order!' && !e.shown(e.q('pay-button'))`)
			if got := h.sqlStr(`SELECT payment_status FROM orders WHERE id = ?`, ids[1]); got != "paid" {
				t.Errorf("payment status %q in postgres, want paid", got)
			}

			// The second order's checkout is open when the order expires: the provider's page
			// says it is closed; a confirmation that comes anyway is refunded, and said so.
			b.do("open the second order", chromedp.Navigate(h.srv.URL+"/orders/"+ids[0]))
			b.waitFor("the order page, awaiting payment", 10*time.Second, `e.shown(e.q('pay-button'))`)
			b.do("Pay", chromedp.Click(e2eTestID("pay-button")))
			b.waitAcross("the provider's page", 10*time.Second, `location.pathname.startsWith('/pay/simulated/') && e.q('simpay').hasAttribute('data-ready')`)
			// Cancel and return: the order page says the payment was not made, not "finish paying
			// there" (the checkout stays open, but the shopper just left it); Pay goes back.
			b.do("Cancel and return", chromedp.Click(e2eTestID("simpay-back")))
			b.waitAcross("the order page after giving up", 10*time.Second, `location.pathname === '/orders/`+ids[0]+`'
				&& e.text(e.q('order-note')) === 'Payment not made: the order is still yours until its deadline.' && e.shown(e.q('pay-button'))`)
			b.do("Pay again", chromedp.Click(e2eTestID("pay-button")))
			b.waitAcross("the provider's page again", 10*time.Second, `location.pathname.startsWith('/pay/simulated/') && e.q('simpay').hasAttribute('data-ready')`)
			provider := e2eEval[string](b, "the provider's page", `location.href`)
			h.exec(`UPDATE orders SET pay_by = now() - interval '1 second' WHERE id = ?`, ids[0])
			testenv.Eventually(t, 15*time.Second, "the order expired and its checkout closed", func() error {
				if st := h.sqlStr(`SELECT o.status || ' ' || c.state FROM checkouts c JOIN orders o ON o.id = c.order_id WHERE c.order_id = ?`, ids[0]); st != "EXPIRED expired" {
					return fmt.Errorf("order and checkout: %s", st)
				}
				return nil
			})
			b.do("reload the provider's page", chromedp.Navigate(provider))
			b.waitFor("the provider's page says the checkout closed", 10*time.Second,
				`e.text(e.q('simpay-state')) === "This checkout is closed: the order's payment window ended, so it can no longer be paid here." && !e.q('simpay-pay')`)
			b.screenshot(dir, "payment-provider-closed-"+v.name+".png", "")
			// The provider sends the browser back after a last-second payment: the order ended
			// meanwhile and the confirmation is still on its way. The page says what will happen
			// and keeps asking; when the confirmation lands, it says the payment was refunded.
			b.do("back from the provider after paying", chromedp.Navigate(h.srv.URL+"/orders/"+ids[0]+"?payment=done"))
			b.waitFor("the page waits for the word on the payment", 10*time.Second,
				`e.text(e.q('order-status')) === 'Expired'
				&& e.text(e.q('order-note')) === 'If your payment went through after the order ended, it is refunded in full: this page says so within a few minutes.'`)
			if err := h.app.Payments.Apply(context.Background(), h.ownPayment("evt_late_"+ids[0], ids[0], "sim_pi_"+ids[0], 1000)); err != nil {
				t.Fatal(err)
			}
			b.waitFor("the order page says the payment is refunded", 15*time.Second,
				`e.text(e.q('order-status')) === 'Expired'
				&& e.text(e.q('order-note')) === 'Your payment arrived after this order had ended (its payment window closed, or it was cancelled) and its unit had gone back on sale, so it has been refunded in full.'`)
			b.screenshot(dir, "order-refunded-"+v.name+".png", "")
			b.checkConsole()
			h.checkInvariants(s)
		})
	}
}
