package payments

import (
	"testing"
	"time"
)

// A provider call that keeps failing is tried again after the pass interval times 2^n, up to
// maxRetryWait; one that succeeds is due again at once.
func TestBackoffSpacesOutFailures(t *testing.T) {
	var b backoff
	now := time.Unix(1_800_000_000, 0)
	if !b.due("refund x", now) {
		t.Fatal("a call never tried is not due")
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second}
	for i, w := range want {
		if got := b.failed("refund x", now, time.Second); got != w {
			t.Fatalf("failure %d: wait %v, want %v", i+1, got, w)
		}
	}
	if b.due("refund x", now.Add(7*time.Second)) || !b.due("refund x", now.Add(8*time.Second)) {
		t.Fatal("due before its wait, or not after it")
	}
	if !b.due("refund y", now) {
		t.Fatal("another order's call waits for this one's")
	}
	for range 30 {
		b.failed("refund x", now, time.Second)
	}
	if got := b.failed("refund x", now, time.Second); got != maxRetryWait {
		t.Fatalf("after many failures: wait %v, want the cap %v", got, maxRetryWait)
	}
	b.done("refund x")
	if !b.due("refund x", now) {
		t.Fatal("a call that succeeded is not due at once next time")
	}
}
