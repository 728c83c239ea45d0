package tests

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/testenv"
)

// TestE2EMoneyIssues: what a merchant and a shopper see of the money's reconciliation. The merchant's live
// view says, beside the figures, that a payment that was not its order's own paid nothing and
// was refunded, and that a refund Stripe refused must be settled there; the orders list shows
// the refusal's reason; both in Chinese too. A shopper's free order says there is nothing to pay.
// Walked at 1280 pixels and on a 390-pixel phone, with screenshots.
func TestE2EMoneyIssues(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	h, stripe := stripeHarness(t, nil)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	mName, mPass := "money_merchant_"+suffix, "merchant test pass"
	m, err := h.app.Auth.AddUser(ctx, mName, mPass, auth.RoleMerchant)
	if err != nil {
		t.Fatal(err)
	}
	merchant := h.token(m.ID, auth.RoleMerchant)
	r := h.do("POST", "/api/admin/sales", merchant, map[string]any{"name": "Desk lamps",
		"startsAt": time.Now().Add(-time.Second).UTC().Format(time.RFC3339), "endsAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"items": []map[string]any{{"name": "Lamp", "priceCents": 4900, "quantity": 5}, {"name": "Sticker", "priceCents": 0, "quantity": 5}}})
	if r.Status != http.StatusCreated {
		t.Fatalf("create the sale: %d %s", r.Status, r.Raw)
	}
	s := saleIDs{}
	s.sale, _ = strconv.ParseInt(r.str("saleId"), 10, 64)
	for _, it := range r.Body["items"].([]any) {
		id, _ := strconv.ParseInt(it.(map[string]any)["itemId"].(string), 10, 64)
		s.items = append(s.items, id)
	}

	// A payment link naming a lamp order (a conflict, refunded), and a late payment whose refund
	// Stripe refuses.
	linked, _, _ := h.checkedOut(1, s, s.items[0])
	stripe.Session("cs_link_e2e", testenv.StripeSession{Status: "complete", PaymentStatus: "paid", PaymentIntent: "pi_link_e2e", AmountTotal: 4900, Currency: "cny", ClientReferenceID: linked})
	if w := h.postWebhook(sessionEvent("evt_link_e2e", "checkout.session.completed", "cs_link_e2e", linked, "paid", "pi_link_e2e", 4900, "cny"), stripeWebhookSecret); w.Status != http.StatusOK {
		t.Fatalf("webhook: %d %s", w.Status, w.Raw)
	}
	h.app.Payments.Pass(ctx) // the conflict refunded
	late, _, lateSession := h.expiredWithoutStripe(stripe, 2, s, s.items[0])
	stripe.RefundsAnswer("failed", "expired_or_canceled_card")
	h.paidLate(stripe, late, lateSession, "pi_late_e2e", 4900)
	testenv.Eventually(t, 15*time.Second, "the refund refused and the conflict's refused too", func() error {
		h.app.Payments.Pass(ctx)
		if n := h.sqlInt(`SELECT count(*) FROM orders WHERE id = ? AND refund_failure IS NOT NULL`, late); n != 1 {
			return fmt.Errorf("late order's refund not refused yet")
		}
		return nil
	})

	// A shopper's free sticker.
	reg := h.do("POST", "/api/auth/register", "", map[string]string{"username": "free_" + suffix, "password": "a free shopper's password", "captchaId": "c", "answer": "test"})
	if reg.Status != http.StatusCreated {
		t.Fatalf("register: %d %s", reg.Status, reg.Raw)
	}
	tok := reg.str("token")
	buy := h.buy(tok, s.items[1], h.purchaseToken(tok, s.sale))
	if buy.Status != http.StatusAccepted {
		t.Fatalf("buy the sticker: %d %s", buy.Status, buy.Raw)
	}
	free := buy.str("orderId")
	h.drain(s)

	dir := e2eShotDir(t)
	browserCtx := startE2EBrowser(t, ctx)
	b := openE2ETab(t, browserCtx, "merchant")
	b.do("the desktop", chromedp.EmulateViewport(1280, 900))
	b.do("open the admin page", chromedp.Navigate(h.srv.URL+"/admin"))
	b.e2eLogin(mName, mPass)
	b.do("open the live view", chromedp.Navigate(fmt.Sprintf("%s/admin/sales/%d", h.srv.URL, s.sale)))
	b.waitFor("the money's issues said beside the figures", 15*time.Second, `e.shown(e.q('money-issues'))
		&& e.text(e.q('money-issues')) === '1 payment that was not its order\u2019s own (¥49.00) paid nothing and is refunded by itself. 1 refund was refused by the payment provider: settle it there (the reason is in the orders list).'
		&& e.q('money-issues').getAttribute('data-kind') === 'error' && e.text(e.q('money-refunded-amount')) === '¥0.00'`)
	b.do("scroll to the money", chromedp.ScrollIntoView(e2eTestID("live-money")))
	b.shootBoth(dir, "money-issues")

	b.do("open the orders", chromedp.Navigate(fmt.Sprintf("%s/admin/sales/%d/orders", h.srv.URL, s.sale)))
	b.waitFor("the refused refund's reason in the orders list", 15*time.Second,
		`e.qa('order-row').some((r) => e.text(r.querySelector('[data-col="payment"]')) === 'Refund of ¥49.00 refusedexpired_or_canceled_card'
			&& e.text(r.querySelector('[data-testid="order-refund-reason"]')) === 'expired_or_canceled_card')
		&& e.qa('order-row').some((r) => e.text(r.querySelector('[data-col="payment"]')) === 'Free')`)
	b.screenshot(dir, "money-refund-refused-desktop.png", "")

	// The create form: a price Stripe cannot charge, said beside the price, nothing created.
	b.do("open the admin page", chromedp.Navigate(h.srv.URL+"/admin"))
	start := time.Now().Add(2 * time.Hour)
	b.do("fill in a sale at 1.00 CNY",
		chromedp.SetValue(e2eTestID("create-name"), "Stickers"),
		chromedp.SetValue(e2eTestID("create-starts-at"), start.Format("2006-01-02T15:04")),
		chromedp.SetValue(e2eTestID("create-ends-at"), start.Add(time.Hour).Format("2006-01-02T15:04")),
		chromedp.SendKeys(`[data-testid="item-rows"] [data-testid="item-name-input"]`, "Sticker"),
		chromedp.SendKeys(`[data-testid="item-rows"] [data-testid="item-price-input"]`, "1.00"),
		chromedp.SendKeys(`[data-testid="item-rows"] [data-testid="item-quantity-input"]`, "10"),
		chromedp.Click(e2eTestID("create-sale-button")),
	)
	b.waitFor("the refusal beside the price", 10*time.Second, `(() => { const r = e.qa('item-row').filter((x) => x.closest('[data-testid="item-rows"]'))[0];
		const err = r.querySelector('.field-error:not([hidden])');
		return !!err && e.text(err) === 'Below what the payment provider can charge in CNY: at least ¥4.00, or 0 for a free item.'
		  && r.querySelector('[name="price"]').getAttribute('aria-invalid') === 'true'; })()`)
	b.screenshot(dir, "price-not-payable-desktop.png", "")
	if n := h.sqlInt(`SELECT count(*) FROM sales WHERE name = 'Stickers'`); n != 0 {
		t.Errorf("%d sales created at a price Stripe cannot charge, want none", n)
	}

	e2eChinese(b)
	b.do("the live view in Chinese", chromedp.Navigate(fmt.Sprintf("%s/admin/sales/%d?lang=zh", h.srv.URL, s.sale)))
	b.waitFor("the issues in Chinese", 15*time.Second, `document.documentElement.lang === 'zh-CN' && e.shown(e.q('money-issues'))
		&& e.text(e.q('money-issues')) === '1 笔并非订单自身的付款（¥49.00）不计入任何订单，将自动退款。 1 笔退款被支付服务商拒绝：请在服务商处处理（原因见订单列表）。'`)
	b.do("scroll to the money", chromedp.ScrollIntoView(e2eTestID("live-money")))
	b.screenshot(dir, "money-issues-zh-desktop.png", "")

	// The shopper's free order: confirmed, nothing to pay.
	for _, v := range e2eViewports {
		sb := openShopperTab(t, browserCtx, v, "free shopper")
		sb.takeCookies(h, reg.Header)
		sb.do("open the free order", chromedp.Navigate(h.srv.URL+"/orders/"+free))
		sb.waitFor("the free order confirmed, nothing to pay", 15*time.Second, `e.q('order-status').getAttribute('data-status') === 'PAID'
			&& e.text(e.q('order-note')) === 'A free item: nothing to pay, the order is confirmed.' && !e.shown(e.q('pay-button'))`)
		sb.screenshot(dir, "order-free-"+v.name+".png", "")
		sb.checkConsole()
	}
	h.checkInvariants(s)
}
