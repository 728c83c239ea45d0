package tests

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// An instance whose embedded NATS registration lapsed and was taken by another instance (it was
// paused or cut off past the lease meanwhile) stops selling: purchases answer 503 with nothing
// reserved, readiness says why, and the jobs that judge "the queue has drained" wait (a merchant's
// Warm of a lost sale answers 503, the keeper does not rebuild it) while payment expiry goes on.
// Once it holds the registration again it sells again. Before, the lapse was only logged and the
// instance sold on beside a possible second queue.
func TestLapsedRegistrationStopsSelling(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := newHarness(t, harnessOpts{})
	// Orders unpaid after 2 s expire: the first one does while the registration is another's.
	s := h.createSaleWith(map[string]any{"paymentWindowSeconds": 2}, time.Now().Add(-time.Second), 5)
	shopper := h.token(7200, auth.RoleShopper)
	first := h.buy(shopper, s.items[0], h.purchaseToken(shopper, s.sale))
	if first.Status != http.StatusAccepted {
		t.Fatalf("buy while registered: %d %s", first.Status, first.Raw)
	}
	h.drain(s)

	// Another instance holds the registration now (ours lapsed while we could not renew it).
	if err := h.app.Redis.Set(ctx, "flashsale:embedded-nats", "site other|pid 1 (another instance)", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	other := h.token(7201, auth.RoleShopper)
	ptoken := h.purchaseToken(other, s.sale)
	waitUntil(t, 10*time.Second, "the instance to stop selling", func() bool {
		r := h.do("GET", "/readyz", "", nil)
		return r.Status == http.StatusServiceUnavailable && strings.Contains(r.Raw, "queue registration")
	})
	r := h.buy(other, s.items[0], ptoken)
	if r.Status != http.StatusServiceUnavailable || r.str("error") != string(shop.CodeUnavailable) {
		t.Fatalf("buy while the registration is another's: %d %s, want 503 UNAVAILABLE", r.Status, r.Raw)
	}
	// The queue's depth is not to be trusted, but payment expiry and unit returns go on (they
	// need no queue): the unpaid order expires and its unit comes back. Before, a keeper pass
	// whose queue did not answer did nothing at all.
	waitUntil(t, 15*time.Second, "the unpaid order to expire", func() bool { return h.orderOf(first.str("orderId")) == "EXPIRED" })
	waitUntil(t, 10*time.Second, "its unit back", func() bool { return h.redisStock(s, s.items[0]) == 5 })
	if flight, err := h.app.Stock.InFlight(ctx, s.sale); err != nil || len(flight) != 0 {
		t.Errorf("reservations in flight after the refused purchase: %v (err %v), want none", flight, err)
	}
	checkQueueJudgingJobsWait(t, h, s)

	// The other instance is gone: ours takes the registration again, the keeper rebuilds, it sells.
	if err := h.app.Redis.Del(ctx, "flashsale:embedded-nats").Err(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "the rebuild once the registration is held again", func() bool {
		st, err := h.app.Stock.State(ctx, s.sale)
		return err == nil && st.Loaded && !st.Lost
	})
	again := h.token(7202, auth.RoleShopper)
	if r := h.buy(again, s.items[0], h.purchaseToken(again, s.sale)); r.Status != http.StatusAccepted {
		t.Errorf("buy once the registration is held again: %d %s", r.Status, r.Raw)
	}
	h.checkInvariants(s)
}

// checkQueueJudgingJobsWait: the merchant's Warm of a lost sale judges the queue: it waits too
// (503), and the keeper does not rebuild the lost sale.
func checkQueueJudgingJobsWait(t *testing.T, h *harness, s saleIDs) {
	t.Helper()
	ctx := context.Background()
	// The merchant's Warm of a lost sale judges the queue: it waits too.
	if _, err := h.app.Stock.MarkLost(ctx, s.sale, 0, ""); err != nil {
		t.Fatal(err)
	}
	merchant := h.token(9000, auth.RoleMerchant)
	if r := h.saleAction(merchant, s.sale, "warm"); r.Status != http.StatusServiceUnavailable {
		t.Errorf("warm a lost sale while the registration is another's: %d %s, want 503", r.Status, r.Raw)
	}
	time.Sleep(1500 * time.Millisecond) // several keeper passes: none may rebuild
	if st, err := h.app.Stock.State(ctx, s.sale); err != nil || !st.Lost {
		t.Fatalf("the lost sale while the registration is another's: %+v (err %v), want it left lost (no rebuild)", st, err)
	}
}

// Instances sharing a Redis share one queue: one on an external NATS refuses to start beside a
// live instance with its embedded NATS, and the reverse; one on the embedded NATS of another
// instance (the same queue) starts. Before, an external instance started beside the embedded one:
// two queues, and each instance's jobs judged "drained" by its own.
func TestExternalAndEmbeddedNATSNeverMix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := newHarness(t, harnessOpts{})

	// Another NATS server: an external one, with its own JetStream.
	external := startExternalNATS(t)

	config := func(extra map[string]string) app.Config {
		env := mergeEnv(a.env, mergeEnv(map[string]string{"FLASHSALE_DATA_DIR": t.TempDir(), "FLASHSALE_NATS_PORT": strconv.Itoa(testenv.FreePort(t))}, extra))
		cfg, err := app.LoadConfig(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	// On the first instance's embedded NATS: the same queue.
	same, err := app.New(ctx, config(map[string]string{"FLASHSALE_NATS_URL": a.app.NATSURL}), log)
	if err != nil {
		t.Fatalf("an instance on the first one's embedded NATS: %v", err)
	}
	same.Close()
	// On another NATS: refused, naming what to do.
	if b, err := app.New(ctx, config(map[string]string{"FLASHSALE_NATS_URL": external}), log); !errors.Is(err, store.ErrAnotherQueue) || !strings.Contains(err.Error(), "FLASHSALE_NATS_URL") {
		if b != nil {
			b.Close()
		}
		t.Fatalf("an external NATS beside a live embedded one: %v, want ErrAnotherQueue naming FLASHSALE_NATS_URL", err)
	}

	// The reverse: the embedded instance gone, an external one runs; an embedded one is refused.
	a.srv.Close()
	a.app.Close()
	b, err := app.New(ctx, config(map[string]string{"FLASHSALE_NATS_URL": external}), log)
	if err != nil {
		t.Fatalf("an external NATS once the embedded instance stopped: %v", err)
	}
	defer b.Close()
	if c, err := app.New(ctx, config(nil), log); !errors.Is(err, store.ErrAnotherQueue) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("an embedded NATS beside a live external one: %v, want ErrAnotherQueue", err)
	}
	// The refused embedded instance dropped its registration: another external instance starts.
	c, err := app.New(ctx, config(map[string]string{"FLASHSALE_NATS_URL": external}), log)
	if err != nil {
		t.Fatalf("a second instance on the external NATS: %v", err)
	}
	c.Close()
}

// startExternalNATS starts another NATS server, an external one with its own JetStream, stopped
// when the test ends, and returns its URL.
func startExternalNATS(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	token, err := store.EmbeddedNATSToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	port := testenv.FreePort(t)
	ns, err := store.StartNATS(dir, port, false, token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	external := store.EmbeddedNATSURL(port, token)
	return external
}
