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
//   - checkout.session.completed, payment_status paid or no_payment_required: EventPaid
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
	var s stripe.CheckoutSession
	if err := json.Unmarshal(ev.Data.Raw, &s); err != nil {
		return payments.Event{}, fmt.Errorf("stripepay: webhook %s (%s): the checkout session: %w", ev.ID, ev.Type, err)
	}
	out.OrderID = s.ClientReferenceID
	if out.OrderID == "" {
		out.OrderID = s.Metadata["order_id"]
	}
	out.SessionID = s.ID
	if s.PaymentIntent != nil {
		out.PaymentID = s.PaymentIntent.ID
	}
	out.AmountCents = s.AmountTotal
	out.Currency = strings.ToUpper(string(s.Currency))
	if ev.Type == stripe.EventTypeCheckoutSessionCompleted &&
		s.PaymentStatus != stripe.CheckoutSessionPaymentStatusPaid &&
		s.PaymentStatus != stripe.CheckoutSessionPaymentStatusNoPaymentRequired {
		kind = payments.EventIgnored // unpaid: the asynchronous payment's own event decides
	}
	if out.OrderID == "" {
		kind = payments.EventIgnored
	}
	out.Kind = kind
	return out, nil
}

// isSignatureError reports whether err is one of stripe-go's signature verification errors.
func isSignatureError(err error) bool {
	return errors.Is(err, webhook.ErrNotSigned) || errors.Is(err, webhook.ErrInvalidHeader) ||
		errors.Is(err, webhook.ErrNoValidSignature) || errors.Is(err, webhook.ErrTooOld)
}
