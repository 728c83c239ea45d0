package purchase

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A sale's floors are read once, by one of the purchases arriving together while the others wait
// for that read; after a failed read every purchase fails at once for floorRetry, then one reads
// again.
func TestSaleFloorsSeedOnce(t *testing.T) {
	t.Parallel()
	var f saleFloors
	var reads atomic.Int64
	release := make(chan struct{})
	read := func(ctx context.Context) ([]int64, error) {
		reads.Add(1)
		<-release
		return []int64{7, 0, 42}, nil
	}
	now := time.Now
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- f.seed(context.Background(), now, read)
		}()
	}
	time.Sleep(50 * time.Millisecond) // every caller is waiting on the one read
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("seed: %v", err)
		}
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("100 concurrent first purchases read Postgres %d times, want 1", n)
	}
	if !f.seeded.Load() || f.shards[0].Load() != 7 || f.shards[1].Load() != 0 || f.shards[2].Load() != 42 {
		t.Errorf("floors after the seed: seeded %v, %d %d %d; want true, 7 0 42", f.seeded.Load(), f.shards[0].Load(), f.shards[1].Load(), f.shards[2].Load())
	}
	if err := f.seed(context.Background(), now, func(context.Context) ([]int64, error) {
		t.Error("read again once seeded")
		return nil, nil
	}); err != nil {
		t.Error(err)
	}
}

func TestSaleFloorsSeedFailsClosedThenRetries(t *testing.T) {
	t.Parallel()
	var f saleFloors
	clock := time.Unix(1_800_000_000, 0)
	now := func() time.Time { return clock }
	down := errors.New("postgres down")
	var reads int
	read := func(context.Context) ([]int64, error) {
		reads++
		if reads == 1 {
			return nil, down
		}
		return []int64{9}, nil
	}
	if err := f.seed(context.Background(), now, read); !errors.Is(err, down) {
		t.Fatalf("first seed = %v, want the read's error", err)
	}
	clock = clock.Add(floorRetry / 2)
	if err := f.seed(context.Background(), now, read); !errors.Is(err, down) || reads != 1 {
		t.Errorf("within floorRetry: %v after %d reads; want the error again without a read", err, reads)
	}
	if f.seeded.Load() || f.shards[0].Load() != 0 {
		t.Errorf("seeded after a failed read")
	}
	clock = clock.Add(floorRetry)
	if err := f.seed(context.Background(), now, read); err != nil || reads != 2 || f.shards[0].Load() != 9 {
		t.Errorf("after floorRetry: %v, %d reads, floor %d; want nil, 2, 9", err, reads, f.shards[0].Load())
	}
}

// A caller whose context ends while it waits for another's read gives up; the read goes on for
// the others.
func TestSaleFloorsWaiterGivesUp(t *testing.T) {
	t.Parallel()
	var f saleFloors
	release := make(chan struct{})
	started := make(chan struct{})
	read := func(ctx context.Context) ([]int64, error) {
		close(started)
		<-release
		return []int64{3}, nil
	}
	done := make(chan error, 1)
	go func() { done <- f.seed(context.Background(), time.Now, read) }()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.seed(ctx, time.Now, read); !errors.Is(err, context.Canceled) {
		t.Errorf("a waiter whose context ended = %v, want context.Canceled", err)
	}
	close(release)
	if err := <-done; err != nil || f.shards[0].Load() != 3 {
		t.Errorf("the reader: %v, floor %d; want nil, 3", err, f.shards[0].Load())
	}
}
