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
	"github.com/flashsale/flashsale/services/payments"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/testenv"
)

// pendingOrder buys one unit of item as user and waits until the order is PENDING.
func (h *harness) pendingOrder(user int64, s saleIDs, item int64) (id, bearer string) {
	h.t.Helper()
	bearer = h.token(user, auth.RoleShopper)
	r := h.buy(bearer, item, h.purchaseToken(bearer, s.sale))
	if r.Status != http.StatusAccepted {
		h.t.Fatalf("buy: %d %s", r.Status, r.Raw)
	}
	id = r.str("orderId")
	testenv.Eventually(h.t, 15*time.Second, "order "+id+" PENDING", func() error {
		if o := h.do("GET", "/api/flash-sales/orders/"+id, bearer, nil); o.str("status") != "PENDING" {
			return fmt.Errorf("status %q", o.str("status"))
		}
		return nil
	})
	return id, bearer
}

// payOnProvider pays an order as its shopper does on the simulated provider's page: the
// checkout opened, then paid there.
func (h *harness) payOnProvider(orderID, bearer string) {
	h.t.Helper()
	c := h.do("POST", "/api/flash-sales/orders/"+orderID+"/checkout", bearer, nil)
	if c.Status != http.StatusOK {
		h.t.Fatalf("checkout of %s: %d %s", orderID, c.Status, c.Raw)
	}
	if p := h.do("POST", "/api/payments/simulated/"+strings.TrimPrefix(c.str("checkoutUrl"), "/pay/simulated/")+"/pay", "", nil); p.Status != http.StatusOK {
		h.t.Fatalf("pay %s on the provider's page: %d %s", orderID, p.Status, p.Raw)
	}
}

// latePayment makes order orderID's payment come too late: its checkout opened, its deadline
// passed and the expiry run (the unit back on sale), then the provider's confirmation applied. The
// refund is due: the next Payments.Pass makes it.
func (h *harness) latePayment(orderID, bearer string) {
	h.t.Helper()
	ctx := context.Background()
	if c := h.do("POST", "/api/flash-sales/orders/"+orderID+"/checkout", bearer, nil); c.Status != http.StatusOK {
		h.t.Fatalf("checkout of %s: %d %s", orderID, c.Status, c.Raw)
	}
	h.exec(`UPDATE orders SET pay_by = now() - interval '1 second' WHERE id = ?`, orderID)
	if err := h.app.KeeperPass(ctx); err != nil {
		h.t.Fatalf("keeper pass: %v", err)
	}
	if err := h.app.Payments.Apply(ctx, h.ownPayment("evt_late_"+orderID, orderID, "pi_"+orderID, 1000)); err != nil {
		h.t.Fatalf("the late payment of %s: %v", orderID, err)
	}
}

func (h *harness) exec(query string, args ...any) {
	h.t.Helper()
	if err := h.sql().Exec(query, args...).Error; err != nil {
		h.t.Fatalf("%s: %v", query, err)
	}
}

// ownPayment is the provider's paid event (eventID) of order orderID's own checkout, as the
// provider tells it: the recorded session, the given amount and the sale's currency, money taken
// as payment paymentID.
func (h *harness) ownPayment(eventID, orderID, paymentID string, cents int64) payments.Event {
	h.t.Helper()
	session := h.sqlStr(`SELECT session_id FROM checkouts WHERE order_id = ?`, orderID)
	currency := h.sqlStr(`SELECT s.currency FROM orders o JOIN sales s ON s.id = o.sale_id WHERE o.id = ?`, orderID)
	return payments.Event{ID: eventID, Kind: payments.EventPaid, OrderID: orderID, SessionID: session, PaymentID: paymentID,
		AmountCents: cents, Currency: currency}
}

func (h *harness) sqlStr(query string, args ...any) string {
	h.t.Helper()
	var s *string
	if err := h.sql().Raw(query, args...).Scan(&s).Error; err != nil {
		h.t.Fatalf("%s: %v", query, err)
	}
	if s == nil {
		return ""
	}
	return *s
}

// TestSimulatedCheckoutRoundTrip: Pay opens the simulated provider's page (one per order however
// often it is asked), paying there confirms through the same path as a provider's webhook, the
// order answers paymentStatus paid; the same confirmation again changes nothing; the direct pay of
// API clients still works with the simulated provider.
func TestSimulatedCheckoutRoundTrip(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.liveSale(5)
	id, bearer := h.pendingOrder(1, s, s.items[0])
	if o := h.do("GET", "/api/flash-sales/orders/"+id, bearer, nil); o.str("paymentStatus") != "none" || o.Body["refunded"] != false {
		t.Fatalf("a new order: %s, want paymentStatus none and refunded false", o.Raw)
	}
	c := h.do("POST", "/api/flash-sales/orders/"+id+"/checkout", bearer, nil)
	url := c.str("checkoutUrl")
	if c.Status != http.StatusOK || !strings.HasPrefix(url, "/pay/simulated/sim_cs_"+id+"_") {
		t.Fatalf("checkout: %d %s, want 200 and the simulated provider's page", c.Status, c.Raw)
	}
	if again := h.do("POST", "/api/flash-sales/orders/"+id+"/checkout", bearer, nil); again.str("checkoutUrl") != url {
		t.Fatalf("a second checkout: %s, want the same page %s", again.Raw, url)
	}
	if o := h.do("GET", "/api/flash-sales/orders/"+id, bearer, nil); o.str("paymentStatus") != "awaiting" {
		t.Fatalf("with a checkout open: %s, want paymentStatus awaiting", o.Raw)
	}
	// Another shopper cannot open it; a made-up session is the not-found page.
	if o := h.do("POST", "/api/flash-sales/orders/"+id+"/checkout", h.token(2, auth.RoleShopper), nil); o.Status != http.StatusNotFound {
		t.Fatalf("another shopper's checkout: %d %s, want 404", o.Status, o.Raw)
	}
	page := h.do("GET", url, "", nil)
	if page.Status != http.StatusOK || !strings.Contains(page.Raw, "¥10.00") || !strings.Contains(page.Raw, `data-testid="simpay-pay"`) {
		t.Fatalf("the simulated page: %d, want 200 with the amount and Pay:\n%.2000s", page.Status, page.Raw)
	}
	session := strings.TrimPrefix(url, "/pay/simulated/")
	forged := session[:len(session)-1] + map[bool]string{true: "0", false: "1"}[!strings.HasSuffix(session, "0")]
	if r := h.do("GET", "/pay/simulated/"+forged, "", nil); r.Status != http.StatusNotFound {
		t.Fatalf("a forged session's page: %d, want 404", r.Status)
	}
	if r := h.do("POST", "/api/payments/simulated/"+forged+"/pay", "", nil); r.Status != http.StatusNotFound || r.str("error") != "NOT_FOUND" {
		t.Fatalf("paying a forged session: %d %s, want 404 NOT_FOUND", r.Status, r.Raw)
	}
	paid := h.do("POST", "/api/payments/simulated/"+session+"/pay", "", nil)
	if paid.Status != http.StatusOK || paid.str("returnUrl") != "/orders/"+id+"?payment=done" {
		t.Fatalf("paying on the simulated page: %d %s", paid.Status, paid.Raw)
	}
	o := h.do("GET", "/api/flash-sales/orders/"+id, bearer, nil)
	if o.str("status") != "PAID" || o.str("paymentStatus") != "paid" {
		t.Fatalf("after paying: %s, want PAID and paymentStatus paid", o.Raw)
	}
	paidAt := h.sqlStr(`SELECT paid_at::text FROM orders WHERE id = ?`, id)
	// The same confirmation again (a resent webhook, a second click): nothing changes.
	if again := h.do("POST", "/api/payments/simulated/"+session+"/pay", "", nil); again.Status != http.StatusOK {
		t.Fatalf("paying twice: %d %s, want 200 (already paid)", again.Status, again.Raw)
	}
	if err := h.app.Payments.Apply(context.Background(), h.ownPayment("sim_evt_"+session, id, "sim_pi_"+id, 1000)); err != nil {
		t.Fatal(err)
	}
	if got := h.sqlStr(`SELECT paid_at::text FROM orders WHERE id = ?`, id); got != paidAt {
		t.Fatalf("a replayed event changed paid_at %s → %s", paidAt, got)
	}
	if n := h.sqlInt(`SELECT count(*) FROM payment_events WHERE order_id = ?`, id); n != 1 {
		t.Fatalf("payment events recorded: %d, want 1", n)
	}
	if r := h.do("POST", "/api/flash-sales/orders/"+id+"/checkout", bearer, nil); r.Status != http.StatusConflict || r.str("error") != "NOT_PAYABLE" {
		t.Fatalf("checkout of a paid order: %d %s, want 409 NOT_PAYABLE", r.Status, r.Raw)
	}
	// The direct pay (API clients) with the simulated provider, and a checkout page it closed.
	id2, bearer2 := h.pendingOrder(3, s, s.items[0])
	c2 := h.do("POST", "/api/flash-sales/orders/"+id2+"/checkout", bearer2, nil)
	if p := h.do("POST", "/api/flash-sales/orders/"+id2+"/pay", bearer2, nil); p.Status != http.StatusOK || p.str("status") != "PAID" {
		t.Fatalf("direct pay: %d %s", p.Status, p.Raw)
	}
	late := h.do("POST", "/api/payments/simulated/"+strings.TrimPrefix(c2.str("checkoutUrl"), "/pay/simulated/")+"/pay", "", nil)
	if late.Status != http.StatusOK || late.Body["paid"] != true {
		t.Fatalf("the checkout of an order paid directly: %d %s, want 200 paid (nothing taken twice)", late.Status, late.Raw)
	}
	if n := h.sqlInt(`SELECT count(*) FROM payment_events WHERE order_id = ?`, id2); n != 0 {
		t.Fatalf("a second payment was recorded for an order paid directly: %d events", n)
	}
	h.checkInvariants(s)
}

// TestPaymentDeadlineOrderings: the shopper pays at the last second; the provider's confirmation,
// the expiry of the order and the expiry of its checkout come in every order, on real Postgres.
// A confirmation that lands while the order is PENDING wins, its deadline past or not (the expiry
// has not committed); one that lands after the expiry committed is refunded, once, and the order
// says so; the unit goes back exactly once, and never for a paid order.
func TestPaymentDeadlineOrderings(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noKeeper: true})
	ctx := context.Background()
	orderings := [][]string{
		{"confirm", "expire", "session"}, {"confirm", "session", "expire"},
		{"expire", "confirm", "session"}, {"expire", "session", "confirm"},
		{"session", "confirm", "expire"}, {"session", "expire", "confirm"},
	}
	s := h.liveSale(len(orderings))
	for i, steps := range orderings {
		name := strings.Join(steps, ", ")
		id, bearer := h.pendingOrder(int64(100+i), s, s.items[0])
		if c := h.do("POST", "/api/flash-sales/orders/"+id+"/checkout", bearer, nil); c.Status != http.StatusOK {
			t.Fatalf("%s: checkout %d %s", name, c.Status, c.Raw)
		}
		// Paid at second 599: the deadline passes before the confirmation arrives.
		h.exec(`UPDATE orders SET pay_by = now() - interval '1 second' WHERE id = ?`, id)
		expired := false
		wantPaid := false
		for _, step := range steps {
			switch step {
			case "confirm":
				wantPaid = !expired
				if err := h.app.Payments.Apply(ctx, h.ownPayment("evt_paid_"+id, id, "pi_"+id, 1000)); err != nil {
					t.Fatalf("%s: confirm: %v", name, err)
				}
			case "expire":
				expired = !wantPaid
				if err := h.app.KeeperPass(ctx); err != nil { // the expiry job (and the unit's return to Redis)
					t.Logf("%s: keeper pass: %v", name, err)
				}
			case "session":
				if h.sqlStr(`SELECT status FROM orders WHERE id = ?`, id) == "PENDING" {
					// The provider expired the session itself: it tells so.
					if err := h.app.Payments.Apply(ctx, payments.Event{ID: "evt_exp_" + id, Kind: payments.EventExpired, OrderID: id}); err != nil {
						t.Fatalf("%s: session expired: %v", name, err)
					}
				} else {
					h.app.Payments.Pass(ctx) // the shop expires the checkout of an ended order through the API
				}
			}
		}
		h.app.Payments.Pass(ctx) // refunds due
		o := h.do("GET", "/api/flash-sales/orders/"+id, bearer, nil)
		if wantPaid {
			if o.str("status") != "PAID" || o.str("paymentStatus") != "paid" || o.Body["refunded"] != false {
				t.Errorf("%s: %s, want PAID, paymentStatus paid, not refunded", name, o.Raw)
			}
		} else {
			if o.str("status") != "EXPIRED" || o.str("paymentStatus") != "refunded" || o.Body["refunded"] != true || !strings.Contains(o.str("message"), "refunded") {
				t.Errorf("%s: %s, want EXPIRED, paymentStatus refunded, refunded true and a sentence", name, o.Raw)
			}
			if got := h.sqlStr(`SELECT refund_id FROM orders WHERE id = ?`, id); got != "sim_re_"+id {
				t.Errorf("%s: refund id %q", name, got)
			}
		}
		if st := h.sqlStr(`SELECT state FROM checkouts WHERE order_id = ?`, id); st == "open" {
			t.Errorf("%s: the checkout is still open", name)
		}
	}
	_ = h.app.KeeperPass(ctx)
	paid := h.sqlInt(`SELECT count(*) FROM orders WHERE item_id = ? AND status = 'PAID'`, s.items[0])
	if sold := h.sqlInt(`SELECT sold FROM items WHERE id = ?`, s.items[0]); sold != paid || paid != 3 {
		t.Errorf("sold %d, paid orders %d: want both 3 (the three confirmations before the expiry)", sold, paid)
	}
	h.checkInvariants(s)
}

// TestPaymentRacesExpiry: the confirmation and the expiry of the same order at once, for many
// orders: each ends exactly one way (PAID, or EXPIRED with its payment refunded), its unit sold or
// given back once; over the rounds both ways happen.
func TestPaymentRacesExpiry(t *testing.T) {
	h := newHarness(t, harnessOpts{noKeeper: true})
	ctx := context.Background()
	const n, rounds = 12, 4
	s := h.liveSale(n * rounds)
	var paid, refunded int64
	for round := 0; round < rounds && (paid == 0 || refunded == 0 || round < 2); round++ {
		ids := make([]string, n)
		for i := range ids {
			var bearer string
			ids[i], bearer = h.pendingOrder(int64(200+round*n+i), s, s.items[0])
			if c := h.do("POST", "/api/flash-sales/orders/"+ids[i]+"/checkout", bearer, nil); c.Status != http.StatusOK {
				t.Fatalf("checkout %d %s", c.Status, c.Raw)
			}
		}
		h.exec(`UPDATE orders SET pay_by = now() - interval '1 second' WHERE id = ANY(?::uuid[])`, "{"+strings.Join(ids, ",")+"}")
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Add(2)
			go func() {
				defer wg.Done()
				if err := h.app.Payments.Apply(ctx, h.ownPayment("evt_"+id, id, "pi_"+id, 1000)); err != nil {
					t.Error(err)
				}
			}()
			go func() {
				defer wg.Done()
				if _, err := h.app.DB.ExpireOrder(ctx, shop.Order{ID: id, ItemID: s.items[0]}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		_ = h.app.KeeperPass(ctx) // the units given back reach Redis
		h.app.Payments.Pass(ctx)  // the refunds
		paid = h.sqlInt(`SELECT count(*) FROM orders WHERE item_id = ? AND status = 'PAID' AND payment_status = 'paid'`, s.items[0])
		refunded = h.sqlInt(`SELECT count(*) FROM orders WHERE item_id = ? AND status = 'EXPIRED' AND payment_status = 'refunded' AND refund_id IS NOT NULL`, s.items[0])
		if paid+refunded != int64(n*(round+1)) {
			t.Fatalf("round %d: paid %d + refunded %d, want every one of %d orders ending one way", round, paid, refunded, n*(round+1))
		}
	}
	if paid == 0 || refunded == 0 {
		t.Errorf("%d paid, %d refunded: the race never went both ways", paid, refunded)
	}
	if sold := h.sqlInt(`SELECT sold FROM items WHERE id = ?`, s.items[0]); sold != paid {
		t.Errorf("sold %d, want the %d paid orders", sold, paid)
	}
	t.Logf("%d paid, %d expired and refunded", paid, refunded)
	h.checkInvariants(s)
}

// TestCheckoutRefusals: what cannot be paid says why, and nothing is opened: a made-up id and
// another shopper's order are not found, a QUEUED order is not payable yet; the webhook of a
// deployment without Stripe is not found. A checkout the provider closed unpaid while the order is
// still PENDING (an asynchronous payment that failed) is opened anew. The order keeps the price it
// was bought at when the merchant edits the item's.
func TestCheckoutRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noWriter: true})
	s := h.liveSale(5)
	alice := h.token(1, auth.RoleShopper)
	for _, id := range []string{"nope", "00000000-0000-0000-0000-000000000000", "%00"} {
		if r := h.do("POST", "/api/flash-sales/orders/"+id+"/checkout", alice, nil); r.Status != http.StatusNotFound || r.str("error") != "NOT_FOUND" {
			t.Errorf("checkout of %q: %d %s, want 404 NOT_FOUND", id, r.Status, r.Raw)
		}
	}
	r := h.buy(alice, s.items[0], h.purchaseToken(alice, s.sale))
	queued := r.str("orderId")
	if c := h.do("POST", "/api/flash-sales/orders/"+queued+"/checkout", alice, nil); c.Status != http.StatusConflict || c.str("error") != "NOT_PAYABLE" {
		t.Errorf("checkout of a QUEUED order: %d %s, want 409 NOT_PAYABLE", c.Status, c.Raw)
	}
	if w := h.do("POST", "/api/payments/stripe/webhook", "", map[string]any{"id": "evt_1"}, "Stripe-Signature", "t=1,v1=00"); w.Status != http.StatusNotFound {
		t.Errorf("a Stripe webhook with the simulated provider: %d %s, want 404", w.Status, w.Raw)
	}

	// Recorded: the merchant raises the price; the order keeps what it was bought at.
	h.app.Start(context.Background(), true, false)
	testenv.Eventually(t, 15*time.Second, "the order recorded", func() error {
		if o := h.do("GET", "/api/flash-sales/orders/"+queued, alice, nil); o.str("status") != "PENDING" {
			return fmt.Errorf("%s", o.Raw)
		}
		return nil
	})
	if e := h.do("PATCH", fmt.Sprintf("/api/admin/sales/%d", s.sale), h.token(9000, auth.RoleMerchant),
		map[string]any{"items": []map[string]any{{"itemId": strconv.FormatInt(s.items[0], 10), "priceCents": 2500}}}); e.Status != http.StatusOK {
		t.Fatalf("edit the price: %d %s", e.Status, e.Raw)
	}
	if o := h.do("GET", "/api/flash-sales/orders/"+queued, alice, nil); o.Body["priceCents"] != float64(1000) {
		t.Errorf("after the price went up: %s, want the order's priceCents 1000", o.Raw)
	}
	c := h.do("POST", "/api/flash-sales/orders/"+queued+"/checkout", alice, nil)
	page := h.do("GET", c.str("checkoutUrl"), "", nil)
	if !strings.Contains(page.Raw, "¥10.00") || strings.Contains(page.Raw, "¥25.00") {
		t.Errorf("the provider's page does not ask the order's price ¥10.00")
	}
	// The provider closes the checkout unpaid: Pay opens a new one.
	if err := h.app.Payments.Apply(context.Background(), payments.Event{ID: "evt_async_failed", Kind: payments.EventExpired, OrderID: queued}); err != nil {
		t.Fatal(err)
	}
	if o := h.do("GET", "/api/flash-sales/orders/"+queued, alice, nil); o.str("paymentStatus") != "none" {
		t.Errorf("after the checkout closed unpaid: %s, want paymentStatus none", o.Raw)
	}
	if again := h.do("POST", "/api/flash-sales/orders/"+queued+"/checkout", alice, nil); again.Status != http.StatusOK {
		t.Fatalf("checkout after the first closed unpaid: %d %s, want 200", again.Status, again.Raw)
	}
	if st := h.sqlStr(`SELECT state || ' ' || attempt FROM checkouts WHERE order_id = ?`, queued); st != "open 1" {
		t.Errorf("the checkout after one closed unpaid: %q, want open 1", st)
	}
	if paid := h.do("POST", "/api/payments/simulated/"+strings.TrimPrefix(c.str("checkoutUrl"), "/pay/simulated/")+"/pay", "", nil); paid.Status != http.StatusOK {
		t.Fatalf("pay: %d %s", paid.Status, paid.Raw)
	}
	if got := h.sqlInt(`SELECT paid_cents FROM orders WHERE id = ?`, queued); got != 1000 {
		t.Errorf("paid %d cents, want the order's 1000", got)
	}
	h.checkInvariants(s)
}
