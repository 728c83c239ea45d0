// Package metrics holds the Prometheus collectors of the flash-sale rules.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Metrics are the Prometheus collectors of the flash-sale rules.
type Metrics struct {
	Purchases      *prometheus.CounterVec
	PublishBatch   prometheus.Histogram
	PublishSeconds prometheus.Histogram
	Written        *prometheus.CounterVec
	WriteBatch     prometheus.Histogram
	Released       *prometheus.CounterVec
	Backlog        prometheus.Gauge
	RedisLoss      *prometheus.CounterVec
	Expired        prometheus.Counter
	Cancelled      prometheus.Counter
	Returned       *prometheus.CounterVec
	PendingReturns prometheus.Gauge
	Rebuilds       prometheus.Counter
	Mismatches     *prometheus.GaugeVec
	Repairs        prometheus.Counter
	WriterRetries  *prometheus.CounterVec
	Borrows        prometheus.Counter
	DrawEntries    prometheus.Counter     // purchases acknowledged as entries of a fair-start draw
	Draws          *prometheus.CounterVec // draws decided and applied, by step (decided, applied)
	Transfers      prometheus.Counter
	Payments       *prometheus.CounterVec

	purchaseBy sync.Map // outcome -> prometheus.Counter: Purchases' children, looked up once each
}

// Purchase is the counter of purchases with this outcome (ACCEPTED, or the refusal's code): the
// child of Purchases, its label hashed once per outcome instead of once per purchase.
func (m *Metrics) Purchase(outcome string) prometheus.Counter {
	if c, ok := m.purchaseBy.Load(outcome); ok {
		return c.(prometheus.Counter)
	}
	c, _ := m.purchaseBy.LoadOrStore(outcome, m.Purchases.WithLabelValues(outcome))
	return c.(prometheus.Counter)
}

// New registers the collectors on reg.
func New(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	return &Metrics{
		Purchases: f.NewCounterVec(prometheus.CounterOpts{Name: "flashsale_purchases_total",
			Help: "Purchase attempts by outcome code (ACCEPTED for 202)."}, []string{"outcome"}),
		PublishBatch: f.NewHistogram(prometheus.HistogramOpts{Name: "flashsale_publish_batch_orders",
			Help:    "Reservations acknowledged by one JetStream write.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500}}),
		PublishSeconds: f.NewHistogram(prometheus.HistogramOpts{Name: "flashsale_publish_seconds",
			Help:    "Time from a JetStream publish to its PubAck.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		Written: f.NewCounterVec(prometheus.CounterOpts{Name: "flashsale_writer_orders_total",
			Help: "Orders the writer handled, by result."}, []string{"result"}),
		WriteBatch: f.NewHistogram(prometheus.HistogramOpts{Name: "flashsale_writer_batch_orders",
			Help:    "Orders written by one Postgres transaction.",
			Buckets: []float64{1, 10, 50, 100, 250, 500, 1000, 2500, 5000}}),
		Released: f.NewCounterVec(prometheus.CounterOpts{Name: "flashsale_released_units_total",
			Help: "Reservations given back, by reason."}, []string{"reason"}),
		Backlog: f.NewGauge(prometheus.GaugeOpts{Name: "flashsale_queue_backlog_messages",
			Help: "Order messages the writer has not acknowledged."}),
		RedisLoss: f.NewCounterVec(prometheus.CounterOpts{Name: "flashsale_redis_data_loss_total",
			Help: "Times a sale's Redis state was found to have lost data, by how it was found."}, []string{"detected_by"}),
		Expired: f.NewCounter(prometheus.CounterOpts{Name: "flashsale_orders_expired_total",
			Help: "PENDING orders expired after their payment window."}),
		Cancelled: f.NewCounter(prometheus.CounterOpts{Name: "flashsale_orders_cancelled_total",
			Help: "PENDING orders cancelled by their shopper."}),
		Returned: f.NewCounterVec(prometheus.CounterOpts{Name: "flashsale_units_returned_total",
			Help: "Units of expired or cancelled orders given back in Redis, by reason."}, []string{"reason"}),
		PendingReturns: f.NewGauge(prometheus.GaugeOpts{Name: "flashsale_stock_returns_pending",
			Help: "Units given back in Postgres and not yet in Redis (retried until Redis takes them)."}),
		Rebuilds: f.NewCounter(prometheus.CounterOpts{Name: "flashsale_redis_rebuilds_total",
			Help: "Sales (re)loaded into Redis from Postgres."}),
		Mismatches: f.NewGaugeVec(prometheus.GaugeOpts{Name: "flashsale_reconcile_mismatched_items",
			Help: "Items whose Redis and Postgres disagreed at the last reconciliation, by sale."}, []string{"sale"}),
		Repairs: f.NewCounter(prometheus.CounterOpts{Name: "flashsale_reconcile_repairs_total",
			Help: "Sales repaired from Postgres after a mismatch persisted."}),
		WriterRetries: f.NewCounterVec(prometheus.CounterOpts{Name: "flashsale_writer_retries_total",
			Help: "Batches the writer had to retry, by cause (a Postgres SQLSTATE, or redis, or other)."}, []string{"cause"}),
		Borrows: f.NewCounter(prometheus.CounterOpts{Name: "flashsale_stock_borrows_total",
			Help: "Purchases of a sharded sale whose shard ran dry and borrowed units from another shard."}),
		DrawEntries: f.NewCounter(prometheus.CounterOpts{Name: "flashsale_draw_entries_total",
			Help: "Purchases in a fair start's window acknowledged as entries of its draw."}),
		Draws: f.NewCounterVec(prometheus.CounterOpts{Name: "flashsale_draws_total",
			Help: "Fair-start draws by step: decided (in Postgres, once per sale), applied (to a Redis shard, once per shard)."}, []string{"step"}),
		Transfers: f.NewCounter(prometheus.CounterOpts{Name: "flashsale_stock_transfers_completed_total",
			Help: "Transfers between stock shards left half-done (a process died) that the keeper completed."}),
		Payments: f.NewCounterVec(prometheus.CounterOpts{Name: "flashsale_payments_total",
			Help: "Payment events and provider calls by what came of them (paid, refund_due, duplicate, refunded, session_expired, provider_error …)."}, []string{"outcome"}),
	}
}

// ObservePublish records one JetStream write of n reservations.
func (m *Metrics) ObservePublish(n int, d time.Duration, err error) {
	if err != nil {
		return
	}
	m.PublishBatch.Observe(float64(n))
	m.PublishSeconds.Observe(d.Seconds())
}

// Discard counts into collectors registered nowhere: what a service counts into when it is
// given no metrics (tests, tools), so no rule ever checks whether it has any.
var Discard = New(prometheus.NewRegistry())

// Or returns m, or Discard when m is nil.
func Or(m *Metrics) *Metrics {
	if m == nil {
		return Discard
	}
	return m
}
