package services

import (
	"context"
	"log/slog"

	"github.com/flashsale/flashsale/store"
)

// Returns gives back in Redis the units Postgres gave back (orders EXPIRED or CANCELLED). Each
// return is a row of stock_returns written with the order's change; it is deleted only after
// Redis took the unit, and the release script's tombstone makes a second application a no-op. A
// Redis that is down delays a return, never loses it, and never applies it twice.
type Returns struct {
	db      *store.DB
	stock   *store.Stock
	soldOut *SoldOut
	metrics *Metrics
	log     *slog.Logger
}

// NewReturns returns the service.
func NewReturns(db *store.DB, stock *store.Stock, soldOut *SoldOut, m *Metrics, log *slog.Logger) *Returns {
	return &Returns{db: db, stock: stock, soldOut: soldOut, metrics: m, log: log}
}

// Apply gives the units back in Redis and forgets the returns Redis took; what fails stays for
// the next pass. It returns how many it applied.
func (r *Returns) Apply(ctx context.Context, rets []store.StockReturn) int {
	var done []string
	for _, ret := range rets {
		ref := store.OrderRef{SaleID: ret.SaleID, ItemID: ret.ItemID, UserID: ret.UserID, OrderID: ret.OrderID}
		out, err := r.stock.Release(ctx, ref, store.ReturnUnit)
		if err != nil {
			r.log.Warn("unit not returned to redis yet; retried", "order", ret.OrderID, "err", err)
			break // Redis is down: the rest would fail too
		}
		if out == store.Released {
			r.soldOut.Returned(ret.ItemID)
			if r.metrics != nil {
				r.metrics.Returned.WithLabelValues(ret.Reason).Inc()
			}
		}
		done = append(done, ret.OrderID)
	}
	if err := r.db.DeleteReturns(ctx, done); err != nil {
		r.log.Warn("stock returns applied but not deleted; the next pass finds them applied", "err", err)
	}
	return len(done)
}

// Drain applies every pending return.
func (r *Returns) Drain(ctx context.Context) error {
	for {
		rets, err := r.db.PendingReturns(ctx, 500)
		if err != nil {
			return err
		}
		if r.metrics != nil {
			r.metrics.PendingReturns.Set(float64(len(rets)))
		}
		if len(rets) == 0 {
			return nil
		}
		if n := r.Apply(ctx, rets); n < len(rets) || len(rets) < 500 {
			return nil
		}
	}
}
