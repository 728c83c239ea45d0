package store

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"testing"
	"time"
)

// A message that carries an order a second time (a resent purchase publishes its reservation
// again) is stored with everything it carries: named after its first order only, it took the id
// of the message that first carried that order, and JetStream's duplicate check dropped it whole,
// the other, acknowledged, reservations with it. A message sent again whole is still stored once.
func TestGroupMessageCarryingAnOrderAgainIsStored(t *testing.T) {
	t.Parallel()
	ns, err := StartNATS(t.TempDir(), -1, false, "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	ctx := context.Background()
	q, err := OpenQueue(ctx, EmbeddedNATSURL(ns.Addr().(*net.TCPAddr).Port, "tok"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	p := NewGroupPublisher(q, 2, 10, 5*time.Second, nil)
	defer p.Close()

	// send publishes exactly these orders as one message, as the publisher's loop does with the
	// reservations waiting together (its loop holds one of the two slots, waiting for them).
	send := func(ids ...string) {
		t.Helper()
		batch := make([]pubReq, len(ids))
		for i, id := range ids {
			batch[i] = pubReq{order: QueuedOrder{OrderID: id, SaleID: 1, ItemID: 1, UserID: int64(i + 1)}, res: make(chan error, 1)}
		}
		p.slots <- struct{}{}
		p.wg.Add(1)
		p.send(batch)
		for _, r := range batch {
			if err := <-r.res; err != nil {
				t.Fatalf("publish %v: %v", ids, err)
			}
		}
	}
	send("order-x", "order-z")
	send("order-x", "order-y") // order-x again, first again, with another reservation
	send("order-x", "order-y") // the same message again: stored once
	send("order-w")
	send("order-w") // a message of one order, again: stored once

	msgs, err := q.FetchOrders(ctx, 10, time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		var env Envelope
		if err := json.Unmarshal(m.Data(), &env); err != nil {
			t.Fatal(err)
		}
		for _, o := range env.Orders {
			got = append(got, o.OrderID)
		}
		_ = m.Ack()
	}
	if want := []string{"order-x", "order-z", "order-x", "order-y", "order-w"}; !slices.Equal(got, want) {
		t.Errorf("the stream carries %v, want %v", got, want)
	}
}
