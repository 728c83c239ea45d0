package payments

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Provider is a payment provider as flashsale uses it: a hosted checkout page per order, the
// expiry of a checkout that may no longer be paid, and the refund of a payment that came too late.
// Each call is idempotent for the same order (a retry after a lost answer changes nothing more).
type Provider interface {
	// Name is the provider's name as stored on a payment ("simulated", "stripe").
	Name() string
	// Checkout opens a hosted checkout for one order and answers where to send the browser.
	Checkout(ctx context.Context, r CheckoutRequest) (Session, error)
	// ExpireSession closes an open checkout so that it can no longer be paid. A session that is
	// already expired answers nil; one that was completed (paid) answers ErrSessionComplete.
	ExpireSession(ctx context.Context, sessionID string) error
	// Refund returns the whole of a payment. A retry with the same Attempt reaches the same
	// refund; a later Attempt (after a call that got no verdict) first looks for a refund of the
	// payment that exists, and makes one only if there is none. A refusal for good answers an
	// error whose Transient method says false; a refund the provider took and then failed
	// answers ErrRefundFailed with its reason.
	Refund(ctx context.Context, r RefundRequest) (refundID string, err error)
	// RefundState asks the provider where a refund it accepted stands: RefundSucceeded and
	// RefundFailed are final (reason: the provider's failure reason), anything else is not yet.
	RefundState(ctx context.Context, refundID string) (state, reason string, err error)
	// Lookup asks the provider what became of a checkout session: the reconciler's question when
	// a webhook may have been lost, and the deadline's when an expiry is refused.
	Lookup(ctx context.Context, sessionID string) (SessionState, error)
	// Completed lists the provider's completed checkout sessions created since, each with its
	// state (the sweep: a payment naming an order through a session the shop never made, a
	// payment link, is found even when its webhook is lost).
	Completed(ctx context.Context, since time.Time, each func(sessionID string, st SessionState) error) error
	// MinimumCents is the smallest amount the provider charges in currency (ISO 4217), in its
	// minor units: a sale refuses an item price below it (422 PRICE_NOT_PAYABLE); 0 is free.
	MinimumCents(currency string) int64
}

// SessionState is what the provider says of a checkout session.
type SessionState struct {
	Status      string // SessionOpen, SessionComplete or SessionExpired
	Paid        bool   // money was taken (Stripe: payment_status paid)
	OrderID     string // its client reference
	PaymentID   string // the payment (Stripe: the PaymentIntent), when one was made
	AmountCents int64
	Currency    string // upper case
}

// The final states of a refund (RefundState).
const (
	RefundSucceeded = "succeeded"
	RefundFailed    = "failed"
)

// The states of a provider's checkout session.
const (
	SessionOpen     = "open"
	SessionComplete = "complete"
	SessionExpired  = "expired"
)

// ErrNoLookup is Lookup's answer from a provider that keeps no books of its own to ask (the
// simulated one confirms in-process: nothing it says can be lost).
var ErrNoLookup = errors.New("payments: this provider cannot be asked about its sessions")

// ErrRefundFailed is what errors.Is finds in a RefundRefusal.
var ErrRefundFailed = errors.New("payments: the provider refused the refund")

// RefundRefusal is a refund the provider took and could not make (Stripe: a refund answered
// failed or canceled): final, in the provider's own words (its failure reason).
type RefundRefusal struct {
	RefundID string
	Reason   string // the provider's failure reason, such as expired_or_canceled_card
}

func (r *RefundRefusal) Error() string {
	return fmt.Sprintf("%v: refund %s: %s", ErrRefundFailed, r.RefundID, r.Reason)
}

// Is makes errors.Is(err, ErrRefundFailed) true.
func (r *RefundRefusal) Is(target error) bool { return target == ErrRefundFailed }

// Transient is false: asking again does not change a refusal.
func (r *RefundRefusal) Transient() bool { return false }

// CheckoutRequest is one order's checkout.
type CheckoutRequest struct {
	OrderID     string // also the provider's client reference and the idempotency key's root
	ItemName    string
	AmountCents int64
	Currency    string // ISO 4217, lower or upper case
	SuccessURL  string // where the provider sends the browser after paying (the order page)
	CancelURL   string // where it sends the browser on giving up (the order page)
	ExpiresAt   time.Time
	Attempt     int // 0, then one more for each checkout of the order that closed unpaid
	Try         int // 0, then one more after a call that got no verdict (a new idempotency key)
}

// Session is an open hosted checkout.
type Session struct {
	ID  string
	URL string
}

// RefundRequest names the payment to give back.
type RefundRequest struct {
	OrderID   string // the order the payment named ("" for a conflict that named none)
	PaymentID string // the provider's payment (Stripe: the PaymentIntent)
	Attempt   int    // 0, then one more after each call that got no verdict
}

// ErrSessionComplete is ExpireSession's answer for a checkout that was paid: the payment's own
// confirmation (a webhook) decides what becomes of it.
var ErrSessionComplete = errors.New("payments: the checkout session was completed")

// Event is a provider's notification, verified, in flashsale's words.
type Event struct {
	ID          string    // the provider's event id: each is applied once
	Kind        EventKind // what happened
	OrderID     string    // the order (the checkout's client reference)
	SessionID   string
	PaymentID   string // the provider's payment, set when Kind is Paid and money was taken
	AmountCents int64
	Currency    string
}

// EventKind is what a provider's event says happened to a checkout.
type EventKind int

const (
	EventIgnored EventKind = iota // an event flashsale does not act on (it is acknowledged)
	EventPaid                     // the checkout's payment is confirmed (money taken)
	EventExpired                  // the checkout expired or its asynchronous payment failed: nothing taken
)
