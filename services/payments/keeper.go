package payments

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

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

// Run closes, until ctx ends, the checkouts of orders that can no longer be paid and makes the
// refunds that are due: every Interval, and at once when kicked. A provider that does not answer
// is asked again at the next pass, for as long as it takes. Any number of instances may run it:
// each provider call is idempotent for its order.
func (p *Payments) Run(ctx context.Context) {
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		p.Pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.kick:
		}
	}
}

// Pass is one round of the keeper: it reports how many checkouts it closed and refunds it made.
func (p *Payments) Pass(ctx context.Context) (closed, refunded int) {
	return p.expireCheckouts(ctx), p.refund(ctx)
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
		err := p.provider.ExpireSession(ctx, c.SessionID)
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
		key := "refund " + r.OrderID
		if !p.retries.due(key, p.now()) {
			continue
		}
		id, err := p.provider.Refund(ctx, RefundRequest{OrderID: r.OrderID, PaymentID: r.PaymentID})
		if err != nil {
			p.metrics.Payments.WithLabelValues("provider_error").Inc()
			wait := p.retries.failed(key, p.now(), p.cfg.Interval)
			p.log.Warn("payments: a refund failed; it is tried again", "order", r.OrderID, "payment", r.PaymentID, "in", wait, "err", err)
			continue
		}
		p.retries.done(key)
		if err := p.db.RecordRefund(ctx, r.OrderID, id); err != nil {
			p.log.Warn("payments: recording a refund failed", "order", r.OrderID, "refund", id, "err", err)
			continue
		}
		p.metrics.Payments.WithLabelValues("refunded").Inc()
		p.log.Info("payments: refunded a payment that came after its order ended", "order", r.OrderID, "refund", id)
		n++
	}
	return n
}
