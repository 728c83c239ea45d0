package ttlcache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
)

// counted returns a load that counts its calls and answers v, err.
func counted[V any](n *atomic.Int64, v V, err error) func(context.Context) (V, error) {
	return func(context.Context) (V, error) { n.Add(1); return v, err }
}

func TestTTLCache(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	c := New[int64](Config[int]{TTL: 5 * time.Second, Max: 10, StaleFor: time.Minute}, func() time.Time { return now })
	var loads atomic.Int64
	if got, err := c.Get(ctx, 1, counted(&loads, 10, nil)); got != 10 || err != nil {
		t.Fatalf("first get = %d, %v; want 10", got, err)
	}
	if got, _ := c.Get(ctx, 1, counted(&loads, 11, nil)); got != 10 || loads.Load() != 1 {
		t.Errorf("within ttl: got %d after %d loads, want the cached 10 after 1", got, loads.Load())
	}
	now = now.Add(6 * time.Second)
	if got, err := c.Get(ctx, 1, counted(&loads, 0, errors.New("postgres down"))); got != 10 || err != nil {
		t.Errorf("failed reload: got %d, %v; want the stale 10 and no error", got, err)
	}
	if _, err := c.Get(ctx, 2, counted(&loads, 0, errors.New("postgres down"))); err == nil {
		t.Errorf("failed first load: want the error")
	}
	if got, _ := c.Get(ctx, 1, counted(&loads, 12, nil)); got != 12 {
		t.Errorf("expired and reloadable: got %d, want 12", got)
	}
	now = now.Add(2 * time.Minute)
	if _, err := c.Get(ctx, 1, counted(&loads, 0, errors.New("postgres down"))); err == nil {
		t.Errorf("failed reload past StaleFor: want the error, not a value minutes old")
	}
}

// Past its bound the cache forgets the least recently used entry, not everything.
func TestTTLCacheEvictsLeastRecentlyUsed(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	c := New[int64](Config[int]{TTL: time.Hour, Max: 3}, func() time.Time { return now })
	var loads atomic.Int64
	for id := int64(1); id <= 3; id++ {
		c.Get(ctx, id, counted(&loads, int(id), nil))
	}
	c.Get(ctx, 1, counted(&loads, -1, nil)) // 1 is now the most recently used, 2 the least
	c.Get(ctx, 4, counted(&loads, 4, nil))  // past Max: 2 goes
	if known, _ := c.Len(); known != 3 {
		t.Errorf("entries after passing max = %d, want 3 (one evicted, not all)", known)
	}
	loads.Store(0)
	for _, id := range []int64{1, 3, 4} {
		if got, _ := c.Get(ctx, id, counted(&loads, -1, nil)); got != int(id) {
			t.Errorf("get(%d) = %d, want the cached %d", id, got, id)
		}
	}
	if loads.Load() != 0 {
		t.Errorf("recently used entries were reloaded %d times, want 0", loads.Load())
	}
	if got, _ := c.Get(ctx, 2, counted(&loads, 22, nil)); got != 22 || loads.Load() != 1 {
		t.Errorf("the least recently used entry: got %d after %d loads, want it reloaded (22, 1)", got, loads.Load())
	}
}

// Unknown ids are remembered (a repeat costs no load) in their own bound: a flood of them never
// pushes a known id out.
func TestTTLCacheRemembersAbsentApart(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	c := New[int64](Config[int]{TTL: time.Hour, Max: 10, MaxAbsent: 100,
		Absent: func(v int) bool { return v == 0 }}, func() time.Time { return now })
	var loads atomic.Int64
	c.Get(ctx, 1, counted(&loads, 1, nil))
	for id := int64(1000); id < 11_000; id++ {
		c.Get(ctx, id, counted(&loads, 0, nil))
	}
	known, absent := c.Len()
	if known != 1 || absent != 100 {
		t.Errorf("after 10,000 unknown ids: %d known, %d absent entries; want 1 and 100 (the bound)", known, absent)
	}
	loads.Store(0)
	if got, _ := c.Get(ctx, 1, counted(&loads, -1, nil)); got != 1 || loads.Load() != 0 {
		t.Errorf("known id after a flood of unknown ones: got %d after %d loads, want the cached 1", got, loads.Load())
	}
	for i := 0; i < 50; i++ {
		if got, _ := c.Get(ctx, 10_999, counted(&loads, 7, nil)); got != 0 {
			t.Fatalf("a remembered unknown id: got %d, want 0 (absent)", got)
		}
	}
	if loads.Load() != 0 {
		t.Errorf("a repeated unknown id cost %d loads, want 0", loads.Load())
	}
}

// A shared load runs detached from the caller that started it: that caller leaving does not
// fail the others waiting on it, and the load has a deadline of its own.
func TestTTLCacheLoadOutlivesFirstCaller(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c := New[string](Config[string]{TTL: time.Second, Max: 10, LoadTimeout: time.Minute}, func() time.Time { return now })
	release := make(chan struct{})
	started := make(chan struct{})
	var loads atomic.Int64
	var loadErr atomic.Value
	load := func(ctx context.Context) (string, error) {
		loads.Add(1)
		close(started)
		<-release
		if _, ok := ctx.Deadline(); !ok {
			return "", errors.New("the load has no deadline of its own")
		}
		if err := ctx.Err(); err != nil {
			loadErr.Store(err)
			return "", err
		}
		return "page", nil
	}
	first, leave := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() { _, err := c.Get(first, "", load); firstErr <- err }()
	<-started
	var wg sync.WaitGroup
	results := make([]string, 5)
	errs := make([]error, 5)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = c.Get(context.Background(), "", load)
		}()
	}
	leave() // the first caller disconnects while the load runs
	select {
	case err := <-firstErr:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the caller that left got %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the caller that left is still waiting on the load")
	}
	time.Sleep(20 * time.Millisecond) // let the others join the load in flight
	close(release)
	wg.Wait()
	for i := range results {
		if errs[i] != nil || results[i] != "page" {
			t.Errorf("waiter %d: %q, %v; want the page (the first caller leaving must not fail it)", i, results[i], errs[i])
		}
	}
	if err := loadErr.Load(); err != nil {
		t.Errorf("the load's context ended with its first caller: %v", err)
	}
	if n := loads.Load(); n != 1 {
		t.Errorf("%d loads for concurrent misses of one key, want 1", n)
	}
}

// A load that never answers is cut off by the cache's own timeout.
func TestTTLCacheLoadTimeout(t *testing.T) {
	c := New[int64](Config[int]{TTL: time.Second, Max: 10, LoadTimeout: 50 * time.Millisecond}, time.Now)
	_, err := c.Get(context.Background(), 1, func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a hung load: %v, want its own deadline exceeded", err)
	}
	if got := shop.ErrorCode(OrUnavailable(err)); got != shop.CodeUnavailable {
		t.Errorf("a hung load answers %s, want UNAVAILABLE", got)
	}
}

// An absent value is served for AbsentTTL, a known one for TTL: an id unknown now may be a sale
// a moment later.
func TestTTLCacheAbsentTTL(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	c := New[int64](Config[int]{TTL: 5 * time.Second, AbsentTTL: time.Second, Max: 10, MaxAbsent: 10,
		Absent: func(v int) bool { return v < 0 }, StaleFor: time.Hour}, func() time.Time { return now })
	var loads atomic.Int64
	c.Get(ctx, 1, counted(&loads, 10, nil))
	c.Get(ctx, 2, counted(&loads, -1, nil))
	now = now.Add(900 * time.Millisecond)
	if a, _ := c.Get(ctx, 1, counted(&loads, 11, nil)); a != 10 {
		t.Errorf("known value within both TTLs = %d, want the cached 10", a)
	}
	if b, _ := c.Get(ctx, 2, counted(&loads, 20, nil)); b != -1 || loads.Load() != 2 {
		t.Errorf("absent value within AbsentTTL = %d after %d loads, want the cached -1 after 2", b, loads.Load())
	}
	now = now.Add(200 * time.Millisecond)
	if b, _ := c.Get(ctx, 2, counted(&loads, 20, nil)); b != 20 {
		t.Errorf("absent value past AbsentTTL = %d, want it loaded again (20)", b)
	}
	if a, _ := c.Get(ctx, 1, counted(&loads, 11, nil)); a != 10 || loads.Load() != 3 {
		t.Errorf("known value within TTL = %d after %d loads, want the cached 10 after 3", a, loads.Load())
	}
	// Unset, it is the TTL.
	d := New[int64](Config[int]{TTL: 5 * time.Second, Absent: func(v int) bool { return v < 0 }}, func() time.Time { return now })
	d.Get(ctx, 3, counted(&loads, -1, nil))
	now = now.Add(4 * time.Second)
	if v, _ := d.Get(ctx, 3, counted(&loads, 30, nil)); v != -1 {
		t.Errorf("absent value without AbsentTTL, within TTL = %d, want the cached -1", v)
	}
}

// Fresh answers what Get would answer without a load, and only that: a value within its TTL
// (absent ones by their own), never a stale one nor a missing one; a read marks the entry used,
// so eviction spares it as it spares one Get read.
func TestTTLCacheFresh(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	c := New[int64](Config[int]{TTL: 5 * time.Second, Max: 2, StaleFor: time.Minute, Absent: func(v int) bool { return v < 0 },
		AbsentTTL: time.Second}, func() time.Time { return now })
	var loads atomic.Int64
	if _, ok := c.Fresh(1); ok {
		t.Errorf("Fresh of a key never loaded: ok")
	}
	c.Get(ctx, 1, counted(&loads, 10, nil))
	c.Get(ctx, 9, counted(&loads, -1, nil)) // an absent id
	if v, ok := c.Fresh(1); v != 10 || !ok {
		t.Errorf("Fresh within the TTL = %d, %v; want 10, true", v, ok)
	}
	now = now.Add(2 * time.Second)
	if v, ok := c.Fresh(9); ok {
		t.Errorf("Fresh of an absent id past its own TTL = %d, ok; want a miss", v)
	}
	c.Get(ctx, 2, counted(&loads, 20, nil))
	c.Fresh(1)                              // 1 used: 2 is the least recently used now
	c.Get(ctx, 3, counted(&loads, 30, nil)) // past Max: 2 goes, not 1
	if _, ok := c.Fresh(1); !ok {
		t.Errorf("the entry Fresh read was evicted")
	}
	now = now.Add(4 * time.Second)
	if v, ok := c.Fresh(1); ok {
		t.Errorf("Fresh past the TTL = %d, ok; want a miss (Get serves it stale only when its reload fails)", v)
	}
}
