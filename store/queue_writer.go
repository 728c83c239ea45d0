package store

// The writer's side of the queue: its durable pull consumer, the deliveries it fetches, and
// the positions and counts the keeper and the live view read.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Delivery is one order message handed to the writer; it hides the NATS types.
type Delivery struct{ m jetstream.Msg }

// Data is the message body (an Envelope).
func (d Delivery) Data() []byte { return d.m.Data() }

// Ack tells the queue the message is done with.
func (d Delivery) Ack() error { return d.m.Ack() }

// InProgress tells the queue the message is still being worked on: its ack wait starts over.
func (d Delivery) InProgress() error { return d.m.InProgress() }

// Nak asks for a redelivery after delay.
func (d Delivery) Nak(delay time.Duration) error { return d.m.NakWithDelay(delay) }

// Seq is the message's stream sequence number (0 if unknown).
func (d Delivery) Seq() uint64 {
	md, err := d.m.Metadata()
	if err != nil {
		return 0
	}
	return md.Sequence.Stream
}

// NumDelivered is how many times the message was delivered, this time included.
func (d Delivery) NumDelivered() uint64 {
	md, err := d.m.Metadata()
	if err != nil {
		return 1
	}
	return md.NumDelivered
}

// FetchOrders takes what is waiting for the writer, up to max, at once; with nothing waiting it
// blocks until the first message arrives (or wait passes), so an idle writer costs one request
// per wait. Short of max, it waits linger more and takes what came meanwhile (up to max): a
// backlog is written in full batches at once, a steady stream in fewer, larger ones. The
// writer's durable consumer is created on first use.
func (q *Queue) FetchOrders(ctx context.Context, max int, wait, linger time.Duration) ([]Delivery, error) {
	q.mu.Lock()
	cons, ackWait := q.cons, q.ackWait
	q.mu.Unlock()
	if cons == nil {
		c, err := q.WriterConsumer(ctx, ackWait)
		if err != nil {
			return nil, err
		}
		q.mu.Lock()
		q.cons, cons = c, c
		q.mu.Unlock()
	}
	collect := func(b jetstream.MessageBatch) ([]Delivery, error) {
		var out []Delivery
		for m := range b.Messages() {
			out = append(out, Delivery{m})
		}
		return out, b.Error()
	}
	b, err := cons.FetchNoWait(max)
	if err != nil {
		return nil, err
	}
	msgs, err := collect(b)
	if len(msgs) == 0 && (err == nil || errors.Is(err, jetstream.ErrNoMessages)) {
		if b, err = cons.Fetch(1, jetstream.FetchMaxWait(wait)); err != nil {
			return nil, err
		}
		msgs, err = collect(b)
	}
	if err = ignoreNoMessages(err); err != nil || len(msgs) == 0 || len(msgs) >= max || linger <= 0 {
		return msgs, err
	}
	// Less than a batch: more are usually on their way (a steady stream of purchases, each
	// message a group commit of a few orders). Wait a little and take them too, so that they
	// share one Postgres transaction instead of a few each.
	t := time.NewTimer(linger)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		return msgs, nil // what was fetched is handed over: it is in progress, unacked
	}
	b, err = cons.FetchNoWait(max - len(msgs))
	if err != nil {
		return msgs, nil // the top-up is best effort: write what is here
	}
	more, _ := collect(b) // an error ends the top-up only: what came is handed over
	return append(msgs, more...), nil
}

func ignoreNoMessages(err error) error {
	if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) {
		return nil
	}
	return err
}

// PublishRaw publishes an arbitrary body on the orders subject (tests: a poison message).
func (q *Queue) PublishRaw(ctx context.Context, msgID string, data []byte) error {
	return q.publish(ctx, OrdersSubject, data, jetstream.WithMsgID(msgID), jetstream.WithExpectStream(OrdersStream))
}

// WriterConsumer returns the writer's durable pull consumer, creating it if needed.
func (q *Queue) WriterConsumer(ctx context.Context, ackWait time.Duration) (jetstream.Consumer, error) {
	c, err := q.js.CreateOrUpdateConsumer(ctx, OrdersStream, jetstream.ConsumerConfig{
		Durable:       WriterConsumer,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxAckPending: 20000,
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		Replicas:      q.opt.replicas, // 0: the stream's
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", WriterConsumer, err)
	}
	return c, nil
}

// Backlog reports how many order messages the writer has not acknowledged yet.
func (q *Queue) Backlog(ctx context.Context) (uint64, error) {
	c, err := q.js.Consumer(ctx, OrdersStream, WriterConsumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		s, err := q.js.Stream(ctx, OrdersStream)
		if err != nil {
			return 0, fmt.Errorf("backlog: %w", err)
		}
		return s.CachedInfo().State.Msgs, nil
	}
	if err != nil {
		return 0, fmt.Errorf("backlog: %w", err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("backlog: %w", err)
	}
	return info.NumPending + uint64(info.NumAckPending), nil
}

// Position is the queue's last position: the sequence of the last message the order stream
// stored. Every message acknowledged to a publisher so far is at or before it.
func (q *Queue) Position(ctx context.Context) (uint64, error) {
	s, err := q.js.Stream(ctx, OrdersStream)
	if err != nil {
		return 0, fmt.Errorf("queue position: %w", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("queue position: %w", err)
	}
	return info.State.LastSeq, nil
}

// WrittenThrough is the position up to which the writers have finished every message (written
// to Postgres, or set aside as dead): the writer consumer's acknowledgement floor. 0 while no
// writer consumer exists.
func (q *Queue) WrittenThrough(ctx context.Context) (uint64, error) {
	c, err := q.js.Consumer(ctx, OrdersStream, WriterConsumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("written through: %w", err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("written through: %w", err)
	}
	return info.AckFloor.Stream, nil
}

// DeadCount reports how many messages the dead-letter stream holds.
func (q *Queue) DeadCount(ctx context.Context) (uint64, error) {
	s, err := q.js.Stream(ctx, DeadStream)
	if err != nil {
		return 0, fmt.Errorf("dead count: %w", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("dead count: %w", err)
	}
	return info.State.Msgs, nil
}
