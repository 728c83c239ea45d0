// Package draw decides when a fair start's draw closes, and closes it: once its window has passed
// on every Redis shard of the sale and every entry acknowledged is written in Postgres, the draw
// is decided there in one transaction (the units go to the best ranks) and then applied to each
// shard, after which the sale sells first come, first served. Every instance may run it at once:
// the decision is taken once (Postgres's row lock) and applying it twice changes nothing.
package draw

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/flashsale/flashsale/services/faults"
	"github.com/flashsale/flashsale/services/metrics"
	"github.com/flashsale/flashsale/store"
)

// DB is what closing a draw needs of Postgres (store.DB).
type DB interface {
	DrawsDue(ctx context.Context, now time.Time) ([]int64, error)
	DrawDecided(ctx context.Context, saleID int64) (bool, error)
	EntriesWritten(ctx context.Context, ids []string) (int, error)
	CloseDraw(ctx context.Context, saleID int64) (store.Decision, bool, error)
}

// Stock is what closing a draw needs of Redis (store.Stock).
type Stock interface {
	DrawShards(ctx context.Context, saleID int64) ([]store.DrawShard, error)
	ApplyDraw(ctx context.Context, saleID int64, d store.Decision) (applied, unheld int, err error)
}

// Queue tells how many messages the writers have not finished (store.Queue).
type Queue interface {
	Backlog(ctx context.Context) (uint64, error)
}

// Config are the closer's tunables.
type Config struct {
	// Grace: how long after the window an entry Redis holds but Postgres does not is waited for
	// (its publish may still be under way) before a drained queue proves it never reached the
	// queue (its instance died before publishing). The keeper's orphan age is the right value.
	Grace time.Duration
}

// Closer closes fair-start draws.
type Closer struct {
	cfg     Config
	db      DB
	stock   Stock
	q       Queue
	metrics *metrics.Metrics
	log     *slog.Logger
	now     func() time.Time

	mu       sync.Mutex
	inflight map[int64]*closing // one close per sale at a time in this process; the others wait for it
}

type closing struct {
	done chan struct{}
	err  error
}

// New returns a Closer.
func New(cfg Config, db DB, stock Stock, q Queue, m *metrics.Metrics, log *slog.Logger, now func() time.Time) *Closer {
	if cfg.Grace <= 0 {
		cfg.Grace = 45 * time.Second
	}
	return &Closer{cfg: cfg, db: db, stock: stock, q: q, metrics: metrics.Or(m), log: log, now: now, inflight: map[int64]*closing{}}
}

// ErrNotReady: the draw cannot be decided yet (its window is open on a shard, or entries are on
// their way to Postgres). It is decided on a later try.
var ErrNotReady = errors.New("the draw is not ready to close")

// Close decides and applies the sale's draw if it can now: nil once every shard has applied it.
// Concurrent calls for one sale in this process share one attempt.
func (c *Closer) Close(ctx context.Context, saleID int64) error {
	c.mu.Lock()
	if cl, ok := c.inflight[saleID]; ok {
		c.mu.Unlock()
		select {
		case <-cl.done:
			return cl.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	cl := &closing{done: make(chan struct{})}
	c.inflight[saleID] = cl
	c.mu.Unlock()
	cl.err = c.close(context.WithoutCancel(ctx), saleID)
	c.mu.Lock()
	delete(c.inflight, saleID)
	c.mu.Unlock()
	close(cl.done)
	return cl.err
}

// Pass closes every draw whose window has passed and that some shard has not applied (the
// keeper runs it on each pass, on every instance).
func (c *Closer) Pass(ctx context.Context) error {
	ids, err := c.db.DrawsDue(ctx, c.now())
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if err := c.Close(ctx, id); err != nil && !errors.Is(err, ErrNotReady) {
			errs = append(errs, fmt.Errorf("sale %d: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Closer) close(ctx context.Context, saleID int64) error {
	shards, err := c.stock.DrawShards(ctx, saleID)
	if err != nil {
		return err
	}
	if applied(shards) {
		return nil
	}
	decided, err := c.db.DrawDecided(ctx, saleID)
	if err != nil {
		return err
	}
	if !decided {
		if err := c.ready(ctx, saleID, shards); err != nil {
			return err
		}
	}
	dec, now, err := c.db.CloseDraw(ctx, saleID)
	if err != nil {
		return err
	}
	if now {
		c.metrics.Draws.WithLabelValues("decided").Inc()
		c.log.Info("draw decided", "sale", saleID, "winners", len(dec.Winners))
	}
	faults.Reached(faults.DrawDecided)
	n, unheld, err := c.stock.ApplyDraw(ctx, saleID, dec)
	c.metrics.Draws.WithLabelValues("applied").Add(float64(n))
	if err != nil {
		return err
	}
	if unheld > 0 {
		// those shards' load reads the decided draw from Postgres (the keeper loads them)
		return fmt.Errorf("%d shard(s) of sale %d not loaded; their load applies the draw: %w", unheld, saleID, ErrNotReady)
	}
	return nil
}

// applied tells whether every shard holds the draw applied.
func applied(shards []store.DrawShard) bool {
	for _, s := range shards {
		if !s.Held || (!s.WindowEnd.IsZero() && !s.Drawn) {
			return false
		}
	}
	return true
}

// ready tells whether the draw may be decided: its window has passed on every shard (by that
// shard's Redis clock: no entry is added any more) and every entry acknowledged is written. An
// entry Redis holds that Postgres does not is waited for; after the grace, a drained queue proves
// it never reached the queue. A shard loaded after the window opened lost its entries from Redis
// (not from the queue): then a drained queue after the grace is waited for in any case.
func (c *Closer) ready(ctx context.Context, saleID int64, shards []store.DrawShard) error {
	var ids []string
	lost := false
	var latest time.Time // the latest shard clock, to time the grace
	for sh, s := range shards {
		if !s.Held {
			return fmt.Errorf("shard %d of sale %d not loaded: %w", sh, saleID, ErrNotReady)
		}
		if !s.WindowEnd.IsZero() && s.Now.Before(s.WindowEnd) {
			return fmt.Errorf("sale %d: the window is open (shard %d): %w", saleID, sh, ErrNotReady)
		}
		ids = append(ids, s.Entries...)
		lost = lost || s.EntryLost
		if s.Now.After(latest) {
			latest = s.Now
		}
	}
	written, err := c.db.EntriesWritten(ctx, ids)
	if err != nil {
		return err
	}
	if written == len(ids) && !lost {
		return nil
	}
	var end time.Time
	for _, s := range shards {
		if s.WindowEnd.After(end) {
			end = s.WindowEnd
		}
	}
	if latest.Before(end.Add(c.cfg.Grace)) {
		return fmt.Errorf("sale %d: %d of %d entries written: %w", saleID, written, len(ids), ErrNotReady)
	}
	backlog, err := c.q.Backlog(ctx)
	if err != nil {
		return err
	}
	if backlog > 0 {
		return fmt.Errorf("sale %d: %d of %d entries written, %d messages queued: %w", saleID, written, len(ids), backlog, ErrNotReady)
	}
	c.log.Warn("draw: deciding without entries that never reached the queue (or that Redis lost)", "sale", saleID,
		"held", len(ids), "written", written, "redis_lost_entries", lost)
	return nil
}
