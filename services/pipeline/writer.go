package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/flashsale/flashsale/services/faults"
	"github.com/flashsale/flashsale/services/metrics"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// OrderQueue is what the writer and the background jobs need of the durable queue. The services
// own this interface; store.Queue implements it over NATS JetStream.
type OrderQueue interface {
	FetchOrders(ctx context.Context, max int, wait, linger time.Duration) ([]store.Delivery, error)
	PublishDead(ctx context.Context, msgID string, orders []store.QueuedOrder, reason string) error
	Backlog(ctx context.Context) (uint64, error)
}

// WriterConfig are the tunables of the writer.
type WriterConfig struct {
	Workers int           // batches written concurrently (one goroutine each on the durable consumer)
	Batch   int           // messages fetched at once
	MaxWait time.Duration // how long a fetch waits for a first message
	// Linger: a fetch that found fewer than Batch messages waits this long for more (0: none),
	// so that a steady trickle is written in fewer, larger transactions.
	Linger time.Duration
	// AckWait is the consumer's ack wait: a writer that dies holding a batch delays it by this
	// much at most (another instance's writer gets it then). A live writer keeps its batch with
	// in-progress acks every third of it, however long Postgres takes.
	AckWait time.Duration
}

// Writer moves reservations from the queue into Postgres: one transaction per batch, acks only
// after commit, refused orders to the dead-letter stream with their units given back.
type Writer struct {
	cfg     WriterConfig
	soldOut SoldOutFlags
	q       OrderQueue
	db      DB
	stock   Stock
	metrics *metrics.Metrics
	log     *slog.Logger

	// AfterCommit, if set, runs after a batch commits and before anything is acknowledged; an
	// error stops the writer there (tests use it to kill the writer at the worst moment).
	AfterCommit func() error

	rate *Throughput // the orders this writer takes off the queue per second
}

// NewWriter returns a writer.
func NewWriter(cfg WriterConfig, q OrderQueue, db DB, stock Stock, soldOut SoldOutFlags, m *metrics.Metrics, log *slog.Logger) *Writer {
	if cfg.Batch <= 0 {
		cfg.Batch = 200
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = time.Second
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	if soldOut == nil {
		soldOut = noFlags{} // no local flags to clear
	}
	return &Writer{cfg: cfg, q: q, db: db, stock: stock, soldOut: soldOut, metrics: metrics.Or(m), log: log,
		rate: NewThroughput(cfg.Workers, nil)}
}

// errStop ends Run without logging it as a failure.
var errStop = errors.New("writer stopped by hook")

// Run consumes until ctx ends. Failures of Postgres, Redis or NATS are retried with backoff; the
// messages stay in the queue meanwhile. Workers fetch and write batches concurrently, so one
// batch's round trips overlap another's.
func (w *Writer) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range w.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w.work(wctx) {
				cancel() // the hook stopped one worker: stop them all, as a crash would
			}
		}()
	}
	wg.Wait()
	return nil
}

// work is one writer loop; it reports whether the AfterCommit hook stopped it.
func (w *Writer) work(ctx context.Context) bool {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		msgs, err := w.q.FetchOrders(ctx, w.cfg.Batch, w.cfg.MaxWait, w.cfg.Linger)
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
		stopKeeping := w.keepInProgress(msgs)
		err = w.process(ctx, msgs)
		stopKeeping()
		if err != nil {
			if errors.Is(err, errStop) {
				return true
			}
			w.metrics.WriterRetries.WithLabelValues(store.ErrorCause(err)).Inc()
			if store.IsAnswered(err) && len(msgs) > 1 {
				// A component refused the batch itself: find the message to blame, one at a time.
				for _, m := range msgs {
					if err := w.process(ctx, []store.Delivery{m}); err != nil {
						if errors.Is(err, errStop) {
							return true
						}
						w.fail(ctx, m, err, backoff)
					}
				}
				continue
			}
			w.log.Warn("writer: batch not written, will retry", "messages", len(msgs), "err", err)
			for _, m := range msgs {
				w.fail(ctx, m, err, backoff)
			}
			sleepCtx(ctx, backoff)
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
	}
	return false
}

// keepInProgress tells the queue, every third of the ack wait, that the batch is still being
// written, until the returned function is called: a slow Postgres never gets a live writer's
// batch redelivered to another one, and a dead writer's batch is redelivered after one ack wait.
func (w *Writer) keepInProgress(msgs []store.Delivery) (stop func()) {
	if w.cfg.AckWait <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(w.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				for _, m := range msgs {
					_ = m.InProgress()
				}
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// maxDeliveries bounds how often a message that Redis or Postgres refuses (an error answer, not
// an outage) is tried before it is dead-lettered. Outages are retried for as long as they last.
const maxDeliveries = 5

// fail hands a message back for a later try, or dead-letters it once it has been refused
// maxDeliveries times: its reservations are released and it is counted, so it never holds the
// backlog above zero (and warm-up and recovery, which wait for a drained queue) forever.
func (w *Writer) fail(ctx context.Context, m store.Delivery, err error, backoff time.Duration) {
	if !store.IsAnswered(err) || m.NumDelivered() < maxDeliveries {
		_ = m.Nak(backoff)
		return
	}
	reason := fmt.Sprintf("%s after %d deliveries: %v", reasonPoison, m.NumDelivered(), err)
	w.log.Error("writer: message refused on every delivery, dead-lettered", "seq", m.Seq(), "err", err)
	var env store.Envelope
	_ = json.Unmarshal(m.Data(), &env)
	// An order an earlier delivery did write stays: only the unwritten ones are given back.
	ids := make([]string, len(env.Orders))
	for i, o := range env.Orders {
		ids[i] = o.OrderID
	}
	written, xerr := w.db.ExistingOrders(ctx, ids)
	if xerr != nil {
		_ = m.Nak(backoff)
		return
	}
	if perr := w.q.PublishDead(ctx, fmt.Sprintf("poison-%d", m.Seq()), env.Orders, reason); perr != nil {
		_ = m.Nak(backoff)
		return
	}
	for _, o := range env.Orders {
		if st, ok := written[o.OrderID]; ok && st != shop.StatusFailed {
			continue
		}
		if _, rerr := w.releaseRefused(ctx, newOrderOf(o), reason); rerr != nil {
			w.log.Warn("writer: dead-lettered reservation not released; orphan recovery will", "order", o.OrderID, "err", rerr)
		}
	}
	w.count("dead_lettered", max(len(env.Orders), 1))
	_ = m.Ack()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// Reasons an order is not written, recorded on its FAILED row and its dead letter.
const (
	reasonNoRoom    = "no room: Postgres holds no unit for it"
	reasonDuplicate = "the shopper already holds a live order in this sale"
	reasonRefused   = "refused by a database constraint"
	reasonReleased  = "not confirmed in time: the reservation was released before it was written, nothing was sold"
	reasonPoison    = "cannot be written"
)

// batch is one fetched batch on its way through the writer's steps.
type batch struct {
	orders   []store.QueuedOrder
	entries  []store.NewEntry // fair-start draw entries: written ENTERED, no unit claimed
	write    []store.NewOrder
	unknown  map[string]bool // Redis did not know the order (claim verdict ClaimUnknown)
	released []store.NewOrder
	inserted map[string]bool
	refused  []refusal
	existing map[string]string // orders found already written (a redelivery), by status
}

type refusal struct {
	order  store.NewOrder
	reason string
}

// process writes one fetched batch, in named steps. It returns an error (and acks nothing) when a
// component fails; every step is idempotent, so the redelivered batch is simply done again.
func (w *Writer) process(ctx context.Context, msgs []store.Delivery) error {
	started := time.Now()
	b := &batch{}
	if err := w.decode(ctx, msgs, b); err != nil {
		return err
	}
	if _, err := w.db.InsertEntries(ctx, b.entries); err != nil {
		return err
	}
	if err := w.claim(ctx, b); err != nil {
		return err
	}
	faults.Reached(faults.WriterBeforeCommit)
	if err := w.insert(ctx, b); err != nil {
		return err
	}
	if err := w.classify(ctx, b); err != nil {
		return err
	}
	faults.Reached(faults.WriterAfterCommit)
	if w.AfterCommit != nil {
		if err := w.AfterCommit(); err != nil {
			return errStop
		}
	}
	if err := w.finishRefusals(ctx, b); err != nil {
		return err
	}
	if err := w.recordReleased(ctx, b); err != nil {
		return err
	}
	w.markUnknownWritten(ctx, b)
	w.settle(ctx, b)
	w.count("written", len(b.inserted))
	w.count("entered", len(b.entries))
	w.count("redelivered", len(b.existing))
	w.rate.Observe(len(b.orders), time.Since(started))
	for _, m := range msgs {
		if err := m.Ack(); err != nil {
			w.log.Warn("writer: ack failed; the batch will be redelivered and skipped as written", "err", err)
		}
	}
	return nil
}

// decode reads the envelopes; a message that is not one is dead-lettered as it is (it is not
// ours to interpret, and it must never block the queue).
func (w *Writer) decode(ctx context.Context, msgs []store.Delivery, b *batch) error {
	seen := map[string]bool{}
	for _, m := range msgs {
		var env store.Envelope
		if err := json.Unmarshal(m.Data(), &env); err != nil {
			w.log.Error("writer: undecodable message dead-lettered", "seq", m.Seq(), "err", err)
			if err := w.q.PublishDead(ctx, fmt.Sprintf("raw-%d", m.Seq()), nil, "undecodable: "+err.Error()); err != nil {
				return err
			}
			w.count("dead_lettered", 1)
			continue
		}
		for _, o := range env.Orders {
			switch {
			case seen[o.OrderID]:
			case o.Draw:
				b.entries = append(b.entries, store.NewEntry{ID: o.OrderID, SaleID: o.SaleID, ItemID: o.ItemID, UserID: o.UserID,
					EnteredAt: time.UnixMilli(o.ReservedAt), Seq: o.Seq})
			default:
				b.orders = append(b.orders, o)
			}
			seen[o.OrderID] = true
		}
	}
	return nil
}

func newOrderOf(o store.QueuedOrder) store.NewOrder {
	return store.NewOrder{ID: o.OrderID, SaleID: o.SaleID, ItemID: o.ItemID, UserID: o.UserID, Seq: o.Seq, ReservedAt: time.UnixMilli(o.ReservedAt)}
}

// claim takes ownership of the batch's reservations in Redis, one call per sale. A reservation
// whose unit already went back (its publish was reported failed) is not written; one Redis does
// not know is written all the same (Postgres constraints decide), and noted.
func (w *Writer) claim(ctx context.Context, b *batch) error {
	bySale := map[int64][]store.QueuedOrder{}
	for _, o := range b.orders {
		bySale[o.SaleID] = append(bySale[o.SaleID], o)
	}
	b.unknown = map[string]bool{}
	for sale, os := range bySale {
		items := make([]store.ClaimItem, len(os))
		for i, o := range os {
			items[i] = store.ClaimItem{OrderID: o.OrderID, Seq: o.Seq, UserID: o.UserID}
		}
		verdicts, err := w.stock.Claim(ctx, sale, items)
		if err != nil {
			return err
		}
		for i, o := range os {
			switch verdicts[i] {
			case store.ClaimGone:
				b.released = append(b.released, newOrderOf(o))
			case store.ClaimUnknown:
				b.unknown[o.OrderID] = true
				b.write = append(b.write, newOrderOf(o))
			default:
				b.write = append(b.write, newOrderOf(o))
			}
		}
	}
	if len(b.released) > 0 {
		w.log.Info("writer: skipped reservations released before they were written", "count", len(b.released))
		w.count("skipped_released", len(b.released))
	}
	return nil
}

// insert writes the batch in one transaction. If Postgres refuses something in it (no room, a
// constraint, data it can never take), the orders are written one by one to find out which.
func (w *Writer) insert(ctx context.Context, b *batch) error {
	b.inserted = map[string]bool{}
	ids, err := w.db.InsertOrders(ctx, b.write)
	if err == nil {
		for _, id := range ids {
			b.inserted[id] = true
		}
		if len(ids) > 0 {
			w.metrics.WriteBatch.Observe(float64(len(ids)))
		}
		return nil
	}
	if !errors.Is(err, store.ErrNoRoom) && !errors.Is(err, store.ErrRefused) && !store.IsPermanent(err) {
		return err // Postgres unreachable, restarting, a lost race: retry the whole batch
	}
	for _, o := range b.write {
		ids, err := w.db.InsertOrders(ctx, []store.NewOrder{o})
		switch {
		case err == nil:
			for _, id := range ids {
				b.inserted[id] = true
			}
		case errors.Is(err, store.ErrNoRoom):
			b.refused = append(b.refused, refusal{o, reasonNoRoom})
		case errors.Is(err, store.ErrRefused):
			b.refused = append(b.refused, refusal{o, reasonRefused})
		case store.IsPermanent(err):
			w.log.Error("writer: order Postgres can never write, dead-lettered", "order", o.ID, "err", err)
			b.refused = append(b.refused, refusal{o, reasonPoison + ": " + err.Error()})
		default:
			return err
		}
	}
	return nil
}

// classify finds out what became of the orders neither inserted nor refused: already written by
// an earlier delivery, or refused by the one-live-order-per-shopper index.
func (w *Writer) classify(ctx context.Context, b *batch) error {
	refused := map[string]bool{}
	for _, r := range b.refused {
		refused[r.order.ID] = true
	}
	var rest []string
	for _, o := range b.write {
		if !b.inserted[o.ID] && !refused[o.ID] {
			rest = append(rest, o.ID)
		}
	}
	existing, err := w.db.ExistingOrders(ctx, rest)
	if err != nil {
		return err
	}
	b.existing = existing
	for _, o := range b.write {
		if b.inserted[o.ID] || refused[o.ID] {
			continue
		}
		if _, ok := existing[o.ID]; !ok {
			b.refused = append(b.refused, refusal{o, reasonDuplicate})
		}
	}
	return nil
}

// finishRefusals records each refused order (a FAILED row, a dead letter) and gives back its
// reservation; a redelivered refusal (found FAILED) is finished by its recorded reason.
func (w *Writer) finishRefusals(ctx context.Context, b *batch) error {
	for _, r := range b.refused {
		if err := w.refuse(ctx, r.order, r.reason); err != nil {
			return err
		}
	}
	for _, o := range b.write {
		if b.existing[o.ID] != shop.StatusFailed {
			continue
		}
		prev, err := w.db.OrderByID(ctx, o.ID)
		if err != nil {
			return err
		}
		reason := reasonRefused
		if prev.Failure != nil {
			reason = *prev.Failure
		}
		if reason == reasonReleased {
			continue
		}
		if _, err := w.releaseRefused(ctx, o, reason); err != nil {
			return err
		}
	}
	return nil
}

// recordReleased writes a FAILED row for each reservation released before it was written, so the
// ledger holds every order the queue carried and its shopper can see what became of it.
func (w *Writer) recordReleased(ctx context.Context, b *batch) error {
	for _, o := range b.released {
		if _, err := w.db.InsertFailedOrder(ctx, o, reasonReleased); err != nil {
			if store.IsPermanent(err) {
				w.log.Warn("writer: released order not recorded", "order", o.ID, "err", err)
				continue
			}
			return err
		}
	}
	return nil
}

// markUnknownWritten fails a sale closed when the writer inserted an order Redis did not know:
// a healthy Redis holds every reservation in flight until it is written, so Redis lost data
// (restarted from an old append-only file, or a replica promoted). The sale is rebuilt from
// Postgres once the queue drains.
func (w *Writer) markUnknownWritten(ctx context.Context, b *batch) {
	sales := map[int64]bool{}
	for _, o := range b.write {
		if b.unknown[o.ID] && b.inserted[o.ID] {
			sales[o.SaleID] = true
		}
	}
	for sale := range sales {
		marked, err := w.stock.MarkLost(ctx, sale, 0, "")
		if err != nil {
			w.log.Warn("writer: could not mark the sale lost; reconciliation will", "sale", sale, "err", err)
			continue
		}
		if marked {
			w.log.Error("writer: wrote orders Redis did not know: Redis lost data; the sale fails closed until rebuilt", "sale", sale)
			w.metrics.RedisLoss.WithLabelValues("unknown_order").Inc()
		}
	}
}

// settle removes the written orders from flight. A failure is harmless: the entries stay claimed
// and orphan recovery settles them against Postgres.
func (w *Writer) settle(ctx context.Context, b *batch) {
	refused := map[string]bool{}
	for _, r := range b.refused {
		refused[r.order.ID] = true
	}
	bySale := map[int64][]string{}
	for _, o := range b.write {
		status, was := b.existing[o.ID]
		if (b.inserted[o.ID] && !refused[o.ID]) || (was && status != shop.StatusFailed) {
			bySale[o.SaleID] = append(bySale[o.SaleID], o.ID)
		}
	}
	if err := w.stock.Settle(ctx, bySale); err != nil {
		w.log.Warn("writer: settle in redis failed", "err", err)
	}
}

func (w *Writer) count(result string, n int) {
	if n > 0 {
		w.metrics.Written.WithLabelValues(result).Add(float64(n))
	}
}

func refOf(o store.NewOrder) shop.OrderRef {
	return shop.OrderRef{SaleID: o.SaleID, ItemID: o.ItemID, UserID: o.UserID, OrderID: o.ID}
}

// releaseRefused gives back the reservation of an order Postgres refused. The unit returns to
// stock unless Postgres had no room for it (then Redis had promised a unit that does not exist);
// a shopper refused for already holding a live order stays a buyer.
func (w *Writer) releaseRefused(ctx context.Context, o store.NewOrder, reason string) (store.ReleaseOutcome, error) {
	op := shop.ReleaseRefused
	ref := refOf(o)
	switch reason {
	case reasonNoRoom:
		op = shop.ReleaseNoRoom
	case reasonDuplicate:
		op = shop.ReleaseDuplicate
		held, err := w.db.HeldOrder(ctx, o.SaleID, o.ItemID, o.UserID)
		if err != nil {
			return store.NotInFlight, err
		}
		ref.HeldBy = held // the buyer entry names the order the shopper really holds
	}
	out, err := w.stock.Release(ctx, ref, op)
	if err == nil && out == store.Released && op != shop.ReleaseNoRoom {
		w.soldOut.Returned(o.ItemID)
	}
	return out, err
}

// refuse records an order Postgres will not take: a FAILED row (so its shopper sees why), a
// dead letter (so an operator does), and its reservation released.
func (w *Writer) refuse(ctx context.Context, o store.NewOrder, reason string) error {
	w.log.Warn("writer: order refused by postgres, dead-lettered", "order", o.ID, "item", o.ItemID, "reason", reason)
	if _, err := w.db.InsertFailedOrder(ctx, o, reason); err != nil {
		if !store.IsPermanent(err) {
			return err
		}
		w.log.Warn("writer: refused order has no FAILED row (Postgres cannot take it at all)", "order", o.ID, "err", err)
	}
	q := store.QueuedOrder{OrderID: o.ID, SaleID: o.SaleID, ItemID: o.ItemID, UserID: o.UserID, Seq: o.Seq, ReservedAt: o.ReservedAt.UnixMilli()}
	if err := w.q.PublishDead(ctx, "dead-"+o.ID, []store.QueuedOrder{q}, reason); err != nil {
		return err
	}
	if _, err := w.releaseRefused(ctx, o, reason); err != nil {
		return err
	}
	w.count("dead_lettered", 1)
	w.metrics.Released.WithLabelValues("refused").Inc()
	return nil
}

// SetThroughput shares the writer's throughput meter (the queue estimates read it).
func (w *Writer) Throughput() *Throughput { return w.rate }
