package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/flashsale/flashsale/testenv"
)

const stripeWebhookSecret = "whsec_flashsale_test"

// stripeEvent is a Checkout Session event as Stripe sends it.
func stripeEvent(eventID, typ, sessionID, orderID, paymentIntent string, amount int64) []byte {
	return fmt.Appendf(nil, `{"id": %q, "object": "event", "api_version": "2025-06-30.basil", "type": %q, "created": %d,
  "livemode": false, "pending_webhooks": 1,
  "data": {"object": {"id": %q, "object": "checkout.session", "mode": "payment", "status": "complete",
    "payment_status": "paid", "client_reference_id": %q, "metadata": {"order_id": %q},
    "payment_intent": %q, "amount_total": %d, "currency": "cny"}}}`,
		eventID, typ, time.Now().Unix(), sessionID, orderID, orderID, paymentIntent, amount)
}

// postWebhook sends a Stripe event signed with secret, as Stripe does.
func (h *harness) postWebhook(payload []byte, secret string) response {
	h.t.Helper()
	sig := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: secret, Timestamp: time.Now()}).Header
	req, _ := http.NewRequest("POST", h.srv.URL+"/api/payments/stripe/webhook", bytes.NewReader(payload))
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Stripe-Signature", sig)
	res, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("webhook: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	r := response{Status: res.StatusCode, Raw: string(b)}
	_ = json.Unmarshal(b, &r.Body)
	return r
}

// TestStripeCheckoutAndWebhook: with FLASHSALE_PAYMENTS=stripe against stripe-mock (every call
// flashsale makes is checked against Stripe's OpenAPI document): direct pay is refused with
// USE_CHECKOUT; Pay opens a Checkout Session; only the signed webhook marks the order PAID, once,
// whatever number of times it comes; a bad signature changes nothing; a payment confirmed after
// the order expired is refunded through Stripe, and the expired order's session is expired there.
func TestStripeCheckoutAndWebhook(t *testing.T) {
	h := newHarness(t, harnessOpts{env: map[string]string{"FLASHSALE_PAYMENTS": "stripe", "FLASHSALE_STRIPE_SECRET_KEY": "sk_test_flashsale",
		"FLASHSALE_STRIPE_WEBHOOK_SECRET": stripeWebhookSecret, "FLASHSALE_STRIPE_API_URL": testenv.StripeMock(t)}})
	s := h.liveSale(5)
	id, bearer := h.pendingOrder(1, s, s.items[0])
	if p := h.do("POST", "/api/flash-sales/orders/"+id+"/pay", bearer, nil); p.Status != http.StatusConflict || p.str("error") != "USE_CHECKOUT" {
		t.Fatalf("direct pay with Stripe: %d %s, want 409 USE_CHECKOUT", p.Status, p.Raw)
	}
	c := h.do("POST", "/api/flash-sales/orders/"+id+"/checkout", bearer, nil)
	if c.Status != http.StatusOK || !strings.HasPrefix(c.str("checkoutUrl"), "https://") {
		t.Fatalf("checkout: %d %s, want 200 and Stripe's page", c.Status, c.Raw)
	}
	session := h.sqlStr(`SELECT session_id FROM checkouts WHERE order_id = ?`, id)
	if !strings.HasPrefix(session, "cs_") {
		t.Fatalf("the checkout's session %q, want a Checkout Session id", session)
	}
	// The browser's return to the order page changes nothing: the order waits for the webhook.
	if o := h.do("GET", "/api/flash-sales/orders/"+id, bearer, nil); o.str("status") != "PENDING" || o.str("paymentStatus") != "awaiting" {
		t.Fatalf("before the webhook: %s, want PENDING awaiting", o.Raw)
	}
	paid := stripeEvent("evt_paid_1", "checkout.session.completed", session, id, "pi_flashsale_1", 1000)
	if r := h.postWebhook(paid, "whsec_someone_else"); r.Status != http.StatusBadRequest || r.str("error") != "BAD_SIGNATURE" {
		t.Fatalf("a webhook signed with another secret: %d %s, want 400 BAD_SIGNATURE", r.Status, r.Raw)
	}
	if o := h.do("GET", "/api/flash-sales/orders/"+id, bearer, nil); o.str("status") != "PENDING" {
		t.Fatalf("after a forged webhook: %s, want PENDING", o.Raw)
	}
	for i := 0; i < 3; i++ { // Stripe may deliver an event more than once
		if r := h.postWebhook(paid, stripeWebhookSecret); r.Status != http.StatusOK {
			t.Fatalf("webhook #%d: %d %s, want 200", i+1, r.Status, r.Raw)
		}
	}
	o := h.do("GET", "/api/flash-sales/orders/"+id, bearer, nil)
	if o.str("status") != "PAID" || o.str("paymentStatus") != "paid" {
		t.Fatalf("after the webhook: %s, want PAID paid", o.Raw)
	}
	if got := h.sqlStr(`SELECT payment_id FROM orders WHERE id = ?`, id); got != "pi_flashsale_1" {
		t.Errorf("payment id %q, want Stripe's PaymentIntent", got)
	}
	if n := h.sqlInt(`SELECT count(*) FROM payment_events WHERE provider = 'stripe' AND order_id = ?`, id); n != 1 {
		t.Errorf("%d events recorded, want 1", n)
	}

	// Too late: the order expires (its session is expired at Stripe), then Stripe confirms a
	// payment made at the last second: refunded through Stripe, and the order says so.
	late, lateBearer := h.pendingOrder(2, s, s.items[0])
	if c := h.do("POST", "/api/flash-sales/orders/"+late+"/checkout", lateBearer, nil); c.Status != http.StatusOK {
		t.Fatalf("checkout: %d %s", c.Status, c.Raw)
	}
	h.exec(`UPDATE orders SET pay_by = now() - interval '1 second' WHERE id = ?`, late)
	testenv.Eventually(t, 15*time.Second, "the order expired and its session expired at Stripe", func() error {
		st, cs := h.sqlStr(`SELECT status FROM orders WHERE id = ?`, late), h.sqlStr(`SELECT state FROM checkouts WHERE order_id = ?`, late)
		if st != "EXPIRED" || cs != "expired" {
			return fmt.Errorf("order %s, checkout %s", st, cs)
		}
		return nil
	})
	lateSession := h.sqlStr(`SELECT session_id FROM checkouts WHERE order_id = ?`, late)
	if r := h.postWebhook(stripeEvent("evt_paid_2", "checkout.session.completed", lateSession, late, "pi_flashsale_2", 1000), stripeWebhookSecret); r.Status != http.StatusOK {
		t.Fatalf("late webhook: %d %s", r.Status, r.Raw)
	}
	testenv.Eventually(t, 15*time.Second, "the late payment refunded", func() error {
		o := h.do("GET", "/api/flash-sales/orders/"+late, lateBearer, nil)
		if o.str("status") != "EXPIRED" || o.str("paymentStatus") != "refunded" || o.Body["refunded"] != true {
			return fmt.Errorf("%s", o.Raw)
		}
		return nil
	})
	if rid := h.sqlStr(`SELECT refund_id FROM orders WHERE id = ?`, late); !strings.HasPrefix(rid, "re_") {
		t.Errorf("refund id %q, want Stripe's", rid)
	}
	// An event about a checkout flashsale did not make is acknowledged and changes nothing.
	if r := h.postWebhook(stripeEvent("evt_other", "checkout.session.completed", "cs_other", "not-an-order", "pi_other", 5), stripeWebhookSecret); r.Status != http.StatusOK {
		t.Errorf("an event about another checkout: %d %s, want 200", r.Status, r.Raw)
	}
	h.checkInvariants(s)
}
