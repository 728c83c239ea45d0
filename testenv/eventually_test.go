package testenv_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/testenv"
)

// fakeTB records a failure instead of failing the test, and stops the goroutine the way
// testing.T's Fatalf does, so that the code after a failed wait does not run.
type fakeTB struct {
	testing.TB // nil: only Helper and Fatalf are called
	mu         sync.Mutex
	failed     string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.failed = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// run calls fn with a fakeTB on a goroutine of its own, as testing runs a test, and returns
// the failure message ("" if none) and whether fn ran to its end.
func run(fn func(t testing.TB)) (failed string, finished bool) {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
		finished = true
	}()
	<-done
	return f.failed, finished
}

func TestEventuallyFailsWhenTheConditionNeverHolds(t *testing.T) {
	t.Parallel()
	calls := 0
	start := time.Now()
	failed, finished := run(func(tb testing.TB) {
		testenv.Eventually(tb, 300*time.Millisecond, "the order written", func() error {
			calls++
			return fmt.Errorf("%d orders in Postgres", calls)
		})
	})
	took := time.Since(start)
	if finished {
		t.Fatal("Eventually returned although the condition never held")
	}
	want := fmt.Sprintf("the order written: not within 300ms: %d orders in Postgres", calls)
	if failed != want {
		t.Errorf("failure message %q, want %q (what, the time and the last error)", failed, want)
	}
	if took < 300*time.Millisecond || took > 2*time.Second {
		t.Errorf("gave up after %v, want 300 ms", took)
	}
	// every 50 ms for 300 ms, plus the first and the last call
	if calls < 4 || calls > 9 {
		t.Errorf("condition called %d times in 300 ms, want about 7", calls)
	}
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	calls := 0
	start := time.Now()
	failed, finished := run(func(tb testing.TB) {
		testenv.Eventually(tb, 10*time.Second, "three calls", func() error {
			calls++
			if calls < 3 {
				return errors.New("not yet")
			}
			return nil
		})
	})
	if !finished || failed != "" {
		t.Fatalf("Eventually failed (%q) although the condition held on its third call", failed)
	}
	if calls != 3 {
		t.Errorf("condition called %d times, want 3 (none after it held)", calls)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("returned after %v, want about 100 ms", took)
	}
}

func TestEventuallyValue(t *testing.T) {
	t.Parallel()
	calls := 0
	var got int
	failed, finished := run(func(tb testing.TB) {
		got = testenv.EventuallyValue(tb, 10*time.Second, "a count of 2", func() (int, error) {
			calls++
			if calls < 2 {
				return calls, errors.New("below 2")
			}
			return calls * 10, nil
		})
	})
	if !finished || failed != "" || got != 20 {
		t.Fatalf("EventuallyValue: %d, failed %q; want 20 (the value of the call that held)", got, failed)
	}

	failed, finished = run(func(tb testing.TB) {
		testenv.EventuallyValue(tb, 100*time.Millisecond, "a leader", func() (string, error) {
			return "", errors.New("no leader")
		})
	})
	if finished || !strings.HasPrefix(failed, "a leader: not within 100ms: no leader") {
		t.Errorf("EventuallyValue on a condition that never held: finished %v, failure %q", finished, failed)
	}
}

func TestPollAndUntil(t *testing.T) {
	t.Parallel()
	// the condition is checked once even when no time is given
	if err := testenv.Poll(0, time.Second, testenv.Until(func() bool { return true }, "false")); err != nil {
		t.Errorf("Poll of a condition that holds at once: %v", err)
	}
	err := testenv.Poll(120*time.Millisecond, 20*time.Millisecond, testenv.Until(func() bool { return false }, "still disconnected"))
	if err == nil || err.Error() != "not within 120ms: still disconnected" {
		t.Errorf("Poll of a condition that never holds: %v", err)
	}
	if err := testenv.Poll(0, time.Second, testenv.Until(func() bool { return false }, "x")); err == nil {
		t.Error("Poll with no time, condition false: no error")
	}
}
