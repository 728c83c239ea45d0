package purchase

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/flashsale/flashsale/shop"
)

// DefaultWriterRate is the writer throughput (orders per second) a queue estimate assumes while
// this instance's writer has not written anything in the last throughputWindow: deliberately
// low (a writer usually does thousands a second), so a shopper is never promised a wait shorter
// than the real one.
const DefaultWriterRate = 50.0

// QueueWait answers where a QUEUED order stands: the reservations of its sale still in flight
// (not yet written to Postgres) that were made before it, from the sale's in-flight hash in
// Redis, and the wait that means at the writer's recent rate. Each instance reads a sale's
// in-flight hash at most every queueSnapshotAge, however many shoppers poll.
type QueueWait struct {
	stock Stock
	rate  WriterRate

	mu    sync.Mutex
	sales map[int64]*queueSnapshot
}

type queueSnapshot struct {
	mu   sync.Mutex
	at   time.Time
	seqs []int64 // sorted
}

const queueSnapshotAge = 250 * time.Millisecond

// WriterRate is the local writer's recent throughput (pipeline.Throughput): orders per second, and
// false when it has not measured any.
type WriterRate interface {
	Rate() (float64, bool)
}

// noRate is a writer never measured: the default rate is assumed.
type noRate struct{}

func (noRate) Rate() (float64, bool) { return 0, false }

// NewQueueWait returns the estimator; rate is the local writer's meter.
func NewQueueWait(stock Stock, rate WriterRate) *QueueWait {
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
