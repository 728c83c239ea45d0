package target

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/services/pipeline"
	"github.com/flashsale/flashsale/store"
)

// Backends are the server's Postgres and Redis, opened by the tool to check its work.
type Backends struct {
	DB    *store.DB
	Redis redis.UniversalClient
}

// Open connects to the server's Postgres and Redis.
func Open(ctx context.Context, databaseURL, redisURL string) (*Backends, error) {
	db, err := store.OpenDB(ctx, databaseURL, 4)
	if err != nil {
		return nil, fmt.Errorf("-database-url: %w", err)
	}
	rdb, err := store.OpenRedis(ctx, redisURL, 4)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("-redis-url: %w", err)
	}
	return &Backends{DB: db, Redis: rdb}, nil
}

// Close closes the connections; a nil Backends is fine.
func (b *Backends) Close() {
	if b == nil {
		return
	}
	b.DB.Close()
	b.Redis.Close()
}

// Persisted returns how many units of a sale's items Postgres counts as sold (the writer
// updates sold in the same transaction that inserts the orders) and how many reservations Redis
// still has in flight.
func (b *Backends) Persisted(ctx context.Context, s *Sale) (sold, inFlight int64, err error) {
	if sold, err = b.DB.SoldOfSale(ctx, s.SaleID); err != nil {
		return 0, 0, err
	}
	k, err := b.DB.StockShardsCached(ctx, s.SaleID)
	if err != nil {
		return 0, 0, err
	}
	for sh := range k { // a sale split into stock shards has an in-flight hash per shard
		n, err := b.Redis.HLen(ctx, store.InFlightKeyOf(s.SaleID, sh)).Result()
		if err != nil {
			return 0, 0, err
		}
		inFlight += n
	}
	return sold, inFlight, nil
}

// Drained reports whether every accepted order of the sales is in Postgres and nothing is left
// in flight.
func (b *Backends) Drained(ctx context.Context, sales []*Sale) (bool, error) {
	for _, s := range sales {
		sold, flight, err := b.Persisted(ctx, s)
		if err != nil {
			return false, err
		}
		if sold < int64(len(s.Acked)) || flight > 0 {
			return false, nil
		}
	}
	return true, nil
}

// WaitDrained polls until drained or timeout and returns how long it waited.
func (b *Backends) WaitDrained(ctx context.Context, sales []*Sale, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		ok, err := b.Drained(ctx, sales)
		if err != nil {
			return time.Since(start), err
		}
		if ok {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return time.Since(start), fmt.Errorf("not drained after %v: accepted orders are missing from Postgres or still in flight", timeout)
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// InvariantReport is the verdict of the end-of-run check.
type InvariantReport struct {
	Checked    bool     `json:"checked"`
	OK         bool     `json:"ok"`
	Violations []string `json:"violations,omitempty"`
	Sales      int      `json:"sales"`
	Accepted   int      `json:"accepted"`
	DrainWait  float64  `json:"drain_wait_s"`
}

// ackChunk bounds the order ids sent to Postgres in one query.
const ackChunk = 20_000

// Verify waits for the queue to drain, then checks ARCHITECTURE.md's invariants for every sale:
// pipeline.Invariants on Postgres and Redis, every acknowledged order id in Postgres, and the
// merchant's own view (GET /api/admin/sales/{id}/stock) agreeing with what the tool saw.
func Verify(ctx context.Context, b *Backends, a *API, sales []*Sale, drainTimeout time.Duration) InvariantReport {
	rep := InvariantReport{Checked: true, Sales: len(sales)}
	for _, s := range sales {
		rep.Accepted += len(s.Acked)
	}
	wait, derr := b.WaitDrained(ctx, sales, drainTimeout)
	rep.DrainWait = wait.Seconds()
	if derr != nil {
		rep.Violations = append(rep.Violations, "drain: "+derr.Error())
	}
	for _, s := range sales {
		rep.Violations = append(rep.Violations, checkSale(ctx, b, a, s)...)
	}
	rep.OK = len(rep.Violations) == 0
	return rep
}

// checkSale returns one sale's violations: of pipeline.Invariants, of "acknowledged means
// durable" (in chunks when there are many acknowledged orders) and of the merchant's view.
func checkSale(ctx context.Context, b *Backends, a *API, s *Sale) []string {
	var v []string
	acked := s.Acked
	if len(acked) > ackChunk {
		acked = nil // checked below in chunks
	}
	for _, err := range pipeline.Invariants(ctx, b.DB, store.NewStock(b.Redis, b.DB.StockShardsCached), s.SaleID, acked) {
		v = append(v, fmt.Sprintf("sale %d: %v", s.SaleID, err))
	}
	if len(s.Acked) > ackChunk {
		v = append(v, checkAckedChunks(ctx, b, s)...)
	}
	items, err := a.AdminStock(ctx, s.SaleID)
	if err != nil {
		return append(v, fmt.Sprintf("sale %d: merchant view: %v", s.SaleID, err))
	}
	return append(v, checkMerchantView(s, items)...)
}

// checkAckedChunks checks that every acknowledged order of s is in Postgres, ackChunk ids a query.
func checkAckedChunks(ctx context.Context, b *Backends, s *Sale) []string {
	var v []string
	missing := 0
	for i := 0; i < len(s.Acked); i += ackChunk {
		chunk := s.Acked[i:min(i+ackChunk, len(s.Acked))]
		have, err := b.DB.ExistingOrders(ctx, chunk)
		if err != nil {
			v = append(v, fmt.Sprintf("sale %d: %v", s.SaleID, err))
			break
		}
		missing += len(chunk) - len(have)
	}
	if missing > 0 {
		v = append(v, fmt.Sprintf("sale %d: acknowledged means durable: %d of %d acknowledged orders are not in postgres", s.SaleID, missing, len(s.Acked)))
	}
	return v
}

// checkMerchantView checks the merchant's stock view after the drain: every item reconciled,
// nothing in flight, displayed = quantity - live, and at least as many live orders as 202s.
func checkMerchantView(s *Sale, items []AdminItem) []string {
	var v []string
	var live int64
	for _, it := range items {
		live += it.Pending + it.Paid
		if !it.Reconciled {
			v = append(v, fmt.Sprintf("sale %d item %s: merchant view: not reconciled (displayed %d, pending %d, paid %d, in flight %d, quantity %d)",
				s.SaleID, it.ItemID, it.Displayed, it.Pending, it.Paid, it.InFlight, it.Quantity))
		}
		if it.InFlight != 0 {
			v = append(v, fmt.Sprintf("sale %d item %s: merchant view: %d reservations in flight after the drain", s.SaleID, it.ItemID, it.InFlight))
		}
		if want := it.Quantity - it.Pending - it.Paid; it.Displayed != want {
			v = append(v, fmt.Sprintf("sale %d item %s: merchant view: displayed %d, want quantity - live = %d", s.SaleID, it.ItemID, it.Displayed, want))
		}
	}
	// Orders a timed-out request created are live but unknown to the tool: more is possible,
	// fewer is a lost acknowledged order.
	if live < int64(len(s.Acked)) {
		v = append(v, fmt.Sprintf("sale %d: merchant view: %d live orders, but %d were answered 202", s.SaleID, live, len(s.Acked)))
	}
	return v
}

// PersistWatch follows a phase's accepted orders into Postgres: the backlog (accepted, not yet
// written) and its peak, when the first and the last of them were written, and the server's
// queue gauge from /metrics.
type PersistWatch struct {
	b        *Backends
	a        *API
	sale     *Sale
	base     time.Time
	accepted func() int64
	sold0    int64

	mu          sync.Mutex
	peak        int64   // accepted − persisted
	gaugePeak   float64 // flashsale_queue_backlog_messages
	firstAt     time.Duration
	allAt       time.Duration
	persisted   int64
	err         error
	phaseDone   chan struct{}
	done        chan struct{}
	unaccounted int64 // Persisted beyond what was answered 202 (timeouts that were accepted)

	// the loop's own, unguarded
	last   int64         // the persisted count at the last sample (-1 before the first)
	grewAt time.Duration // when the persisted count last grew: once every accepted order is
	// in, that is when the last one arrived, even if the phase (the crowd) was still running
}

// WatchPersistence starts following sale's orders from time zero base; accepted reads the
// phase's 202 count as it goes.
func WatchPersistence(ctx context.Context, b *Backends, a *API, sale *Sale, base time.Time, accepted func() int64, timeout time.Duration) *PersistWatch {
	w := &PersistWatch{b: b, a: a, sale: sale, base: base, accepted: accepted, firstAt: -1, allAt: -1,
		phaseDone: make(chan struct{}), done: make(chan struct{}), last: -1}
	w.sold0, _, w.err = b.Persisted(ctx, sale)
	go w.loop(ctx, timeout)
	return w
}

// loop samples every 20 ms until, after the phase, every accepted order is written and none is
// in flight, or the timeout passes, or a query fails, or ctx ends.
func (w *PersistWatch) loop(ctx context.Context, timeout time.Duration) {
	defer close(w.done)
	if w.err != nil {
		return
	}
	var deadline time.Time
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ended := false
		select {
		case <-w.phaseDone:
			ended = true
			if deadline.IsZero() {
				deadline = time.Now().Add(timeout)
			}
		default:
		}
		if i%25 == 0 { // the gauge moves every keeper pass (2 s): twice a second is plenty
			w.scrapeGauge(ctx)
		}
		p, acc, ok := w.sample(ctx)
		if !ok {
			return
		}
		if ended && p >= acc && w.allIn(ctx, p, acc) {
			return
		}
		if ended && time.Now().After(deadline) {
			w.mu.Lock()
			w.err = errors.New("accepted orders still missing from Postgres after -drain-timeout " + timeout.String())
			w.mu.Unlock()
			return
		}
	}
}

// scrapeGauge keeps the peak of the server's queue backlog gauge.
func (w *PersistWatch) scrapeGauge(ctx context.Context) {
	if m, err := w.a.Scrape(ctx); err == nil {
		w.mu.Lock()
		w.gaugePeak = max(w.gaugePeak, m["flashsale_queue_backlog_messages"])
		w.mu.Unlock()
	}
}

// sample reads the orders persisted so far (p) against the 202s so far (acc) and updates the
// backlog's peak and the first and the last growth; false when the query failed (w.err).
func (w *PersistWatch) sample(ctx context.Context) (p, acc int64, ok bool) {
	sold, _, err := w.b.Persisted(ctx, w.sale)
	now := time.Since(w.base)
	acc = w.accepted()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.err = err
		return 0, 0, false
	}
	p = sold - w.sold0
	if p != w.last {
		w.last, w.grewAt = p, now
	}
	w.persisted = p
	w.peak = max(w.peak, acc-p)
	if p > 0 && w.firstAt < 0 {
		w.firstAt = now
	}
	return p, acc, true
}

// allIn tells whether, with every accepted order persisted, none is still in flight; then the
// last one was written when the count last grew.
func (w *PersistWatch) allIn(ctx context.Context, p, acc int64) bool {
	_, flight, err := w.b.Persisted(ctx, w.sale)
	if err != nil || flight != 0 {
		return false
	}
	w.mu.Lock()
	w.allAt = w.grewAt
	w.unaccounted = p - acc
	w.mu.Unlock()
	return true
}

// Persistence is what a PersistWatch saw.
type Persistence struct {
	BacklogPeak int64         // accepted − persisted, at most
	GaugePeak   float64       // flashsale_queue_backlog_messages, at most
	FirstAt     time.Duration // since the phase's time zero, when the first order was written (-1: never)
	AllAt       time.Duration // when the last one was written (-1: not all were)
	Unaccounted int64         // written beyond what was answered 202 (timeouts that were accepted)
	Err         error
}

// Finish tells the watcher the phase is over, waits for every accepted order to be written (or
// the timeout) and returns what it saw.
func (w *PersistWatch) Finish() Persistence {
	close(w.phaseDone)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return Persistence{BacklogPeak: w.peak, GaugePeak: w.gaugePeak, FirstAt: w.firstAt, AllAt: w.allAt, Unaccounted: w.unaccounted, Err: w.err}
}

// RedisForks returns how many times Redis has forked (AOF rewrites, snapshots), or -1.
func (b *Backends) RedisForks(ctx context.Context) int64 {
	if b == nil {
		return -1
	}
	info, err := b.Redis.Info(ctx, "stats").Result()
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_forks:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}
