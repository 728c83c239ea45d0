package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/flashsale/flashsale/services/metrics"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// Loader (re)builds a sale's Redis state from Postgres, the source of truth: at warm-up, and after
// Redis lost data. Every instance may run it at once: the load script refuses a rebuild of an
// older snapshot, and does nothing while the sale is loaded and healthy.
type Loader struct {
	db       DB
	stock    Stock
	soldOut  SoldOutFlags
	metrics  *metrics.Metrics
	log      *slog.Logger
	tokenTTL time.Duration
	// rebuildDelay: a sale Redis lost is rebuilt no sooner than this after the loss was seen, so
	// that the publishes on their way at the loss (a publish waits up to its timeout) are in the
	// queue, and so counted in Postgres once it has drained.
	rebuildDelay time.Duration

	beforeRedis func(saleID int64) // LoaderConfig.BeforeRedisLoad
}

// LoaderConfig are the loader's tunables.
type LoaderConfig struct {
	// TokenTTL is the purchase tokens' lifetime: a rebuild after data loss voids the tokens
	// issued before it, since Redis may have lost their use marks.
	TokenTTL time.Duration
	// RebuildDelay is how long after a loss is seen a rebuild may start (the publish timeout and
	// a margin).
	RebuildDelay time.Duration
	// BeforeRedisLoad, if set, runs in every load between reading its Postgres snapshot and
	// writing it to Redis (tests edit the sale in that window).
	BeforeRedisLoad func(saleID int64)
}

// NewLoader returns a Loader.
func NewLoader(cfg LoaderConfig, db DB, stock Stock, soldOut SoldOutFlags, m *metrics.Metrics, log *slog.Logger) *Loader {
	before := cfg.BeforeRedisLoad
	if before == nil {
		before = func(int64) {}
	}
	return &Loader{db: db, stock: stock, soldOut: soldOut, metrics: metrics.Or(m), log: log, tokenTTL: cfg.TokenTTL, rebuildDelay: cfg.RebuildDelay,
		beforeRedis: before}
}

// Rebuild is a merchant's Warm on a sale loaded before: it rebuilds the sale if Redis lost it,
// under the keeper's rule and never around it. Postgres is complete only once the queue has
// drained: rebuilt earlier, Redis would not count the queued orders, sell their units again and
// let their buyers buy again. So with a backlog it refuses (QUEUE_NOT_DRAINED; the keeper
// rebuilds the sale by itself once drained); with none it waits the rebuild delay (publishes on
// their way at the loss land meanwhile), looks at the queue again, and loads. A sale Redis holds
// healthy is left as it is.
func (l *Loader) Rebuild(ctx context.Context, saleID int64, q Backlogger) error {
	st, err := l.stock.State(ctx, saleID)
	if err != nil {
		return shop.Unavailable(err)
	}
	if st.Loaded && !st.Lost && !st.Partial && !st.Mixed {
		return nil
	}
	if err := QueueDrained(ctx, q); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return shop.Unavailable(ctx.Err())
	case <-time.After(l.rebuildDelay):
	}
	if err := QueueDrained(ctx, q); err != nil {
		return err
	}
	if _, err := l.Load(ctx, saleID); err != nil {
		return shop.Unavailable(err)
	}
	return nil
}

// QueueDrained answers QUEUE_NOT_DRAINED while the writer has messages left to write: until
// then, Postgres does not hold every order Redis had counted.
func QueueDrained(ctx context.Context, q Backlogger) error {
	if q == nil {
		q = NoQueue{}
	}
	n, err := q.Backlog(ctx)
	if err != nil {
		return shop.Unavailable(err)
	}
	if n > 0 {
		return &shop.Error{Code: shop.CodeQueueNotDrained, RetryAfter: 2 * time.Second, Message: fmt.Sprintf(
			"Redis lost this sale's stock while orders are still queued for the database (%d messages left): the sale is rebuilt from the database by itself as soon as they are written; rebuilding sooner would sell their units twice. Nothing was changed.", n)}
	}
	return nil
}

// Load reads the sale's snapshot from Postgres and loads it into Redis unless Redis holds it
// healthy already. The caller makes sure the queue has drained when Redis lost data, so that
// Postgres is complete. It reports whether it loaded now.
func (l *Loader) Load(ctx context.Context, saleID int64) (bool, error) {
	return l.load(ctx, saleID, false)
}

// LoadFirst is the warm-up: it loads a sale no reservation of which can exist, at once (Postgres
// is complete whatever the queue holds): one never loaded, or one whose start is still
// startMargin away (Redis refuses every reservation before the start), such as one whose first
// load failed on Redis. Any other sale is left alone: its rebuild is the keeper's, once the
// queue has drained. It reports whether it loaded now.
func (l *Loader) LoadFirst(ctx context.Context, saleID int64) (bool, error) {
	return l.load(ctx, saleID, true)
}

// startMargin: a sale whose start is at least this far away by this instance's clock has not
// started by Redis's either (clocks on one deployment agree far better), so no reservation of it
// can exist.
const startMargin = 5 * time.Second

// BeforeStart tells whether no reservation of a sale starting at startsAt can exist at now.
func BeforeStart(startsAt, now time.Time) bool { return now.Add(startMargin).Before(startsAt) }

func (l *Loader) load(ctx context.Context, saleID int64, firstOnly bool) (bool, error) {
	snap, err := l.db.RebuildSnapshot(ctx, saleID)
	if errors.Is(err, store.ErrRebuildBusy) {
		return false, nil // another instance is loading it
	}
	if err != nil {
		return false, err
	}
	if firstOnly && snap.Epoch > 1 && !BeforeStart(snap.StartsAt, time.Now()) {
		// Loaded before (the snapshot's epoch, bumped under the sale's row lock, says so) and
		// started: the epoch this snapshot took is simply skipped, the load script only
		// compares epochs.
		return false, nil
	}
	var void time.Duration
	if snap.Epoch > 1 {
		void = l.tokenTTL // not the first load: a rebuild
	}
	l.beforeRedis(saleID)
	loaded, err := l.stock.Load(ctx, snap, void)
	if err != nil || !loaded {
		return false, err
	}
	// An edit committed after the snapshot found the sale not in Redis and left it to "the next
	// load": what was just loaded may be the sale before that edit. Fail it closed; the keeper
	// rebuilds it from Postgres.
	if edited, err := l.db.EditedSince(ctx, snap); err != nil || edited {
		if _, lerr := l.stock.MarkLost(context.WithoutCancel(ctx), saleID, 0, ""); lerr != nil {
			return false, errors.Join(err, lerr)
		}
		l.log.Warn("sale edited while it was being loaded into redis: marked for a rebuild", "sale", saleID, "epoch", snap.Epoch, "err", err)
		return false, err
	}
	for _, it := range snap.Items {
		if snap.Left[it] > 0 {
			l.soldOut.Returned(it)
		}
	}
	l.metrics.Rebuilds.Inc()
	left := int64(0)
	for _, n := range snap.Left {
		left += n
	}
	if snap.Epoch > 1 {
		l.log.Warn("sale rebuilt in redis from postgres", "sale", saleID, "epoch", snap.Epoch, "left", left, "buyers", len(snap.Buyers), "returns", len(snap.Gone))
	} else {
		l.log.Info("sale loaded into redis", "sale", saleID, "left", left)
	}
	return true, nil
}

// Returned clears this instance's sold-out flag of an item whose stock rose (a merchant's edit).
func (l *Loader) Returned(itemID int64) { l.soldOut.Returned(itemID) }
