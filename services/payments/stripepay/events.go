package stripepay

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/flashsale/flashsale/services/payments"
)

// ErrBadSignature is what errors.Is finds in ParseEvent's error when the payload is not one Stripe
// signed with the webhook secret within the tolerance: no or a malformed Stripe-Signature
// header, no matching signature (a wrong secret, a changed body), or a timestamp too old (a
// replay). The webhook answers it 400 and acts on nothing.
var ErrBadSignature = payments.ErrBadSignature // the rule package's, so that it answers 400 BAD_SIGNATURE

// ParseEvent verifies a webhook's payload against its Stripe-Signature header and translates it:
//
//   - checkout.session.completed, payment_status paid: EventPaid
//   - checkout.session.completed, payment_status no_payment_required (a 100% promotion code, a
//     session of amount 0): EventPaid with no PaymentID and nothing taken, which pays no order
//     (payments records it as a conflict)
//   - checkout.session.completed, payment_status unpaid (an asynchronous method, not paid yet):
//     EventIgnored (checkout.session.async_payment_succeeded or _failed follows)
//   - checkout.session.async_payment_succeeded: EventPaid
//   - checkout.session.async_payment_failed, checkout.session.expired: EventExpired
//   - anything else: EventIgnored
//
// A checkout event of a session without an order reference (not made by flashsale) is
// EventIgnored too. The event's API version may differ from stripe-go's: only the fields read
// here matter.
func (p *Provider) ParseEvent(payload []byte, sigHeader string) (payments.Event, error) {
	ev, err := webhook.ConstructEventWithOptions(payload, sigHeader, p.webhookSecret, webhook.ConstructEventOptions{
		Tolerance:                p.tolerance,
		IgnoreAPIVersionMismatch: true,
	})
	if err != nil {
		if isSignatureError(err) {
			return payments.Event{}, fmt.Errorf("%w: %w", ErrBadSignature, err)
		}
		return payments.Event{}, fmt.Errorf("stripepay: webhook payload: %w", err)
	}
	if ev.ID == "" {
		return payments.Event{}, errors.New("stripepay: webhook payload: an event without id")
	}
	out := payments.Event{ID: ev.ID, Kind: payments.EventIgnored}
	var kind payments.EventKind
	switch ev.Type {
	case stripe.EventTypeCheckoutSessionCompleted, stripe.EventTypeCheckoutSessionAsyncPaymentSucceeded:
		kind = payments.EventPaid
	case stripe.EventTypeCheckoutSessionAsyncPaymentFailed, stripe.EventTypeCheckoutSessionExpired:
		kind = payments.EventExpired
	default:
		return out, nil
	}
	if ev.Data == nil || len(ev.Data.Raw) == 0 {
		return payments.Event{}, fmt.Errorf("stripepay: webhook %s (%s): no data.object", ev.ID, ev.Type)
	}
	return sessionEvent(out, kind, ev.Type, ev.Data.Raw)
}

// sessionEvent fills out, a checkout event of type typ, from its checkout session (raw):
// the order, the session, the payment and its amount. A completed session not paid yet (an
// asynchronous method) and one of no flashsale order are EventIgnored; otherwise kind.
func sessionEvent(out payments.Event, kind payments.EventKind, typ stripe.EventType, raw json.RawMessage) (payments.Event, error) {
	// Only the fields flashsale reads, so that an endpoint on another API version (a field that
	// changed its type elsewhere in the session) still decodes: a payment is never left
	// unrecorded, and unrefunded, for a field flashsale does not use.
	var s struct {
		ID                string            `json:"id"`
		ClientReferenceID string            `json:"client_reference_id"`
		Metadata          map[string]string `json:"metadata"`
		PaymentIntent     json.RawMessage   `json:"payment_intent"` // an id, or the object when expanded
		AmountTotal       int64             `json:"amount_total"`
		Currency          string            `json:"currency"`
		PaymentStatus     string            `json:"payment_status"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return payments.Event{}, fmt.Errorf("stripepay: webhook %s (%s): the checkout session: %w", out.ID, typ, err)
	}
	out.OrderID = s.ClientReferenceID
	if out.OrderID == "" {
		out.OrderID = s.Metadata["order_id"]
	}
	out.SessionID = s.ID
	out.PaymentID = paymentIntentID(s.PaymentIntent)
	out.AmountCents = s.AmountTotal
	out.Currency = strings.ToUpper(s.Currency)
	switch {
	case typ != stripe.EventTypeCheckoutSessionCompleted, s.PaymentStatus == string(stripe.CheckoutSessionPaymentStatusPaid):
	case s.PaymentStatus == string(stripe.CheckoutSessionPaymentStatusNoPaymentRequired):
		out.PaymentID, out.AmountCents = "", 0 // nothing taken: pays nothing
	default:
		kind = payments.EventIgnored // unpaid: the asynchronous payment's own event decides
	}
	if out.OrderID == "" {
		kind = payments.EventIgnored
	}
	out.Kind = kind
	return out, nil
}

// paymentIntentID reads a session's payment_intent: its id as a string, or the expanded object's
// id; "" when there is none (null).
func paymentIntentID(raw json.RawMessage) string {
	var id string
	if json.Unmarshal(raw, &id) == nil {
		return id
	}
	var obj struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.ID
	}
	return ""
}

// isSignatureError reports whether err is one of stripe-go's signature verification errors.
func isSignatureError(err error) bool {
	return errors.Is(err, webhook.ErrNotSigned) || errors.Is(err, webhook.ErrInvalidHeader) ||
		errors.Is(err, webhook.ErrNoValidSignature) || errors.Is(err, webhook.ErrTooOld)
}
