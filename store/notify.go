package store

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
)

// Notices are best-effort messages between the instances of a deployment on NATS core subjects
// (no JetStream: a lost notice costs a cache's TTL, never an order). They implement shop.Notices.
type Notices struct{ nc *nats.Conn }

// Notices returns the notices carried by the queue's connection.
func (q *Queue) Notices() Notices { return Notices{nc: q.nc} }

// Publish sends data on subject.
func (n Notices) Publish(subject string, data []byte) error { return n.nc.Publish(subject, data) }

// Subscribe calls handle with each notice on subject (wildcards allowed) until stop is called.
func (n Notices) Subscribe(subject string, handle func(subject string, data []byte)) (stop func(), err error) {
	sub, err := n.nc.Subscribe(subject, func(m *nats.Msg) { handle(m.Subject, m.Data) })
	if err != nil {
		return nil, err
	}
	return func() { _ = sub.Unsubscribe() }, nil
}

// Connected reports whether the queue's connection to NATS is up (the readiness check).
func (q *Queue) Connected() error {
	if !q.IsConnected() {
		return errors.New("disconnected")
	}
	return nil
}

// IsConnected reports whether the queue's connection to NATS is up.
func (q *Queue) IsConnected() bool { return q.nc.IsConnected() }

// Ping checks that Postgres answers (the readiness check).
func (d *DB) Ping(ctx context.Context) error {
	sqlDB, err := d.g.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}
