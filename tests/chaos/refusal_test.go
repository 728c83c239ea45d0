//go:build linux

package chaos

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// Scenarios 19a–19c: a Redis that refuses writes mid-rush while it keeps its data and answers
// reads (testenv.RedisRefuse: out of memory under noeviction, unable to persist, read-only). It
// is an outage, never a verdict on the orders: purchases answer 503 with nothing reserved, the
// orders acknowledged before it wait in the queue (the writer retries them with backoff for as
// long as it lasts and dead-letters none), and once lifted everything lands.
//
// Scenario 19d: Redis loses a sale while the writers are behind, and the merchant presses Warm
// and cuts a quantity: both answer 409 QUEUE_NOT_DRAINED, and the keeper rebuilds the sale by
// itself once the queue has drained.

// refusalFor is how long Redis refuses writes in 19a–19c.
const refusalFor = 4 * time.Second

// refusalText says how each refusal is made on one server, for the table.
var refusalText = map[testenv.Refusal]string{
	testenv.RefuseOOM:        "maxmemory cut to 1 byte under noeviction (OOM)",
	testenv.RefuseMISCONF:    "a snapshot failing to be written, save points set (MISCONF)",
	testenv.RefuseReadOnly:   "made a replica of a master that does not answer (READONLY)",
	testenv.RefuseNoReplicas: "min-replicas-to-write above its replicas (NOREPLICAS)",
}

// refuse makes the scenario's Redis refuse writes as kind says and returns the function lifting
// it and what was done. On one server the server refuses; on the cluster the master of the sale's
// slot does (every key of the sale is there; the other masters keep taking writes). A cluster node
// cannot be made read-only while it serves slots (cluster mode refuses REPLICAOF, and a master
// demoted by a failover answers MOVED, which the client follows): there, read-only becomes the
// refusal a master gives for its replication, NOREPLICAS.
func (c *cluster) refuse(t *testing.T, saleID int64, kind testenv.Refusal) (lift func(), what string) {
	t.Helper()
	switch rb := c.redis.(type) {
	case *redisSingle:
		return rb.srv.Refuse(t, kind), "Redis " + refusalText[kind]
	case *redisCluster:
		m, _ := rb.masterOf(t, saleID)
		if kind == testenv.RefuseReadOnly {
			return rb.cl.MustRefuse(t, m, testenv.RefuseNoReplicas),
				"the sale's master " + m.Addr + " " + refusalText[testenv.RefuseNoReplicas] + ", in place of read-only (a cluster node cannot be: REPLICAOF is refused in cluster mode)"
		}
		return rb.cl.MustRefuse(t, m, kind), "the sale's master " + m.Addr + " " + refusalText[kind]
	}
	t.Fatalf("refuse: unknown redis backend %T", c.redis)
	return nil, ""
}

// probeBuy is one shopper's whole purchase on instance i: captcha, purchase token, purchase. It
// returns the status of the step that refused, or of the purchase (0: no answer), and the answer.
func (c *cluster) probeBuy(i int, user, item, saleID int64) (int, answer) {
	bearer := bearerOf(user)
	ans, err := c.do(i, "POST", fmt.Sprintf("/api/flash-sales/%d/captcha", saleID), bearer, nil)
	if err == nil && ans.status == http.StatusOK {
		ans, err = c.do(i, "POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", saleID), bearer,
			map[string]string{"captchaId": ans.str("captchaId"), "answer": "test"})
		if err == nil && ans.status == http.StatusOK {
			ans, err = c.do(i, "POST", fmt.Sprintf("/api/flash-sales/items/%d/purchase", item), bearer, nil, "X-Purchase-Token", ans.str("purchaseToken"))
		}
	}
	if err != nil {
		return 0, answer{}
	}
	return ans.status, ans
}

// probeBuyWhile503 is probeBuy asked again every 300 ms while it answers 503 (fail closed) or
// nothing, up to within; user gives the shopper of each try (0, 1, …). It returns the last
// answer and its shopper.
func (c *cluster) probeBuyWhile503(i int, user func(try int) int64, item, saleID int64, within time.Duration) (int, answer, int64) {
	var st int
	var ans answer
	var u int64
	try := 0
	_ = testenv.Poll(within, 300*time.Millisecond, func() error {
		u = user(try)
		try++
		if st, ans = c.probeBuy(i, u, item, saleID); st == http.StatusServiceUnavailable || st == 0 {
			return fmt.Errorf("answered %d", st)
		}
		return nil
	})
	return st, ans, u
}

// waitRebuilt waits up to within for the sale to be loaded again at an epoch other than
// epochBefore and not marked lost; what names the awaited rebuild in the failure.
func (c *cluster) waitRebuilt(t *testing.T, saleID int64, epochBefore string, within time.Duration, what string) {
	t.Helper()
	testenv.EventuallyEvery(t, within, 100*time.Millisecond, what, func() error {
		e, lost := c.saleField(saleID, "epoch"), c.saleField(saleID, "lost")
		if e != "" && e != epochBefore && lost != "1" {
			return nil
		}
		return fmt.Errorf("epoch %q, %q before; lost=%q", e, epochBefore, lost)
	})
}

// saleField reads one field of the sale's meta hash in Redis ("" when absent or unreadable).
func (c *cluster) saleField(saleID int64, field string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, _ := c.rdb.HGet(ctx, store.MetaKey(saleID), field).Result()
	return v
}

// jetStream runs fn on a connection of its own to the scenario's NATS.
func (c *cluster) jetStream(fn func(ctx context.Context, js jetstream.JetStream) error) error {
	nc, err := nats.Connect(c.nats.url(), nats.Timeout(5*time.Second))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return fn(ctx, js)
}

// deadLetters is how many messages the dead-letter stream holds, asked from NATS.
func (c *cluster) deadLetters() (n uint64, err error) {
	err = c.jetStream(func(ctx context.Context, js jetstream.JetStream) error {
		s, err := js.Stream(ctx, store.DeadStream)
		if err != nil {
			return err
		}
		info, err := s.Info(ctx)
		if err == nil {
			n = info.State.Msgs
		}
		return err
	})
	return n, err
}

// undelivered is how many order messages no writer has fetched yet, asked from NATS.
func (c *cluster) undelivered() (n uint64, err error) {
	err = c.jetStream(func(ctx context.Context, js jetstream.JetStream) error {
		cons, err := js.Consumer(ctx, store.OrdersStream, store.WriterConsumer)
		if err != nil {
			return err
		}
		info, err := cons.Info(ctx)
		if err == nil {
			n = info.NumPending
		}
		return err
	})
	return n, err
}

// metricSum sums, over the running instances' /metrics, the samples of name by their label text
// (`cause="redis_oom"`).
func (c *cluster) metricSum(name string) map[string]float64 {
	out := map[string]float64{}
	for _, in := range c.inst {
		if in.proc == nil || in.proc.exited() {
			continue
		}
		resp, err := c.client.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", in.metricsPort))
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(b), "\n") {
			rest, ok := strings.CutPrefix(line, name+"{")
			if !ok {
				continue
			}
			labels, v, ok := strings.Cut(rest, "} ")
			if !ok {
				continue
			}
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			out[labels] += f
		}
	}
	return out
}

// instancesAlive fails the scenario for every instance that exited: an outage of Redis is no
// reason for a crash.
func (c *cluster) instancesAlive(t *testing.T, r *result, when string) {
	t.Helper()
	for i, in := range c.inst {
		if in.proc.exited() {
			r.Violations++
			t.Errorf("instance %d exited %s: %v\n%s", i, when, in.proc.state, logTail(in.log, 30))
		}
	}
}

// scenarioRefusal (19a–19c): 1.5 s into a rush of 2,000 shoppers for 1,600 units, Redis (on the
// cluster: the sale's master) refuses writes for 4 s, then accepts them again; acknowledged orders
// are in the queue, not yet fetched by any writer, when it starts. While it refuses, probe
// shoppers on the three instances are answered 503 at whichever step needed a write, and the
// sale's reservation counter does not move: nothing is reserved. The writers meet the refusal
// (their retries are counted under its kind) and wait it out: once lifted, every order
// acknowledged before is written within the bound, none went to the dead letters, the rush goes
// on and sells, no instance exited, and the end of every scenario holds.
func scenarioRefusal(kind testenv.Refusal) func(t *testing.T, r *result) {
	return func(t *testing.T, r *result) {
		c := newCluster(t, clusterOpts{})
		s := c.createSale(time.Now().Add(-time.Second), 0, 800, 800)
		l := newLedger()
		// tries for 12 s: shoppers arriving during the refusal buy after it
		done := c.goRun(l, s, shoppersFor(s, 1, 2000), loadOpts{attempts: 40, retryPause: 300 * time.Millisecond})
		time.Sleep(1500 * time.Millisecond)
		// Acknowledged orders wait in the queue when Redis starts refusing, for certain: the
		// writers are held back a moment (lockOrders) until messages are queued that no writer
		// has fetched, and let go once Redis refuses. Each writer then commits the batch it held
		// (claimed before the refusal) and fetches the queued messages, whose claim Redis refuses.
		release := c.lockOrders(t)
		heldAt := time.Now()
		testenv.Eventually(t, time.Until(heldAt.Add(20*time.Second)), "20 messages queued with the writers held back", func() error {
			if n, err := c.undelivered(); err != nil || n < 20 {
				return fmt.Errorf("%d undelivered (%v)", n, err)
			}
			return nil
		})
		lift, what := c.refuse(t, s.id, kind)
		refusedAt := time.Now()
		undelivered, _ := c.undelivered()
		release()
		heldFor := time.Since(heldAt)
		seqAt := c.saleField(s.id, "seq")
		ackedBeforeRefusal := len(l.ackedBefore(refusedAt))
		probe := c.probeDuringRefusal(t, r, s, refusedAt)
		time.Sleep(time.Until(refusedAt.Add(refusalFor)))
		seqEnd := c.saleField(s.id, "seq")
		lift()
		liftedAt := time.Now()
		r.Faults = fmt.Sprintf("%s for %.0f s mid-rush, %d order messages queued unfetched at its start (writers held back %.1f s), then lifted",
			what, refusalFor.Seconds(), undelivered, heldFor.Seconds())
		if seqAt == "" || seqEnd != seqAt {
			r.Violations++
			t.Errorf("the sale's reservation counter moved while Redis refused writes: %q at the start, %q at the end", seqAt, seqEnd)
		}
		// every order acknowledged before the lift lands once writes are accepted again
		waited := c.checkDurableAfterLift(t, r, l, liftedAt)
		<-done
		c.instancesAlive(t, r, "during the refusal")
		after := len(l.ackedIDs()) - len(waited)
		if after == 0 {
			r.Violations++
			t.Errorf("nothing was sold after the refusal was lifted (answers %v)", l.status)
		}
		dead := c.checkNoDeadLetters(t, r)
		retries := c.checkWritersMetRefusal(t, r, kind)
		c.finish(t, r, l, s)
		r.Note = fmt.Sprintf("probe shoppers during the refusal %v; %d acknowledged before it, %d after the lift; writer retries by cause %v; %d dead letters; ",
			probe, ackedBeforeRefusal, after, retries, dead) + r.Note
	}
}

// checkDurableAfterLift checks that every order acknowledged before the lift lands in Postgres
// once writes are accepted again, and returns those orders.
func (c *cluster) checkDurableAfterLift(t *testing.T, r *result, l *ledger, liftedAt time.Time) []string {
	waited := l.ackedBefore(liftedAt)
	took, err := c.waitDurable(waited, 30*time.Second)
	if err != nil {
		r.Violations++
		t.Errorf("after the refusal was lifted: %v", err)
	}
	r.Durable = fmt.Sprintf("%.1fs after the lift (%d orders)", took.Seconds(), len(waited))
	return waited
}

// checkNoDeadLetters checks that no message went to the dead letters (a refusal is an outage, not
// a bad message), and returns how many did.
func (c *cluster) checkNoDeadLetters(t *testing.T, r *result) uint64 {
	dead, err := c.deadLetters()
	if err != nil || dead != 0 {
		r.Violations++
		t.Errorf("dead letters after the refusal: %d (err %v), want 0: a refusal is an outage, not a bad message", dead, err)
	}
	return dead
}

// probeDuringRefusal has probe shoppers buy, one every 200 ms over three seconds of the refusal,
// on the three instances in turn: each must be answered 503. It returns the answers by status.
func (c *cluster) probeDuringRefusal(t *testing.T, r *result, s sale, refusedAt time.Time) map[int]int {
	// probe shoppers, one every 200 ms over three seconds of the refusal
	probe := map[int]int{}
	for k := 0; time.Since(refusedAt) < refusalFor-time.Second; k++ {
		st, ans := c.probeBuy(k%3, int64(600000+k), s.items[k%2], s.id)
		probe[st]++
		if st != http.StatusServiceUnavailable {
			r.Violations++
			t.Errorf("probe shopper on instance %d during the refusal: %d %s, want 503", k%3, st, ans.raw)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return probe
}

// checkWritersMetRefusal checks that the writers met the refusal with the queued messages and
// waited it out: a batch retried under its kind. It returns the retries by cause.
func (c *cluster) checkWritersMetRefusal(t *testing.T, r *result, kind testenv.Refusal) map[string]float64 {
	// the writers met the refusal with those messages, and waited it out
	retries := c.metricSum("flashsale_writer_retries_total")
	cause := kind
	if clusterMode() && kind == testenv.RefuseReadOnly {
		cause = testenv.RefuseNoReplicas
	}
	if retries[`cause="redis_`+string(cause)+`"`] == 0 {
		r.Violations++
		t.Errorf("no writer retried a batch for redis_%s: the writers never met the refusal (retries by cause %v)", cause, retries)
	}
	return retries
}

// lockOrders holds the writers back the way a long transaction or a migration would: a
// transaction of its own takes the orders table in SHARE mode, so every INSERT into it waits
// (reads go on). The returned function commits it; it is also ended when the test ends.
func (c *cluster) lockOrders(t *testing.T) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, `LOCK TABLE orders IN SHARE MODE`)
	}
	if err != nil {
		conn.Close(ctx)
		t.Fatalf("lock orders: %v", err)
	}
	done := false
	release = func() {
		if done {
			return
		}
		done = true
		if err := tx.Commit(ctx); err != nil {
			t.Errorf("release the lock on orders: %v", err)
		}
		conn.Close(ctx)
	}
	t.Cleanup(release)
	return release
}
