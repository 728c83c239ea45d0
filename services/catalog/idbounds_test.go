package catalog

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// idBounds answers "above" only from a read of the highest ids that began after the question:
// a sale created a moment before (on any instance) is never answered "not found". Concurrent
// questions share a read; reads start at least gap apart; an id at or below the highest known
// costs no read.
func TestIDBoundsAreNeverStale(t *testing.T) {
	ctx := context.Background()
	cb := newCountedBounds(100)
	checkKnownIDsCostNoRead(ctx, t, cb)
	checkCrowdSharesSpacedReads(ctx, t, cb)
	checkRaisedIDsCostNoRead(ctx, t, cb)
	// A failed read is an error, not an answer.
	failing := newIDBounds(func(context.Context) (int64, int64, error) { return 0, 0, errors.New("postgres down") })
	if _, err := failing.aboveSale(ctx, 1); err == nil {
		t.Error("a failed read answered")
	}
}

// countedBounds is an idBounds over a fake read (5 ms long, of highest and 10 × highest) that
// counts its reads and records when each started; reads start at least 30 ms apart.
type countedBounds struct {
	b       *idBounds
	reads   atomic.Int64
	highest atomic.Int64
	mu      sync.Mutex
	starts  []time.Time
}

func newCountedBounds(highest int64) *countedBounds {
	cb := &countedBounds{}
	cb.highest.Store(highest)
	cb.b = newIDBounds(func(context.Context) (int64, int64, error) {
		cb.mu.Lock()
		cb.starts = append(cb.starts, time.Now())
		cb.mu.Unlock()
		cb.reads.Add(1)
		time.Sleep(5 * time.Millisecond)
		h := cb.highest.Load()
		return h, 10 * h, nil
	})
	cb.b.gap = 30 * time.Millisecond
	return cb
}

// checkKnownIDsCostNoRead: the first question above the highest reads; ids at or below what
// that read found cost none; a sale created right after a read is read again, not refused.
func checkKnownIDsCostNoRead(ctx context.Context, t *testing.T, cb *countedBounds) {
	t.Helper()
	b, reads := cb.b, &cb.reads
	if above, err := b.aboveSale(ctx, 101); err != nil || !above || reads.Load() != 1 {
		t.Fatalf("101 with 100 the highest: above %v, %v after %d reads; want above after 1", above, err, reads.Load())
	}
	if above, _ := b.aboveSale(ctx, 100); above || reads.Load() != 1 {
		t.Errorf("100: above %v after %d reads, want known without a read", above, reads.Load())
	}
	if above, _ := b.aboveItem(ctx, 1000); above || reads.Load() != 1 {
		t.Errorf("item 1000: above %v after %d reads, want known without a read", above, reads.Load())
	}
	// A sale created just now, right after a read: the next question reads again.
	cb.highest.Store(101)
	if above, _ := b.aboveSale(ctx, 101); above {
		t.Error("a sale created before the question was answered above the highest")
	}
}

// checkCrowdSharesSpacedReads: a crowd of made-up ids; each waits for a read that starts after
// it asked, they share reads, and reads start at least gap apart.
func checkCrowdSharesSpacedReads(ctx context.Context, t *testing.T, cb *countedBounds) {
	t.Helper()
	b := cb.b
	cb.reads.Store(0)
	var wg sync.WaitGroup
	startAt := time.Now()
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if above, err := b.aboveSale(ctx, 1_000_000+int64(i)); err != nil || !above {
				t.Errorf("made-up id: above %v, %v", above, err)
			}
			time.Sleep(time.Duration(i%7) * 10 * time.Millisecond)
			if above, _ := b.aboveItem(ctx, 1_000_000_000+int64(i)); !above {
				t.Error("made-up item id answered known")
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(startAt)
	if n := cb.reads.Load(); n > int64(elapsed/b.gap)+2 {
		t.Errorf("%d reads for 400 questions in %v, want at most one per %v", n, elapsed, b.gap)
	}
	cb.mu.Lock()
	defer cb.mu.Unlock()
	for i := 1; i < len(cb.starts); i++ {
		if d := cb.starts[i].Sub(cb.starts[i-1]); d < b.gap-time.Millisecond {
			t.Errorf("reads %d and %d started %v apart, want at least %v", i-1, i, d, b.gap)
		}
	}
}

// checkRaisedIDsCostNoRead: raise: ids created here are known without a read.
func checkRaisedIDsCostNoRead(ctx context.Context, t *testing.T, cb *countedBounds) {
	t.Helper()
	cb.reads.Store(0)
	cb.b.raise(5000, 50_000)
	if above, _ := cb.b.aboveSale(ctx, 5000); above || cb.reads.Load() != 0 {
		t.Errorf("a raised id: above %v after %d reads", above, cb.reads.Load())
	}
}
