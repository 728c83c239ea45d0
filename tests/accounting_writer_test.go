package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/pipeline"
	"github.com/flashsale/flashsale/services/purchase"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// Two instances on one Redis with their own embedded NATS would be two queues: the second refuses
// to start and says what to do; once the first has stopped, it starts.
func TestSecondEmbeddedNATSRefused(t *testing.T) {
	t.Parallel()
	a := newHarness(t, harnessOpts{})
	env := mergeEnv(a.env, map[string]string{
		"FLASHSALE_DATA_DIR":  t.TempDir(),
		"FLASHSALE_NATS_PORT": strconv.Itoa(testenv.FreePort(t)),
	})
	cfg, err := app.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	_, err = app.New(context.Background(), cfg, log)
	if !errors.Is(err, store.ErrEmbeddedNATSLive) || !strings.Contains(err.Error(), "FLASHSALE_NATS_URL") {
		t.Fatalf("second embedded NATS on the same Redis: %v, want a refusal naming FLASHSALE_NATS_URL", err)
	}
	a.srv.Close()
	a.app.Close() // drops the registration
	b, err := app.New(context.Background(), cfg, log)
	if err != nil {
		t.Fatalf("embedded NATS after the first instance stopped: %v", err)
	}
	b.Close()
}

// A message the writer can never write goes to the dead-letter stream, is counted, and the
// backlog returns to zero; the sale goes on.
func TestPoisonMessageDeadLettered(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.liveSale(5)
	ctx := context.Background()
	deadBefore, _ := h.app.Queue.DeadCount(ctx)
	// A well-formed envelope Postgres can never take (a reservation time out of its range) next
	// to one that is not JSON at all.
	poison, _ := json.Marshal(store.Envelope{Orders: []store.QueuedOrder{{
		OrderID: purchase.NewOrderID(s.items[0], time.Now()), SaleID: s.sale, ItemID: s.items[0], UserID: 99, Seq: 1,
		ReservedAt: 1 << 62}}})
	if err := h.app.Queue.PublishRaw(ctx, "poison-1", poison); err != nil {
		t.Fatal(err)
	}
	if err := h.app.Queue.PublishRaw(ctx, "poison-2", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	alice := h.token(1, auth.RoleShopper)
	if r := h.buy(alice, s.items[0], h.purchaseToken(alice, s.sale)); r.Status != http.StatusAccepted {
		t.Fatalf("buy beside the poison: %d %s", r.Status, r.Raw)
	}
	h.drain(s) // the backlog returns to zero
	dead, err := h.app.Queue.DeadCount(ctx)
	if err != nil || dead-deadBefore != 2 {
		t.Errorf("dead letters = %d (%v), want 2 more", dead-deadBefore, err)
	}
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE status = 'PENDING'`); got != 1 {
		t.Errorf("PENDING orders = %d, want 1 (the real one)", got)
	}
	h.checkInvariants(s)
}

// Writer workers writing batches that touch the same items in different orders, while orders
// expire, never deadlock: every transaction locks items in id order.
func TestWriterNoDeadlocks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noWriter: true, env: map[string]string{"FLASHSALE_WRITER_WORKERS": "8", "FLASHSALE_WRITER_BATCH": "4"}})
	s := h.createSaleWith(map[string]any{"purchaseLimit": "per-item", "paymentWindowSeconds": 1}, time.Now().Add(-time.Second), 400, 400, 400, 400, 400)
	var wg sync.WaitGroup
	for i := range 600 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok := h.token(int64(5000+i), auth.RoleShopper)
			// each shopper buys three items, in an order of its own
			for k := range 3 {
				it := s.items[(i+k*(1+i%4))%len(s.items)]
				h.buy(tok, it, h.purchaseToken(tok, s.sale))
			}
		}()
	}
	wg.Wait()
	var before int64
	h.sql().Raw(`SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&before)
	h.app.Start(context.Background(), true, false)
	h.drain(s)
	time.Sleep(1500 * time.Millisecond) // the expiry of the first written overlaps the last writes
	var after int64
	h.sql().Raw(`SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&after)
	if after != before {
		t.Errorf("deadlocks in Postgres during the writes and expiries: %d", after-before)
	}
	var m dto.Metric
	if err := h.app.Metrics.WriterRetries.WithLabelValues("40P01").Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetCounter().GetValue(); n != 0 {
		t.Errorf("writer batches retried after a deadlock: %v", n)
	}
	// Every order has a one-second window and none is paid: the check waits for the final state,
	// every order expired and its unit back in Redis. Checked while the keeper still expires
	// them, Postgres and Redis are read a few expiries apart (conservation off by those units:
	// seen on a loaded machine).
	testenv.Eventually(t, 60*time.Second, "every order expired and its unit back", func() error {
		if n := h.sqlInt(`SELECT count(*) FROM orders WHERE sale_id = ? AND status = 'PENDING'`, s.sale); n != 0 {
			return fmt.Errorf("%d orders still PENDING", n)
		}
		return noReturnsPending(h)()
	})
	h.checkInvariants(s)
}

// A writer that dies holding a batch (fetched, never written nor acknowledged) delays those
// orders by one ack wait at most: another instance's writer writes them then, not 30 s later.
func TestDeadWriterStallsNoOneLong(t *testing.T) {
	t.Parallel()
	a := newHarness(t, harnessOpts{noWriter: true, env: map[string]string{"FLASHSALE_WRITER_ACK_WAIT": "2s"}})
	b := newHarness(t, harnessOpts{shared: a, noWriter: true, env: map[string]string{"FLASHSALE_WRITER_ACK_WAIT": "2s"}})
	s := a.liveSale(50)
	orders := a.buyN(s, s.items[0], 100, 20)
	// The dead writer: it took every message and will never answer for them.
	taken, err := a.app.Queue.FetchOrders(context.Background(), 1000, time.Second, 0)
	if err != nil || len(taken) == 0 {
		t.Fatalf("fetch as the dying writer: %d messages, %v", len(taken), err)
	}
	died := time.Now()
	b.app.Start(context.Background(), true, false)
	testenv.Eventually(t, 8*time.Second, "orders held by a dead writer written (ack wait 2 s)", func() error {
		if n := a.sqlInt(`SELECT count(*) FROM orders WHERE item_id = ?`, s.items[0]); n < int64(len(orders)) {
			return fmt.Errorf("%d of %d in Postgres", n, len(orders))
		}
		return nil
	})
	t.Logf("written %.1f s after the writer died", time.Since(died).Seconds())
	a.checkInvariants(s)
}

// A live writer whose Postgres is slow keeps its batch: in-progress acks stop the queue from
// handing it to another worker meanwhile.
func TestSlowBatchIsNotRedelivered(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noWriter: true, env: map[string]string{"FLASHSALE_WRITER_ACK_WAIT": "1s"}})
	s := h.liveSale(10)
	h.buyN(s, s.items[0], 100, 5)
	slow := pipeline.NewWriter(pipeline.WriterConfig{Workers: 2, Batch: 100, AckWait: time.Second}, h.app.Queue, h.app.DB, h.app.Stock, h.app.SoldOut, h.app.Metrics, h.app.Log)
	var once sync.Once
	slow.AfterCommit = func() error {
		once.Do(func() { time.Sleep(3500 * time.Millisecond) }) // three ack waits and more
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go slow.Run(ctx)
	h.drain(s)
	var m dto.Metric
	if err := h.app.Metrics.Written.WithLabelValues("redelivered").Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetCounter().GetValue(); n != 0 {
		t.Errorf("orders redelivered while their batch was being written: %v", n)
	}
	cancel()
	h.checkInvariants(s)
}
