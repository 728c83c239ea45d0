package catalog

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale/services/internal/ttlcache"
	"github.com/flashsale/flashsale/shop"
)

// Create validates and stores a new sale of merchantID, then loads its stock into Redis.
func (s *Sales) Create(ctx context.Context, merchantID int64, in NewSale) (shop.Sale, error) {
	row, err := s.create(ctx, merchantID, in)
	if err != nil {
		return shop.Sale{}, err
	}
	return row, nil
}

// Get returns a sale with its items, from Postgres. A fire drill's scratch copy is not found:
// only the purchase path (CachedRow) knows it.
func (s *Sales) Get(ctx context.Context, saleID int64) (shop.Sale, error) {
	row, err := s.getRow(ctx, saleID)
	if err != nil {
		return shop.Sale{}, err
	}
	return visible(row)
}

// Cached returns a sale from the in-process catalog cache (a few seconds old at most; unknown ids
// are remembered too). A fire drill's scratch copy is not found, as in Get.
func (s *Sales) Cached(ctx context.Context, saleID int64) (shop.Sale, error) {
	row, err := s.CachedRow(ctx, saleID)
	if err != nil {
		return shop.Sale{}, err
	}
	return visible(row)
}

// visible hides a fire drill's scratch copy from every page and answer: NOT_FOUND, as for an id
// that names no sale.
func visible(row shop.Sale) (shop.Sale, error) {
	if row.DrillOf != 0 {
		return shop.Sale{}, shop.Errorf(shop.CodeNotFound, "no sale %d", row.ID)
	}
	return row, nil
}

// idBounds knows the highest sale id and item id Postgres holds, so that an id above them (a
// made-up one: a crawler, a script trying ids) is answered "not found" without a query of its
// own. Negative caching alone cannot do that: every new random id would be a miss.
//
// It is exact, never stale: an id above the highest known waits for the next read of the
// highest ids, one that starts after it arrived (rounds, shared by every caller meanwhile), so
// a sale committed before a request arrived, on any instance, is never answered "not found".
// Rounds start at least boundsGap apart: a flood of made-up ids costs at most one small query
// per boundsGap on one connection, whatever its size, and never holds more of the pool.
type idBounds struct {
	sale, item atomic.Int64 // the highest ids known (raised by every read and by creations here)
	read       func(ctx context.Context) (sale, item int64, err error)
	gap        time.Duration // between the starts of two reads
	timeout    time.Duration // of one read

	mu   sync.Mutex
	next *boundsRound // the round callers join; its read has not started yet
	last time.Time    // when the last round's read started
}

type boundsRound struct {
	done chan struct{}
	err  error
}

// boundsGap is the least time between two reads of the highest ids.
const boundsGap = 50 * time.Millisecond

func newIDBounds(read func(ctx context.Context) (int64, int64, error)) *idBounds {
	return &idBounds{read: read, gap: boundsGap, timeout: ttlcache.DefaultLoadTimeout}
}

// raise records ids known to exist (a sale created here), so they need no read.
func (b *idBounds) raise(sale, item int64) {
	raiseTo(&b.sale, sale)
	raiseTo(&b.item, item)
}

func raiseTo(v *atomic.Int64, n int64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}

// aboveSale reports whether no sale with this id existed when the call began. An id at or
// below the highest known costs one atomic load (it may still be a gap: the caller looks it
// up, through its cache); one above waits for the next read.
func (b *idBounds) aboveSale(ctx context.Context, id int64) (bool, error) {
	return b.above(ctx, &b.sale, id)
}

// aboveItem is aboveSale for an item id.
func (b *idBounds) aboveItem(ctx context.Context, id int64) (bool, error) {
	return b.above(ctx, &b.item, id)
}

func (b *idBounds) above(ctx context.Context, known *atomic.Int64, id int64) (bool, error) {
	if b == nil || id <= known.Load() {
		return false, nil
	}
	if err := b.refresh(ctx); err != nil {
		return false, err
	}
	return id > known.Load(), nil
}

// refresh waits for a read of the highest ids that starts after it was called.
func (b *idBounds) refresh(ctx context.Context) error {
	b.mu.Lock()
	r := b.next
	if r == nil {
		r = &boundsRound{done: make(chan struct{})}
		b.next = r
		go b.run(r, time.Until(b.last.Add(b.gap)))
	}
	b.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *idBounds) run(r *boundsRound, wait time.Duration) {
	defer close(r.done)
	if wait > 0 {
		time.Sleep(wait)
	}
	b.mu.Lock()
	b.next = nil // whoever comes from now on may have come after this read began: the next round
	b.last = time.Now()
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	sale, item, err := b.read(ctx)
	if err != nil {
		r.err = err
		return
	}
	b.raise(sale, item)
}

// HighestSaleID is the highest sale id this instance has seen (0: none yet).
func (s *Sales) HighestSaleID() int64 { return s.bounds.sale.Load() }
