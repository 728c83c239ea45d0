package tests

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// A three-server NATS cluster keeps the order stream on all three (R3), and two instances'
// writers share its one durable consumer. The server leading the stream, which one instance is
// connected to, is killed with SIGKILL in the middle of a rush: purchases wait for the new leader
// instead of failing, every order answered 202 is in Postgres exactly once, nothing is written
// twice, both writers wrote, and the invariants hold.
func TestNATSClusterLosesANodeDuringARush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl := testenv.NATS(t, 3)
	env := map[string]string{
		"FLASHSALE_NATS_URL":      cl.URLs(),
		"FLASHSALE_NATS_REPLICAS": "3",
		// Longer than a stream's election after its leader died (4 to 9 s of NATS's raft
		// timers): a purchase waits for the new leader instead of failing.
		"FLASHSALE_PUBLISH_TIMEOUT": "15s",
		"FLASHSALE_WRITER_ACK_WAIT": "3s",
		"FLASHSALE_ORPHAN_AGE":      "60s",
	}
	a := newHarness(t, harnessOpts{env: env})
	b := newHarness(t, harnessOpts{shared: a, env: env})

	checkNATSReplicas(t, ctx, cl)
	victimName, victim := leadFromAsServer(t, ctx, cl, a, b)
	const units = 150
	s := a.liveSale(units, units)
	r := rushKillingAServer(t, cl, a, b, s, victim)
	t.Logf("answers: %v; slowest purchase %v; publishes retried: a %d, b %d", r.statuses, r.slowest.Round(time.Millisecond),
		a.app.Queue.PublishRetries(), b.app.Queue.PublishRetries())
	if r.killedAt.IsZero() {
		t.Fatal("the rush ended before the kill")
	}
	accepted := checkNoPurchaseFailed(t, a, b, r.statuses, units)

	// The stream has a new leader among the survivors.
	waitNewStreamLeader(t, ctx, cl, victimName, r.killedAt)

	acked := mergeAcked(t, a, b, accepted)
	a.checkInvariants(s)
	checkAckedLiveOnce(t, a, s, acked, accepted)
	checkBothWritersWrote(t, a, b, accepted)

	// The killed server comes back and catches up: the stream is on three current servers again.
	cl.RestartT(t, victim)
	waitStreamCurrentAgain(t, ctx, cl, victimName)
}

// waitNewStreamLeader waits for the order stream to have a leader other than the killed node.
func waitNewStreamLeader(t *testing.T, ctx context.Context, cl *testenv.NATSCluster, victimName string, killedAt time.Time) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, fmt.Sprintf("a new leader of the order stream after %s was killed", victimName), func() error {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		leader, err := cl.StreamLeader(qctx, store.OrdersStream)
		cancel()
		if err == nil && leader != "" && leader != victimName {
			t.Logf("new stream leader %s, %v after the kill", leader, time.Since(killedAt).Round(time.Millisecond))
			return nil
		}
		return fmt.Errorf("leader %q, err %v", leader, err)
	})
}

// waitStreamCurrentAgain waits for the order stream to be on three current servers again, the
// restarted one caught up.
func waitStreamCurrentAgain(t *testing.T, ctx context.Context, cl *testenv.NATSCluster, victimName string) {
	t.Helper()
	testenv.EventuallyEvery(t, 20*time.Second, 200*time.Millisecond, fmt.Sprintf("the order stream back on three current servers after %s restarted", victimName), func() error {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		info, err := cl.StreamInfo(qctx, store.OrdersStream)
		cancel()
		current := 0
		if err == nil && info.Cluster != nil {
			for _, p := range info.Cluster.Replicas {
				if p.Current && !p.Offline {
					current++
				}
			}
		}
		if current == 2 && info.State.Msgs > 0 {
			return nil
		}
		return fmt.Errorf("%d followers current, err %v", current, err)
	})
}

// checkNATSReplicas checks that both streams and the writers' consumer are on all three servers.
func checkNATSReplicas(t *testing.T, ctx context.Context, cl *testenv.NATSCluster) {
	t.Helper()
	for _, name := range []string{store.OrdersStream, store.DeadStream} {
		info, err := cl.StreamInfo(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.Replicas != 3 || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
			t.Fatalf("stream %s: replicas %d, cluster %v; want 3 (a leader and 2 followers)", name, info.Config.Replicas, clusterOf(info.Cluster))
		}
	}
	nc, err := cl.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// The writers create their consumer as they start; wait until it has elected its leader.
	ci := testenv.EventuallyValue(t, 20*time.Second, "a leader of the writers' consumer", func() (*jetstream.ConsumerInfo, error) {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := js.Consumer(qctx, store.OrdersStream, store.WriterConsumer)
		cancel()
		if err == nil && c.CachedInfo().Cluster != nil && c.CachedInfo().Cluster.Leader != "" {
			return c.CachedInfo(), nil
		}
		return nil, fmt.Errorf("no leader (err %v)", err)
	})
	if ci.Config.Replicas != 3 || len(ci.Cluster.Replicas) != 2 {
		t.Fatalf("consumer %s: replicas %d, %d followers; want 3 replicas (a leader and 2 followers)", store.WriterConsumer, ci.Config.Replicas, len(ci.Cluster.Replicas))
	}
}

// leadFromAsServer makes the server instance a is connected to lead the order stream, so that
// killing it takes away both a's connection and the stream's leader, and returns its name and
// index.
func leadFromAsServer(t *testing.T, ctx context.Context, cl *testenv.NATSCluster, a, b *harness) (string, int) {
	t.Helper()
	victimName := a.app.Queue.ServerName()
	mctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	if err := cl.MoveStreamLeader(mctx, store.OrdersStream, victimName); err != nil {
		t.Fatal(err)
	}
	cancel()
	_, victim := cl.Node(victimName)
	if victim < 0 {
		t.Fatalf("instance a is connected to %q, not a node of the cluster", victimName)
	}
	t.Logf("stream leader and instance a's server: %s; instance b's server: %s", victimName, b.app.Queue.ServerName())

	return victimName, victim
}

// natsRush is what rushKillingAServer saw: each answer's count, the slowest purchase and when
// the server was killed.
type natsRush struct {
	statuses map[string]int
	slowest  time.Duration
	killedAt time.Time
}

// rushKillingAServer has 400 shoppers, 24 at a time, buy on a and b in turn, and kills the
// cluster's node victim once a fifth of them are done.
func rushKillingAServer(t *testing.T, cl *testenv.NATSCluster, a, b *harness, s saleIDs, victim int) natsRush {
	const shoppers, workers = 400, 24
	var (
		done     atomic.Int64
		killOnce sync.Once
		killedAt time.Time
		mu       sync.Mutex
		statuses = map[string]int{}
		slowest  time.Duration
	)
	ids := make(chan int, shoppers)
	for i := range shoppers {
		ids <- i
	}
	close(ids)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ids {
				h := a
				if i%2 == 1 {
					h = b
				}
				user := int64(50_000 + i)
				tok := h.token(user, auth.RoleShopper)
				started := time.Now()
				r := buyOrSoldOut(h, tok, s.sale, s.items[i%len(s.items)])
				took := time.Since(started)
				key := fmt.Sprint(r.Status)
				if r.Status != http.StatusAccepted {
					key += " " + r.str("error")
				}
				mu.Lock()
				statuses[key]++
				slowest = max(slowest, took)
				mu.Unlock()
				if done.Add(1) == shoppers/5 {
					killOnce.Do(func() {
						cl.KillT(t, victim)
						killedAt = time.Now()
					})
				}
			}
		}()
	}
	wg.Wait()
	return natsRush{statuses: statuses, slowest: slowest, killedAt: killedAt}
}

// checkNoPurchaseFailed checks that every purchase was answered 202 or sold out (none failed
// over the lost server), that every unit was sold and that the kill hit the rush; it returns the
// number accepted.
func checkNoPurchaseFailed(t *testing.T, a, b *harness, statuses map[string]int, units int) int {
	t.Helper()
	// Every purchase was answered 202 or sold out: none failed over the lost server.
	accepted := statuses["202"]
	for k, n := range statuses {
		if k != "202" && k != "410 SOLD_OUT" {
			t.Errorf("%d purchases answered %s, want only 202 or 410 SOLD_OUT while NATS fails over", n, k)
		}
	}
	if accepted != 2*units {
		t.Errorf("%d purchases accepted, want every one of the %d units sold", accepted, 2*units)
	}
	if a.app.Queue.PublishRetries()+b.app.Queue.PublishRetries() == 0 {
		t.Errorf("no publish was retried: the kill did not hit the rush")
	}

	return accepted
}

// mergeAcked gathers the order ids both instances answered 202 into a's record, and checks there
// is one for each answer.
func mergeAcked(t *testing.T, a, b *harness, accepted int) []string {
	t.Helper()
	a.mu.Lock()
	b.mu.Lock()
	acked := append(append([]string(nil), a.acked...), b.acked...)
	a.acked = acked
	b.mu.Unlock()
	a.mu.Unlock()
	if len(acked) != accepted {
		t.Fatalf("%d order ids recorded for %d answers 202", len(acked), accepted)
	}
	return acked
}

// checkAckedLiveOnce checks that every 202 is in Postgres exactly once, as a live order, and
// that no other order is.
func checkAckedLiveOnce(t *testing.T, a *harness, s saleIDs, acked []string, accepted int) {
	t.Helper()
	var rows []struct {
		ID     string
		Status string
		N      int
	}
	if err := a.sql().Raw(`SELECT id, min(status) AS status, count(*) AS n FROM orders WHERE sale_id = ? GROUP BY id`, s.sale).Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	live := map[string]bool{}
	for _, r := range rows {
		if r.N != 1 {
			t.Errorf("order %s is in Postgres %d times", r.ID, r.N)
		}
		if r.Status != shop.StatusFailed {
			live[r.ID] = true
		}
	}
	var missing []string
	for _, id := range acked {
		if !live[id] {
			missing = append(missing, id)
		}
		delete(live, id)
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%d orders answered 202 are not live in Postgres: %v", len(missing), missing)
	}
	if len(live) > 0 {
		t.Errorf("%d live orders in Postgres were never answered 202", len(live))
	}
	if sold := a.sqlInt(`SELECT coalesce(sum(sold), 0) FROM items WHERE sale_id = ?`, s.sale); sold != int64(accepted) {
		t.Errorf("items sold = %d, want %d", sold, accepted)
	}
}

// checkBothWritersWrote checks that both instances' writers took orders off the one consumer,
// each order once.
func checkBothWritersWrote(t *testing.T, a, b *harness, accepted int) {
	t.Helper()
	written := func(h *harness, result string) int {
		var m dto.Metric
		if err := h.app.Metrics.Written.WithLabelValues(result).Write(&m); err != nil {
			t.Fatal(err)
		}
		return int(m.GetCounter().GetValue())
	}
	wa, wb := written(a, "written"), written(b, "written")
	t.Logf("written by a %d, by b %d; redelivered and found written: a %d, b %d", wa, wb, written(a, "redelivered"), written(b, "redelivered"))
	if wa == 0 || wb == 0 {
		t.Errorf("written by a %d, by b %d: want both writers to take part in the one consumer", wa, wb)
	}
	if wa+wb != accepted {
		t.Errorf("the writers wrote %d orders, want %d (each once)", wa+wb, accepted)
	}
}

// buyOrSoldOut is one shopper's purchase (captcha, token, buy); a sale sold out before the
// token is answered 410 SOLD_OUT by the token request, which is returned instead.
func buyOrSoldOut(h *harness, bearer string, saleID, itemID int64) response {
	h.t.Helper()
	c := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/captcha", saleID), bearer, nil)
	if c.Status != http.StatusOK {
		return c
	}
	r := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", saleID), bearer, map[string]string{"captchaId": c.str("captchaId"), "answer": "test"})
	if r.Status != http.StatusOK {
		return r
	}
	return h.buy(bearer, itemID, r.str("purchaseToken"))
}

// clusterOf describes a stream's cluster: its leader and followers.
func clusterOf(c *jetstream.ClusterInfo) string {
	if c == nil {
		return "none"
	}
	var peers []string
	for _, p := range c.Replicas {
		peers = append(peers, fmt.Sprintf("%s(current %v)", p.Name, p.Current))
	}
	return fmt.Sprintf("leader %q, followers %v", c.Leader, peers)
}

// FLASHSALE_NATS_REPLICAS rescales existing streams; a queue opened without it (a tool) leaves
// the count alone; more replicas than servers, or more than one on a single server, is refused
// with a message that says why.
func TestNATSStreamReplicasRescaled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl := testenv.NATS(t, 3)
	replicas := func() (orders, dead int) { t.Helper(); return streamReplicas(t, ctx, cl) }
	open := func(opts ...store.QueueOption) (*store.Queue, error) { return openQueueOn(t, ctx, cl, opts...) }
	if _, err := open(); err != nil {
		t.Fatal(err)
	}
	if o, d := replicas(); o != 1 || d != 1 {
		t.Fatalf("streams created without a replica count: %d and %d replicas, want 1", o, d)
	}
	q, err := open(store.WithReplicas(3))
	if err != nil {
		t.Fatalf("rescale to 3: %v", err)
	}
	if o, d := replicas(); o != 3 || d != 3 {
		t.Fatalf("after opening with 3 replicas: %d and %d, want 3", o, d)
	}
	// The writers create their consumer on first use, and retry while the rescaled stream settles
	// (JetStream answers "insufficient resources" until its new copies are placed).
	var c jetstream.Consumer
	testenv.EventuallyEvery(t, 15*time.Second, 200*time.Millisecond, "the writers' consumer after the rescale", func() error {
		if c, err = q.WriterConsumer(ctx, 5*time.Second); err != nil {
			t.Logf("the writers' consumer: %v", err)
		}
		return err
	})
	if r := c.CachedInfo().Config.Replicas; r != 3 {
		t.Errorf("the writers' consumer has %d replicas, want 3", r)
	}
	if _, err := open(); err != nil {
		t.Fatal(err)
	}
	if o, d := replicas(); o != 3 || d != 3 {
		t.Errorf("a queue opened without a count changed the streams to %d and %d replicas, want 3 kept", o, d)
	}
	if _, err := open(store.WithReplicas(5)); err == nil || !strings.Contains(err.Error(), "needs a NATS cluster of at least 5 servers") {
		t.Errorf("5 replicas on 3 servers: %v, want a refusal naming the cluster size needed", err)
	}
	if o, _ := replicas(); o != 3 {
		t.Errorf("after the refused rescale: %d replicas, want 3", o)
	}
	checkOneServerRefusesThreeReplicas(t, ctx)
}

// streamReplicas is the replica count of the order stream and of the dead-letter stream.
func streamReplicas(t *testing.T, ctx context.Context, cl *testenv.NATSCluster) (orders, dead int) {
	t.Helper()
	for _, name := range []string{store.OrdersStream, store.DeadStream} {
		info, err := cl.StreamInfo(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if name == store.OrdersStream {
			orders = info.Config.Replicas
		} else {
			dead = info.Config.Replicas
		}
	}
	return orders, dead
}

// openQueueOn opens a queue on the cluster, closed at the end of the test.
func openQueueOn(t *testing.T, ctx context.Context, cl *testenv.NATSCluster, opts ...store.QueueOption) (*store.Queue, error) {
	q, err := store.OpenQueue(ctx, cl.URLs(), "", opts...)
	if err == nil {
		t.Cleanup(q.Close)
	}
	return q, err
}

// checkOneServerRefusesThreeReplicas checks that a single server (the embedded one) cannot keep
// three copies: the queue refuses, saying a cluster is needed.
func checkOneServerRefusesThreeReplicas(t *testing.T, ctx context.Context) {
	t.Helper()
	dir := t.TempDir()
	ns, err := store.StartNATS(dir, testenv.FreePort(t), true, "tok")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	_, err = store.OpenQueue(ctx, store.EmbeddedNATSURL(ns.Addr().(*net.TCPAddr).Port, "tok"), "", store.WithReplicas(3))
	if err == nil || !strings.Contains(err.Error(), "FLASHSALE_NATS_REPLICAS=3 needs a NATS cluster") {
		t.Errorf("3 replicas on one server: %v, want a refusal saying a cluster is needed", err)
	}
}
