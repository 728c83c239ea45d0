package services

import (
	"context"
	"log/slog"
	"time"

	"github.com/flashsale/flashsale/store"
)

// KeeperConfig are the tunables of the background jobs.
type KeeperConfig struct {
	Interval  time.Duration // how often the jobs run
	OrphanAge time.Duration // a reservation older than this that never reached the queue is returned
}

// Keeper runs the background jobs that keep Redis honest; every instance may run it at once.
//   - warm-up: loads an item's stock into Redis when Redis does not know it (a new sale, or
//     Redis lost its data), but only once the queue has drained, so Postgres is complete.
//   - orphan recovery: returns reservations that never reached the queue (an instance died
//     between reserve and publish) once the writer has provably processed everything older.
type Keeper struct {
	cfg     KeeperConfig
	soldOut *SoldOut
	db      *store.DB
	stock   *store.Stock
	q       *store.Queue
	metrics *Metrics
	log     *slog.Logger
	now     func() time.Time
}

// NewKeeper returns a Keeper.
func NewKeeper(cfg KeeperConfig, db *store.DB, stock *store.Stock, q *store.Queue, soldOut *SoldOut, m *Metrics, log *slog.Logger, now func() time.Time) *Keeper {
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.OrphanAge <= 0 {
		cfg.OrphanAge = 45 * time.Second
	}
	return &Keeper{cfg: cfg, db: db, stock: stock, q: q, soldOut: soldOut, metrics: m, log: log, now: now}
}

// Run repeats the jobs until ctx ends.
func (k *Keeper) Run(ctx context.Context) {
	t := time.NewTicker(k.cfg.Interval)
	defer t.Stop()
	for {
		if err := k.Once(ctx); err != nil && ctx.Err() == nil {
			k.log.Warn("keeper: pass incomplete", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Once runs every job once.
func (k *Keeper) Once(ctx context.Context) error {
	backlog, err := k.q.Backlog(ctx)
	if err != nil {
		return err
	}
	if k.metrics != nil {
		k.metrics.Backlog.Set(float64(backlog))
	}
	sales, err := k.db.SalesEndingAfter(ctx, k.now().Add(-time.Hour), 1000)
	if err != nil {
		return err
	}
	var items []store.Item
	for _, s := range sales {
		items = append(items, s.Items...)
	}
	if err := k.warm(ctx, items, backlog); err != nil {
		return err
	}
	return k.recoverOrphans(ctx, items)
}

func (k *Keeper) warm(ctx context.Context, items []store.Item, backlog uint64) error {
	if len(items) == 0 {
		return nil
	}
	ids := make([]int64, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	levels, err := k.stock.Levels(ctx, ids)
	if err != nil {
		return err
	}
	for i, it := range items {
		if levels[i] >= 0 {
			continue
		}
		if backlog > 0 {
			k.log.Warn("keeper: item unknown to redis; waiting for the queue to drain before rebuilding", "item", it.ID, "backlog", backlog)
			continue
		}
		fresh, err := k.db.ItemByID(ctx, it.ID)
		if err != nil {
			return err
		}
		buyers, err := k.db.LiveBuyers(ctx, it.ID)
		if err != nil {
			return err
		}
		loaded, err := k.stock.Load(ctx, it.ID, int64(fresh.Quantity-len(buyers)), buyers)
		if err != nil {
			return err
		}
		if loaded {
			k.soldOut.Returned(it.ID)
			k.log.Info("keeper: item loaded into redis from postgres", "item", it.ID, "left", fresh.Quantity-len(buyers), "buyers", len(buyers))
		}
	}
	return nil
}

// recoverOrphans returns unclaimed reservations older than OrphanAge. Their publish ended long
// ago (a slow publish re-checks ownership before answering 202), so if the writer has
// acknowledged every message in the queue after we listed them, none of them is in the queue:
// each would have been claimed.
func (k *Keeper) recoverOrphans(ctx context.Context, items []store.Item) error {
	cutoff := k.now().Add(-k.cfg.OrphanAge)
	type cand struct {
		item  int64
		order string
	}
	var cands []cand
	for _, it := range items {
		flight, err := k.stock.InFlight(ctx, it.ID)
		if err != nil {
			return err
		}
		var claimedOld []string
		for _, r := range flight {
			if !r.ReservedAt.Before(cutoff) {
				continue
			}
			if r.Claimed {
				claimedOld = append(claimedOld, r.OrderID)
				continue
			}
			cands = append(cands, cand{it.ID, r.OrderID})
		}
		if err := k.settleWritten(ctx, it.ID, claimedOld); err != nil {
			return err
		}
	}
	if len(cands) == 0 {
		return nil
	}
	backlog, err := k.q.Backlog(ctx)
	if err != nil {
		return err
	}
	if backlog > 0 {
		return nil // next pass
	}
	for _, c := range cands {
		out, err := k.stock.Release(ctx, c.item, c.order, true, false)
		if err != nil {
			return err
		}
		if out == store.Released {
			k.soldOut.Returned(c.item)
			k.log.Warn("keeper: orphan reservation returned to stock", "item", c.item, "order", c.order)
			if k.metrics != nil {
				k.metrics.Released.WithLabelValues("orphan").Inc()
			}
		}
	}
	return nil
}

// settleWritten clears claimed entries whose order Postgres holds (the writer's settle failed).
func (k *Keeper) settleWritten(ctx context.Context, itemID int64, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	have, err := k.db.ExistingOrders(ctx, ids)
	if err != nil {
		return err
	}
	var done []string
	for id, st := range have {
		if st != store.StatusFailed {
			done = append(done, id)
		}
	}
	return k.stock.Settle(ctx, map[int64][]string{itemID: done})
}
