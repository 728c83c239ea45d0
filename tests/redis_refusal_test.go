package tests

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// A Redis that refuses writes (out of memory under noeviction, unable to persist, read-only)
// while acknowledged orders wait in the queue is an outage: the writer retries them with backoff
// for as long as it lasts (well past the five deliveries that dead-letter a poison message), and
// once Redis accepts writes again every order reaches Postgres, each unit sold once. Before the
// writer classified errors by kind, the claim script's "OOM … on @user_script:N." was taken for
// the message's fault: the orders were dead-lettered and their units sold again.
func TestWriterWaitsOutRedisRefusals(t *testing.T) {
	t.Parallel()
	for _, r := range testenv.Refusals {
		t.Run(string(r), func(t *testing.T) {
			t.Parallel()
			writerWaitsOutRefusal(t, r)
		})
	}
	// A real script bug (the sale's counter corrupted, so the claim script fails comparing nil
	// with a number on every delivery) is the message's own: dead-lettered after five deliveries,
	// its units given back, never retried forever.
	t.Run("script bug", func(t *testing.T) {
		t.Parallel()
		scriptBugIsDeadLettered(t)
	})
}

// writerWaitsOutRefusal: with Redis refusing writes of kind r, the writer fails more often than a
// poison message is allowed, dead-letters nothing and writes nothing; once lifted, every order is
// written, none dead-lettered.
func writerWaitsOutRefusal(t *testing.T, r testenv.Refusal) {
	ctx := context.Background()
	h := newHarness(t, harnessOpts{noWriter: true})
	s := h.liveSale(5)
	// One order, so one message: every failed try of the writer is one of its deliveries.
	ids := buyQueued(h, s, 1)
	lift := h.redis.Refuse(t, r)
	cause := "redis_" + string(r)
	h.app.Start(ctx, true, false)
	// More failed deliveries than a poison message is allowed (five).
	waitUntil(t, 30*time.Second, "the writer to fail 7 times on "+cause, func() bool {
		return counterValue(h.app.Metrics.WriterRetries.WithLabelValues(cause)) >= 7
	})
	if n, err := h.app.Queue.DeadCount(ctx); err != nil || n != 0 {
		t.Fatalf("dead letters during the %s outage: %d (err %v), want 0", r, n, err)
	}
	if n := h.sqlInt(`SELECT count(*) FROM orders WHERE sale_id = ?`, s.sale); n != 0 {
		t.Fatalf("%d orders written while Redis refused the claim", n)
	}
	lift()
	h.checkInvariants(s)
	for _, id := range ids {
		if o := h.orderOf(id); o != "PENDING" {
			t.Errorf("order %s after the %s outage: %s, want PENDING", id, r, o)
		}
	}
	if n, _ := h.app.Queue.DeadCount(ctx); n != 0 {
		t.Errorf("dead letters after the %s outage: %d, want 0", r, n)
	}
}

// scriptBugIsDeadLettered: a real script bug (the sale's counter corrupted, so the claim script
// fails comparing nil with a number on every delivery) is the message's own: dead-lettered after
// five deliveries, its units given back, never retried forever.
func scriptBugIsDeadLettered(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harnessOpts{noWriter: true})
	s := h.liveSale(5)
	buyQueued(h, s, 3)
	seq, err := h.app.Redis.HGet(ctx, store.MetaKey(s.sale), "seq").Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.app.Redis.HSet(ctx, store.MetaKey(s.sale), "seq", "corrupt").Err(); err != nil {
		t.Fatal(err)
	}
	h.app.Start(ctx, true, false)
	// Every message dead-lettered (the queue empty: none can be written while the counter is
	// corrupt) before the counter is put back, or a message still being retried would then
	// be written.
	waitUntil(t, 60*time.Second, "every poisoned message to be dead-lettered", func() bool {
		n, err := h.app.Queue.DeadCount(ctx)
		b, berr := h.app.Queue.Backlog(ctx)
		return err == nil && berr == nil && n > 0 && b == 0
	})
	if got := counterValue(h.app.Metrics.WriterRetries.WithLabelValues("redis")); got < 5 {
		t.Errorf("dead-lettered after %v failed tries, want at least 5", got)
	}
	if err := h.app.Redis.HSet(ctx, store.MetaKey(s.sale), "seq", seq).Err(); err != nil {
		t.Fatal(err)
	}
	if n := h.sqlInt(`SELECT count(*) FROM orders WHERE sale_id = ? AND status IN ('PENDING','PAID')`, s.sale); n != 0 {
		t.Errorf("%d live orders written from poisoned messages", n)
	}
	waitUntil(t, 10*time.Second, "the poisoned orders' units back", func() bool { return h.redisStock(s, s.items[0]) == 5 })
	h.mu.Lock()
	h.acked = nil // dead-lettered by design: the one case a 202 does not end in Postgres
	h.mu.Unlock()
	h.checkInvariants(s)
}

// buyQueued has n shoppers buy one unit each of the sale's first item and returns their order ids.
func buyQueued(h *harness, s saleIDs, n int) []string {
	h.t.Helper()
	var ids []string
	for i := range n {
		bearer := h.token(int64(7000+i), auth.RoleShopper)
		r := h.buy(bearer, s.items[0], h.purchaseToken(bearer, s.sale))
		if r.Status != http.StatusAccepted {
			h.t.Fatalf("buy %d: %d %s", i, r.Status, r.Raw)
		}
		ids = append(ids, r.str("orderId"))
	}
	return ids
}

// orderOf returns an order's status in Postgres ("" when it is not there).
func (h *harness) orderOf(id string) string {
	h.t.Helper()
	var st string
	if err := h.sql().Raw(`SELECT status FROM orders WHERE id = ?`, id).Scan(&st).Error; err != nil {
		h.t.Fatalf("order %s: %v", id, err)
	}
	return st
}

// waitUntil is testenv.Eventually for a yes/no condition: it polls cond until it holds, failing
// the test after d.
func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, d, what, testenv.Until(cond, "not yet"))
}

// counterValue reads a Prometheus counter.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
