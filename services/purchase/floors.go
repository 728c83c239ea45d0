package purchase

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale/shop"
)

// raiseFloor raises a floor to seq (a floor never goes down).
func raiseFloor(floor *atomic.Int64, seq int64) {
	for {
		f := floor.Load()
		if seq <= f || floor.CompareAndSwap(f, seq) {
			return
		}
	}
}

// saleFloors are this instance's floors of one sale, one per stock shard (each shard has its own
// reservation counter): the highest seq it knows the shard issued. The reserve script refuses
// (and marks the sale lost) where Redis's counter is below it: Redis went back in time.
//
// A floor starts at the highest seq Postgres holds for the shard, read once per sale and
// instance before its first reserve there, and rises with every seq Redis answers. Starting at 0
// instead, an instance restarted after Redis lost writes would take the reissued seqs for new
// ones: once the counter passed the lost maximum, no check would ever see the loss.
type saleFloors struct {
	seeded atomic.Bool // shards hold Postgres's seqs (set once, after them)
	shards [shop.MaxStockShards]atomic.Int64

	mu       sync.Mutex
	seeding  chan struct{} // closed when the read under way ends; nil while none is
	failedAt time.Time     // the last read that failed, and why: the next waits floorRetry
	err      error
}

const (
	floorReadTimeout = 2 * time.Second        // a seed's read of Postgres, shared by whoever waits for it
	floorRetry       = 500 * time.Millisecond // after a failed read, purchases of the sale answer 503 at once this long
)

// floorsOf returns the floors of a sale of k shards, seeded from Postgres. The first purchase of
// the sale on this instance reads them (one query; purchases arriving meanwhile wait for the
// same read); every later one finds them in memory. Postgres unreachable: 503, and for
// floorRetry no purchase of the sale waits for another read. A floor of 0 would let a Redis that
// lost writes sell again the units it forgot, so the sale fails closed instead, like a Redis
// that cannot be reached.
func (p *Purchases) floorsOf(ctx context.Context, saleID int64, k int) (*saleFloors, error) {
	v, ok := p.floors.Load(saleID)
	if !ok {
		v, _ = p.floors.LoadOrStore(saleID, new(saleFloors))
	}
	f := v.(*saleFloors)
	if f.seeded.Load() {
		return f, nil
	}
	read := func(ctx context.Context) ([]int64, error) {
		seqs, err := p.maxSeqs(ctx, saleID, k)
		if err != nil {
			p.log.Warn("purchase: cannot read the sale's highest reservation seqs from postgres; its purchases answer 503 until it can", "sale", saleID, "err", err)
		}
		return seqs, err
	}
	return f, f.seed(ctx, p.now, read)
}

// seed sets f's floors from read, run once by one caller while the others wait for it (or for
// their ctx). After a failed read, callers get its error at once for floorRetry, then one reads
// again.
func (f *saleFloors) seed(ctx context.Context, now func() time.Time, read func(context.Context) ([]int64, error)) error {
	for {
		f.mu.Lock()
		if f.seeded.Load() {
			f.mu.Unlock()
			return nil
		}
		if ch := f.seeding; ch != nil {
			f.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if !f.failedAt.IsZero() && now().Sub(f.failedAt) < floorRetry {
			err := f.err
			f.mu.Unlock()
			return err
		}
		ch := make(chan struct{})
		f.seeding = ch
		f.mu.Unlock()

		// Detached from the caller: the read is shared with whoever waits for it.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), floorReadTimeout)
		seqs, err := read(rctx)
		cancel()

		f.mu.Lock()
		if err == nil {
			for sh, seq := range seqs {
				if sh < len(f.shards) {
					raiseFloor(&f.shards[sh], seq)
				}
			}
			f.seeded.Store(true)
		} else {
			f.failedAt, f.err = now(), err
		}
		f.seeding = nil
		close(ch)
		f.mu.Unlock()
		return err
	}
}

// maxSeqs are the highest reservation seqs Postgres holds for each of the sale's k shards.
func (p *Purchases) maxSeqs(ctx context.Context, saleID int64, k int) ([]int64, error) {
	if k <= 1 {
		n, err := p.db.MaxSeqOfSale(ctx, saleID)
		return []int64{n}, err
	}
	return p.db.MaxSeqOfShards(ctx, saleID, k)
}
