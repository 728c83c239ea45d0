package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
	// Draw: an entry of the sale's fair-start draw (no unit taken), written ENTERED until the
	// draw decides it (its rank derives from its order id and the sale's seed: shop.DrawKey).
	Draw bool `json:"draw,omitempty"`
}

// Envelope is one JetStream message: the reservations that one durable write acknowledged.
type Envelope struct {
	Orders []QueuedOrder `json:"orders"`
}

// Queue is the durable hand-off between the purchase path and the writer.
type Queue struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	opt queueOptions

	mu      sync.Mutex
	cons    jetstream.Consumer
	ackWait time.Duration

	retries atomic.Uint64 // publish attempts repeated (PublishRetries)
}

// QueueOption is an optional setting of OpenQueue.
type QueueOption func(*queueOptions)

type queueOptions struct {
	replicas int
	log      *slog.Logger
	ackWait  time.Duration
}

// WithReplicas makes the order and dead-letter streams (and the writer's durable consumer) keep
// n copies, one per NATS server (FLASHSALE_NATS_REPLICAS): an existing stream with another count
// is scaled to n. Without it a new stream gets one copy and an existing one keeps its count, as a
// tool that only reads the queue (reconcile) must leave it.
func WithReplicas(n int) QueueOption { return func(o *queueOptions) { o.replicas = n } }

// WithAckWait sets how long the writer's consumer waits for an ack before it redelivers a batch
// (FLASHSALE_WRITER_ACK_WAIT; without it, 30 s).
func WithAckWait(d time.Duration) QueueOption { return func(o *queueOptions) { o.ackWait = d } }

// WithLog makes the queue log its connection's losses and recoveries and a stream's rescaling.
func WithLog(l *slog.Logger) QueueOption { return func(o *queueOptions) { o.log = l } }

// DedupeWindow is how long the order stream remembers a message id: a publish resent with the
// same id within it is stored once. A publish never waits longer than this (the publish timeout is
// capped below it), so every resend of one purchase falls inside the window.
const DedupeWindow = 2 * time.Minute

// OpenQueue connects to NATS at url and makes sure the order and dead-letter streams exist.
// url may list several servers of one cluster, comma-separated
// (nats://a:4222,nats://b:4222); the client connects to one of them (the order is shuffled, so
// instances spread over the cluster), learns the others from it, and when its server goes away
// reconnects to another, forever. A credential may be in a URL: nats://TOKEN@host:port. creds, if
// not empty, is a NATS credentials file (user JWT and seed) for an external server.
func OpenQueue(ctx context.Context, url, creds string, options ...QueueOption) (*Queue, error) {
	q := &Queue{}
	for _, o := range options {
		o(&q.opt)
	}
	if q.opt.log == nil {
		q.opt.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if q.opt.ackWait <= 0 {
		q.opt.ackWait = 30 * time.Second
	}
	q.ackWait = q.opt.ackWait
	if q.opt.replicas < 0 || q.opt.replicas > MaxReplicas {
		return nil, fmt.Errorf("nats: %d stream replicas: want 1 to %d", q.opt.replicas, MaxReplicas)
	}
	log := q.opt.log
	opts := []nats.Option{
		nats.Name("flashsale"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
		// A server that vanished without closing the connection (a host or network gone) is
		// noticed within three pings, not the client's default four minutes.
		nats.PingInterval(5 * time.Second),
		nats.MaxPingsOutstanding(3),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(c *nats.Conn, err error) {
			if !c.IsClosed() {
				log.Warn("nats: disconnected, reconnecting", "err", err)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn("nats: asynchronous error", "err", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("nats: reconnected", "server", c.ConnectedServerName(), "url", redactURL(c.ConnectedUrl()))
		}),
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
	q.nc, q.js = nc, js
	if err := q.ensureStreams(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return q, nil
}

// MaxReplicas is the most copies JetStream keeps of a stream.
const MaxReplicas = 5

func (q *Queue) ensureStreams(ctx context.Context) error {
	cfgs := []jetstream.StreamConfig{
		{
			Name:        OrdersStream,
			Subjects:    []string{OrdersSubject},
			Storage:     jetstream.FileStorage,
			Retention:   jetstream.LimitsPolicy,
			MaxAge:      7 * 24 * time.Hour,
			Duplicates:  DedupeWindow,
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
		if err := q.ensureStream(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// ensureStream creates the stream or updates it to c with the wanted replica count. A cluster
// that is still electing its leaders (every server starting at once) is waited for, up to 30 s.
func (q *Queue) ensureStream(ctx context.Context, c jetstream.StreamConfig) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		err := q.tryEnsureStream(ctx, c)
		if err == nil || !transientJS(err) || ctx.Err() != nil {
			return err
		}
		q.opt.log.Warn("nats: stream not ready, retrying", "stream", c.Name, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

func (q *Queue) tryEnsureStream(ctx context.Context, c jetstream.StreamConfig) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c.Replicas = q.opt.replicas
	have := 0
	if s, err := q.js.Stream(cctx, c.Name); err == nil {
		have = s.CachedInfo().Config.Replicas
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("stream %s: %w", c.Name, err)
	}
	switch {
	case c.Replicas == 0 && have > 0:
		c.Replicas = have // not asked to change it: keep the stream's count
	case c.Replicas == 0:
		c.Replicas = 1
	case have > 0 && have != c.Replicas:
		q.opt.log.Warn("nats: changing the stream's replica count", "stream", c.Name, "from", have, "to", c.Replicas)
	}
	_, err := q.js.CreateOrUpdateStream(cctx, c)
	if err == nil {
		return nil
	}
	if c.Replicas > 1 && !transientJS(err) {
		verb := "create"
		if have > 0 {
			verb = fmt.Sprintf("change from %d to", have)
		}
		return fmt.Errorf("stream %s: cannot %s %d replicas: %w (each replica needs its own JetStream server: "+
			"FLASHSALE_NATS_REPLICAS=%d needs a NATS cluster of at least %d servers)", c.Name, verb, c.Replicas, err, c.Replicas, c.Replicas)
	}
	return fmt.Errorf("stream %s: %w", c.Name, err)
}

// transientJS reports whether a JetStream request failed for a moment only: no server answered
// (a stream or the meta group between leaders), the request timed out, or JetStream said it is
// temporarily unavailable. A refusal (a bad request, a full disk, a sealed stream) is not.
func transientJS(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case 10008, // JetStream system temporarily unavailable
			10009, // JetStream cluster can not handle request (not the leader)
			10118, // stream is offline
			10194, // stream is offline: reason
			// duplicate message id is in process: a replicated stream is storing another publish
			// of the same message (a purchase sent again while its first send publishes); asked
			// again once that one is stored, the answer is a duplicate's ack, and if that one
			// failed, this one is stored. Never a failure of the message.
			10158:
			return true
		}
		return false
	}
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrReconnectBufExceeded) || errors.Is(err, nats.ErrDisconnected)
}

// redactURL hides the credentials in a NATS URL or a comma-separated list of them.
func redactURL(u string) string {
	parts := strings.Split(u, ",")
	for i, p := range parts {
		scheme, rest, ok := strings.Cut(p, "://")
		if at := strings.LastIndex(rest, "@"); ok && at >= 0 {
			parts[i] = scheme + "://****@" + rest[at+1:]
		}
	}
	return strings.Join(parts, ",")
}

// Close drains nothing: it closes the connection.
func (q *Queue) Close() { q.nc.Close() }

// ServerName names the NATS server the queue is connected to now.
func (q *Queue) ServerName() string { return q.nc.ConnectedServerName() }

// Publish writes one envelope durably and waits for JetStream's acknowledgement, until ctx ends.
// msgID deduplicates a retried publish.
func (q *Queue) Publish(ctx context.Context, msgID string, env Envelope) error {
	data, err := json.Marshal(env)
	if err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	if err := q.publish(ctx, OrdersSubject, data, jetstream.WithMsgID(msgID), jetstream.WithExpectStream(OrdersStream)); err != nil {
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
	if err := q.publish(ctx, DeadSubject, data, jetstream.WithMsgID(msgID)); err != nil {
		return fmt.Errorf("dead letter %s: %w", msgID, err)
	}
	return nil
}

// First wait of a publish for its acknowledgement, doubled on each retry up to the last.
const (
	publishAttemptFirst = time.Second
	publishAttemptMax   = 4 * time.Second
)

// publish sends one message and waits for its acknowledgement, repeating it (same message id:
// JetStream stores it once) while the failure is a passing one, until ctx ends: a replicated
// stream electing a new leader after one of its servers died has no one to answer for a few
// seconds, and a request sent to a server that died before answering is never answered. A
// refusal (stream full, disk full, wrong stream) returns at once.
func (q *Queue) publish(ctx context.Context, subject string, data []byte, opts ...jetstream.PublishOpt) error {
	// The client's own retry on "no responders" is replaced by this loop, bounded by ctx.
	opts = append(opts, jetstream.WithRetryAttempts(0))
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, publishAttemptMax+publishAttemptFirst)
		defer cancel()
	}
	attempt, pause := publishAttemptFirst, 50*time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		_, err := q.js.Publish(actx, subject, data, opts...)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (last attempt: %v)", ctx.Err(), err)
		}
		if !transientJS(err) {
			return err
		}
		q.retries.Add(1)
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			attempt = min(2*attempt, publishAttemptMax) // unanswered: wait longer next time
			continue
		}
		// Answered at once that no one can take it (between leaders): try again shortly.
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last attempt: %v)", ctx.Err(), err)
		case <-time.After(pause):
		}
		pause = min(2*pause, 500*time.Millisecond)
	}
}

// PublishRetries counts the publish attempts repeated since the queue was opened (a leader
// election, a server lost mid-request).
func (q *Queue) PublishRetries() uint64 { return q.retries.Load() }
