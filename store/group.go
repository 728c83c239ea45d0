package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// ErrPublisherClosed is returned to reservations arriving after the publisher was closed.
var ErrPublisherClosed = errors.New("publisher closed")

// GroupPublisher makes one durable JetStream write acknowledge many reservations (group
// commit): reservations that arrive while earlier writes are in flight wait together and go out
// as one message. Each caller still gets its own answer only after the PubAck of the message
// that carries its reservation, so "acknowledged means durable" holds for every one.
type GroupPublisher struct {
	q        *Queue
	maxBatch int
	timeout  time.Duration
	reqs     chan pubReq
	slots    chan struct{}
	done     chan struct{}
	mu       sync.RWMutex // guards closed against a Publish racing Close
	closed   bool
	wg       sync.WaitGroup
	observe  func(n int, d time.Duration, err error)
}

type pubReq struct {
	order QueuedOrder
	res   chan error
}

// NewGroupPublisher starts a publisher with at most parallel messages in flight, each carrying
// at most maxBatch reservations and given timeout to be acknowledged. observe, if not nil, is
// told the size, latency and outcome of every message.
func NewGroupPublisher(q *Queue, parallel, maxBatch int, timeout time.Duration, observe func(n int, d time.Duration, err error)) *GroupPublisher {
	if parallel < 1 {
		parallel = 1
	}
	if maxBatch < 1 {
		maxBatch = 1
	}
	p := &GroupPublisher{
		q: q, maxBatch: maxBatch, timeout: timeout, observe: observe,
		reqs:  make(chan pubReq, 4*maxBatch*parallel),
		slots: make(chan struct{}, parallel),
		done:  make(chan struct{}),
	}
	p.wg.Add(1)
	go p.loop()
	return p
}

// Publish hands one reservation over and waits until it is durably queued or has failed.
func (p *GroupPublisher) Publish(ctx context.Context, o QueuedOrder) error {
	r := pubReq{order: o, res: make(chan error, 1)}
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		return ErrPublisherClosed
	}
	select {
	case p.reqs <- r:
	case <-ctx.Done():
		p.mu.RUnlock()
		return ctx.Err()
	}
	p.mu.RUnlock()
	// Once handed over, wait for the outcome even if the caller's context ends: the caller
	// must know whether the order is queued before it may release the unit.
	return <-r.res
}

func (p *GroupPublisher) loop() {
	defer p.wg.Done()
	for {
		select {
		case p.slots <- struct{}{}:
		case <-p.done:
			p.failPending()
			return
		}
		var first pubReq
		select {
		case first = <-p.reqs:
		case <-p.done:
			<-p.slots
			p.failPending()
			return
		}
		batch := []pubReq{first}
	fill:
		for len(batch) < p.maxBatch {
			select {
			case r := <-p.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		p.wg.Add(1)
		go p.send(batch)
	}
}

func (p *GroupPublisher) failPending() {
	for {
		select {
		case r := <-p.reqs:
			r.res <- ErrPublisherClosed
		default:
			return
		}
	}
}

func (p *GroupPublisher) send(batch []pubReq) {
	defer p.wg.Done()
	defer func() { <-p.slots }()
	env := Envelope{Orders: make([]QueuedOrder, len(batch))}
	for i, r := range batch {
		env.Orders[i] = r.order
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	start := time.Now()
	err := p.q.Publish(ctx, msgIDOf(env.Orders), env)
	cancel()
	if p.observe != nil {
		p.observe(len(batch), time.Since(start), err)
	}
	for _, r := range batch {
		r.res <- err
	}
}

// msgIDOf names a message after the orders it carries: the order id of a message of one, else a
// digest of them all. The queue repeats a publish under the same id until it is acknowledged,
// and JetStream stores a message whose id it has seen (within its duplicate window) once. An
// order may be carried again, by another message (a resent purchase publishes its reservation
// again: purchase.Purchases.again): named after its first order only, such a message would take
// the id of the first message that carried that order and be dropped whole, the other
// reservations in it with it, though acknowledged.
func msgIDOf(orders []QueuedOrder) string {
	if len(orders) == 1 {
		return orders[0].OrderID
	}
	h := sha256.New()
	for _, o := range orders {
		h.Write([]byte(o.OrderID))
		h.Write([]byte{0})
	}
	return "g-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// Close stops taking reservations and waits for the messages in flight.
func (p *GroupPublisher) Close() {
	p.mu.Lock()
	p.closed = true // no Publish enqueues after this; the loop drains what is queued
	p.mu.Unlock()
	close(p.done)
	p.wg.Wait()
	p.failPending()
}
