// Package draw decides when a fair start's draw closes, and closes it: once its window has passed
// on every Redis shard of the sale and every entry acknowledged is written in Postgres, the draw
// is decided there in one transaction (the units go to the best ranks: shop.DrawKey) and then
// applied to each shard, after which the sale sells first come, first served. Every instance may
// run it at once: the decision is taken once (Postgres's row lock) and applying it twice changes
// nothing.
//
// "Every entry acknowledged is written" does not trust Redis's list of entries (a failover may
// drop entries that are already in the queue): an entry is acknowledged (202) only once the queue
// stored it, within the publish timeout of its attempt, which fell in the window. So once the
// window has passed by that much on every shard, every acknowledged entry is at or before the
// queue's last position then; the draw records that position and waits for the writers to pass
// it.
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
	DrawQueuePosition(ctx context.Context, saleID int64, pos uint64) (uint64, error)
	CloseDraw(ctx context.Context, saleID int64) (store.Decision, bool, error)
}

// Stock is what closing a draw needs of Redis (store.Stock).
type Stock interface {
	DrawShards(ctx context.Context, saleID int64) ([]store.DrawShard, error)
	ApplyDraw(ctx context.Context, saleID int64, d store.Decision) (applied, unheld int, err error)
}

// Queue tells the queue's last position and how far the writers have finished it (store.Queue).
type Queue interface {
	Position(ctx context.Context) (uint64, error)
	WrittenThrough(ctx context.Context) (uint64, error)
}

// Config are the closer's tunables.
type Config struct {
	// PublishTimeout: the longest a purchase waits for the queue to store its message before it
	// answers (FLASHSALE_PUBLISH_TIMEOUT). An entry answered 202 was stored by the window's end
	// plus this.
	PublishTimeout time.Duration
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
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = 5 * time.Second
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

// settle is how long past the window's end plus the publish timeout the queue's position is read:
// the clocks' slack.
const settle = time.Second

// ready tells whether the draw may be decided: its window has passed on every shard (by that
// shard's Redis clock: no entry is added any more), by the publish timeout too on the latest
// clock (every entry acknowledged is in the queue by then), and the writers have finished the
// queue up to its position then (recorded the first time, for every instance).
func (c *Closer) ready(ctx context.Context, saleID int64, shards []store.DrawShard) error {
	var latest, end time.Time // the latest shard clock; the window's end
	for sh, s := range shards {
		if !s.Held {
			return fmt.Errorf("shard %d of sale %d not loaded: %w", sh, saleID, ErrNotReady)
		}
		if !s.WindowEnd.IsZero() && s.Now.Before(s.WindowEnd) {
			return fmt.Errorf("sale %d: the window is open (shard %d): %w", saleID, sh, ErrNotReady)
		}
		if s.Now.After(latest) {
			latest = s.Now
		}
		if s.WindowEnd.After(end) {
			end = s.WindowEnd
		}
	}
	if latest.Before(end.Add(c.cfg.PublishTimeout + settle)) {
		return fmt.Errorf("sale %d: entries answered in the window may still be on their way to the queue: %w", saleID, ErrNotReady)
	}
	last, err := c.q.Position(ctx)
	if err != nil {
		return err
	}
	pos, err := c.db.DrawQueuePosition(ctx, saleID, last)
	if err != nil {
		return err
	}
	done, err := c.q.WrittenThrough(ctx)
	if err != nil {
		return err
	}
	if done < pos {
		return fmt.Errorf("sale %d: the writers are at queue position %d of %d: %w", saleID, done, pos, ErrNotReady)
	}
	return nil
}
