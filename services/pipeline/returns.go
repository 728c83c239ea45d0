package pipeline

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/flashsale/flashsale/services/metrics"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// Returns gives back in Redis the units Postgres gave back (orders EXPIRED or CANCELLED). Each
// return is a row of stock_returns written with the order's change. The release script's
// tombstone makes a second application a no-op, and a row is deleted only once a later pass
// (after returnsSettle, when Redis's append-only file has surely been synced) still finds the
// tombstone: a Redis that is down delays a return, one that loses its last second of writes has
// it applied again, and none applies it twice. A sale Redis does not hold healthy (not loaded,
// or lost) is not touched: its rebuild from Postgres counts the unit, and takes the row as a
// tombstone.
type Returns struct {
	db      DB
	stock   Stock
	soldOut SoldOutFlags
	metrics *metrics.Metrics
	log     *slog.Logger

	mu      sync.Mutex
	applied map[string]appliedReturn // order id -> applied, awaiting the check before deletion
}

type appliedReturn struct {
	saleID int64
	at     time.Time
}

// returnsSettle is how long after Redis took a return its row is kept: Redis syncs its
// append-only file every second, so by then the tombstone is on disk.
const returnsSettle = 3 * time.Second

// NewReturns returns the service.
func NewReturns(db DB, stock Stock, soldOut SoldOutFlags, m *metrics.Metrics, log *slog.Logger) *Returns {
	return &Returns{db: db, stock: stock, soldOut: soldOut, metrics: metrics.Or(m), log: log, applied: map[string]appliedReturn{}}
}

// Apply gives the units back in Redis, in pipelines (one round trip per 500); what fails, or
// waits for a rebuild, stays for the next pass. It returns how many Redis took.
func (r *Returns) Apply(ctx context.Context, rets []store.StockReturn) int {
	n := 0
	var obsolete []string
	now := time.Now()
	refs := make([]shop.OrderRef, len(rets))
	for i, ret := range rets {
		refs[i] = shop.OrderRef{SaleID: ret.SaleID, ItemID: ret.ItemID, UserID: ret.UserID, OrderID: ret.OrderID}
	}
	outs, errs := r.stock.ReleaseMany(ctx, refs, shop.ReturnUnit)
	failed := 0
	var firstErr error
	for i, out := range outs {
		ret := rets[i]
		if errs[i] != nil {
			// Redis (or this sale's node) is down: the return stays for the next pass (a release
			// is idempotent, so one Redis took after all is a no-op then)
			failed++
			firstErr = cmp.Or(firstErr, errs[i])
			continue
		}
		if out == store.RetryLater {
			if ret.SaleOver {
				obsolete = append(obsolete, ret.OrderID) // ended long ago and not loaded: nothing to give back to
			}
			continue
		}
		if out == store.Released {
			r.soldOut.Returned(ret.ItemID)
			r.metrics.Returned.WithLabelValues(ret.Reason).Inc()
		}
		r.mu.Lock()
		r.applied[ret.OrderID] = appliedReturn{saleID: ret.SaleID, at: now}
		r.mu.Unlock()
		n++
	}
	if failed > 0 {
		r.log.Warn("units not returned to redis yet; retried", "pending", failed, "err", firstErr)
	}
	if err := r.db.DeleteReturns(ctx, obsolete); err != nil {
		r.log.Warn("returns of ended sales not deleted; retried", "err", err)
	}
	return n
}

// settle deletes the rows of returns applied at least returnsSettle ago whose tombstone Redis
// still holds; one whose tombstone is gone (Redis lost it) is applied again by the next pass.
func (r *Returns) settle(ctx context.Context) error {
	cutoff := time.Now().Add(-returnsSettle)
	bySale := map[int64][]string{}
	r.mu.Lock()
	for id, a := range r.applied {
		if a.at.Before(cutoff) {
			bySale[a.saleID] = append(bySale[a.saleID], id)
		}
	}
	r.mu.Unlock()
	for sale, ids := range bySale {
		gone, err := r.stock.AreGone(ctx, sale, ids)
		if err != nil {
			return err
		}
		var done []string
		for i, id := range ids {
			if gone[i] {
				done = append(done, id)
			}
		}
		if err := r.db.DeleteReturns(ctx, done); err != nil {
			return err
		}
		r.mu.Lock()
		for _, id := range ids {
			delete(r.applied, id) // deleted, or to be applied again
		}
		r.mu.Unlock()
	}
	return nil
}

// Drain settles the returns applied earlier, then applies the pending ones (up to 2,000 a pass;
// expiry and cancel apply theirs at once, this is the retry path).
func (r *Returns) Drain(ctx context.Context) error {
	if err := r.settle(ctx); err != nil {
		return err
	}
	rets, err := r.db.PendingReturns(ctx, 2000)
	if err != nil {
		return err
	}
	r.metrics.PendingReturns.Set(float64(len(rets)))
	var todo []store.StockReturn
	r.mu.Lock()
	for _, ret := range rets {
		if _, waiting := r.applied[ret.OrderID]; !waiting {
			todo = append(todo, ret)
		}
	}
	r.mu.Unlock()
	r.Apply(ctx, todo)
	return nil
}
