package services

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// DefaultWriterRate is the writer throughput (orders per second) a queue estimate assumes while
// this instance's writer has not written anything in the last throughputWindow: deliberately
// low (a writer usually does thousands a second), so a shopper is never promised a wait shorter
// than the real one.
const DefaultWriterRate = 50.0

const throughputWindow = 10 // seconds of history the writer's rate is measured over

// Throughput is the writer's recent capacity: the orders it took off the queue divided by the
// time it spent writing them, over the last ten seconds, times its concurrent workers. Measured
// while busy (not over wall time), an idle queue does not make the writer look slow.
type Throughput struct {
	workers int
	now     func() time.Time

	mu      sync.Mutex
	sec     [throughputWindow]int64 // the Unix second each slot holds
	orders  [throughputWindow]int64
	busyNS  [throughputWindow]int64
	hasData bool
}

// NewThroughput returns a meter for a writer with workers concurrent loops.
func NewThroughput(workers int, now func() time.Time) *Throughput {
	if now == nil {
		now = time.Now
	}
	return &Throughput{workers: max(workers, 1), now: now}
}

// Observe records one batch of n orders written in busy.
func (t *Throughput) Observe(n int, busy time.Duration) {
	if t == nil || n <= 0 {
		return
	}
	s := t.now().Unix()
	i := int(s % throughputWindow)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sec[i] != s {
		t.sec[i], t.orders[i], t.busyNS[i] = s, 0, 0
	}
	t.orders[i] += int64(n)
	t.busyNS[i] += max(busy.Nanoseconds(), int64(time.Millisecond))
	t.hasData = true
}

// Rate is the measured orders per second, and false with no batch in the window.
func (t *Throughput) Rate() (float64, bool) {
	if t == nil {
		return 0, false
	}
	now := t.now().Unix()
	t.mu.Lock()
	defer t.mu.Unlock()
	var n, ns int64
	for i := range t.sec {
		if t.sec[i] > now-throughputWindow && t.sec[i] <= now {
			n += t.orders[i]
			ns += t.busyNS[i]
		}
	}
	if n == 0 || ns == 0 {
		return 0, false
	}
	return float64(n) / (float64(ns) / 1e9) * float64(t.workers), true
}

// QueueWait answers where a QUEUED order stands: the reservations of its sale still in flight
// (not yet written to Postgres) that were made before it, from the sale's in-flight hash in
// Redis, and the wait that means at the writer's recent rate. Each instance reads a sale's
// in-flight hash at most every queueSnapshotAge, however many shoppers poll.
type QueueWait struct {
	stock *store.Stock
	rate  *Throughput

	mu    sync.Mutex
	sales map[int64]*queueSnapshot
}

type queueSnapshot struct {
	mu   sync.Mutex
	at   time.Time
	seqs []int64 // sorted
}

const queueSnapshotAge = 250 * time.Millisecond

// NewQueueWait returns the estimator; rate is the local writer's meter (nil: the default rate).
func NewQueueWait(stock *store.Stock, rate *Throughput) *QueueWait {
	return &QueueWait{stock: stock, rate: rate, sales: map[int64]*queueSnapshot{}}
}

// Estimate returns the place of the in-flight reservation with sequence seq of saleID.
func (q *QueueWait) Estimate(ctx context.Context, saleID, seq int64) (shop.QueueEstimate, error) {
	seqs, err := q.snapshot(ctx, saleID, seq)
	if err != nil {
		return shop.QueueEstimate{}, err
	}
	pos, _ := slices.BinarySearch(seqs, seq)
	rate, measured := q.rate.Rate()
	if !measured || rate <= 0 {
		rate = DefaultWriterRate
	}
	wait := int64(math.Ceil(float64(pos+1) / rate))
	retry := min(max((wait+1)/2, 1), 5)
	return shop.QueueEstimate{Position: int64(pos), WaitSeconds: wait, RetryAfter: time.Duration(retry) * time.Second, Measured: measured}, nil
}

// snapshot returns the sorted sequences in flight in saleID, read again if older than
// queueSnapshotAge or if it does not hold seq yet (a reservation newer than the snapshot).
func (q *QueueWait) snapshot(ctx context.Context, saleID, seq int64) ([]int64, error) {
	q.mu.Lock()
	s := q.sales[saleID]
	if s == nil {
		if len(q.sales) > 1000 {
			q.sales = map[int64]*queueSnapshot{} // bound: only running sales are asked about
		}
		s = &queueSnapshot{}
		q.sales[saleID] = s
	}
	q.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, found := slices.BinarySearch(s.seqs, seq); found && time.Since(s.at) < queueSnapshotAge {
		return s.seqs, nil
	}
	entries, err := q.stock.InFlight(ctx, saleID)
	if err != nil {
		return nil, err
	}
	seqs := make([]int64, len(entries))
	for i, e := range entries {
		seqs[i] = e.Seq
	}
	slices.Sort(seqs)
	s.seqs, s.at = seqs, time.Now()
	return seqs, nil
}
