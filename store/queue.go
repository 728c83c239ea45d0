package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Names of the JetStream streams, subjects and the writer's durable consumer.
const (
	OrdersStream   = "ORDERS"
	OrdersSubject  = "orders.reserved"
	DeadStream     = "ORDERS_DLQ"
	DeadSubject    = "orders.dead"
	WriterConsumer = "writer"
)

// EmbeddedNATSToken makes a new random credential for the embedded NATS server and keeps it in
// dir (file nats.token, readable by its owner only), where `flashsale reconcile` and an operator
// find it. Without it no local process can connect, so none can publish a forged sold-out notice
// or order.
func EmbeddedNATSToken(dir string) (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(b[:])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("nats token: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nats.token"), []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("nats token: %w", err)
	}
	return tok, nil
}

// ReadEmbeddedNATSToken reads the credential a running embedded server was started with.
func ReadEmbeddedNATSToken(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "nats.token"))
	if err != nil {
		return "", fmt.Errorf("the embedded NATS credential (is an instance with FLASHSALE_DATA_DIR=%s running?): %w", dir, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// EmbeddedNATSURL is the URL a client uses for the embedded server: the credential in it.
func EmbeddedNATSURL(port int, token string) string {
	return fmt.Sprintf("nats://%s@127.0.0.1:%d", token, port)
}

// StartNATS starts an in-process NATS server with JetStream file storage under dir, listening
// on 127.0.0.1:port (-1 picks a free port), accepting only clients that present token.
// syncAlways makes every acknowledged message fsynced.
func StartNATS(dir string, port int, syncAlways bool, token string) (*server.Server, error) {
	if token == "" {
		return nil, errors.New("nats server: a credential is required")
	}
	opts := &server.Options{
		ServerName:    "flashsale",
		Host:          "127.0.0.1",
		Port:          port,
		Authorization: token,
		JetStream:     true,
		StoreDir:      filepath.Join(dir, "jetstream"),
		SyncAlways:    syncAlways,
		NoSigs:        true,
		NoLog:         true,
		MaxPayload:    8 << 20,
	}
	if syncAlways {
		opts.SyncInterval = 2 * time.Minute
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("nats server: not ready after 10s")
	}
	return ns, nil
}

// QueuedOrder is one reservation on its way from Redis to Postgres.
type QueuedOrder struct {
	OrderID    string `json:"orderId"`
	SaleID     int64  `json:"saleId"`
	ItemID     int64  `json:"itemId"`
	UserID     int64  `json:"userId"`
	Seq        int64  `json:"seq"`        // the sale's reservation counter in Redis
	ReservedAt int64  `json:"reservedAt"` // unix milliseconds, Redis's clock
}

// Envelope is one JetStream message: the reservations that one durable write acknowledged.
type Envelope struct {
	Orders []QueuedOrder `json:"orders"`
}

// Queue is the durable hand-off between the purchase path and the writer.
type Queue struct {
	nc *nats.Conn
	js jetstream.JetStream

	mu      sync.Mutex
	cons    jetstream.Consumer
	ackWait time.Duration
}

// OpenQueue connects to NATS at url (a credential may be in it: nats://TOKEN@host:port) and
// makes sure the order and dead-letter streams exist. creds, if not empty, is a NATS credentials
// file (user JWT and seed) for an external server.
func OpenQueue(ctx context.Context, url, creds string) (*Queue, error) {
	opts := []nats.Option{
		nats.Name("flashsale"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(200 * time.Millisecond),
		nats.RetryOnFailedConnect(false),
	}
	if creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("nats %s: %w", redactURL(url), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	q := &Queue{nc: nc, js: js}
	if err := q.ensureStreams(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return q, nil
}

func (q *Queue) ensureStreams(ctx context.Context) error {
	cfgs := []jetstream.StreamConfig{
		{
			Name:        OrdersStream,
			Subjects:    []string{OrdersSubject},
			Storage:     jetstream.FileStorage,
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      7 * 24 * time.Hour,
			Duplicates:  2 * time.Minute,
			Description: "reserved orders on their way to Postgres",
		},
		{
			Name:        DeadStream,
			Subjects:    []string{DeadSubject},
			Storage:     jetstream.FileStorage,
			MaxAge:      30 * 24 * time.Hour,
			Description: "orders Postgres refused",
		},
	}
	for _, c := range cfgs {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := q.js.CreateOrUpdateStream(cctx, c)
		cancel()
		if err != nil {
			return fmt.Errorf("stream %s: %w", c.Name, err)
		}
	}
	return nil
}

// redactURL hides a credential in a NATS URL.
func redactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if at := strings.LastIndex(rest, "@"); ok && at >= 0 {
		return scheme + "://****@" + rest[at+1:]
	}
	return u
}

// Close drains nothing: it closes the connection.
func (q *Queue) Close() { q.nc.Close() }

// Conn exposes the NATS connection (broadcasts, health).
func (q *Queue) Conn() *nats.Conn { return q.nc }

// Publish writes one envelope durably and waits for JetStream's acknowledgement. msgID
// deduplicates a retried publish.
func (q *Queue) Publish(ctx context.Context, msgID string, env Envelope) error {
	data, err := json.Marshal(env)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	_, err = q.js.Publish(ctx, OrdersSubject, data, jetstream.WithMsgID(msgID), jetstream.WithExpectStream(OrdersStream))
	if err != nil {
		return fmt.Errorf("publish %s: %w", msgID, err)
	}
	return nil
}

// PublishDead records refused orders in the dead-letter stream with the reason.
func (q *Queue) PublishDead(ctx context.Context, msgID string, orders []QueuedOrder, reason string) error {
	data, err := json.Marshal(struct {
		Orders []QueuedOrder `json:"orders"`
		Reason string        `json:"reason"`
	}{orders, reason})
	if err != nil {
		return fmt.Errorf("dead letter: %w", err)
	}
	if _, err := q.js.Publish(ctx, DeadSubject, data, jetstream.WithMsgID(msgID)); err != nil {
		return fmt.Errorf("dead letter %s: %w", msgID, err)
	}
	return nil
}

// SetAckWait sets how long the writer's consumer waits for an ack before redelivering (before the
// first FetchOrders).
func (q *Queue) SetAckWait(d time.Duration) {
	q.mu.Lock()
	q.ackWait = d
	q.mu.Unlock()
}

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
// per wait and a busy one never waits to fill a batch. The writer's durable consumer is created
// on first use.
func (q *Queue) FetchOrders(ctx context.Context, max int, wait time.Duration) ([]Delivery, error) {
	q.mu.Lock()
	cons, ackWait := q.cons, q.ackWait
	q.mu.Unlock()
	if cons == nil {
		if ackWait <= 0 {
			ackWait = 30 * time.Second
		}
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
	if len(msgs) > 0 || (err != nil && !errors.Is(err, jetstream.ErrNoMessages)) {
		return msgs, ignoreNoMessages(err)
	}
	b, err = cons.Fetch(1, jetstream.FetchMaxWait(wait))
	if err != nil {
		return nil, err
	}
	msgs, err = collect(b)
	return msgs, ignoreNoMessages(err)
}

func ignoreNoMessages(err error) error {
	if errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, nats.ErrTimeout) {
		return nil
	}
	return err
}

// PublishRaw publishes an arbitrary body on the orders subject (tests: a poison message).
func (q *Queue) PublishRaw(ctx context.Context, msgID string, data []byte) error {
	_, err := q.js.Publish(ctx, OrdersSubject, data, jetstream.WithMsgID(msgID), jetstream.WithExpectStream(OrdersStream))
	return err
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
