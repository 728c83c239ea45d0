package testenv

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// PollInterval is how often Eventually and EventuallyValue call their condition.
const PollInterval = 50 * time.Millisecond

// Eventually waits for a state the test cannot be told about: it calls cond every PollInterval
// until cond returns nil, and returns at once when it does. If cond has not returned nil within
// the given time, the test fails (t.Fatalf) with
//
//	<what>: not within <within>: <cond's last error>
//
// so what names the awaited state ("every order written") and cond's error says how far off
// it still was ("12 of 30 in Postgres"). cond is called at least once, also after the time is
// up, and runs on the caller's goroutine, so it may itself call t.Fatal. Use it only from the
// test's goroutine; a goroutine of its own uses Poll.
func Eventually(t testing.TB, within time.Duration, what string, cond func() error) {
	t.Helper()
	EventuallyEvery(t, within, PollInterval, what, cond)
}

// EventuallyEvery is Eventually calling cond every interval instead of every PollInterval, for a
// condition that is costly to check or must not be asked too often.
func EventuallyEvery(t testing.TB, within, interval time.Duration, what string, cond func() error) {
	t.Helper()
	if err := Poll(within, interval, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// EventuallyValue is Eventually for a condition that yields a value: it returns the value of
// the first call of cond that returned no error.
func EventuallyValue[T any](t testing.TB, within time.Duration, what string, cond func() (T, error)) T {
	t.Helper()
	var v T
	EventuallyEvery(t, within, PollInterval, what, func() error {
		var err error
		v, err = cond()
		return err
	})
	return v
}

// Poll is the loop under Eventually, without a test: it calls cond every interval until cond
// returns nil (Poll returns nil) or the time is up (Poll returns "not within <within>: <cond's
// last error>"). cond is called at least once, and once more when the time is up.
func Poll(within, interval time.Duration, cond func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("not within %v: %w", within, err)
		}
		time.Sleep(min(interval, left))
	}
}

// Until adapts a yes/no condition to Eventually and Poll: the returned condition fails with
// the error made by notYet while cond is false.
//
//	testenv.Eventually(t, 10*time.Second, "the queue connected", testenv.Until(conn.IsConnected, "still disconnected"))
func Until(cond func() bool, notYet string) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return errors.New(notYet)
	}
}
