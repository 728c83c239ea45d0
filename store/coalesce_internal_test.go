package store

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/testenv"
)

// countScript counts each call once in KEYS[1] and answers the call's own ARGV[1] with the
// count it made.
const countScript = `local n = redis.call('INCR', KEYS[1]) return {ARGV[1], n}`

func newCountCalls(t *testing.T) (*scriptCalls, *redis.Client) {
	t.Helper()
	rs := testenv.Redis(t)
	rdb, err := OpenRedis(context.Background(), rs.URL(), 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	admin := redis.NewClient(&redis.Options{Addr: rdb.(*redis.Client).Options().Addr})
	t.Cleanup(func() { admin.Close() })
	return newScriptCalls(rdb, redis.NewScript(countScript)), admin
}

// burst makes n calls at once while Redis is paused for pause: the first maxInFlight go alone,
// the others queue behind them. It returns each call's answer (its own argument back) and error.
func burst(t *testing.T, s *scriptCalls, admin *redis.Client, n int, pause time.Duration) ([]string, []error) {
	t.Helper()
	ctx := context.Background()
	if err := admin.Do(ctx, "CLIENT", "PAUSE", pause.Milliseconds(), "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	got, errs := make([]string, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := s.run(ctx, []string{"count"}, []any{i})
			errs[i] = err
			if err == nil && len(v) == 2 {
				got[i], _ = v[0].(string)
			}
		}()
	}
	wg.Wait()
	return got, errs
}

// Calls that come together go together: 200 calls while Redis is paused take a few round trips,
// not 200, and each gets its own reply; the script ran once per call.
func TestScriptCallsGoTogether(t *testing.T) {
	t.Parallel()
	s, admin := newCountCalls(t)
	got, errs := burst(t, s, admin, 200, 300*time.Millisecond)
	for i := range got {
		if errs[i] != nil || got[i] != strconv.Itoa(i) {
			t.Fatalf("call %d: %q, %v; want its own argument back", i, got[i], errs[i])
		}
	}
	if n, _ := admin.Get(context.Background(), "count").Int(); n != 200 {
		t.Errorf("the script ran %d times, want 200", n)
	}
	if trips := s.trips.Load(); trips > 20 {
		t.Errorf("%d round trips for 200 calls that came together, want a few", trips)
	}
}

// A batch whose script Redis no longer holds (restarted, failed over: NOSCRIPT) is answered
// anyway: each call is sent again alone, through EVAL; the script still ran once per call.
func TestScriptCallsNoScriptInABatch(t *testing.T) {
	t.Parallel()
	s, admin := newCountCalls(t)
	ctx := context.Background()
	if _, err := s.run(ctx, []string{"count"}, []any{"first"}); err != nil { // loads the script
		t.Fatal(err)
	}
	if err := admin.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	_, errs := burst(t, s, admin, 50, 200*time.Millisecond)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d after SCRIPT FLUSH: %v", i, err)
		}
	}
	if n, _ := admin.Get(ctx, "count").Int(); n != 51 {
		t.Errorf("the script ran %d times, want 51", n)
	}
}

// A call still queued when its context ends gives up with the context's error, and nothing is
// sent for it; the calls already sent are answered.
func TestScriptCallsQueuedCallGivesUp(t *testing.T) {
	t.Parallel()
	s, admin := newCountCalls(t)
	ctx := context.Background()
	if err := admin.Do(ctx, "CLIENT", "PAUSE", 500, "ALL").Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range maxInFlight { // the leaders: sent, waiting for paused Redis
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.run(ctx, []string{"count"}, []any{i}); err != nil {
				t.Errorf("leader %d: %v", i, err)
			}
		}()
	}
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.inFlight == maxInFlight })
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := s.run(short, []string{"count"}, []any{"late"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a queued call past its deadline: %v, want context.DeadlineExceeded", err)
	}
	wg.Wait()
	if n, _ := admin.Get(ctx, "count").Int(); n != maxInFlight {
		t.Errorf("the script ran %d times, want %d (the call that gave up never sent)", n, maxInFlight)
	}
	if s.inFlight != 0 || len(s.waiting) != 0 {
		t.Errorf("after: %d in flight, %d waiting; want none", s.inFlight, len(s.waiting))
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
