package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/flashsale/flashsale/services/faults"
	"github.com/flashsale/flashsale/services/metrics"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// KeeperConfig are the tunables of the background jobs.
type KeeperConfig struct {
	Interval          time.Duration // how often the jobs run
	OrphanAge         time.Duration // a reservation older than this that never reached the queue is returned
	ReconcileInterval time.Duration // how often the lease holder reconciles Redis with Postgres
	RebuildDelay      time.Duration // how long a sale stays unhealthy before its rebuild (publishes in flight land meanwhile)
	WarmAhead         time.Duration // a sale is loaded into Redis this long before its start (0: shop.DefaultWarmAhead)
	Instance          string        // names this instance in the reconciliation lease
}

// DrawPass closes the fair-start draws whose window has passed (draw.Closer).
type DrawPass interface {
	Pass(ctx context.Context) error
}

type noDraws struct{}

func (noDraws) Pass(context.Context) error { return nil }

// Keeper runs the background jobs that keep every unit accounted for. Every instance runs them
// at once, safely; the queue they judge "drained" by is the shared JetStream stream.
//   - warm-up and rebuild: loads a sale into Redis when Redis does not hold it or lost data for
//     it, once the queue has drained, so Postgres is complete;
//   - loss detection: a Redis reservation counter behind what Postgres holds fails the sale closed;
//   - payment expiry: PENDING orders past their deadline become EXPIRED (Postgres first, with a
//     durable return record), and their units go back in Redis;
//   - orphan recovery: returns reservations that never reached the queue (an instance died
//     between reserve and publish) once the writer has provably processed everything older;
//   - reconciliation: under a lease, one instance at a time compares Redis with Postgres;
//   - fair-start draws: decided and applied once their window has passed (services/draw).
type Keeper struct {
	cfg       KeeperConfig
	soldOut   SoldOutFlags
	db        DB
	stock     Stock
	q         OrderQueue
	loader    *Loader
	returns   *Returns
	reconcile *Reconciler
	draws     DrawPass
	metrics   *metrics.Metrics
	log       *slog.Logger
	now       func() time.Time

	lastReconcile  time.Time
	unhealthySince map[int64]time.Time // sale -> when this keeper first saw Redis not hold it healthy
	partial        map[int64]bool      // sharded sales seen held by some shards only at the last pass
}

// KeeperDeps are what the keeper's jobs work with.
type KeeperDeps struct {
	DB        DB
	Stock     Stock
	Queue     OrderQueue
	Loader    *Loader
	Returns   *Returns
	Reconcile *Reconciler
	Draws     DrawPass // closes fair-start draws whose window has passed (nil: none closed here)
	SoldOut   SoldOutFlags
	Metrics   *metrics.Metrics
	Log       *slog.Logger
	Now       func() time.Time
}

// NewKeeper returns a Keeper.
func NewKeeper(cfg KeeperConfig, d KeeperDeps) *Keeper {
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.OrphanAge <= 0 {
		cfg.OrphanAge = 45 * time.Second
	}
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = 5 * time.Second
	}
	if cfg.WarmAhead <= 0 {
		cfg.WarmAhead = shop.DefaultWarmAhead
	}
	if d.Draws == nil {
		d.Draws = noDraws{}
	}
	return &Keeper{cfg: cfg, draws: d.Draws, db: d.DB, stock: d.Stock, q: d.Queue, loader: d.Loader, returns: d.Returns, reconcile: d.Reconcile,
		soldOut: d.SoldOut, metrics: metrics.Or(d.Metrics), log: d.Log, now: d.Now, unhealthySince: map[int64]time.Time{}, partial: map[int64]bool{}}
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

// backlogUnknown stands for the queue's depth when NATS did not answer (or this instance's queue
// is not to be trusted: its embedded NATS registration lapsed): every job that waits for a
// drained queue (rebuild, orphan recovery, reconciliation's repairs) waits.
const backlogUnknown = math.MaxUint64

// Once runs every job once; a job that fails does not keep the others from running. A queue that
// does not answer stops only the jobs that wait for it to drain: payment expiry and unit returns
// (Postgres and Redis only) go on.
func (k *Keeper) Once(ctx context.Context) error {
	backlog, qerr := k.q.Backlog(ctx)
	if qerr != nil {
		backlog = backlogUnknown
		qerr = fmt.Errorf("queue depth unknown (rebuilds, orphan recovery and repairs wait): %w", qerr)
	} else {
		k.metrics.Backlog.Set(float64(backlog))
	}
	var err error
	// Every sale not ended over an hour ago, however many: a merchant's sale is never left out
	// because others have more.
	var ids []int64
	var sales []saleToWarm
	err = k.db.EachSaleEndingAfter(ctx, k.now().Add(-time.Hour), func(page []shop.Sale) error {
		for _, s := range page {
			k.stock.RememberShards(s.ID, s.StockShards)
			ids = append(ids, s.ID)
			sales = append(sales, saleToWarm{id: s.ID, startsAt: s.StartsAt, epoch: s.Epoch})
		}
		return nil
	})
	if err != nil {
		return err
	}
	errs := []error{
		qerr,
		k.completeTransfers(ctx, ids),
		k.warm(ctx, sales, backlog),
		k.expire(ctx),
		k.returns.Drain(ctx),
		k.recoverOrphans(ctx, ids),
		k.draws.Pass(ctx),
	}
	if k.now().Sub(k.lastReconcile) >= k.cfg.ReconcileInterval && qerr == nil {
		k.lastReconcile = k.now()
		errs = append(errs, k.reconcilePass(ctx, ids, backlog))
	}
	return errors.Join(errs...)
}

// saleToWarm is what warm needs to know of a sale.
type saleToWarm struct {
	id       int64
	startsAt time.Time
	epoch    int64 // Postgres's redis_epoch as listed: 0 when the sale was never loaded
}

// warm loads each sale Redis does not hold healthy once its start is WarmAhead away or closer: a
// sale never loaded at once (the warm-up), one Redis lost once the queue has drained (it must be
// rebuilt from a complete Postgres). It also detects a Redis that went back in time: its
// reservation counter behind the highest one Postgres holds.
func (k *Keeper) warm(ctx context.Context, sales []saleToWarm, backlog uint64) error {
	// One sale's failure (its Redis node down, say) does not keep the others from being warmed.
	var errs []error
	for _, s := range sales {
		if err := k.warmOne(ctx, s, backlog); err != nil {
			errs = append(errs, fmt.Errorf("warm sale %d: %w", s.id, err))
		}
	}
	return errors.Join(errs...)
}

// warmOne is warm for one sale.
func (k *Keeper) warmOne(ctx context.Context, s saleToWarm, backlog uint64) error {
	sale := s.id
	st, healthy, err := k.checkHealth(ctx, sale)
	if err != nil || healthy {
		return err
	}
	if !shop.DueForWarmUp(s.startsAt, k.now(), k.cfg.WarmAhead) {
		delete(k.unhealthySince, sale)
		return nil // loaded WarmAhead before its start (or at once by the merchant's warm button)
	}
	if (s.epoch == 0 && !st.Loaded) || BeforeStart(s.startsAt, k.now()) {
		// The warm-up: never loaded, or not started (a first load that failed on Redis, a loss
		// before the start), so no reservation of it exists anywhere and Postgres is complete;
		// no need to wait for the queue (another sale's rush may keep it busy).
		_, err := k.loader.LoadFirst(ctx, sale)
		return err
	}
	return k.rebuild(ctx, sale, backlog)
}

// checkHealth reads how Redis holds a sale; healthy when it holds it and no shard's counter is
// behind Postgres. One found behind is marked lost: the sale fails closed until rebuilt.
func (k *Keeper) checkHealth(ctx context.Context, sale int64) (_ store.SaleState, healthy bool, _ error) {
	// Postgres first: every seq it holds was issued by Redis before this read, so a healthy
	// Redis read after it can only be ahead.
	pg, err := k.db.MaxSeqOfSale(ctx, sale)
	if err != nil {
		return store.SaleState{}, false, err
	}
	st, err := k.stock.State(ctx, sale)
	if err != nil {
		return st, false, err
	}
	behind, err := k.shardsBehind(ctx, sale, st, pg)
	if err != nil || !st.Loaded || st.Lost {
		return st, false, err
	}
	if !behind {
		delete(k.unhealthySince, sale)
		return st, true, nil
	}
	marked, err := k.stock.MarkLost(ctx, sale, 0, st.SeqRaw)
	if err != nil || !marked {
		return st, !marked && err == nil, err
	}
	k.log.Error("keeper: redis's reservation counter is behind postgres: redis lost data; the sale fails closed until rebuilt",
		"sale", sale, "redis", st.Seq, "postgres", pg)
	k.metrics.RedisLoss.WithLabelValues("keeper").Inc()
	return st, false, nil
}

// rebuild (re)builds a sale Redis does not hold, or lost data for, from a complete Postgres.
// Reservations made just before the loss may still be on their way to the queue (a publish waits
// up to its timeout), so the rebuild waits that long after the sale was first seen unhealthy,
// then for the queue to drain, read after that wait.
func (k *Keeper) rebuild(ctx context.Context, sale int64, backlog uint64) error {
	since, seen := k.unhealthySince[sale]
	if !seen {
		since = k.now()
		k.unhealthySince[sale] = since
	}
	if k.now().Sub(since) < k.cfg.RebuildDelay {
		return nil
	}
	if backlog == backlogUnknown {
		k.log.Warn("keeper: sale not healthy in redis; the queue's depth is unknown, so its rebuild waits", "sale", sale)
		return nil
	}
	if backlog > 0 {
		k.log.Warn("keeper: sale not healthy in redis; waiting for the queue to drain before rebuilding", "sale", sale, "backlog", backlog)
		return nil
	}
	if now, err := k.q.Backlog(ctx); err != nil || now > 0 {
		return nil
	}
	if _, err := k.loader.Load(ctx, sale); err != nil {
		return err
	}
	if st, err := k.stock.State(ctx, sale); err == nil && st.Loaded && !st.Lost {
		delete(k.unhealthySince, sale)
	}
	return nil
}

// shardsBehind tells whether Redis's reservation counter is behind the highest seq Postgres
// holds (pg): for a sharded sale, whether any shard's counter is behind that shard's highest seq
// in Postgres. A sharded sale with one shard lost is failed closed as a whole here (every shard
// marked lost), so the others stop selling until the rebuild; so is one whose transfer between
// shards lost a step (a shard's seq below what another shard recorded of it: store.TransferSeqLoss).
// Shards missing or at different epochs are a load under way (it writes the shards one by one,
// in milliseconds) or a load that died halfway: only seen again at the next pass are they
// marked lost. Marking them at once would mark the fresh shards of another instance's load, its
// post-check would fail, and the sale would wait another RebuildDelay per collision.
func (k *Keeper) shardsBehind(ctx context.Context, sale int64, st store.SaleState, pg int64) (bool, error) {
	if st.Shards <= 1 {
		return pg > st.Seq, nil
	}
	seenPartial := k.partial[sale]
	loading := st.Partial || st.Mixed
	if loading {
		k.partial[sale] = true
	} else {
		delete(k.partial, sale)
	}
	if loading && !seenPartial {
		return false, nil // judged at the next pass
	}
	if loading || (st.Lost && st.Loaded) {
		if _, err := k.stock.MarkLost(ctx, sale, 0, ""); err != nil {
			return false, err
		}
		return false, nil
	}
	if !st.Loaded {
		return false, nil
	}
	pgs, err := k.db.MaxSeqOfShards(ctx, sale, st.Shards)
	if err != nil {
		return false, err
	}
	seqs := st.ShardSeqs()
	for sh, m := range pgs {
		if sh < len(seqs) && m > seqs[sh] {
			k.log.Error("keeper: a shard's reservation counter is behind postgres", "sale", sale, "shard", sh, "redis", seqs[sh], "postgres", m)
			return true, nil
		}
	}
	if st.Lost {
		return false, nil
	}
	loss, found, err := k.stock.TransferSeqLoss(ctx, sale, st.Shards)
	if err != nil || !found {
		return false, err
	}
	// Marked here without the seq guard: the transfers' own steps move the seqs, and a shard
	// that lost writes can catch up with what was recorded of it by selling.
	marked, err := k.stock.MarkLost(ctx, sale, 0, "")
	if err != nil || !marked {
		return false, err
	}
	k.log.Error("keeper: a transfer between shards lost a step (a shard's seq is below what another shard recorded of it): redis lost data; the sale fails closed until rebuilt",
		"sale", sale, "shard", loss.Shard, "seq", loss.Seq, "recorded_by", loss.SeenBy, "recorded", loss.Recorded)
	k.metrics.RedisLoss.WithLabelValues("keeper").Inc()
	return false, nil
}

// completeTransfers finishes the stock transfers between shards left half-done (a process killed
// between taking units from a shard and adding them to another): no unit stays stranded in a
// transfer log. A live transfer completed here at the same time is added once all the same.
func (k *Keeper) completeTransfers(ctx context.Context, sales []int64) error {
	var errs []error // one sale's Redis node down does not stop the others'
	for _, sale := range sales {
		n, err := k.stock.CompleteTransfers(ctx, sale)
		if err != nil {
			errs = append(errs, fmt.Errorf("transfers of sale %d: %w", sale, err))
			continue
		}
		if n > 0 {
			k.log.Info("keeper: stock transfers between shards completed", "sale", sale, "count", n)
			k.metrics.Transfers.Add(float64(n))
		}
	}
	return errors.Join(errs...)
}

// expire moves PENDING orders past their payment deadline to EXPIRED in Postgres (with a durable
// return record each, in the same transaction), then gives their units back in Redis.
func (k *Keeper) expire(ctx context.Context) error {
	const batch = 500
	for range 20 {
		rets, err := k.db.ExpireDue(ctx, batch)
		if err != nil {
			return err
		}
		if len(rets) == 0 {
			return nil
		}
		k.metrics.Expired.Add(float64(len(rets)))
		k.log.Info("keeper: orders expired", "count", len(rets))
		k.returns.Apply(ctx, rets)
		if len(rets) < batch {
			return nil
		}
	}
	return nil
}

// recoverOrphans returns unclaimed reservations older than OrphanAge by Redis's clock. Their
// publish ended long ago (a slow publish re-checks ownership before answering 202), so if the
// writer has acknowledged every message in the shared queue after we listed them, none of them
// is in the queue: each would have been claimed.
func (k *Keeper) recoverOrphans(ctx context.Context, sales []int64) error {
	var cands []shop.OrderRef
	var errs []error // one sale's Redis node down does not stop the others'
	for _, sale := range sales {
		// Each reservation's age by the clock of the Redis holding it (a cluster's nodes each
		// have their own clock).
		flight, err := k.stock.InFlightOlder(ctx, sale, k.cfg.OrphanAge)
		if err != nil {
			errs = append(errs, fmt.Errorf("in flight of sale %d: %w", sale, err))
			continue
		}
		var claimedOld []string
		for _, r := range flight {
			if r.Claimed {
				claimedOld = append(claimedOld, r.OrderID)
				continue
			}
			cands = append(cands, shop.OrderRef{SaleID: sale, ItemID: r.ItemID, UserID: r.UserID, OrderID: r.OrderID})
		}
		if err := k.settleWritten(ctx, sale, claimedOld); err != nil {
			errs = append(errs, fmt.Errorf("settle sale %d: %w", sale, err))
		}
	}
	if len(cands) == 0 {
		return errors.Join(errs...)
	}
	backlog, err := k.q.Backlog(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if backlog > 0 {
		return errors.Join(errs...) // the candidates: next pass
	}
	for _, c := range cands {
		out, err := k.stock.Release(ctx, c, shop.ReleaseUnsold)
		if err != nil {
			errs = append(errs, fmt.Errorf("release order %s: %w", c.OrderID, err))
			continue
		}
		if out == store.Released {
			k.soldOut.Returned(c.ItemID)
			k.log.Warn("keeper: orphan reservation returned to stock", "sale", c.SaleID, "item", c.ItemID, "order", c.OrderID)
			k.metrics.Released.WithLabelValues("orphan").Inc()
		}
	}
	return errors.Join(errs...)
}

// settleWritten clears claimed entries whose order Postgres holds (the writer's settle failed).
func (k *Keeper) settleWritten(ctx context.Context, saleID int64, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	have, err := k.db.ExistingOrders(ctx, ids)
	if err != nil {
		return err
	}
	var done []string
	for id, st := range have {
		if st != shop.StatusFailed {
			done = append(done, id)
		}
	}
	return k.stock.Settle(ctx, map[int64][]string{saleID: done})
}

// reconcilePass takes (or renews) the reconciliation lease and, as its holder, reconciles.
func (k *Keeper) reconcilePass(ctx context.Context, sales []int64, backlog uint64) error {
	lease, err := k.stock.ReconcileLease(ctx, k.cfg.Instance, 3*k.cfg.ReconcileInterval)
	if err != nil || lease == nil {
		return err
	}
	faults.Reached(faults.LeaseHeld)
	k.reconcile.Pass(ctx, sales, lease.Fence, backlog == 0)
	return nil
}
