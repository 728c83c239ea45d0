package services

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/flashsale/flashsale/store"
)

// Loader (re)builds a sale's Redis state from Postgres, the source of truth: at warm-up, and after
// Redis lost data. Every instance may run it at once: the load script refuses a rebuild of an
// older snapshot, and does nothing while the sale is loaded and healthy.
type Loader struct {
	db       *store.DB
	stock    *store.Stock
	soldOut  *SoldOut
	metrics  *Metrics
	log      *slog.Logger
	tokenTTL time.Duration

	beforeRedis func(saleID int64) // tests only: runs between reading the snapshot and loading it
}

// SetBeforeRedisLoad makes every load call fn between reading its Postgres snapshot and writing
// it to Redis (tests use it to edit the sale in that window).
func (l *Loader) SetBeforeRedisLoad(fn func(saleID int64)) { l.beforeRedis = fn }

// NewLoader returns a Loader; tokenTTL is the purchase tokens' lifetime (a rebuild after data
// loss voids the tokens issued before it, since Redis may have lost their use marks).
func NewLoader(db *store.DB, stock *store.Stock, soldOut *SoldOut, m *Metrics, log *slog.Logger, tokenTTL time.Duration) *Loader {
	return &Loader{db: db, stock: stock, soldOut: soldOut, metrics: m, log: log, tokenTTL: tokenTTL}
}

// Load reads the sale's snapshot from Postgres and loads it into Redis unless Redis holds it
// healthy already. The caller makes sure the queue has drained when Redis lost data, so that
// Postgres is complete. It reports whether it loaded now.
func (l *Loader) Load(ctx context.Context, saleID int64) (bool, error) {
	return l.load(ctx, saleID, false)
}

// LoadFirst is the warm-up: it loads a sale that was never loaded, at once (no reservation of it
// can exist, so Postgres is complete whatever the queue holds). A sale loaded before is left
// alone: its rebuild is the keeper's, once the queue has drained. It reports whether it loaded
// now.
func (l *Loader) LoadFirst(ctx context.Context, saleID int64) (bool, error) {
	return l.load(ctx, saleID, true)
}

func (l *Loader) load(ctx context.Context, saleID int64, firstOnly bool) (bool, error) {
	snap, err := l.db.RebuildSnapshot(ctx, saleID)
	if errors.Is(err, store.ErrRebuildBusy) {
		return false, nil // another instance is loading it
	}
	if err != nil {
		return false, err
	}
	if firstOnly && snap.Epoch > 1 {
		// Loaded before (the snapshot's epoch, bumped under the sale's row lock, says so): the
		// epoch this snapshot took is simply skipped, the load script only compares epochs.
		return false, nil
	}
	var void time.Duration
	if snap.Epoch > 1 {
		void = l.tokenTTL // not the first load: a rebuild
	}
	if l.beforeRedis != nil {
		l.beforeRedis(saleID)
	}
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
	if l.metrics != nil {
		l.metrics.Rebuilds.Inc()
	}
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
