// Package payments runs what becomes of an order's money: a hosted checkout per PENDING order,
// the provider's confirmation (the webhook, the only thing that marks an order PAID), and the
// races at the payment deadline. A payment confirmed while the order is PENDING wins over an
// expiry that has not committed (both are conditional updates of the one PENDING row); one
// confirmed after the expiry committed is refunded, automatically and once; a checkout whose
// order can no longer be paid is expired at the provider, retried until it is.
//
// Where each rule is decided: the verdict on a provider's event (paid, refund due, a payment
// that is not the order's own, a duplicate) is taken inside one Postgres transaction with the
// order's row locked, store.DB.ApplyPaymentEvent (store/payments.go: applyPaid, applyExpired),
// because it must be atomic with the row it changes; the expiry of an unpaid order, by
// store.DB.ExpireOrder's conditional update. This package calls them and acts on their
// outcomes (a refund made due, a checkout closed at the provider, the books checked against
// the provider's); it decides the rest: when to open, expire and verify checkouts, and how to
// retry a provider that said nothing.
package payments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/flashsale/flashsale/services/metrics"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// ErrBadSignature is a webhook that does not verify: answered 400 BAD_SIGNATURE, nothing applied.
var ErrBadSignature = errors.New("payments: the webhook's signature does not verify")

// Config are the payments' settings.
type Config struct {
	// PublicURL is where shoppers reach this deployment ("https://shop.example.com"): the
	// provider sends the browser back to its order page there. Empty: the request's own address.
	PublicURL string
	// Interval is how often the keeper expires checkouts of ended orders and makes refunds due.
	Interval time.Duration
	// CallTimeout bounds each call to the provider (0: DefaultCallTimeout): a slow provider holds
	// neither a shopper's click nor the keeper's other work longer than this.
	CallTimeout time.Duration
	// ReconcileEvery is how often the reconciler asks the provider about checkouts whose outcome
	// may not have reached us (0: DefaultReconcileEvery).
	ReconcileEvery time.Duration
}

// Defaults of Config.
const (
	DefaultCallTimeout    = 5 * time.Second
	DefaultReconcileEvery = 30 * time.Second
)

// Deps are what payments work with. Webhooks may be left out: then no webhook is accepted (the
// simulated provider confirms in-process).
type Deps struct {
	Provider Provider
	Webhooks EventParser
	DB       DB
	Queued   QueuedOrders // the shoppers' orders acknowledged and not written yet (nil: none known)
	Returns  Returner
	Metrics  *metrics.Metrics
	Log      *slog.Logger
	Now      func() time.Time
}

// Payments is the payment side of the shop.
type Payments struct {
	cfg      Config
	provider Provider
	webhooks EventParser
	db       DB
	queued   QueuedOrders
	returns  Returner
	metrics  *metrics.Metrics
	log      *slog.Logger
	now      func() time.Time
	kick     chan struct{} // wakes the keeper: a refund became due
	retries  backoff       // provider calls that keep failing, spaced out
	tries    tries         // calls that got no verdict: the next one goes under a new idempotency key
}

// New returns the payments service.
func New(cfg Config, d Deps) *Payments {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.ReconcileEvery <= 0 {
		cfg.ReconcileEvery = DefaultReconcileEvery
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Webhooks == nil {
		d.Webhooks = noWebhooks{}
	}
	if d.Queued == nil {
		d.Queued = noQueued{}
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	return &Payments{cfg: cfg, provider: d.Provider, webhooks: d.Webhooks, db: d.DB, queued: d.Queued, returns: d.Returns,
		metrics: metrics.Or(d.Metrics), log: d.Log, now: d.Now, kick: make(chan struct{}, 1)}
}

// Provider is the provider in use (its minimum charge, for the catalog's prices).
func (p *Payments) Provider() Provider { return p.provider }

// ProviderName names the provider in use ("simulated", "stripe").
func (p *Payments) ProviderName() string { return p.provider.Name() }

// DirectPay reports whether the API's direct pay is allowed: only with the simulated provider; a
// real one takes money only through its checkout (409 USE_CHECKOUT).
func (p *Payments) DirectPay() error {
	if p.provider.Name() == SimulatedName {
		return nil
	}
	return shop.Errorf(shop.CodeUseCheckout, "payments go through the %s checkout: POST /api/flash-sales/orders/{orderId}/checkout", p.provider.Name())
}

// Checkout opens (or finds) the hosted checkout of a shopper's PENDING order and answers where to
// send the browser. origin is the request's own scheme and host, used when no PublicURL is set.
// One order has one checkout: a second click, on any instance, answers the same.
func (p *Payments) Checkout(ctx context.Context, userID int64, orderID, origin string) (string, error) {
	o, err := p.payableOrder(ctx, userID, orderID)
	if shop.ErrorCode(err) == shop.CodeNotFound {
		err = p.notWrittenYet(ctx, userID, orderID, err)
	}
	if err != nil {
		return "", err
	}
	attempt := 0
	if c, err := p.db.CheckoutOf(ctx, o.ID); err == nil {
		switch c.State {
		case store.CheckoutOpen:
			return c.URL, nil
		case store.CheckoutComplete:
			return "", shop.Errorf(shop.CodeNotPayable, "this order's checkout was completed; its payment is being confirmed")
		}
		attempt = c.Attempt + 1 // closed unpaid (an asynchronous payment failed, the provider expired it): a new one
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", shop.Unavailable(err)
	}
	return p.openCheckout(ctx, o, attempt, origin)
}

// notPending answers why an order in status (not PENDING) cannot be paid.
func notPending(status string) error {
	if status == shop.StatusPaid {
		return shop.Errorf(shop.CodeNotPayable, "the order is paid already")
	}
	return shop.PaidAnswer(status)
}

// payableOrder is the shopper's order if it may be paid now: PENDING, its window open. One whose
// window has closed by this instance's clock is expired there and then (by Postgres's clock, the
// expiry's own), so that the answer and the state agree.
func (p *Payments) payableOrder(ctx context.Context, userID int64, orderID string) (store.OrderDetail, error) {
	if !shop.IsOrderID(orderID) {
		return store.OrderDetail{}, shop.Errorf(shop.CodeNotFound, "no order %q", orderID)
	}
	o, err := p.db.OrderDetailByID(ctx, orderID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && o.UserID != userID) {
		return store.OrderDetail{}, shop.Errorf(shop.CodeNotFound, "no order %q", orderID)
	}
	if err != nil {
		return store.OrderDetail{}, shop.Unavailable(err)
	}
	if o.Status != shop.StatusPending {
		return store.OrderDetail{}, notPending(o.Status)
	}
	if p.now().Before(o.PayBy) {
		return o, nil
	}
	rets, err := p.db.ExpireOrder(ctx, o.Order)
	if err != nil {
		return store.OrderDetail{}, shop.Unavailable(err)
	}
	if len(rets) > 0 {
		p.returns.Apply(ctx, rets)
		return store.OrderDetail{}, shop.PaidAnswer(shop.StatusExpired)
	}
	if o, err = p.db.OrderDetailByID(ctx, orderID); err != nil {
		return store.OrderDetail{}, shop.Unavailable(err)
	}
	if o.Status != shop.StatusPending { // ended meanwhile, by another instance
		return store.OrderDetail{}, notPending(o.Status)
	}
	if c, err := p.db.CheckoutOf(ctx, orderID); err == nil && c.State == store.CheckoutOpen && c.Provider != SimulatedName {
		// Past the deadline, its checkout is being closed at the provider first (closeDue): the
		// order expires, or is paid if the session was, in a moment. Nobody is sent to pay now.
		return store.OrderDetail{}, shop.Errorf(shop.CodeExpired, "the payment window has closed; the payment provider is closing the checkout")
	}
	return o, nil // still open by Postgres's clock
}

// openCheckout asks the provider for the order's checkout (this attempt) and records it; a
// checkout of an order that ended meanwhile is not handed out.
func (p *Payments) openCheckout(ctx context.Context, o store.OrderDetail, attempt int, origin string) (string, error) {
	base := p.cfg.PublicURL
	if base == "" {
		base = strings.TrimRight(origin, "/")
	}
	back := base + "/orders/" + o.ID
	req := CheckoutRequest{OrderID: o.ID, ItemName: o.ItemName, AmountCents: o.PriceCents, Currency: o.Currency,
		SuccessURL: back + "?payment=done", CancelURL: back + "?payment=cancelled", ExpiresAt: o.PayBy, Attempt: attempt}
	s, err := p.createCheckout(ctx, req)
	if err != nil {
		p.metrics.Payments.WithLabelValues("provider_error").Inc()
		p.log.Warn("payments: opening a checkout failed", "order", o.ID, "provider", p.provider.Name(), "err", err)
		if !transient(err) {
			// The provider refused this checkout for good (an amount it cannot charge, a key it
			// does not take): asking again would not help.
			return "", shop.Errorf(shop.CodeNotPayable, "the payment provider refused to open a checkout for this order; the shop has been told")
		}
		return "", shop.Unavailable(fmt.Errorf("the payment provider did not answer: %w", err))
	}
	c, err := p.db.RecordCheckout(ctx, store.Checkout{OrderID: o.ID, Provider: p.provider.Name(), SessionID: s.ID, URL: s.URL,
		ExpiresAt: o.PayBy, Attempt: attempt})
	if err != nil {
		return "", shop.Unavailable(err)
	}
	if c.OrderStatus != shop.StatusPending {
		// The order ended while the provider opened the checkout: nobody is sent to pay for a
		// unit the shop no longer holds, and the keeper expires the session at once.
		p.Kick()
		return "", notPending(c.OrderStatus)
	}
	p.metrics.Payments.WithLabelValues("checkout_opened").Inc()
	return c.URL, nil
}

// createCheckout asks the provider for a checkout within the click's budget: each call has its
// own timeout, and a call that got no verdict (a 5xx, no answer) is tried again under a new
// idempotency key (Try), since the provider replays a stored failure under the old one. A session
// made by a call whose answer was lost is never handed out: it expires by itself at the provider.
// The tries of an order are remembered, so a later click starts from a key not yet spent.
func (p *Payments) createCheckout(ctx context.Context, req CheckoutRequest) (Session, error) {
	key := "checkout " + req.OrderID
	var err error
	for range checkoutTries {
		req.Try = p.tries.get(key)
		var s Session
		s, err = call(ctx, p.cfg.CallTimeout, func(ctx context.Context) (Session, error) { return p.provider.Checkout(ctx, req) })
		if err == nil {
			return s, nil
		}
		if !transient(err) || ctx.Err() != nil {
			return Session{}, err
		}
		p.tries.next(key)
	}
	return Session{}, err
}

// checkoutTries is how many calls one click makes to open a checkout (each under its own key).
const checkoutTries = 2

// transient reports whether a provider's error gave no verdict (worth another try): an error
// that says so through a Transient method, or any error that does not say (a network error).
func transient(err error) bool {
	var t interface{ Transient() bool }
	if errors.As(err, &t) {
		return t.Transient()
	}
	return !errors.Is(err, ErrRefundFailed)
}

// Webhook verifies a provider's notification and applies it once. A payload that does not verify
// answers BAD_SIGNATURE; an event flashsale does not act on is acknowledged and changes nothing.
func (p *Payments) Webhook(ctx context.Context, payload []byte, signature string) error {
	e, err := p.webhooks.ParseEvent(payload, signature)
	var se *shop.Error
	switch {
	case errors.Is(err, ErrBadSignature):
		p.metrics.Payments.WithLabelValues("bad_signature").Inc()
		return shop.Errorf(shop.CodeBadSignature, "the webhook's signature does not verify")
	case errors.As(err, &se):
		return err // no webhooks taken here: NOT_FOUND
	case err != nil:
		return shop.Errorf(shop.CodeInvalidInput, "the webhook cannot be read: %v", err)
	}
	return p.Apply(ctx, e)
}

// Apply applies a verified provider event once (by its id). It is the one way an order becomes
// PAID through a provider.
func (p *Payments) Apply(ctx context.Context, e Event) error {
	kind := ""
	switch e.Kind {
	case EventPaid:
		kind = store.PaymentPaid
	case EventExpired:
		kind = store.PaymentExpired
	default:
		p.metrics.Payments.WithLabelValues("ignored").Inc()
		return nil
	}
	if e.ID == "" {
		return shop.Errorf(shop.CodeInvalidInput, "the event has no id")
	}
	if e.OrderID != "" && !shop.IsOrderID(e.OrderID) {
		// Not one of ours (a checkout made outside flashsale on the same account): acknowledged.
		p.log.Info("payments: an event about no flashsale order", "event", e.ID, "reference", e.OrderID)
		e.OrderID = ""
	}
	out, err := p.db.ApplyPaymentEvent(ctx, store.PaymentEvent{Provider: p.provider.Name(), EventID: e.ID, Kind: kind,
		OrderID: e.OrderID, SessionID: e.SessionID, PaymentID: e.PaymentID, AmountCents: e.AmountCents, Currency: e.Currency})
	if err != nil {
		return shop.Unavailable(err) // the provider sends it again
	}
	p.metrics.Payments.WithLabelValues(string(out)).Inc()
	switch out {
	case store.OutcomeRefund:
		p.log.Warn("payments: a payment arrived after its order had ended; refunding it", "order", e.OrderID, "payment", e.PaymentID)
		p.Kick()
	case store.OutcomeConflict:
		// Not the order's own payment (another session, a payment link, another amount): it pays
		// nothing, and its money goes back; the merchant's money view counts it.
		p.log.Warn("payments: a payment that is not its order's own; refunding it", "order", e.OrderID,
			"session", e.SessionID, "payment", e.PaymentID, "amount", e.AmountCents, "currency", e.Currency)
		p.Kick()
	case store.OutcomeUnknown:
		p.log.Warn("payments: an event about an unknown order", "event", e.ID, "order", e.OrderID)
	}
	return nil
}

// Kick wakes the keeper at once (a refund became due, a checkout must close).
func (p *Payments) Kick() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

type noWebhooks struct{}

func (noWebhooks) ParseEvent([]byte, string) (Event, error) {
	return Event{}, shop.Errorf(shop.CodeNotFound, "this deployment takes no provider webhooks")
}

// QueuedOrders tells of a shopper's order the writer has not written yet (purchase.Purchases).
type QueuedOrders interface {
	Order(ctx context.Context, userID int64, orderID string) (shop.OrderView, error)
}

// noQueued knows of no order not written yet.
type noQueued struct{}

func (noQueued) Order(_ context.Context, _ int64, orderID string) (shop.OrderView, error) {
	return shop.OrderView{}, shop.Errorf(shop.CodeNotFound, "no order %q", orderID)
}

// notWrittenYet answers the checkout of an order Postgres does not hold (notFound): the
// shopper's QUEUED order, recorded in a moment, is not payable yet (NOT_PAYABLE, QUEUED);
// another's or a made-up one is not found; and when Redis cannot say now, the shop is
// unavailable rather than the order "not found". Asked only then: a checkout of a written order
// costs no Redis call.
func (p *Payments) notWrittenYet(ctx context.Context, userID int64, orderID string, notFound error) error {
	v, err := p.queued.Order(ctx, userID, orderID)
	switch {
	case err == nil && v.Status == shop.StatusQueued:
		return shop.PaidAnswer(shop.StatusQueued)
	case err != nil && shop.ErrorCode(err) != shop.CodeNotFound:
		return err
	}
	return notFound
}
