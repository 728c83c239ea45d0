// Package stripepay is the Stripe side of payments.Provider: a Stripe Checkout Session per order,
// its expiry, the refund of its PaymentIntent, and the verification and translation of Stripe's
// webhook events into payments.Event.
//
// It is an adapter: the only package of flashsale that imports stripe-go. Every call that makes
// something carries an idempotency key derived from what it makes ("flashsale-checkout-"+OrderID
// with the attempt and expiry, "flashsale-refund-"+PaymentIntent), so a retry after a lost answer,
// or two clicks at once, reach one Stripe object; a try after a call with no verdict adds "-tN"
// (Stripe replays a stored failure under the old key), a refund's after looking for one first.
//
// Errors: what Checkout, ExpireSession and Refund answer is an *Error. Transient(err) (or
// errors.Is(err, ErrTransient), or the error's Transient method, for a caller that does not
// import this package) tells the ones worth retrying: no answer from Stripe (a network error, a
// timeout), a Stripe 5xx, a 409 (a concurrent request with the same idempotency key), a 429 (rate
// limit, lock_timeout). Everything else (a 4xx invalid request, a wrong key) is permanent.
package stripepay

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/flashsale/flashsale/services/payments"
)

// The settings New refuses to start without, named in its errors.
const (
	EnvSecretKey     = "FLASHSALE_STRIPE_SECRET_KEY"
	EnvWebhookSecret = "FLASHSALE_STRIPE_WEBHOOK_SECRET"
)

// Config is what the Stripe provider needs.
type Config struct {
	SecretKey     string // the API key (sk_live_…, sk_test_… or rk_…); FLASHSALE_STRIPE_SECRET_KEY
	WebhookSecret string // the webhook endpoint's signing secret (whsec_…); FLASHSALE_STRIPE_WEBHOOK_SECRET
	// APIBase is the API's base URL without /v1 ("http://127.0.0.1:12111" for stripe-mock);
	// empty is Stripe's (https://api.stripe.com).
	APIBase string
	// HTTPClient makes the API calls; nil is stripe-go's default (80 s timeout).
	HTTPClient *http.Client
	// Tolerance is how old a webhook's signed timestamp may be; 0 is stripe-go's default (300 s).
	Tolerance time.Duration
}

// Provider is payments.Provider on Stripe Checkout, and the parser of Stripe's webhook events.
type Provider struct {
	client        *stripe.Client
	webhookSecret string
	tolerance     time.Duration
	now           func() time.Time
}

var _ payments.Provider = (*Provider)(nil)

// New returns the Stripe provider. It refuses an empty secret key or webhook secret.
func New(cfg Config) (*Provider, error) {
	if strings.TrimSpace(cfg.SecretKey) == "" {
		return nil, fmt.Errorf("stripepay: no Stripe secret key: set %s", EnvSecretKey)
	}
	if strings.TrimSpace(cfg.WebhookSecret) == "" {
		return nil, fmt.Errorf("stripepay: no Stripe webhook signing secret: set %s", EnvWebhookSecret)
	}
	if cfg.Tolerance < 0 {
		return nil, fmt.Errorf("stripepay: negative webhook tolerance %v", cfg.Tolerance)
	}
	if cfg.HTTPClient == nil {
		// stripe-go's own client waits 80 s a try; each call here also has the caller's own
		// short deadline (payments.Config.CallTimeout), this is the backstop.
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	bc := &stripe.BackendConfig{
		HTTPClient: cfg.HTTPClient,
		// No retries of stripe-go's own: they resend under the same idempotency key, which
		// Stripe answers with the stored failure. payments retries, asking first, under a new key.
		MaxNetworkRetries: stripe.Int64(0),
		// Errors are returned to the caller, who logs them with the order: stripe-go's own
		// logger would print each one a second time on stderr.
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if cfg.APIBase != "" {
		bc.URL = stripe.String(strings.TrimRight(cfg.APIBase, "/"))
	}
	return &Provider{
		client:        stripe.NewClient(cfg.SecretKey, stripe.WithBackends(stripe.NewBackendsWithConfig(bc))),
		webhookSecret: cfg.WebhookSecret,
		tolerance:     cfg.Tolerance,
		now:           time.Now,
	}, nil
}

// Name is "stripe".
func (p *Provider) Name() string { return "stripe" }

// The idempotency keys' roots; the order id follows.
const (
	checkoutKeyPrefix = "flashsale-checkout-"
	refundKeyPrefix   = "flashsale-refund-"
)

// Stripe accepts a Checkout Session's expires_at between 30 minutes and 24 hours after its
// creation; the margins cover the clocks' difference and the request's time in flight.
const (
	minSessionLife = 30*time.Minute + time.Minute
	maxSessionLife = 24*time.Hour - time.Minute
	// sessionLifeStep is how far an expiry too soon for Stripe is pushed, in whole steps from
	// the order's own expiry (see sessionExpiry). At least minSessionLife, so that one step
	// covers the whole of an order's payment window when that is shorter.
	sessionLifeStep = 40 * time.Minute
)

// sessionExpiry is the expires_at sent for an order expiring at expiresAt, the call made at now;
// ok false: send none (Stripe's default, 24 hours).
//
// Stripe refuses an expires_at sooner than 30 minutes ahead, and a flash sale's orders expire
// sooner than that: such an expiry is pushed by whole steps of sessionLifeStep from the order's
// own expiry, not to now+31m. The value then depends on the order alone, not on the moment of
// the call, for the whole of a payment window shorter than 31 minutes: a retry, or a second
// click, sends the same parameters under the same idempotency key, which Stripe answers with the
// first session (different parameters under one key are a 400 idempotency_error). The session
// outlives the order by up to sessionLifeStep: flashsale expires it (ExpireSession) when the
// order expires, and Stripe's expiry is only the safety net.
func sessionExpiry(expiresAt, now time.Time) (time.Time, bool) {
	if expiresAt.IsZero() {
		return time.Time{}, false
	}
	at := expiresAt
	if short := now.Add(minSessionLife).Sub(at); short > 0 {
		at = at.Add((short + sessionLifeStep - 1) / sessionLifeStep * sessionLifeStep)
	}
	if at.Sub(now) > maxSessionLife {
		return time.Time{}, false
	}
	return at, true
}

// Checkout creates a Checkout Session (mode payment) of one line item for the order.
func (p *Provider) Checkout(ctx context.Context, r payments.CheckoutRequest) (payments.Session, error) {
	switch {
	case r.OrderID == "":
		return payments.Session{}, permanent("checkout", errors.New("no order id"))
	case r.AmountCents <= 0:
		return payments.Session{}, permanent("checkout", fmt.Errorf("order %s: amount %d is not positive", r.OrderID, r.AmountCents))
	case len(r.Currency) != 3:
		return payments.Session{}, permanent("checkout", fmt.Errorf("order %s: currency %q is not an ISO 4217 code", r.OrderID, r.Currency))
	case strings.TrimSpace(r.ItemName) == "":
		return payments.Session{}, permanent("checkout", fmt.Errorf("order %s: no item name", r.OrderID))
	case r.SuccessURL == "" || r.CancelURL == "":
		return payments.Session{}, permanent("checkout", fmt.Errorf("order %s: no success or cancel URL", r.OrderID))
	}
	params := &stripe.CheckoutSessionCreateParams{
		Mode:              stripe.String(string(stripe.CheckoutSessionModePayment)),
		ClientReferenceID: stripe.String(r.OrderID),
		SuccessURL:        stripe.String(r.SuccessURL),
		CancelURL:         stripe.String(r.CancelURL),
		LineItems: []*stripe.CheckoutSessionCreateLineItemParams{{
			PriceData: &stripe.CheckoutSessionCreateLineItemPriceDataParams{
				Currency:   stripe.String(strings.ToLower(r.Currency)),
				UnitAmount: stripe.Int64(r.AmountCents),
				ProductData: &stripe.CheckoutSessionCreateLineItemPriceDataProductDataParams{
					Name: stripe.String(r.ItemName),
				},
			},
			Quantity: stripe.Int64(1),
		}},
		// Cards only: a method that settles days later (bank debits, transfers) would confirm long
		// after a flash sale's payment window, every such payment taken and then refunded.
		PaymentMethodTypes: []*string{stripe.String("card")},
		PaymentIntentData: &stripe.CheckoutSessionCreatePaymentIntentDataParams{
			Metadata: map[string]string{"order_id": r.OrderID},
		},
	}
	params.AddMetadata("order_id", r.OrderID)
	expiry := "default"
	if at, ok := sessionExpiry(r.ExpiresAt, p.now()); ok {
		params.ExpiresAt = stripe.Int64(at.Unix())
		expiry = strconv.FormatInt(at.Unix(), 10)
	}
	// The key names what it sends that can change: the attempt (a checkout reopened after one closed
	// unpaid) and the expiry (pushed differently once the order's window has less than 31 minutes
	// left), so a retry never sends other parameters under the same key (Stripe's 400
	// idempotency_error); two clicks at once send the same.
	// A try after a call that got no verdict goes under a key of its own (Stripe replays a stored
	// 500 under the old one for 24 hours).
	params.SetIdempotencyKey(checkoutKeyPrefix + r.OrderID + "-" + strconv.Itoa(r.Attempt) + "-" + expiry + tryKey(r.Try))
	s, err := p.client.V1CheckoutSessions.Create(ctx, params)
	if err != nil {
		return payments.Session{}, classify("checkout", err)
	}
	if s.ID == "" || s.URL == "" {
		return payments.Session{}, permanent("checkout", fmt.Errorf("order %s: Stripe answered a session without id or URL (%q, %q)", r.OrderID, s.ID, s.URL))
	}
	return payments.Session{ID: s.ID, URL: s.URL}, nil
}

// ExpireSession expires an open Checkout Session. A session already expired answers nil, one
// completed answers payments.ErrSessionComplete: Stripe refuses to expire a session that is not
// open with a 400, and the session's status, retrieved then, decides.
func (p *Provider) ExpireSession(ctx context.Context, sessionID string) error {
	if sessionID == "" {
		return permanent("expire", errors.New("no session id"))
	}
	_, err := p.client.V1CheckoutSessions.Expire(ctx, sessionID, nil)
	if err == nil {
		return nil
	}
	var se *stripe.Error
	if !errors.As(err, &se) || se.HTTPStatusCode != http.StatusBadRequest {
		return classify("expire", err)
	}
	s, rerr := p.client.V1CheckoutSessions.Retrieve(ctx, sessionID, nil)
	if rerr != nil {
		return classify("expire", fmt.Errorf("%w (and retrieving the session to see why: %w)", err, rerr))
	}
	return expireOutcome(s.Status, err)
}

// expireOutcome decides what a refused expiry means from the session's status.
func expireOutcome(status stripe.CheckoutSessionStatus, expireErr error) error {
	switch status {
	case stripe.CheckoutSessionStatusExpired:
		return nil
	case stripe.CheckoutSessionStatusComplete:
		return payments.ErrSessionComplete
	default:
		return classify("expire", expireErr)
	}
}

// tryKey is the idempotency key's suffix of a try: none for the first (the keys of the calls
// made before tries existed), "-t1", "-t2"… after.
func tryKey(try int) string {
	if try == 0 {
		return ""
	}
	return "-t" + strconv.Itoa(try)
}

// Refund refunds the whole of a PaymentIntent and answers the refund's id. A later attempt
// (after a call that got no verdict) first looks for a refund of the payment that exists, so a
// refund Stripe made but whose answer was lost is not made twice; a payment already refunded
// answers the refund that exists. A refund Stripe answers as failed or canceled is refused for
// good: payments.ErrRefundFailed with its failure reason.
func (p *Provider) Refund(ctx context.Context, r payments.RefundRequest) (string, error) {
	if r.PaymentID == "" {
		return "", permanent("refund", fmt.Errorf("order %q: no payment to refund", r.OrderID))
	}
	if r.Attempt > 0 {
		if id, err := p.existingRefund(ctx, r.PaymentID); err != nil {
			return "", classify("refund", fmt.Errorf("looking for an earlier refund first: %w", err))
		} else if id != "" {
			return id, nil
		}
	}
	params := &stripe.RefundCreateParams{PaymentIntent: stripe.String(r.PaymentID)}
	if r.OrderID != "" {
		params.AddMetadata("order_id", r.OrderID)
	}
	params.SetIdempotencyKey(refundKeyPrefix + r.PaymentID + tryKey(r.Attempt))
	ref, err := p.client.V1Refunds.Create(ctx, params)
	if err == nil {
		if ref.Status == stripe.RefundStatusFailed || ref.Status == stripe.RefundStatusCanceled {
			reason := string(ref.FailureReason)
			if reason == "" {
				reason = string(ref.Status)
			}
			return "", &payments.RefundRefusal{RefundID: ref.ID, Reason: reason}
		}
		return ref.ID, nil
	}
	var se *stripe.Error
	if errors.As(err, &se) && se.Code == stripe.ErrorCodeChargeAlreadyRefunded {
		if id, lerr := p.existingRefund(ctx, r.PaymentID); lerr == nil && id != "" {
			return id, nil
		}
	}
	if errors.As(err, &se) && refusedForGood[se.Code] {
		// Stripe refuses this payment's refund, whatever is asked again: final.
		return "", &payments.RefundRefusal{Reason: string(se.Code) + ": " + se.Msg}
	}
	return "", classify("refund", err)
}

// RefundState retrieves a refund: succeeded, failed (canceled counts as failed: no money went
// back) with Stripe's failure reason, or its other status (pending, requires_action: not final).
func (p *Provider) RefundState(ctx context.Context, refundID string) (string, string, error) {
	if refundID == "" {
		return "", "", permanent("refund state", errors.New("no refund id"))
	}
	ref, err := p.client.V1Refunds.Retrieve(ctx, refundID, nil)
	if err != nil {
		return "", "", classify("refund state", err)
	}
	switch ref.Status {
	case stripe.RefundStatusSucceeded:
		return payments.RefundSucceeded, "", nil
	case stripe.RefundStatusFailed, stripe.RefundStatusCanceled:
		reason := string(ref.FailureReason)
		if reason == "" {
			reason = string(ref.Status)
		}
		return payments.RefundFailed, reason, nil
	}
	return string(ref.Status), "", nil
}

// refusedForGood are Stripe's error codes of a refund that no retry can make (the payment itself
// forbids it); any other refusal (an authentication or permission error, a malformed request) is
// the shop's configuration to mend, and is asked again.
var refusedForGood = map[stripe.ErrorCode]bool{
	stripe.ErrorCodeChargeDisputed:               true,
	stripe.ErrorCodeChargeExpiredForCapture:      true,
	"charge_not_refundable":                      true,
	"refund_disputed_payment":                    true,
	stripe.ErrorCodeInsufficientFunds:            true,
	stripe.ErrorCodePaymentIntentUnexpectedState: true,
}

// Lookup retrieves a Checkout Session: its status, whether money was taken, its payment, amount
// and currency.
func (p *Provider) Lookup(ctx context.Context, sessionID string) (payments.SessionState, error) {
	if sessionID == "" {
		return payments.SessionState{}, permanent("lookup", errors.New("no session id"))
	}
	s, err := p.client.V1CheckoutSessions.Retrieve(ctx, sessionID, nil)
	if err != nil {
		return payments.SessionState{}, classify("lookup", err)
	}
	return sessionState(s), nil
}

// Completed lists the complete Checkout Sessions created since (Stripe's list, newest first,
// paged by stripe-go), each read as Lookup reads one; the order is its client reference, or its
// metadata's order_id.
func (p *Provider) Completed(ctx context.Context, since time.Time, each func(string, payments.SessionState) error) error {
	params := &stripe.CheckoutSessionListParams{Status: stripe.String(string(stripe.CheckoutSessionStatusComplete)),
		CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: since.Unix()}}
	params.Limit = stripe.Int64(100)
	for s, err := range p.client.V1CheckoutSessions.List(ctx, params) {
		if err != nil {
			return classify("list", err)
		}
		st := sessionState(s)
		if st.OrderID == "" {
			st.OrderID = s.Metadata["order_id"]
		}
		if err := each(s.ID, st); err != nil {
			return err
		}
	}
	return nil
}

// sessionState is a Checkout Session in flashsale's words.
func sessionState(s *stripe.CheckoutSession) payments.SessionState {
	st := payments.SessionState{Status: string(s.Status), Paid: s.PaymentStatus == stripe.CheckoutSessionPaymentStatusPaid,
		OrderID: s.ClientReferenceID, AmountCents: s.AmountTotal, Currency: strings.ToUpper(string(s.Currency))}
	if s.PaymentIntent != nil {
		st.PaymentID = s.PaymentIntent.ID
	}
	return st
}

// minimumCharge is Stripe's minimum charge amount per currency, in minor units, from its
// documented table ("Minimum and maximum charge amounts", docs.stripe.com/currencies). A currency
// the table does not list must come to at least 0.50 USD once converted: CNY is set at ¥4.00, which
// stays above that at any rate seen in the last ten years.
var minimumCharge = map[string]int64{"USD": 50, "EUR": 50, "CNY": 400, "GBP": 30, "HKD": 400, "JPY": 50}

// MinimumCents is Stripe's minimum charge in currency; a currency without an entry: the
// equivalent of 0.50 USD taken as 50 minor units.
func (p *Provider) MinimumCents(currency string) int64 {
	if m, ok := minimumCharge[strings.ToUpper(currency)]; ok {
		return m
	}
	return 50
}

// existingRefund answers the id of a refund of the PaymentIntent that is not failed or canceled.
func (p *Provider) existingRefund(ctx context.Context, paymentIntent string) (string, error) {
	params := &stripe.RefundListParams{PaymentIntent: stripe.String(paymentIntent)}
	for ref, err := range p.client.V1Refunds.List(ctx, params) {
		if err != nil {
			return "", err
		}
		if ref.Status != stripe.RefundStatusFailed && ref.Status != stripe.RefundStatusCanceled {
			return ref.ID, nil
		}
	}
	return "", nil
}
