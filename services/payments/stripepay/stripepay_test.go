package stripepay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/flashsale/flashsale/services/payments"
	"github.com/flashsale/flashsale/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const testWebhookSecret = "whsec_test_flashsale"

// newMocked is a provider on the process's stripe-mock.
func newMocked(t *testing.T) *Provider {
	t.Helper()
	p, err := New(Config{SecretKey: "sk_test_123", WebhookSecret: testWebhookSecret, APIBase: testenv.StripeMock(t)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewRefusesMissingKeys(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{WebhookSecret: "whsec_x"}, EnvSecretKey},
		{Config{SecretKey: "  ", WebhookSecret: "whsec_x"}, EnvSecretKey},
		{Config{SecretKey: "sk_test_x"}, EnvWebhookSecret},
	} {
		p, err := New(tc.cfg)
		if err == nil || p != nil {
			t.Fatalf("New(%+v) = %v, %v: want an error", tc.cfg, p, err)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v: does not name %s", tc.cfg, err, tc.want)
		}
	}
	p, err := New(Config{SecretKey: "sk_test_x", WebhookSecret: "whsec_x"})
	if err != nil || p.Name() != "stripe" {
		t.Fatalf("New with both keys: %v, %v", p, err)
	}
}

// TestCheckoutAgainstStripeMock proves the request's shape: stripe-mock validates every parameter
// against Stripe's OpenAPI document and answers 400 to one that does not fit.
func TestCheckoutAgainstStripeMock(t *testing.T) {
	p := newMocked(t)
	ctx := context.Background()
	for _, expires := range []time.Time{
		time.Now().Add(10 * time.Minute), // too soon for Stripe: pushed later
		time.Now().Add(2 * time.Hour),    // sent as it is
		{},                               // none: Stripe's default
	} {
		s, err := p.Checkout(ctx, payments.CheckoutRequest{
			OrderID:     "ord_123",
			ItemName:    "Limited sneaker",
			AmountCents: 12999,
			Currency:    "EUR",
			SuccessURL:  "https://shop.example/orders/ord_123?paid=1",
			CancelURL:   "https://shop.example/orders/ord_123",
			ExpiresAt:   expires,
		})
		if err != nil {
			t.Fatalf("Checkout (expires %v): %v", expires, err)
		}
		if !strings.HasPrefix(s.ID, "cs_") || !strings.HasPrefix(s.URL, "https://") {
			t.Fatalf("Checkout: session %+v: want an id cs_… and a URL", s)
		}
	}
}

func TestCheckoutRefusesBadRequestsBeforeStripe(t *testing.T) {
	p, err := New(Config{SecretKey: "sk_test_x", WebhookSecret: "whsec_x", APIBase: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	good := payments.CheckoutRequest{OrderID: "o1", ItemName: "x", AmountCents: 100, Currency: "usd",
		SuccessURL: "https://a/s", CancelURL: "https://a/c", ExpiresAt: time.Now().Add(time.Hour)}
	for name, mutate := range map[string]func(*payments.CheckoutRequest){
		"no order":    func(r *payments.CheckoutRequest) { r.OrderID = "" },
		"zero amount": func(r *payments.CheckoutRequest) { r.AmountCents = 0 },
		"currency":    func(r *payments.CheckoutRequest) { r.Currency = "euro" },
		"no item":     func(r *payments.CheckoutRequest) { r.ItemName = " " },
		"no url":      func(r *payments.CheckoutRequest) { r.SuccessURL = "" },
	} {
		r := good
		mutate(&r)
		if _, err := p.Checkout(context.Background(), r); err == nil || Transient(err) {
			t.Errorf("%s: Checkout = %v: want a permanent error", name, err)
		}
	}
}

// TestRequestShapeRefused shows that stripe-mock does refuse what Stripe would: the Checkout test
// above could not pass on a stripe-mock that accepted anything.
func TestRequestShapeRefused(t *testing.T) {
	p := newMocked(t)
	params := &stripe.CheckoutSessionCreateParams{Mode: stripe.String("payment")}
	params.AddExtra("no_such_parameter", "1")
	_, err := p.client.V1CheckoutSessions.Create(context.Background(), params)
	var se *stripe.Error
	if !errors.As(err, &se) || se.HTTPStatusCode != http.StatusBadRequest {
		t.Fatalf("an unknown parameter: %v: want a 400", err)
	}
	if cerr := classify("checkout", err); Transient(cerr) || errors.Is(cerr, ErrTransient) {
		t.Errorf("a 400 is classified transient: %v", cerr)
	}
}

func TestRefundAndExpireAgainstStripeMock(t *testing.T) {
	p := newMocked(t)
	ctx := context.Background()
	id, err := p.Refund(ctx, payments.RefundRequest{OrderID: "ord_123", PaymentID: "pi_123"})
	if err != nil {
		t.Fatalf("Refund: %v", err)
	}
	if !strings.HasPrefix(id, "re_") {
		t.Errorf("Refund: id %q: want re_…", id)
	}
	if err := p.ExpireSession(ctx, "cs_test_123"); err != nil {
		t.Fatalf("ExpireSession: %v", err)
	}
	if _, err := p.Refund(ctx, payments.RefundRequest{OrderID: "ord_123"}); err == nil || Transient(err) {
		t.Errorf("Refund without a payment: %v: want a permanent error", err)
	}
}

// TestExpireOutcome is the decision taken from the session's status when Stripe refuses to expire
// it (stripe-mock always expires: its answers are fixtures).
func TestExpireOutcome(t *testing.T) {
	refused := &stripe.Error{HTTPStatusCode: 400, Type: stripe.ErrorTypeInvalidRequest, Msg: "not open"}
	if err := expireOutcome(stripe.CheckoutSessionStatusExpired, refused); err != nil {
		t.Errorf("expired: %v, want nil", err)
	}
	if err := expireOutcome(stripe.CheckoutSessionStatusComplete, refused); !errors.Is(err, payments.ErrSessionComplete) {
		t.Errorf("complete: %v, want ErrSessionComplete", err)
	}
	if err := expireOutcome(stripe.CheckoutSessionStatusOpen, refused); err == nil || !errors.Is(err, refused) || Transient(err) {
		t.Errorf("open: %v, want the permanent refusal", err)
	}
}

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&stripe.Error{HTTPStatusCode: 500, Type: stripe.ErrorTypeAPI}, true},
		{&stripe.Error{HTTPStatusCode: 503}, true},
		{&stripe.Error{HTTPStatusCode: 429, Code: stripe.ErrorCodeRateLimit}, true},
		{&stripe.Error{HTTPStatusCode: 429, Code: stripe.ErrorCodeLockTimeout}, true},
		{&stripe.Error{HTTPStatusCode: 409, Type: stripe.ErrorTypeIdempotency, Code: stripe.ErrorCodeIdempotencyKeyInUse}, true},
		{&stripe.Error{HTTPStatusCode: 400, Type: stripe.ErrorTypeInvalidRequest, Code: stripe.ErrorCodeParameterInvalidInteger}, false},
		{&stripe.Error{HTTPStatusCode: 400, Type: stripe.ErrorTypeIdempotency}, false},
		{&stripe.Error{HTTPStatusCode: 401, Type: stripe.ErrorTypeInvalidRequest}, false},
		{&stripe.Error{HTTPStatusCode: 404, Code: stripe.ErrorCodeResourceMissing}, false},
		{context.DeadlineExceeded, true},
		{context.Canceled, false},
		{fmt.Errorf("Couldn't deserialize JSON (response status: 502, body sample: '<html>'): x"), true},
		{fmt.Errorf("Couldn't deserialize JSON (response status: 400, body sample: '<html>'): x"), false},
	} {
		if got := Transient(classify("op", tc.err)); got != tc.want {
			t.Errorf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
		if got := errors.Is(classify("op", tc.err), ErrTransient); got != tc.want {
			t.Errorf("errors.Is(%v, ErrTransient) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestNetworkErrorIsTransient: no stripe-mock on the port, a real connection refused.
func TestNetworkErrorIsTransient(t *testing.T) {
	p, err := New(Config{SecretKey: "sk_test_x", WebhookSecret: "whsec_x",
		APIBase: fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = p.ExpireSession(ctx, "cs_test_1")
	if err == nil || !Transient(err) || !errors.Is(err, ErrTransient) {
		t.Fatalf("ExpireSession with nothing listening: %v: want a transient error", err)
	}
	var tr interface{ Transient() bool }
	if !errors.As(err, &tr) || !tr.Transient() {
		t.Errorf("%v: no Transient method found", err)
	}
}

func TestSessionExpiry(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	orderExpiry := now.Add(15 * time.Minute)
	// Every call during a 15-minute payment window sends the same expires_at.
	want, ok := sessionExpiry(orderExpiry, now)
	if !ok || want.Sub(now) < 31*time.Minute || want.Sub(now) > 24*time.Hour {
		t.Fatalf("sessionExpiry = %v, %v: outside Stripe's 30 min to 24 h", want, ok)
	}
	for d := time.Duration(0); d <= 15*time.Minute; d += 17 * time.Second {
		got, ok := sessionExpiry(orderExpiry, now.Add(d))
		if !ok || !got.Equal(want) {
			t.Fatalf("at +%v: %v, want %v (the same parameters under the same idempotency key)", d, got, want)
		}
		if got.Sub(now.Add(d)) < 31*time.Minute {
			t.Fatalf("at +%v: %v is under 31 minutes ahead", d, got)
		}
	}
	if got, ok := sessionExpiry(now.Add(3*time.Hour), now); !ok || !got.Equal(now.Add(3*time.Hour)) {
		t.Errorf("far enough: %v, %v, want it unchanged", got, ok)
	}
	if _, ok := sessionExpiry(now.Add(48*time.Hour), now); ok {
		t.Errorf("beyond 24 h: sent, want none (Stripe's default)")
	}
	if _, ok := sessionExpiry(time.Time{}, now); ok {
		t.Errorf("zero: sent, want none")
	}
}

// event is a webhook payload of a Checkout Session event.
func event(typ, paymentStatus, clientRef string) []byte {
	ref := "null"
	if clientRef != "" {
		ref = fmt.Sprintf("%q", clientRef)
	}
	return fmt.Appendf(nil, `{
  "id": "evt_1", "object": "event", "api_version": "2020-08-27", "type": %q, "created": 1700000000,
  "livemode": false, "pending_webhooks": 1,
  "data": {"object": {
    "id": "cs_test_1", "object": "checkout.session", "mode": "payment", "status": "complete",
    "payment_status": %q, "client_reference_id": %s, "metadata": {"order_id": "ord_meta"},
    "payment_intent": "pi_1", "amount_total": 12999, "currency": "eur"
  }}
}`, typ, paymentStatus, ref)
}

func sign(payload []byte, secret string, at time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: secret, Timestamp: at}).Header
}

func TestParseEvent(t *testing.T) {
	p, err := New(Config{SecretKey: "sk_test_x", WebhookSecret: testWebhookSecret})
	if err != nil {
		t.Fatal(err)
	}
	paid := payments.Event{ID: "evt_1", Kind: payments.EventPaid, OrderID: "ord_123", SessionID: "cs_test_1",
		PaymentID: "pi_1", AmountCents: 12999, Currency: "EUR"}
	nothingTaken := paid
	nothingTaken.PaymentID, nothingTaken.AmountCents = "", 0
	with := func(kind payments.EventKind, orderID string) payments.Event {
		e := paid
		e.Kind, e.OrderID = kind, orderID
		return e
	}
	for _, tc := range []struct {
		payload []byte
		want    payments.Event
	}{
		{event("checkout.session.completed", "paid", "ord_123"), paid},
		// A session that took no money (a 100% promotion code) pays nothing: no payment, no amount.
		{event("checkout.session.completed", "no_payment_required", "ord_123"), nothingTaken},
		{event("checkout.session.completed", "unpaid", "ord_123"), with(payments.EventIgnored, "ord_123")},
		{event("checkout.session.async_payment_succeeded", "paid", "ord_123"), paid},
		{event("checkout.session.async_payment_failed", "unpaid", "ord_123"), with(payments.EventExpired, "ord_123")},
		{event("checkout.session.expired", "unpaid", "ord_123"), with(payments.EventExpired, "ord_123")},
		{event("checkout.session.completed", "paid", ""), with(payments.EventPaid, "ord_meta")}, // the metadata's order
		{[]byte(`{"id": "evt_2", "object": "event", "type": "charge.refunded", "data": {"object": {"id": "ch_1", "object": "charge"}}}`),
			payments.Event{ID: "evt_2", Kind: payments.EventIgnored}},
	} {
		got, err := p.ParseEvent(tc.payload, sign(tc.payload, testWebhookSecret, time.Now()))
		if err != nil {
			t.Fatalf("ParseEvent(%s): %v", tc.payload, err)
		}
		if got != tc.want {
			t.Errorf("ParseEvent(%.120s…)\n got %+v\nwant %+v", tc.payload, got, tc.want)
		}
	}
}

func TestParseEventRefusesBadSignatures(t *testing.T) {
	p, err := New(Config{SecretKey: "sk_test_x", WebhookSecret: testWebhookSecret, Tolerance: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	payload := event("checkout.session.completed", "paid", "ord_123")
	tampered := []byte(strings.Replace(string(payload), "12999", "1", 1))
	for name, tc := range map[string]struct {
		payload []byte
		header  string
	}{
		"wrong secret":   {payload, sign(payload, "whsec_other", time.Now())},
		"tampered body":  {tampered, sign(payload, testWebhookSecret, time.Now())},
		"too old":        {payload, sign(payload, testWebhookSecret, time.Now().Add(-2*time.Minute))},
		"no header":      {payload, ""},
		"garbled header": {payload, "t=abc,v1=zz"},
	} {
		ev, err := p.ParseEvent(tc.payload, tc.header)
		if !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: ParseEvent = %+v, %v: want ErrBadSignature", name, ev, err)
		}
	}
	// Within the tolerance it passes: the too-old case fails on its age, not on something else.
	if _, err := p.ParseEvent(payload, sign(payload, testWebhookSecret, time.Now().Add(-30*time.Second))); err != nil {
		t.Errorf("30 s old with a 1 min tolerance: %v", err)
	}
	// Signed but not an event: an error, not ErrBadSignature.
	junk := []byte("not json")
	if _, err := p.ParseEvent(junk, sign(junk, testWebhookSecret, time.Now())); err == nil || errors.Is(err, ErrBadSignature) {
		t.Errorf("signed junk: %v: want a payload error", err)
	}
}

// TestDefaultTolerance: with no Tolerance, stripe-go's 300 s.
func TestDefaultTolerance(t *testing.T) {
	p, err := New(Config{SecretKey: "sk_test_x", WebhookSecret: testWebhookSecret})
	if err != nil {
		t.Fatal(err)
	}
	payload := event("checkout.session.expired", "unpaid", "ord_1")
	if _, err := p.ParseEvent(payload, sign(payload, testWebhookSecret, time.Now().Add(-4*time.Minute))); err != nil {
		t.Errorf("4 min old: %v", err)
	}
	if _, err := p.ParseEvent(payload, sign(payload, testWebhookSecret, time.Now().Add(-6*time.Minute))); !errors.Is(err, ErrBadSignature) {
		t.Errorf("6 min old: %v, want ErrBadSignature", err)
	}
}

// An event from an endpoint on another API version still decodes: a field flashsale does not read
// may have another type, and payment_intent may come expanded.
func TestParseEventOtherShapes(t *testing.T) {
	p, err := New(Config{SecretKey: "sk_test_x", WebhookSecret: testWebhookSecret})
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"id": "evt_9", "object": "event", "api_version": "2099-01-01.future", "type": "checkout.session.completed",
  "created": 1700000000, "livemode": false, "pending_webhooks": 1,
  "data": {"object": {"id": "cs_9", "object": "checkout.session", "status": "complete", "payment_status": "paid",
    "client_reference_id": "ord_9", "automatic_tax": "a string where a struct was", "total_details": 7,
    "payment_intent": {"id": "pi_9", "object": "payment_intent"}, "amount_total": 500, "currency": "cny"}}}`)
	ev, err := p.ParseEvent(payload, sign(payload, testWebhookSecret, time.Now()))
	if err != nil {
		t.Fatalf("ParseEvent: %v", err)
	}
	want := payments.Event{ID: "evt_9", Kind: payments.EventPaid, OrderID: "ord_9", SessionID: "cs_9", PaymentID: "pi_9", AmountCents: 500, Currency: "CNY"}
	if ev != want {
		t.Fatalf("ParseEvent = %+v, want %+v", ev, want)
	}
}
