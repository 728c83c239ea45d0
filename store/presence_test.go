package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale/store"
)

// A registration is held only while renewed: an instance that stops renewing (paused, cut off)
// does not hold it a moment past its lease by its own clock, before any renewal tells it so.
func TestRegistrationHeldOnlyWithinItsLease(t *testing.T) {
	t.Parallel()
	rdb := newRedis(t)
	const ttl = 300 * time.Millisecond
	r := register(t, rdb, "a", ttl)
	if !r.Held() {
		t.Fatal("not held right after the claim")
	}
	time.Sleep(ttl + 50*time.Millisecond) // no renewal: a paused instance
	if r.Held() {
		t.Error("still held past its lease without a renewal")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Keep(ctx, nil); close(done) }()
	deadline := time.Now().Add(2 * time.Second)
	for !r.Held() {
		if time.Now().After(deadline) {
			t.Fatal("a lapsed registration nobody took is not held again after renewals")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if r.Held() {
		t.Error("held after Keep dropped it")
	}
}

// Instances on one queue live side by side; one on another queue is refused while any of them is
// live, and a lapsed one coming back finds the newer queue live and yields.
func TestQueuePresenceOneQueuePerRedis(t *testing.T) {
	t.Parallel()
	rdb := newRedis(t)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	a, err := store.JoinQueue(ctx, rdb, "ORDERS@x", "a", ttl)
	if err != nil || !a.Held() {
		t.Fatalf("first instance: %v", err)
	}
	if _, err := store.JoinQueue(ctx, rdb, "ORDERS@x", "b", ttl); err != nil {
		t.Fatalf("second instance on the same queue: %v", err)
	}
	if _, err := store.JoinQueue(ctx, rdb, "ORDERS@y", "c", ttl); !errors.Is(err, store.ErrAnotherQueue) {
		t.Fatalf("an instance on another queue beside live ones: %v, want ErrAnotherQueue", err)
	}
	// a and b stop renewing (paused); c starts on its queue once they lapsed.
	time.Sleep(ttl + 100*time.Millisecond)
	if a.Held() {
		t.Error("a holds its presence past its lease")
	}
	c, err := store.JoinQueue(ctx, rdb, "ORDERS@y", "c", ttl)
	if err != nil {
		t.Fatalf("an instance on another queue once the others lapsed: %v", err)
	}
	cctx, stopC := context.WithCancel(ctx)
	defer stopC()
	go c.Keep(cctx, nil)
	// a comes back: it finds c live on another queue, and does not hold its presence.
	conflict := make(chan string, 4)
	actx, stopA := context.WithCancel(ctx)
	defer stopA()
	go a.Keep(actx, func(other string) { conflict <- other })
	select {
	case <-conflict:
	case <-time.After(3 * time.Second):
		t.Fatal("the returning instance was not told of the other queue")
	}
	if a.Held() {
		t.Error("the returning instance holds its presence beside another queue")
	}
	if !c.Held() {
		t.Error("the live instance lost its presence to the returning one")
	}
}
