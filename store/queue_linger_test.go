package store_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/flashsale/flashsale/store"
)

// FetchOrders with a linger takes, besides what was waiting, what arrives within the linger:
// three messages published 30 ms apart come in one fetch with a linger of 1 s, and without one
// the first comes alone. A backlog of a full batch is taken at once, linger or not.
func TestFetchOrdersLingers(t *testing.T) {
	t.Parallel()
	publish, fetch, q := newLingerQueue(t)

	publish()
	if got := len(fetch(10, 0)); got != 1 {
		t.Fatalf("without a linger: %d messages, want 1", got)
	}

	publish()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 2 {
			time.Sleep(30 * time.Millisecond)
			publish()
		}
	}()
	start := time.Now()
	got := fetch(10, time.Second)
	<-done
	if len(got) != 3 {
		t.Errorf("with a linger of 1 s: %d messages, want the 3 published within it", len(got))
	}
	if d := time.Since(start); d < time.Second {
		t.Errorf("the fetch returned after %v, before its linger", d)
	}

	for range 4 {
		publish()
	}
	waitBacklog(t, q, 4) // the earlier acks settled and the four stored: the batch is all there
	start = time.Now()
	if got := len(fetch(4, time.Second)); got != 4 {
		t.Errorf("a full batch waiting: %d messages, want 4", got)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("a full batch waited %v: it should not linger", d)
	}
}

// newLingerQueue starts an embedded NATS server and a queue on it, and returns how to publish
// one order (a new id each time) and how to fetch (and ack) up to max of them with a linger.
func newLingerQueue(t *testing.T) (publish func(), fetch func(max int, linger time.Duration) []store.Delivery, _ *store.Queue) {
	t.Helper()
	ns, err := store.StartNATS(t.TempDir(), -1, false, "tok")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	ctx := context.Background()
	q, err := store.OpenQueue(ctx, store.EmbeddedNATSURL(ns.Addr().(*net.TCPAddr).Port, "tok"), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	n := 0
	publish = func() {
		n++
		id := "linger-" + string(rune('a'+n))
		if err := q.Publish(ctx, id, store.Envelope{Orders: []store.QueuedOrder{{OrderID: id}}}); err != nil {
			t.Error(err)
		}
	}
	fetch = func(max int, linger time.Duration) []store.Delivery {
		t.Helper()
		msgs, err := q.FetchOrders(ctx, max, time.Second, linger)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if err := m.Ack(); err != nil {
				t.Fatal(err)
			}
		}
		return msgs
	}
	return publish, fetch, q
}

// waitBacklog waits until the writer's consumer has exactly n messages to deliver or unacked.
func waitBacklog(t *testing.T, q *store.Queue, n uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := q.Backlog(context.Background())
		if err == nil && b == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("backlog %d (%v), want %d", b, err, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
