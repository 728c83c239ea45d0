package payments

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// keeperBatch is how many checkouts and refunds one pass handles of each.
const keeperBatch = 100

// maxRetryWait is the longest a provider call that keeps failing waits before it is tried again
// (a refusal that will not change, such as a wrong key, is asked again this often, not every pass).
const maxRetryWait = 5 * time.Minute

// backoff spaces out the calls of one order that keep failing: after the n-th failure the next
// try waits the pass interval times 2^n, up to maxRetryWait.
type backoff struct {
	mu   sync.Mutex
	next map[string]retryAt
}

type retryAt struct {
	at    time.Time
	fails int
}

func (b *backoff) due(key string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.next[key]
	return !ok || !now.Before(r.at)
}

func (b *backoff) failed(key string, now time.Time, base time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.next == nil {
		b.next = map[string]retryAt{}
	}
	r := b.next[key]
	r.fails++
	wait := base << min(r.fails, 16)
	if wait > maxRetryWait || wait <= 0 {
		wait = maxRetryWait
	}
	r.at = now.Add(wait)
	b.next[key] = r
	return wait
}

// waiting lists the orders of the calls of kind ("expire", "refund") that wait for their next try
// at now: a pass leaves them out, so that calls that keep failing never crowd out the others.
func (b *backoff) waiting(kind string, now time.Time) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for key, r := range b.next {
		if order, ok := strings.CutPrefix(key, kind+" "); ok && now.Before(r.at) {
			out = append(out, order)
		}
	}
	return out
}

func (b *backoff) done(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.next, key)
}

// tries counts the calls of one key that got no verdict: the next call goes under a new
// idempotency key (the provider replays a stored 500 under the old one for a day).
type tries struct {
	mu sync.Mutex
	n  map[string]int
}

func (t *tries) get(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n[key]
}

func (t *tries) next(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == nil {
		t.n = map[string]int{}
	}
	t.n[key]++
}

func (t *tries) done(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.n, key)
}

// Run closes, until ctx ends, the checkouts of orders that can no longer be paid, makes the
// refunds that are due, and asks the provider about checkouts whose outcome may not have reached
// us: three jobs, each on its own, so that a slow provider in one never holds the others. A
// provider that does not answer is asked again later, for as long as it takes. Any number of
// instances may run it: each provider call is idempotent, and each result is applied once.
func (p *Payments) Run(ctx context.Context) {
	var wg sync.WaitGroup
	kicks := []chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}
	wg.Go(func() { p.every(ctx, p.cfg.Interval, kicks[0], func() { p.closeDue(ctx); p.expireCheckouts(ctx) }) })
	wg.Go(func() { p.every(ctx, p.cfg.Interval, kicks[1], func() { p.refund(ctx) }) })
	wg.Go(func() {
		pass := 0
		p.every(ctx, p.cfg.ReconcileEvery, nil, func() {
			p.Reconcile(ctx)
			p.ConfirmRefunds(ctx)
			if pass%sweepEvery == 0 { // the sweep lists a day of the provider's sessions: seldom
				p.Sweep(ctx)
			}
			pass++
		})
	})
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-p.kick:
			for _, k := range kicks {
				select {
				case k <- struct{}{}:
				default:
				}
			}
		}
	}
}

// every runs job at once, then every interval and whenever kicked, until ctx ends.
func (p *Payments) every(ctx context.Context, interval time.Duration, kick <-chan struct{}, job func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		job()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
	}
}

// Pass is one round of the keeper: it reports how many checkouts it closed and refunds it made.
// (The reconciler is Reconcile.)
func (p *Payments) Pass(ctx context.Context) (closed, refunded int) {
	return p.closeDue(ctx) + p.expireCheckouts(ctx), p.refund(ctx)
}

// closeDue ends the PENDING orders past their deadline whose checkout is open at the provider, in
// the provider's order (Stripe's guidance for limited stock): the session is expired there first;
// only a session the provider closed unpaid lets the order expire and its unit go back, and a
// session it says was paid makes the order PAID. A provider that does not answer is asked again
// (spaced out); after store.CheckoutCloseGrace the order expires without it (the keeper's
// expiry), and a payment that comes later is refunded.
func (p *Payments) closeDue(ctx context.Context) int {
	due, err := p.db.CheckoutsDue(ctx, p.provider.Name(), p.retries.waiting("close", p.now()), keeperBatch)
	if err != nil {
		p.log.Warn("payments: listing checkouts of orders past their deadline failed", "err", err)
		return 0
	}
	n := 0
	for _, c := range due {
		key := "close " + c.OrderID
		if !p.retries.due(key, p.now()) {
			continue
		}
		err := p.expireSession(ctx, c.SessionID)
		if errors.Is(err, ErrSessionComplete) {
			err = p.paidAtTheDeadline(ctx, c)
		} else if err == nil {
			var rets []store.StockReturn
			if rets, err = p.db.ExpireClosed(ctx, shop.Order{ID: c.OrderID, ItemID: c.ItemID}, c.SessionID); err == nil {
				p.returns.Apply(ctx, rets)
				p.metrics.Payments.WithLabelValues("session_expired").Inc()
			}
		}
		if err != nil {
			p.metrics.Payments.WithLabelValues("provider_error").Inc()
			wait := p.retries.failed(key, p.now(), p.cfg.Interval)
			p.log.Warn("payments: closing the checkout of an order past its deadline failed; tried again", "order", c.OrderID,
				"session", c.SessionID, "in", wait, "err", err)
			continue
		}
		p.retries.done(key)
		n++
	}
	return n
}

// paidAtTheDeadline applies a session the provider says was completed when the order's deadline
// came: asked, its payment pays the order (still PENDING) as the webhook would.
func (p *Payments) paidAtTheDeadline(ctx context.Context, c store.CheckoutDue) error {
	st, err := p.lookup(ctx, c.SessionID)
	if err != nil {
		return err
	}
	if st.Status != SessionComplete {
		return fmt.Errorf("the provider refused to expire session %s, which it says is %s", c.SessionID, st.Status)
	}
	return p.applyLookup(ctx, store.CheckoutToExpire{OrderID: c.OrderID, SessionID: c.SessionID}, st)
}

// expireSession and lookup are the provider's calls of the same names, each under its own timeout.
func (p *Payments) expireSession(ctx context.Context, sessionID string) error {
	_, err := call(ctx, p.cfg.CallTimeout, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, p.provider.ExpireSession(ctx, sessionID)
	})
	return err
}

func (p *Payments) lookup(ctx context.Context, sessionID string) (SessionState, error) {
	return call(ctx, p.cfg.CallTimeout, func(ctx context.Context) (SessionState, error) { return p.provider.Lookup(ctx, sessionID) })
}

// call runs one provider call under its own timeout.
func call[T any](ctx context.Context, timeout time.Duration, f func(context.Context) (T, error)) (T, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return f(cctx)
}

func (p *Payments) expireCheckouts(ctx context.Context) int {
	due, err := p.db.CheckoutsToExpire(ctx, p.provider.Name(), p.retries.waiting("expire", p.now()), keeperBatch)
	if err != nil {
		p.log.Warn("payments: listing checkouts to expire failed", "err", err)
		return 0
	}
	n := 0
	for _, c := range due {
		key := "expire " + c.OrderID
		if !p.retries.due(key, p.now()) {
			continue
		}
		state := store.CheckoutExpired
		err := p.expireSession(ctx, c.SessionID)
		if errors.Is(err, ErrSessionComplete) {
			// Paid meanwhile: the provider's confirmation (already here, or on its way) refunds it.
			state, err = store.CheckoutComplete, nil
		}
		if err != nil {
			p.metrics.Payments.WithLabelValues("provider_error").Inc()
			wait := p.retries.failed(key, p.now(), p.cfg.Interval)
			p.log.Warn("payments: expiring a checkout failed; it is tried again", "order", c.OrderID, "session", c.SessionID, "in", wait, "err", err)
			continue
		}
		p.retries.done(key)
		if err := p.db.CloseCheckout(ctx, c.OrderID, state); err != nil {
			p.log.Warn("payments: recording a closed checkout failed", "order", c.OrderID, "err", err)
			continue
		}
		p.metrics.Payments.WithLabelValues("session_" + state).Inc()
		n++
	}
	return n
}

func (p *Payments) refund(ctx context.Context) int {
	due, err := p.db.RefundsDue(ctx, p.provider.Name(), p.retries.waiting("refund", p.now()), keeperBatch)
	if err != nil {
		p.log.Warn("payments: listing refunds due failed", "err", err)
		return 0
	}
	n := 0
	for _, r := range due {
		key := "refund " + r.PaymentID
		if !p.retries.due(key, p.now()) {
			continue
		}
		req := RefundRequest{OrderID: r.OrderID, PaymentID: r.PaymentID, Attempt: p.tries.get(key)}
		id, err := call(ctx, p.cfg.CallTimeout, func(ctx context.Context) (string, error) { return p.provider.Refund(ctx, req) })
		if errors.Is(err, ErrRefundFailed) {
			// Refused for good by the provider, for this payment (disputed, a closed card): asking
			// again would not change it. Recorded with its reason; the merchant's view shows it.
			// Any other refusal (a key revoked or without the right, a request the provider did
			// not take) is the shop's to mend: asked again, spaced out, and logged as an error.
			p.retries.done(key)
			p.tries.done(key)
			p.metrics.Payments.WithLabelValues("refund_failed").Inc()
			p.log.Error("payments: the provider refused a refund for good; the merchant must settle it", "order", r.OrderID,
				"payment", r.PaymentID, "conflict", r.Conflict(), "err", err)
			if err := p.db.RecordRefundFailure(ctx, r, refusalReason(err)); err != nil {
				p.log.Warn("payments: recording a refused refund failed", "payment", r.PaymentID, "err", err)
			}
			continue
		}
		if err != nil {
			p.metrics.Payments.WithLabelValues("provider_error").Inc()
			wait := p.retries.failed(key, p.now(), p.cfg.Interval)
			if transient(err) {
				p.tries.next(key) // no verdict: the next try asks first, then goes under a new key
				p.log.Warn("payments: a refund got no answer; it is tried again", "order", r.OrderID, "payment", r.PaymentID, "in", wait, "err", err)
			} else {
				p.log.Error("payments: the provider refused a refund call (the key, its rights, the request); tried again until mended",
					"order", r.OrderID, "payment", r.PaymentID, "in", wait, "err", err)
			}
			continue
		}
		p.retries.done(key)
		p.tries.done(key)
		if err := p.db.RecordRefund(ctx, r, id); err != nil {
			p.log.Warn("payments: recording a refund failed", "order", r.OrderID, "refund", id, "err", err)
			continue
		}
		p.metrics.Payments.WithLabelValues("refunded").Inc()
		p.log.Info("payments: refunded a payment that did not buy its order", "order", r.OrderID, "payment", r.PaymentID,
			"conflict", r.Conflict(), "refund", id)
		n++
	}
	return n
}

// refusalReason is the words kept for a refund refused for good: the provider's failure reason,
// or its error, shortened.
func refusalReason(err error) string {
	var r *RefundRefusal
	if errors.As(err, &r) && r.Reason != "" {
		return r.Reason
	}
	s := err.Error()
	if len(s) > 300 {
		s = s[:300]
	}
	return s
}

// Reconcile asks the provider about the checkouts whose outcome may not have reached us (open
// longer than a webhook takes, or closed as paid with no payment recorded) and applies what it
// learns exactly as the webhook would: a payment pays its PENDING order or is refunded, an
// expired session closes. The webhook is the fast path; this is the one that does not depend on
// it. It reports how many checkouts it asked about. Safe on any number of instances: each
// checkout is claimed by one for a while, and every result is applied once.
func (p *Payments) Reconcile(ctx context.Context) int {
	due, err := p.db.CheckoutsToVerify(ctx, p.provider.Name(), p.cfg.ReconcileEvery, keeperBatch)
	if err != nil {
		p.log.Warn("payments: listing checkouts to verify failed", "err", err)
		return 0
	}
	n := 0
	for _, c := range due {
		st, err := p.lookup(ctx, c.SessionID)
		if errors.Is(err, ErrNoLookup) {
			return n
		}
		if err != nil {
			p.metrics.Payments.WithLabelValues("provider_error").Inc()
			p.log.Warn("payments: asking the provider about a checkout failed; asked again later", "order", c.OrderID, "session", c.SessionID, "err", err)
			continue
		}
		n++
		if err := p.applyLookup(ctx, c, st); err != nil {
			p.log.Warn("payments: applying what the provider said of a checkout failed", "order", c.OrderID, "session", c.SessionID, "err", err)
		}
	}
	return n
}

// ConfirmRefunds asks the provider where each refund it accepted but has not called final stands
// (Stripe: a refund is pending before it succeeds, and may fail then): a succeeded one is final;
// a failed one is recorded with its reason, shown to the merchant (refundsFailed) and the order
// no longer says refunded. It reports how many became final.
func (p *Payments) ConfirmRefunds(ctx context.Context) int {
	due, err := p.db.RefundsToConfirm(ctx, p.provider.Name(), keeperBatch)
	if err != nil {
		p.log.Warn("payments: listing refunds to confirm failed", "err", err)
		return 0
	}
	n := 0
	for _, r := range due {
		type answer struct{ state, reason string }
		a, err := call(ctx, p.cfg.CallTimeout, func(ctx context.Context) (answer, error) {
			s, why, err := p.provider.RefundState(ctx, r.RefundID)
			return answer{s, why}, err
		})
		if err != nil {
			p.log.Warn("payments: asking about a refund failed; asked again later", "refund", r.RefundID, "err", err)
			continue
		}
		if a.state != RefundSucceeded && a.state != RefundFailed {
			continue
		}
		if a.state == RefundFailed {
			p.metrics.Payments.WithLabelValues("refund_failed").Inc()
			p.log.Error("payments: a refund failed after the provider accepted it; the merchant must settle it", "order", r.OrderID,
				"payment", r.PaymentID, "refund", r.RefundID, "reason", a.reason)
		}
		if err := p.db.ConfirmRefund(ctx, r, a.state == RefundFailed, a.reason); err != nil {
			p.log.Warn("payments: recording a refund's final state failed", "refund", r.RefundID, "err", err)
			continue
		}
		n++
	}
	return n
}

// sweepEvery is how many reconciliation passes come between two sweeps.
const sweepEvery = 10

// sweepWindow is how far back the sweep lists the provider's completed sessions.
const sweepWindow = 24 * time.Hour

// Sweep lists the provider's sessions completed in the last day and applies, as its webhook would,
// each paid one that names an order of ours but that the shop has not heard of (a payment link's
// session, a payment whose webhook was lost): a payment that is not its order's own is a conflict,
// refunded. It reports how many it applied. Safe on any number of instances (each event once).
func (p *Payments) Sweep(ctx context.Context) int {
	type found struct {
		id string
		st SessionState
	}
	var all []found
	lctx, cancel := context.WithTimeout(ctx, 10*p.cfg.CallTimeout)
	err := p.provider.Completed(lctx, p.now().Add(-sweepWindow), func(id string, st SessionState) error {
		if st.Paid && shop.IsOrderID(st.OrderID) {
			all = append(all, found{id, st})
		}
		return nil
	})
	cancel()
	if errors.Is(err, ErrNoLookup) {
		return 0
	}
	if err != nil {
		p.log.Warn("payments: listing the provider's completed sessions failed; listed again later", "err", err)
	}
	if len(all) == 0 {
		return 0
	}
	ids := make([]string, len(all))
	for i, f := range all {
		ids[i] = f.id
	}
	unknown, err := p.db.UnheardSessions(ctx, p.provider.Name(), ids)
	if err != nil {
		p.log.Warn("payments: comparing the provider's sessions with ours failed", "err", err)
		return 0
	}
	n := 0
	for _, f := range all {
		if !unknown[f.id] {
			continue
		}
		p.metrics.Payments.WithLabelValues("swept").Inc()
		if err := p.Apply(ctx, Event{ID: "sweep_paid_" + f.id, Kind: EventPaid, OrderID: f.st.OrderID, SessionID: f.id,
			PaymentID: f.st.PaymentID, AmountCents: f.st.AmountCents, Currency: f.st.Currency}); err != nil {
			p.log.Warn("payments: applying a session found by the sweep failed", "session", f.id, "err", err)
			continue
		}
		n++
	}
	return n
}

// applyLookup applies what the provider said of checkout c, as its webhook would have.
func (p *Payments) applyLookup(ctx context.Context, c store.CheckoutToExpire, st SessionState) error {
	switch st.Status {
	case SessionComplete:
		p.metrics.Payments.WithLabelValues("reconciled_complete").Inc()
		if err := p.Apply(ctx, Event{ID: "reconcile_paid_" + c.SessionID, Kind: EventPaid, OrderID: c.OrderID, SessionID: c.SessionID,
			PaymentID: paidID(st), AmountCents: st.AmountCents, Currency: st.Currency}); err != nil {
			return err
		}
		return p.db.MarkVerified(ctx, c.OrderID, c.SessionID)
	case SessionExpired:
		if err := p.Apply(ctx, Event{ID: "reconcile_expired_" + c.SessionID, Kind: EventExpired, OrderID: c.OrderID, SessionID: c.SessionID}); err != nil {
			return err
		}
		return p.db.MarkVerified(ctx, c.OrderID, c.SessionID)
	}
	return nil // still open: asked again later
}

// paidID is the payment of a session, "" when no money was taken.
func paidID(st SessionState) string {
	if !st.Paid {
		return ""
	}
	return st.PaymentID
}
