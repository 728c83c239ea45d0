//go:build linux

package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/flashsale/flashsale/testenv"
)

const chaosWebhookSecret = "whsec_flashsale_chaos"

// scenarioStripeFaults: the instances take payments through Stripe, and Stripe misbehaves. A
// FaultyStripe in front of stripe-mock answers the first checkouts with 500s, drops refund calls
// (no answer), and is slow to read sessions; the webhooks are dropped, duplicated (to two
// instances), delivered late (past the order's deadline) or out of order (the expired event
// after the paid one). Shoppers pay in time, in the last second, through a payment link that
// names their order (a conflict), or not at all. At the end every payment Stripe took is exactly
// one PAID order or one refund, the money ledger of `flashsale reconcile` agrees with Stripe, no
// unit is sold twice, and no order is left PENDING.
func scenarioStripeFaults(t *testing.T, r *result) {
	stripe := testenv.StartFaultyStripe(t)
	c := newCluster(t, clusterOpts{env: map[string]string{
		"FLASHSALE_PAYMENTS": "stripe", "FLASHSALE_STRIPE_SECRET_KEY": "sk_test_flashsalechaos",
		"FLASHSALE_STRIPE_WEBHOOK_SECRET": chaosWebhookSecret, "FLASHSALE_STRIPE_API_URL": stripe.URL,
		"FLASHSALE_PAYMENT_TIMEOUT": "1s", "FLASHSALE_PAYMENT_RECONCILE_INTERVAL": "2s",
	}})
	stripe.Fail("POST", "/v1/checkout/sessions", 15, http.StatusInternalServerError) // 15 creates answered 500
	stripe.Fail("POST", "/v1/refunds", 6, 0)                                         // 6 refunds never answered
	stripe.Slow("GET", "/v1/checkout/sessions/", 200*time.Millisecond)
	s := c.createSale(time.Now().Add(-time.Second), 6*time.Second, 80)
	l := newLedger()
	var (
		wg      sync.WaitGroup
		n       atomic.Int64
		mu      sync.Mutex
		taken   = map[string]string{} // session -> order it named, for every session Stripe took money in
		dropped atomic.Int64
		dups    atomic.Int64
		late    atomic.Int64
		errs    []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	// deliver sends a Stripe event to one instance, or to two (a duplicate), or not at all, now or
	// after a delay.
	deliver := func(k int64, event []byte, mayDrop bool) {
		switch rnd := rand.IntN(10); {
		case mayDrop && rnd < 3:
			dropped.Add(1)
			return
		case rnd < 5:
			dups.Add(1)
			c.postWebhook(int(k%3), event)
			c.postWebhook(int((k+1)%3), event)
		case rnd < 7:
			late.Add(1)
			time.Sleep(7 * time.Second) // past the deadline
			c.postWebhook(int(k%3), event)
		default:
			c.postWebhook(int(k%3), event)
		}
	}
	pay := func(id string, user int64) {
		defer wg.Done()
		k := n.Add(1)
		bearer := bearerOf(user)
		// The shopper presses Pay, again after a 503 (Stripe's 500s), on any instance.
		var session string
		for try := 0; try < 20 && session == ""; try++ {
			a, err := c.do(int((k+int64(try))%3), "POST", "/api/flash-sales/orders/"+id+"/checkout", bearer, nil)
			switch {
			case err == nil && a.status == http.StatusOK:
				var rows []string
				_ = c.sql.Raw(`SELECT session_id FROM checkouts WHERE order_id = ?`, id).Scan(&rows).Error
				if len(rows) == 1 {
					session = rows[0]
				}
			case err == nil && a.status == http.StatusConflict && a.str("error") == "NOT_PAYABLE":
				time.Sleep(300 * time.Millisecond) // still QUEUED
			default:
				time.Sleep(200 * time.Millisecond)
			}
		}
		if session == "" {
			fail(fmt.Errorf("order %s: no checkout after 20 tries", id))
			return
		}
		var payBy time.Time
		_ = c.sql.Raw(`SELECT pay_by FROM orders WHERE id = ?`, id).Scan(&payBy).Error
		paid := func(session, pi string, amount int64) {
			stripe.Session(session, testenv.StripeSession{Status: "complete", PaymentStatus: "paid", PaymentIntent: pi,
				AmountTotal: amount, Currency: "cny", ClientReferenceID: id})
			mu.Lock()
			taken[session] = id
			mu.Unlock()
		}
		switch k % 10 {
		case 0, 1, 2, 3: // pays in time; the webhook may be lost, doubled or late
			paid(session, "pi_"+id, 1000)
			deliver(k, chaosEvent("evt_paid_"+id, "checkout.session.completed", session, id, "pi_"+id, 1000), true)
		case 4, 5: // pays in the last half second
			time.Sleep(time.Until(payBy.Add(-500 * time.Millisecond)))
			paid(session, "pi_"+id, 1000)
			deliver(k, chaosEvent("evt_paid_"+id, "checkout.session.completed", session, id, "pi_"+id, 1000), true)
		case 6: // a payment link that names the order, and the order's own payment
			paid("cs_link_"+id, "pi_link_"+id, 700)
			deliver(k, chaosEvent("evt_link_"+id, "checkout.session.completed", "cs_link_"+id, id, "pi_link_"+id, 700), true)
			paid(session, "pi_"+id, 1000)
			deliver(k, chaosEvent("evt_paid_"+id, "checkout.session.completed", session, id, "pi_"+id, 1000), true)
		case 7: // pays, then Stripe's expired event of the same session comes after the paid one
			paid(session, "pi_"+id, 1000)
			deliver(k, chaosEvent("evt_paid_"+id, "checkout.session.completed", session, id, "pi_"+id, 1000), false)
			c.postWebhook(int(k%3), chaosEvent("evt_exp_"+id, "checkout.session.expired", session, id, "", 0))
		default: // never pays
		}
	}
	c.run(l, s, shoppersFor(s, 1, 240), loadOpts{attempts: 6, accepted: func(id string, user int64) {
		wg.Add(1)
		pay(id, user)
	}})
	wg.Wait()
	for _, err := range errs {
		r.Violations++
		t.Errorf("payment: %v", err)
	}
	// accounted counts, for each session Stripe took money in, what became of it: paid (one PAID
	// order paid by that payment), refunded (the order's late payment, or a conflict), or none.
	accounted := func() (paid, refunded int, unsettled []string) {
		mu.Lock()
		defer mu.Unlock()
		for session, order := range taken {
			var got struct{ Paid, Refunded, Conflict int64 }
			st, _ := stripe.SessionState(session)
			_ = c.sql.Raw(`SELECT
					(SELECT count(*) FROM orders WHERE id = ?::uuid AND status = 'PAID' AND payment_id = ?) AS paid,
					(SELECT count(*) FROM orders WHERE id = ?::uuid AND payment_status = 'refunded' AND payment_id = ? AND refund_id IS NOT NULL) AS refunded,
					(SELECT count(*) FROM payment_conflicts WHERE session_id = ? AND state = 'refunded') AS conflict`,
				order, st.PaymentIntent, order, st.PaymentIntent, session).Scan(&got).Error
			switch {
			case got.Paid+got.Refunded+got.Conflict != 1:
				unsettled = append(unsettled, fmt.Sprintf("session %s (order %s, %s): paid %d, refunded %d, conflict refunded %d",
					session, order, st.PaymentIntent, got.Paid, got.Refunded, got.Conflict))
			case got.Paid == 1:
				paid++
			default:
				refunded++
			}
		}
		return paid, refunded, unsettled
	}
	// Every order ends (PAID, or EXPIRED with any payment refunded), every refund is made, and
	// every payment is accounted for (a payment link whose webhook was lost waits for a sweep of
	// Stripe's sessions, every tenth reconciliation).
	err := testenv.Poll(120*time.Second, 500*time.Millisecond, func() error {
		var open struct{ Pending, RefundsDue, ConflictsDue int64 }
		if err := c.sql.Raw(`SELECT
				(SELECT count(*) FROM orders WHERE sale_id = ? AND status = 'PENDING') AS pending,
				(SELECT count(*) FROM orders WHERE sale_id = ? AND payment_status = 'refunded' AND refund_id IS NULL AND refund_failure IS NULL) AS refunds_due,
				(SELECT count(*) FROM payment_conflicts WHERE sale_id = ? AND state = 'refund_due') AS conflicts_due`, s.id, s.id, s.id).Scan(&open).Error; err != nil {
			return err
		}
		if open.Pending+open.RefundsDue+open.ConflictsDue > 0 {
			return fmt.Errorf("%+v", open)
		}
		if _, _, unsettled := accounted(); len(unsettled) > 0 {
			return fmt.Errorf("%d payments not accounted for yet", len(unsettled))
		}
		return nil
	})
	if err != nil {
		r.Violations++
		t.Errorf("the payments did not settle: %v", err)
	}
	// Every session Stripe took money in is one PAID order (paid by that payment) or one refund.
	paidOrders, refunds, unsettled := accounted()
	for _, u := range unsettled {
		r.Violations++
		t.Errorf("%s: want exactly one", u)
	}
	r.Faults = fmt.Sprintf("Stripe: 15 checkouts 500, 6 refunds unanswered, lookups slow; webhooks: %d dropped, %d doubled, %d late", dropped.Load(), dups.Load(), late.Load())
	r.Note = fmt.Sprintf("%d payments taken: %d paid an order, %d refunded", paidOrders+refunds+len(unsettled), paidOrders, refunds)
	c.finish(t, r, l, s) // flashsale reconcile: the invariants and the money ledger against Stripe
}

// chaosEvent is a Stripe checkout event (compact JSON, so that it is sent byte for byte).
func chaosEvent(eventID, typ, session, orderID, pi string, amount int64) []byte {
	status := "paid"
	var intent any = pi
	if pi == "" {
		status, intent = "unpaid", nil
	}
	b, _ := json.Marshal(map[string]any{"id": eventID, "object": "event", "api_version": "2025-06-30.basil", "type": typ,
		"created": time.Now().Unix(), "livemode": false, "pending_webhooks": 1,
		"data": map[string]any{"object": map[string]any{"id": session, "object": "checkout.session", "mode": "payment",
			"status": map[bool]string{true: "complete", false: "expired"}[pi != ""], "payment_status": status,
			"client_reference_id": orderID, "payment_intent": intent, "amount_total": amount, "currency": "cny"}}})
	return b
}

// postWebhook delivers a signed Stripe event to instance i, again until it is taken (Stripe
// retries a delivery that got no 2xx).
func (c *cluster) postWebhook(i int, event []byte) {
	for try := 0; try < 20; try++ {
		sig := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: event, Secret: chaosWebhookSecret, Timestamp: time.Now()}).Header
		a, err := c.do((i+try)%3, "POST", "/api/payments/stripe/webhook", "", json.RawMessage(event), "Stripe-Signature", sig)
		if err == nil && a.status == http.StatusOK {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
}
