package app

import (
	"context"
	"errors"
	"time"

	"github.com/flashsale/flashsale/services/purchase"
	"github.com/flashsale/flashsale/store"
)

// errQueueNotHeld refuses what an instance must not do while it cannot tell that its queue is the
// deployment's one: its embedded NATS registration lapsed (paused or cut off from Redis past the
// lease: another instance may have started its own embedded NATS meanwhile), or an instance on
// another queue is live. Nothing is acknowledged and no job judges "the queue has drained" until
// it holds them again.
var errQueueNotHeld = errors.New("this instance's queue registration lapsed or another queue is live: not selling, jobs waiting")

// queueGuard tells whether this instance may sell and judge the queue: it holds its queue
// presence and, with an embedded NATS, its registration.
type queueGuard struct {
	presence *store.QueuePresence
	reg      *store.Registration // nil with an external NATS
}

func (g queueGuard) held() bool {
	return g.presence.Held() && (g.reg == nil || g.reg.Held())
}

// guardedPublisher refuses to acknowledge an order while the guard is not held: the purchase
// gives its unit back and answers 503.
type guardedPublisher struct {
	purchase.Publisher
	guard queueGuard
}

func (p guardedPublisher) Publish(ctx context.Context, o store.QueuedOrder) error {
	if !p.guard.held() {
		return errQueueNotHeld
	}
	return p.Publisher.Publish(ctx, o)
}

// guardedQueue is the queue as the jobs that wait for it to drain see it (the keeper's rebuild,
// orphan recovery and repairs, the merchant's Warm): its depth is unknown while the guard is not
// held, so they wait; payment expiry and unit returns go on.
type guardedQueue struct {
	*store.Queue
	guard queueGuard
}

func (q guardedQueue) Backlog(ctx context.Context) (uint64, error) {
	if !q.guard.held() {
		return 0, errQueueNotHeld
	}
	return q.Queue.Backlog(ctx)
}

func (q guardedQueue) WrittenThrough(ctx context.Context) (uint64, error) {
	if !q.guard.held() {
		return 0, errQueueNotHeld
	}
	return q.Queue.WrittenThrough(ctx)
}

// keepQueueClaims renews the queue presence and the embedded NATS registration until ctx ends,
// logging when either is found taken by another instance.
func (a *App) keepQueueClaims(ctx context.Context) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.presence.Keep(ctx, func(other string) {
			a.Log.Error("an instance on another queue is live on this Redis: this instance stops selling and its jobs wait until it is gone; instances sharing a Redis must share one NATS (FLASHSALE_NATS_URL)", "other", other)
		})
	}()
	if a.natsReg != nil {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.natsReg.Keep(ctx, func(holder string) {
				a.Log.Error("another instance took the embedded NATS registration: this instance stops selling and its jobs wait until it holds it again; instances sharing a Redis must share one NATS (FLASHSALE_NATS_URL)", "holder", holder)
			})
		}()
	}
	a.wg.Add(1)
	go func() { // say when selling stops and resumes
		defer a.wg.Done()
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		was := true
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if now := a.guard.held(); now != was {
				was = now
				if now {
					a.Log.Warn("queue registration held again: selling and jobs resume")
				} else {
					a.Log.Error("queue registration lapsed: purchases answer 503 and the jobs that wait for the queue to drain wait")
				}
			}
		}
	}()
}
