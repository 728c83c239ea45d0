package tests

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/testenv"
)

// stripeHarness is an instance on Stripe's API through a FaultyStripe in front of stripe-mock, its
// keepers' passes run by the test.
func stripeHarness(t *testing.T, extra map[string]string) (*harness, *testenv.FaultyStripe) {
	t.Helper()
	f := testenv.StartFaultyStripe(t)
	env := map[string]string{"FLASHSALE_PAYMENTS": "stripe", "FLASHSALE_STRIPE_SECRET_KEY": "sk_test_flashsale",
		"FLASHSALE_STRIPE_WEBHOOK_SECRET": stripeWebhookSecret, "FLASHSALE_STRIPE_API_URL": f.URL, "FLASHSALE_PAYMENT_TIMEOUT": "1s"}
	for k, v := range extra {
		env[k] = v
	}
	h := newHarness(t, harnessOpts{noKeeper: true, env: env})
	h.ledger = true // the FaultyStripe keeps the sessions each test sets: the ledger is checked
	return h, f
}

// checkedOut is a PENDING order of user with its checkout open at Stripe: its id, bearer and session.
func (h *harness) checkedOut(user int64, s saleIDs, item int64) (id, bearer, session string) {
	h.t.Helper()
	id, bearer = h.pendingOrder(user, s, item)
	if c := h.do("POST", "/api/flash-sales/orders/"+id+"/checkout", bearer, nil); c.Status != http.StatusOK {
		h.t.Fatalf("checkout of %s: %d %s", id, c.Status, c.Raw)
	}
	return id, bearer, h.sqlStr(`SELECT session_id FROM checkouts WHERE order_id = ?`, id)
}

// expiredWithoutStripe is a checked-out order of user whose deadline passed the grace while
// Stripe could not close its session: the keeper expired it anyway. Its id, bearer and session.
func (h *harness) expiredWithoutStripe(stripe *testenv.FaultyStripe, user int64, s saleIDs, item int64) (id, bearer, session string) {
	h.t.Helper()
	id, bearer, session = h.checkedOut(user, s, item)
	h.exec(`UPDATE orders SET pay_by = now() - interval '3 minutes' WHERE id = ?`, id)
	stripe.Fail("POST", "/v1/checkout/sessions/", -1, http.StatusBadGateway)
	if err := h.app.KeeperPass(context.Background()); err != nil {
		h.t.Logf("keeper pass: %v", err)
	}
	stripe.Heal()
	return id, bearer, session
}

// paidLate has Stripe keep order id's session paid (payment pi, cents) and send its webhook.
func (h *harness) paidLate(stripe *testenv.FaultyStripe, id, session, pi string, cents int64) {
	h.t.Helper()
	stripe.Session(session, testenv.StripeSession{Status: "complete", PaymentStatus: "paid", PaymentIntent: pi, AmountTotal: cents, Currency: "cny", ClientReferenceID: id})
	if r := h.postWebhook(stripeEvent("evt_"+pi, "checkout.session.completed", session, id, pi, cents), stripeWebhookSecret); r.Status != http.StatusOK {
		h.t.Fatalf("late payment: %d %s", r.Status, r.Raw)
	}
}

// sessionEvent is a Stripe checkout event with every field set by the caller.
func sessionEvent(eventID, typ, session, orderID, paymentStatus, paymentIntent string, amount int64, currency string) []byte {
	pi := "null"
	if paymentIntent != "" {
		pi = strconv.Quote(paymentIntent)
	}
	return fmt.Appendf(nil, `{"id": %q, "object": "event", "api_version": "2025-06-30.basil", "type": %q, "created": %d,
  "livemode": false, "pending_webhooks": 1,
  "data": {"object": {"id": %q, "object": "checkout.session", "mode": "payment", "status": "complete",
    "payment_status": %q, "client_reference_id": %q, "metadata": {}, "payment_intent": %s, "amount_total": %d, "currency": %q}}}`,
		eventID, typ, time.Now().Unix(), session, paymentStatus, orderID, pi, amount, currency)
}

// TestPaymentPaysOnlyItsOwnOrder: a Stripe event pays an order only when it is the order's own
// checkout session, at its price and currency, with money taken. A payment link's session that
// names the order, another amount, another currency, a 100% promotion code and a second payment
// of a paid order pay nothing: each is a conflict, recorded once, refunded through Stripe (the
// promotion code took nothing: nothing to refund), and counted in the merchant's money view.
// Before this rule each of the first four marked the order PAID.
func TestPaymentPaysOnlyItsOwnOrder(t *testing.T) {
	t.Parallel()
	h, stripe := stripeHarness(t, nil)
	ctx := context.Background()
	s := h.liveSale(6) // item 0 at 10.00 CNY
	merchant := h.token(9000, auth.RoleMerchant)
	id, _, session := h.checkedOut(1, s, s.items[0])
	other, _, otherSession := h.checkedOut(2, s, s.items[0])
	status := func(id string) string {
		return h.sqlStr(`SELECT status || ' ' || payment_status FROM orders WHERE id = ?`, id)
	}
	// pay tells the shop, as Stripe would, that session took amount (its payment intent pi; ""
	// and no_payment_required: nothing taken), and keeps the session so at this Stripe.
	pay := func(name, order, session, paymentStatus, pi string, amount int64, currency string) {
		t.Helper()
		stripe.Session(session, testenv.StripeSession{Status: "complete", PaymentStatus: paymentStatus, PaymentIntent: pi, AmountTotal: amount,
			Currency: currency, ClientReferenceID: order})
		if r := h.postWebhook(sessionEvent("evt_"+name, "checkout.session.completed", session, order, paymentStatus, pi, amount, currency), stripeWebhookSecret); r.Status != http.StatusOK {
			t.Fatalf("%s: webhook %d %s", name, r.Status, r.Raw)
		}
	}

	pay("link", id, "cs_link_1", "paid", "pi_link", 100, "cny")            // a payment link naming the order
	pay("currency", id, "cs_currency", "paid", "pi_currency", 1000, "usd") // another currency
	pay("promo", id, "cs_promo", "no_payment_required", "", 0, "cny")      // a 100% promotion code
	pay("partial", other, otherSession, "paid", "pi_partial", 500, "cny")  // its own session, a partial promotion code
	if got := status(id); got != "PENDING awaiting" {
		t.Fatalf("after a payment link, another currency and a promotion code the order is %q, want still PENDING awaiting", got)
	}
	if got := status(other); got != "PENDING none" {
		t.Fatalf("after its own session paid 5.00 of 10.00 the order is %q, want PENDING none (its checkout closed: a new one can be opened)", got)
	}
	if got := h.sqlStr(`SELECT state FROM payment_conflicts WHERE session_id = 'cs_promo'`); got != "nothing_taken" {
		t.Errorf("the promotion code's conflict is %q, want nothing_taken", got)
	}

	// The order's own payment still pays it; a second payment of the same order is a conflict.
	pay("own", id, session, "paid", "pi_own", 1000, "cny")
	if got := status(id); got != "PAID paid" {
		t.Fatalf("after its own payment the order is %q, want PAID paid", got)
	}
	pay("second", id, "cs_second", "paid", "pi_second", 1000, "cny")
	if got := h.sqlStr(`SELECT payment_id FROM orders WHERE id = ?`, id); got != "pi_own" {
		t.Errorf("the order holds payment %q, want its own pi_own", got)
	}
	// Money taken for an order that does not exist (a deleted drill order, a made-up reference):
	// kept by nobody, so refunded too.
	pay("nobody", "00000000-0000-4000-8000-000000000001", "cs_nobody", "paid", "pi_nobody", 300, "cny")
	if st := h.sqlStr(`SELECT state || ' ' || reason FROM payment_conflicts WHERE session_id = 'cs_nobody'`); st != "refund_due no such order" {
		t.Errorf("a payment naming no order: %q, want a conflict to refund", st)
	}
	if n := h.sqlInt(`SELECT count(*) FROM payment_conflicts`); n != 6 {
		t.Fatalf("%d conflicts recorded, want 6", n)
	}

	// The keeper refunds every conflict that took money, through Stripe, once.
	h.app.Payments.Pass(ctx)
	h.app.Payments.Pass(ctx)
	if n := h.sqlInt(`SELECT count(*) FROM payment_conflicts WHERE state = 'refunded' AND refund_id LIKE 're_%'`); n != 5 {
		t.Errorf("%d conflicts refunded with Stripe's refund id, want 5 (all but the promotion code)", n)
	}
	refunds := stripe.Requests("/v1/refunds")
	if len(refunds) != 5 {
		t.Errorf("%d refund requests to Stripe, want 5: %+v", len(refunds), refunds)
	}
	for _, r := range refunds {
		if !strings.HasPrefix(r.IdempotencyKey, "flashsale-refund-pi_") {
			t.Errorf("refund sent with idempotency key %q, want one per payment", r.IdempotencyKey)
		}
	}
	r := h.do("GET", fmt.Sprintf("/api/admin/sales/%d/live", s.sale), merchant, nil)
	m, _ := r.Body["money"].(map[string]any)
	conflicts, _ := m["conflicts"].(map[string]any)
	if conflicts["count"] != float64(5) || conflicts["amountCents"] != float64(100+1000+500+1000) || m["refundsFailed"] != float64(0) || m["paidCents"] != float64(1000) {
		t.Errorf("money view %s: want 5 conflicts of 2600, none failed, 1000 paid", r.Raw)
	}
	// The other order's checkout closed (the partial payment): a new one is opened, and the
	// reconciler asks about it even though it had checked the first one.
	h.exec(`UPDATE checkouts SET verified = true, checked_at = now() WHERE order_id = ?`, other)
	if c := h.do("POST", "/api/flash-sales/orders/"+other+"/checkout", h.token(2, auth.RoleShopper), nil); c.Status != http.StatusOK {
		t.Fatalf("a new checkout after the partial payment: %d %s", c.Status, c.Raw)
	}
	if st := h.sqlStr(`SELECT state || ' ' || attempt || ' ' || verified || ' ' || (checked_at IS NULL) FROM checkouts WHERE order_id = ?`, other); st != "open 1 false true" {
		t.Errorf("the new checkout: %q, want open, attempt 1, not verified, never checked", st)
	}
	// Stripe captured 3600: 1000 paid + 2600 in conflicts (the ledger, in checkInvariants).
	h.checkInvariants(s)
}

// TestReconcilerFindsWhatTheWebhookLost: no webhook reaches the shop. The reconciler asks Stripe
// about the checkouts whose outcome may be lost and applies what it learns as the webhook would:
// a session paid while the order was PENDING pays it; a session Stripe says was paid when the
// order's deadline came pays it instead of being refunded; a payment link's session that names an
// order is found by the sweep of Stripe's completed sessions and refunded. flashsale reconcile's money ledger then agrees with
// Stripe, and says so by exit status when it does not.
func TestReconcilerFindsWhatTheWebhookLost(t *testing.T) {
	t.Parallel()
	h, stripe := stripeHarness(t, nil)
	ctx := context.Background()
	s := h.liveSale(6)
	paid, _, paidSession := h.checkedOut(1, s, s.items[0])
	late, _, lateSession := h.checkedOut(2, s, s.items[0])
	open, _, openSession := h.checkedOut(3, s, s.items[0])
	stripe.Session(paidSession, testenv.StripeSession{Status: "complete", PaymentStatus: "paid", PaymentIntent: "pi_lost_1", AmountTotal: 1000, Currency: "cny", ClientReferenceID: paid})
	stripe.Session(lateSession, testenv.StripeSession{Status: "complete", PaymentStatus: "paid", PaymentIntent: "pi_lost_2", AmountTotal: 1000, Currency: "cny", ClientReferenceID: late})
	stripe.Session(openSession, testenv.StripeSession{Status: "open", PaymentStatus: "unpaid", ClientReferenceID: open})

	// The late order's deadline passes: the shop asks Stripe to expire its session first, Stripe
	// says it was paid: the order is PAID, not expired and refunded.
	h.exec(`UPDATE orders SET pay_by = now() - interval '1 second' WHERE id = ?`, late)
	if err := h.app.KeeperPass(ctx); err != nil {
		t.Logf("keeper pass: %v", err)
	}
	if st := h.sqlStr(`SELECT status FROM orders WHERE id = ?`, late); st != "PENDING" {
		t.Fatalf("past its deadline with its checkout open at Stripe, the order is %s before Stripe closed it, want PENDING", st)
	}
	h.app.Payments.Pass(ctx)
	if st := h.sqlStr(`SELECT status || ' ' || payment_id FROM orders WHERE id = ?`, late); st != "PAID pi_lost_2" {
		t.Fatalf("the order whose session Stripe says was paid at the deadline: %q, want PAID pi_lost_2", st)
	}

	// The paid order's webhook never comes: the reconciler asks once its checkout is older than a
	// webhook takes.
	h.exec(`UPDATE checkouts SET created_at = now() - interval '2 minutes' WHERE order_id IN (?, ?)`, paid, open)
	if n := h.app.Payments.Reconcile(ctx); n < 2 {
		t.Fatalf("the reconciler asked about %d checkouts, want both", n)
	}
	if st := h.sqlStr(`SELECT status || ' ' || payment_id FROM orders WHERE id = ?`, paid); st != "PAID pi_lost_1" {
		t.Fatalf("the order whose webhook was lost: %q, want PAID pi_lost_1", st)
	}
	if st := h.sqlStr(`SELECT status FROM orders WHERE id = ?`, open); st != "PENDING" {
		t.Fatalf("the order still paying: %s, want PENDING", st)
	}
	if n := h.app.Payments.Reconcile(ctx); n != 0 {
		t.Errorf("asked again at once about %d checkouts, want none (each is claimed for a minute)", n)
	}

	// A payment link that names the open order, paid at Stripe, whose webhook is lost: the shop
	// made no checkout for it, so only the sweep of Stripe's completed sessions finds it: a
	// conflict, refunded; the order stays PENDING.
	stripe.Session("cs_link_lost", testenv.StripeSession{Status: "complete", PaymentStatus: "paid", PaymentIntent: "pi_link_lost", AmountTotal: 700, Currency: "cny", ClientReferenceID: open})
	if n := h.app.Payments.Sweep(ctx); n != 1 {
		t.Fatalf("the sweep applied %d sessions, want the payment link's alone (the others are known)", n)
	}
	if n := h.app.Payments.Sweep(ctx); n != 0 {
		t.Fatalf("a second sweep applied %d sessions, want none", n)
	}
	h.app.Payments.Pass(ctx)
	if st := h.sqlStr(`SELECT state || ' ' || order_id::text FROM payment_conflicts WHERE session_id = 'cs_link_lost'`); st != "refunded "+open {
		t.Fatalf("the lost payment link's conflict: %q, want refunded, naming the order", st)
	}
	if st := h.sqlStr(`SELECT status FROM orders WHERE id = ?`, open); st != "PENDING" {
		t.Fatalf("the order a payment link named: %s, want PENDING", st)
	}

	// The books agree with Stripe's: captured 2700 = two paid orders + the refunded conflict.
	out, code := reconcileMoney(t, h, s.sale)
	if code != 0 || !strings.Contains(out, "✓ money ledger of sale") || !strings.Contains(out, "captured 2700 = paid 2000 (2 orders) + refunded 0 (0) + conflicts 700 (1)") {
		t.Fatalf("reconcile: exit %d\n%s\nwant the ledger agreeing, captured 2700", code, out)
	}
	h.checkInvariants(s)
	// A payment our books do not have (the open session, paid at Stripe, unknown here): exit 1.
	stripe.Session(openSession, testenv.StripeSession{Status: "complete", PaymentStatus: "paid", PaymentIntent: "pi_unknown", AmountTotal: 1000, Currency: "cny", ClientReferenceID: open})
	out, code = reconcileMoney(t, h, s.sale)
	if code != 1 || !strings.Contains(out, "✗ money ledger") || !strings.Contains(out, "difference 1000") {
		t.Fatalf("reconcile with a payment the books lack: exit %d\n%s\nwant 1 and the difference", code, out)
	}
}

// reconcileMoney runs `flashsale reconcile SALE_ID` against h's engines and answers its output
// and exit status (1 on ErrViolations).
func reconcileMoney(t *testing.T, h *harness, saleID int64) (string, int) {
	t.Helper()
	var out bytes.Buffer
	env := mergeEnv(h.env, map[string]string{"FLASHSALE_NATS_URL": h.app.NATSURL})
	err := app.Run(context.Background(), []string{"reconcile", "-wait", "5s", strconv.FormatInt(saleID, 10)}, func(k string) string { return env[k] }, &out)
	switch {
	case err == nil:
		return out.String(), 0
	case err == app.ErrViolations:
		return out.String(), 1
	}
	t.Fatalf("reconcile: %v\n%s", err, out.String())
	return "", 2
}

// TestProviderFaults: Stripe answering 500s, nothing at all, or slowly. A checkout click whose
// first call got a 500 is tried again at once under a new idempotency key (Stripe replays a
// stored 500 under the old one for a day) and answers the shopper; a slow Stripe holds a click no
// longer than the payment timeout; a refund that got no answer looks for an earlier refund first,
// then goes under a new key; a refund Stripe refuses for good is recorded with its reason, shown
// in the money view, and not asked again.
func TestProviderFaults(t *testing.T) {
	t.Parallel()
	h, stripe := stripeHarness(t, nil)
	ctx := context.Background()
	s := h.liveSale(6)

	// One 500 on create: the click still opens a checkout, under a second key.
	id, bearer := h.pendingOrder(1, s, s.items[0])
	stripe.Fail("POST", "/v1/checkout/sessions", 1, http.StatusInternalServerError)
	if c := h.do("POST", "/api/flash-sales/orders/"+id+"/checkout", bearer, nil); c.Status != http.StatusOK {
		t.Fatalf("checkout after one 500: %d %s, want 200", c.Status, c.Raw)
	}
	creates := stripe.Requests("/v1/checkout/sessions")
	if len(creates) != 2 || creates[0].Answered != 500 || creates[1].IdempotencyKey == creates[0].IdempotencyKey {
		t.Fatalf("checkout calls %+v: want a 500, then a second call under a new key", creates)
	}

	// A slow Stripe: the click answers 503 within the timeout's bounds, and nothing is handed out.
	slowID, slowBearer := h.pendingOrder(2, s, s.items[0])
	// (Not a speed test: the bound is the behaviour, an answer long before Stripe's.)
	stripe.Slow("POST", "/v1/checkout/sessions", 8*time.Second)
	start := time.Now()
	c := h.do("POST", "/api/flash-sales/orders/"+slowID+"/checkout", slowBearer, nil)
	if took := time.Since(start); c.Status != http.StatusServiceUnavailable || took > 6*time.Second {
		t.Fatalf("checkout with Stripe taking 8 s: %d %s after %v, want 503 after two 1-second tries, before Stripe answers", c.Status, c.Raw, took)
	}
	stripe.Heal()

	// Two late payments; the refund calls get no answer twice: asked about first, then made under new keys.
	// Past the grace, with Stripe unable to close the sessions: the orders expire without it, and
	// their payments come late.
	late, _, lateSession := h.expiredWithoutStripe(stripe, 3, s, s.items[0])
	refused, _, refusedSession := h.expiredWithoutStripe(stripe, 4, s, s.items[0])
	h.paidLate(stripe, late, lateSession, "pi_late", 1000)
	h.paidLate(stripe, refused, refusedSession, "pi_refused", 1000)
	stripe.Fail("POST", "/v1/refunds", 2, 0) // no answer at all, twice
	for range 20 {
		h.app.Payments.Pass(ctx)
		if h.sqlStr(`SELECT coalesce(refund_id, '') FROM orders WHERE id = ?`, late) != "" && h.sqlStr(`SELECT coalesce(refund_id, '') FROM orders WHERE id = ?`, refused) != "" {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if h.sqlStr(`SELECT coalesce(refund_id, '') FROM orders WHERE id = ?`, late) == "" {
		t.Fatalf("the late payment was not refunded after Stripe answered again: %+v", stripe.Requests("/v1/refunds"))
	}
	keys := map[string]bool{}
	lists := 0
	for _, r := range stripe.Requests("/v1/refunds") {
		if r.Method == "POST" {
			keys[r.IdempotencyKey] = true
		} else {
			lists++
		}
	}
	if len(keys) < 2 || lists == 0 {
		t.Errorf("refund calls %+v: want new keys after calls without an answer, and a look for an earlier refund first", stripe.Requests("/v1/refunds"))
	}

	// Refused for good: recorded with the reason, shown, never asked again.
	other, _, otherSession := h.expiredWithoutStripe(stripe, 5, s, s.items[0])
	stripe.RefundsAnswer("failed", "expired_or_canceled_card")
	h.paidLate(stripe, other, otherSession, "pi_other", 1000)
	before := len(stripe.Requests("/v1/refunds"))
	for range 3 {
		h.app.Payments.Pass(ctx)
	}
	if reason := h.sqlStr(`SELECT coalesce(refund_failure, '') FROM orders WHERE id = ?`, other); reason != "expired_or_canceled_card" {
		t.Fatalf("the refused refund's reason %q, want Stripe's", reason)
	}
	if n := len(stripe.Requests("/v1/refunds")) - before; n != 1 {
		t.Errorf("%d refund calls for a refund refused for good, want 1", n)
	}

	// Accepted (pending), then failed at Stripe: the reconciler asks until the refund is final,
	// records the failure with its reason, and the order no longer says refunded.
	if n := h.app.Payments.ConfirmRefunds(ctx); n != 2 {
		t.Errorf("%d refunds confirmed final, want the two made through stripe-mock (succeeded there)", n)
	}
	pending, pendingBearer, pendingSession := h.expiredWithoutStripe(stripe, 6, s, s.items[0])
	stripe.RefundsAnswer("pending", "")
	h.paidLate(stripe, pending, pendingSession, "pi_pending", 1000)
	h.app.Payments.Pass(ctx)
	if n := h.app.Payments.ConfirmRefunds(ctx); n != 0 {
		t.Fatalf("%d refunds final while Stripe says pending, want 0", n)
	}
	if o := h.do("GET", "/api/flash-sales/orders/"+pending, pendingBearer, nil); o.Body["refunded"] != true {
		t.Fatalf("a refund Stripe accepted: %s, want refunded true", o.Raw)
	}
	stripe.RefundState("re_faulty_pi_pending", "failed", "lost_or_stolen_card")
	if n := h.app.Payments.ConfirmRefunds(ctx); n < 1 {
		t.Fatalf("%d refunds final after Stripe failed it, want the pending one", n)
	}
	if reason := h.sqlStr(`SELECT coalesce(refund_failure, '') FROM orders WHERE id = ?`, pending); reason != "lost_or_stolen_card" {
		t.Fatalf("the failed refund's reason %q, want Stripe's", reason)
	}
	if o := h.do("GET", "/api/flash-sales/orders/"+pending, pendingBearer, nil); o.Body["refunded"] != false {
		t.Errorf("a refund that failed at Stripe: %s, want refunded false", o.Raw)
	}
	r := h.do("GET", fmt.Sprintf("/api/admin/sales/%d/live", s.sale), h.token(9000, auth.RoleMerchant), nil)
	if m, _ := r.Body["money"].(map[string]any); m["refundsFailed"] != float64(2) {
		t.Errorf("money view %s: want refundsFailed 2", r.Raw)
	}
	// The ledger accounts for the refused refunds and says they are not settled.
	out, code := reconcileMoney(t, h, s.sale)
	if code != 0 || !strings.Contains(out, "! 2 refunds (2000) refused by the provider for good") {
		t.Errorf("reconcile: exit %d\n%s\nwant the ledger agreeing and the two refused refunds named", code, out)
	}
	h.checkInvariants(s)
}

// TestPricesAProviderCanTake: with Stripe a price below its minimum for the currency is refused
// (422 PRICE_NOT_PAYABLE naming the minimum), at creation and in an edit; 0 is a free item, whose
// order is confirmed at once with paymentStatus free and never sent to a provider.
func TestPricesAProviderCanTake(t *testing.T) {
	t.Parallel()
	h, stripe := stripeHarness(t, nil)
	merchant := h.token(9000, auth.RoleMerchant)
	body := func(currency string, price int) map[string]any {
		return map[string]any{"name": "Pricing", "currency": currency, "startsAt": time.Now().Add(-time.Second).UTC().Format(time.RFC3339),
			"endsAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "items": []map[string]any{{"name": "thing", "priceCents": price, "quantity": 3}}}
	}
	for _, c := range []struct {
		currency string
		price    int
		min      float64
	}{{"CNY", 399, 400}, {"USD", 49, 50}, {"EUR", 1, 50}} {
		r := h.do("POST", "/api/admin/sales", merchant, body(c.currency, c.price))
		if r.Status != http.StatusUnprocessableEntity || r.str("error") != "PRICE_NOT_PAYABLE" || r.Body["minimumCents"] != c.min || r.str("currency") != c.currency {
			t.Errorf("%d %s: %d %s, want 422 PRICE_NOT_PAYABLE with minimumCents %v", c.price, c.currency, r.Status, r.Raw, c.min)
		}
	}
	ok := h.do("POST", "/api/admin/sales", merchant, body("CNY", 400))
	if ok.Status != http.StatusCreated {
		t.Fatalf("a price at the minimum: %d %s", ok.Status, ok.Raw)
	}
	items, _ := ok.Body["items"].([]any)
	itemID := items[0].(map[string]any)["itemId"].(string)
	if r := h.do("PATCH", "/api/admin/sales/"+ok.str("saleId"), merchant, map[string]any{"items": []map[string]any{{"itemId": itemID, "priceCents": 100}}}); r.Status != http.StatusUnprocessableEntity || r.str("error") != "PRICE_NOT_PAYABLE" {
		t.Errorf("an edit to 1.00 CNY: %d %s, want 422 PRICE_NOT_PAYABLE", r.Status, r.Raw)
	}

	// A free item: the order is confirmed at once, no checkout, no Stripe call.
	free := h.do("POST", "/api/admin/sales", merchant, body("CNY", 0))
	if free.Status != http.StatusCreated {
		t.Fatalf("a free item: %d %s", free.Status, free.Raw)
	}
	saleID, _ := strconv.ParseInt(free.str("saleId"), 10, 64)
	freeItem, _ := strconv.ParseInt(free.Body["items"].([]any)[0].(map[string]any)["itemId"].(string), 10, 64)
	bearer := h.token(7, auth.RoleShopper)
	r := h.buy(bearer, freeItem, h.purchaseToken(bearer, saleID))
	if r.Status != http.StatusAccepted {
		t.Fatalf("buying the free item: %d %s", r.Status, r.Raw)
	}
	id := r.str("orderId")
	testenv.Eventually(t, 15*time.Second, "the free order confirmed", func() error {
		o := h.do("GET", "/api/flash-sales/orders/"+id, bearer, nil)
		if o.str("status") != "PAID" || o.str("paymentStatus") != "free" {
			return fmt.Errorf("%s", o.Raw)
		}
		return nil
	})
	if c := h.do("POST", "/api/flash-sales/orders/"+id+"/checkout", bearer, nil); c.Status != http.StatusConflict || c.str("error") != "NOT_PAYABLE" {
		t.Errorf("checkout of a free order: %d %s, want 409 NOT_PAYABLE", c.Status, c.Raw)
	}
	if n := len(stripe.Requests("/v1/checkout/sessions")); n != 0 {
		t.Errorf("%d checkout calls to Stripe for a free item, want none", n)
	}
	h.checkInvariants(saleIDs{sale: saleID, items: []int64{freeItem}})
}
