package services

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flashsale/flashsale/store"
)

// WriterConfig are the tunables of the writer.
type WriterConfig struct {
	Workers   int           // batches written concurrently (one goroutine each on the durable consumer)
	Batch     int           // messages fetched at once
	MaxWait   time.Duration // how long a fetch waits for a full batch
	AckWait   time.Duration // redelivery after a writer dies holding messages
	PayWindow time.Duration // payment deadline of each new order
}

// Writer moves reservations from the queue into Postgres: one transaction per batch, acks only
// after commit, refused orders to the dead-letter stream with their units given back.
type Writer struct {
	cfg     WriterConfig
	soldOut *SoldOut
	q       *store.Queue
	db      *store.DB
	stock   *store.Stock
	metrics *Metrics
	log     *slog.Logger

	// AfterCommit, if set, runs after a batch commits and before anything is acknowledged; an
	// error stops the writer there (tests use it to kill the writer at the worst moment).
	AfterCommit func() error
}

// NewWriter returns a writer.
func NewWriter(cfg WriterConfig, q *store.Queue, db *store.DB, stock *store.Stock, soldOut *SoldOut, m *Metrics, log *slog.Logger) *Writer {
	if cfg.Batch <= 0 {
		cfg.Batch = 200
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = time.Second
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = 30 * time.Second
	}
	return &Writer{cfg: cfg, q: q, db: db, stock: stock, soldOut: soldOut, metrics: m, log: log}
}

// errStop ends Run without logging it as a failure.
var errStop = errors.New("writer stopped by hook")

// Run consumes until ctx ends. Failures of Postgres, Redis or NATS are retried with backoff; the
// messages stay in the queue meanwhile. Workers fetch and write batches concurrently, so one
// batch's round trips overlap another's.
func (w *Writer) Run(ctx context.Context) error {
	var cons jetstream.Consumer
	for cons == nil {
		c, err := w.q.WriterConsumer(ctx, w.cfg.AckWait)
		if err == nil {
			cons = c
			break
		}
		w.log.Warn("writer: consumer not ready", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
	var wg sync.WaitGroup
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range w.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w.work(wctx, cons) {
				cancel() // the hook stopped one worker: stop them all, as a crash would
			}
		}()
	}
	wg.Wait()
	return nil
}

// work is one writer loop; it reports whether the AfterCommit hook stopped it.
func (w *Writer) work(ctx context.Context, cons jetstream.Consumer) bool {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		msgs, err := w.fetch(cons)
		if err != nil {
			if ctx.Err() != nil {
				return false
			}
			w.log.Warn("writer: fetch failed", "err", err)
			sleepCtx(ctx, backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		if len(msgs) == 0 {
			continue
		}
		if err := w.process(ctx, msgs); err != nil {
			if errors.Is(err, errStop) {
				return true
			}
			w.log.Warn("writer: batch not written, will retry", "messages", len(msgs), "err", err)
			for _, m := range msgs {
				_ = m.NakWithDelay(backoff)
			}
			sleepCtx(ctx, backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
	}
	return false
}

// fetch takes what is waiting, up to a batch, at once; with nothing waiting it blocks until the
// first message arrives (or MaxWait passes), so an idle writer costs one request per MaxWait and a
// busy one never waits to fill a batch.
func (w *Writer) fetch(cons jetstream.Consumer) ([]jetstream.Msg, error) {
	collect := func(b jetstream.MessageBatch) ([]jetstream.Msg, error) {
		var msgs []jetstream.Msg
		for m := range b.Messages() {
			msgs = append(msgs, m)
		}
		return msgs, b.Error()
	}
	b, err := cons.FetchNoWait(w.cfg.Batch)
	if err != nil {
		return nil, err
	}
	msgs, err := collect(b)
	if len(msgs) > 0 || (err != nil && !errors.Is(err, jetstream.ErrNoMessages)) {
		return msgs, ignoreNoMessages(err)
	}
	b, err = cons.Fetch(1, jetstream.FetchMaxWait(w.cfg.MaxWait))
	if err != nil {
		return nil, err
	}
	msgs, err = collect(b)
	return msgs, ignoreNoMessages(err)
}

func ignoreNoMessages(err error) error {
	if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) {
		return nil
	}
	return err
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// Reasons an order is refused, recorded on the FAILED row and the dead letter.
const (
	reasonNoRoom    = "no room: Postgres holds no unit for it"
	reasonDuplicate = "the shopper already holds a live order of this item"
	reasonRefused   = "refused by a database constraint"
)

// process writes one fetched batch. It returns an error (and acks nothing) when a component
// fails; everything it does is idempotent, so the redelivered batch is simply done again.
func (w *Writer) process(ctx context.Context, msgs []jetstream.Msg) error {
	var orders []store.QueuedOrder
	seen := map[string]bool{}
	for _, m := range msgs {
		var env store.Envelope
		if err := json.Unmarshal(m.Data(), &env); err != nil {
			// Not ours to interpret: park it for a human, never block the queue.
			w.log.Error("writer: undecodable message dead-lettered", "err", err)
			if err := w.q.PublishDead(ctx, fmt.Sprintf("raw-%d", metaSeq(m)), nil, "undecodable: "+err.Error()); err != nil {
				return err
			}
			continue
		}
		for _, o := range env.Orders {
			if !seen[o.OrderID] {
				seen[o.OrderID] = true
				orders = append(orders, o)
			}
		}
	}

	// Claim in Redis: a reservation released because its publish was reported failed must not
	// become an order; every other one is owned by the writer from now on.
	byItem := map[int64][]store.QueuedOrder{}
	for _, o := range orders {
		byItem[o.ItemID] = append(byItem[o.ItemID], o)
	}
	var write []store.NewOrder
	skipped := 0
	for item, os := range byItem {
		ids := make([]string, len(os))
		for i, o := range os {
			ids[i] = o.OrderID
		}
		claimed, err := w.stock.Claim(ctx, item, ids)
		if err != nil {
			return err
		}
		for i, o := range os {
			if !claimed[i] {
				skipped++
				continue
			}
			at := time.UnixMilli(o.ReservedAt)
			write = append(write, store.NewOrder{ID: o.OrderID, ItemID: o.ItemID, UserID: o.UserID, ReservedAt: at, PayBy: at.Add(w.cfg.PayWindow)})
		}
	}
	if skipped > 0 {
		w.log.Info("writer: skipped reservations released before they were written", "count", skipped)
		w.count("skipped_released", skipped)
	}

	inserted, err := w.db.InsertOrders(ctx, write)
	var refusedNow []store.NewOrder
	var refusedReason []string
	if errors.Is(err, store.ErrNoRoom) || errors.Is(err, store.ErrRefused) {
		// Someone in the batch does not fit: write them one by one to find out who.
		inserted = inserted[:0]
		for _, o := range write {
			ids, err := w.db.InsertOrders(ctx, []store.NewOrder{o})
			switch {
			case err == nil:
				inserted = append(inserted, ids...)
			case errors.Is(err, store.ErrNoRoom):
				refusedNow, refusedReason = append(refusedNow, o), append(refusedReason, reasonNoRoom)
			case errors.Is(err, store.ErrRefused):
				refusedNow, refusedReason = append(refusedNow, o), append(refusedReason, reasonRefused)
			default:
				return err
			}
		}
	} else if err != nil {
		return err
	}
	if w.metrics != nil && len(inserted) > 0 {
		w.metrics.WriteBatch.Observe(float64(len(inserted)))
	}

	// Orders not inserted and not refused were already there (a redelivery) or collided with
	// the shopper's other live order.
	done := map[string]bool{}
	for _, id := range inserted {
		done[id] = true
	}
	for _, o := range refusedNow {
		done[o.ID] = true
	}
	var rest []string
	for _, o := range write {
		if !done[o.ID] {
			rest = append(rest, o.ID)
		}
	}
	existing, err := w.db.ExistingOrders(ctx, rest)
	if err != nil {
		return err
	}
	var failedBefore []store.NewOrder
	for _, o := range write {
		if done[o.ID] {
			continue
		}
		status, ok := existing[o.ID]
		switch {
		case !ok:
			refusedNow, refusedReason = append(refusedNow, o), append(refusedReason, reasonDuplicate)
		case status == store.StatusFailed:
			failedBefore = append(failedBefore, o) // a redelivery of a refusal: finish its release
		}
	}

	if w.AfterCommit != nil {
		if err := w.AfterCommit(); err != nil {
			return errStop
		}
	}

	refused := map[string]bool{}
	for i, o := range refusedNow {
		refused[o.ID] = true
		if err := w.refuse(ctx, o, refusedReason[i]); err != nil {
			return err
		}
	}
	for _, o := range failedBefore {
		// A redelivery after a crash in refuse: finish the release by the recorded reason.
		prev, err := w.db.OrderByID(ctx, o.ID)
		if err != nil {
			return err
		}
		reason := reasonRefused
		if prev.Failure != nil {
			reason = *prev.Failure
		}
		out, err := w.releaseRefused(ctx, o, reason)
		if err != nil {
			return err
		}
		if out == store.Released && reason != reasonNoRoom && w.soldOut != nil {
			w.soldOut.Returned(o.ItemID)
		}
	}

	// Written now, or found written by an earlier delivery: leave flight.
	settle := map[int64][]string{}
	for _, o := range write {
		status, was := existing[o.ID]
		if (done[o.ID] && !refused[o.ID]) || (was && status != store.StatusFailed) {
			settle[o.ItemID] = append(settle[o.ItemID], o.ID)
		}
	}
	if err := w.stock.Settle(ctx, settle); err != nil {
		// Harmless: the entries stay claimed; orphan recovery settles them against Postgres.
		w.log.Warn("writer: settle in redis failed", "err", err)
	}
	w.count("written", len(inserted))
	w.count("redelivered", len(existing)-len(failedBefore))
	for _, m := range msgs {
		if err := m.Ack(); err != nil {
			w.log.Warn("writer: ack failed; the batch will be redelivered and skipped as written", "err", err)
		}
	}
	return nil
}

func metaSeq(m jetstream.Msg) uint64 {
	md, err := m.Metadata()
	if err != nil {
		return 0
	}
	return md.Sequence.Stream
}

func (w *Writer) count(result string, n int) {
	if w.metrics != nil && n > 0 {
		w.metrics.Written.WithLabelValues(result).Add(float64(n))
	}
}

// releaseRefused gives back the reservation of an order Postgres refused. The unit returns to
// stock unless Postgres had no room for it (then Redis had promised a unit that does not exist);
// a shopper refused for already holding a live order stays a buyer.
func (w *Writer) releaseRefused(ctx context.Context, o store.NewOrder, reason string) (store.ReleaseOutcome, error) {
	switch reason {
	case reasonNoRoom:
		return w.stock.Release(ctx, o.ItemID, o.ID, false, true)
	case reasonDuplicate:
		return w.stock.ReleaseKeepBuyer(ctx, o.ItemID, o.ID)
	}
	return w.stock.Release(ctx, o.ItemID, o.ID, true, true)
}

// refuse records an order Postgres will not take: a FAILED row (so its shopper sees why), a
// dead letter (so an operator does), and its reservation released. The unit returns to stock
// unless Postgres had no room for it: then Redis had promised a unit that does not exist.
func (w *Writer) refuse(ctx context.Context, o store.NewOrder, reason string) error {
	w.log.Warn("writer: order refused by postgres, dead-lettered", "order", o.ID, "item", o.ItemID, "reason", reason)
	if err := w.db.InsertFailedOrder(ctx, o, reason); err != nil {
		return err
	}
	q := store.QueuedOrder{OrderID: o.ID, ItemID: o.ItemID, UserID: o.UserID, ReservedAt: o.ReservedAt.UnixMilli()}
	if err := w.q.PublishDead(ctx, "dead-"+o.ID, []store.QueuedOrder{q}, reason); err != nil {
		return err
	}
	out, err := w.releaseRefused(ctx, o, reason)
	if err != nil {
		return err
	}
	if out == store.Released && reason != reasonNoRoom && w.soldOut != nil {
		w.soldOut.Returned(o.ItemID)
	}
	w.count("dead_lettered", 1)
	if w.metrics != nil {
		w.metrics.Released.WithLabelValues("refused").Inc()
	}
	return nil
}
