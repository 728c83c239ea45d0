//go:build linux

package chaos

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// Scenario 20b: an instance with the embedded NATS stopped past its registration while another
// instance starts with its own embedded NATS (issue 18.4): the second may start, the first,
// continued, yields (503, /readyz naming "queue registration", its queue-judging jobs wait) and its
// writer drains its own queue. On the cluster (an external NATS) the counterpart: an embedded
// instance started while one instance is stopped past its lease and others are live is refused,
// and the stopped one, continued, sells again on the same queue.

// waitReadyz waits up to within for instance i's /readyz to answer 200; what names it in the
// failure, with the instance's log.
func (c *cluster) waitReadyz(t *testing.T, i int, within time.Duration, what string) {
	t.Helper()
	err := testenv.Poll(within, 100*time.Millisecond, func() error {
		if st, body := c.readyz(i); st != http.StatusOK {
			return fmt.Errorf("%d %s", st, body)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, logTail(c.inst[i].log, 20))
	}
}

// readyz is instance i's GET /readyz: its status and body (0 without an answer).
func (c *cluster) readyz(i int) (int, string) {
	resp, err := c.client.Get(c.inst[i].url() + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// embeddedURL is the URL of instance i's embedded NATS (its credential from its data folder).
func (c *cluster) embeddedURL(t *testing.T, i int) string {
	t.Helper()
	tok, err := store.ReadEmbeddedNATSToken(c.inst[i].dataDir)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(c.inst[i].env["FLASHSALE_NATS_PORT"])
	return store.EmbeddedNATSURL(port, tok)
}

// backlogOf is the backlog of the queue at url (messages not yet acknowledged by a writer).
func backlogOf(url string) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	q, err := store.OpenQueue(ctx, url, "")
	if err != nil {
		return 0, err
	}
	defer q.Close()
	return q.Backlog(ctx)
}

// embeddedPauseOrphanAge is the orphan age of scenario 20b: the pause must stay well under it
// (RELIABILITY.md says why).
const embeddedPauseOrphanAge = 45 * time.Second

// scenarioEmbeddedPause (20b) on one server. The sale is created by the usual three instances,
// which are then stopped (SIGTERM: they leave the queue presence); instance A (slot 0) starts
// with an embedded NATS of its own. The writers are held back (orders locked), 300 shoppers buy
// on A, so A's queue holds acknowledged orders; A is stopped (SIGSTOP) and the writers let go.
// 6.5 s later (past the 6 s lease) instance B (slot 1) starts with its own embedded NATS: it must
// start. 200 shoppers buy on B; A is continued: at once /readyz answers 503 naming "queue
// registration" and purchases on A answer 503; A's writer writes every order A acknowledged
// while A keeps yielding (its keeper logs the queue depth as unknown: rebuilds, orphan recovery
// and repairs wait). A is then stopped (SIGTERM) with its queue drained, and the end of every
// scenario holds on B. The orphan age is 45 s (the default), the pause about 10 s.
func scenarioEmbeddedPause(t *testing.T, r *result) {
	if clusterMode() {
		scenarioEmbeddedPauseCluster(t, r)
		return
	}
	c := newCluster(t, clusterOpts{env: map[string]string{"FLASHSALE_ORPHAN_AGE": embeddedPauseOrphanAge.String()}})
	s := c.createSale(time.Now().Add(-time.Second), 0, 800, 800)
	killAllAtTheEnd(t, c)
	leaveForEmbeddedNATS(t, c)
	const A, B = 0, 1

	// A's queue holds acknowledged orders: the writers are held back while shoppers buy on A
	l := newLedger()
	ackedByA, queued, oldestA, release := queueOrdersOnA(t, c, s, l)

	c.inst[A].proc.signal(syscall.SIGSTOP)
	pausedAt := time.Now()
	release()

	// B starts with its own embedded NATS once A's registration and presence lapsed
	time.Sleep(time.Until(pausedAt.Add(6500 * time.Millisecond)))
	tries := startBWhenALapsed(t, c, pausedAt)
	bReadyAfter := time.Since(pausedAt)
	c.env["FLASHSALE_NATS_URL"] = c.embeddedURL(t, B) // the reconcile tool's queue from now on

	// B sells; A is continued meanwhile
	done := c.goRun(l, s, pickOnly(shoppersFor(s, 10001, 200), B), loadOpts{attempts: 10, retryPause: 300 * time.Millisecond})
	time.Sleep(500 * time.Millisecond)
	unwritten := unwrittenOf(t, c, ackedByA)
	c.inst[A].proc.signal(syscall.SIGCONT)
	continuedAt := time.Now()
	pausedFor := time.Since(pausedAt)
	r.Faults = fmt.Sprintf("A (embedded NATS, %d acknowledged orders queued unwritten) SIGSTOP for %.1f s; B started with its own embedded NATS %.1f s into the pause (%d tries); SIGCONT A; orphan age %s",
		queued, pausedFor.Seconds(), bReadyAfter.Seconds(), tries, embeddedPauseOrphanAge)
	if st, body := c.readyz(A); st != http.StatusServiceUnavailable || !strings.Contains(body, "queue registration") {
		r.Violations++
		t.Errorf("A's /readyz at once after SIGCONT: %d %s, want 503 naming \"queue registration\"", st, body)
	}
	probesA := probeAYields(t, r, c, l, s)
	writtenAge := checkADrains(t, r, c, ackedByA, unwritten, continuedAt, oldestA)
	<-done
	yielded := checkAYieldsToB(t, r, c, writtenAge)

	// The operator stops A (its queue drained); B serves on.
	c.inst[A].proc.signal(syscall.SIGTERM)
	if !c.waitExit(A, 30*time.Second) {
		t.Fatalf("A did not stop on SIGTERM")
	}
	c.inst = []*instance{c.inst[B]}
	c.finish(t, r, l, s)
	r.Note = fmt.Sprintf("purchases on A after SIGCONT %v; A's oldest acknowledged order %.1f s old when all were written; A's log: %q; ",
		probesA, writtenAge.Seconds(), yielded) + r.Note
}

// unwrittenOf is how many of the orders A acknowledged are not in Postgres: what A's queue still
// holds for its writer (nothing else reads that queue); none is a failure.
func unwrittenOf(t *testing.T, c *cluster, ackedByA []string) int {
	// what A's queue still holds for its writer (nothing else reads that queue)
	have, err := c.db.ExistingOrders(context.Background(), ackedByA)
	if err != nil {
		t.Fatal(err)
	}
	unwritten := len(ackedByA) - len(have)
	if unwritten == 0 {
		t.Fatalf("every order A acknowledged was written while A was stopped: its writer has nothing left to drain")
	}
	return unwritten
}

// killAllAtTheEnd kills every instance of the cluster as it is now when the test ends, also those
// the scenario drops from c.inst.
func killAllAtTheEnd(t *testing.T, c *cluster) {
	all := append([]*instance(nil), c.inst...)
	t.Cleanup(func() {
		for _, in := range all {
			if in.proc != nil {
				in.proc.kill()
			}
		}
	})
}

// leaveForEmbeddedNATS stops the three external-NATS instances (SIGTERM: they leave the queue
// presence), keeps two, A and B, each set to an embedded NATS of its own, and starts A.
func leaveForEmbeddedNATS(t *testing.T, c *cluster) {
	const A, B = 0, 1
	ctx := context.Background()
	// the external-NATS instances leave
	for _, in := range c.inst {
		in.proc.signal(syscall.SIGTERM)
	}
	for i := range c.inst {
		if !c.waitExit(i, 30*time.Second) {
			t.Fatalf("instance %d did not stop on SIGTERM", i)
		}
	}
	testenv.EventuallyEvery(t, 15*time.Second, 200*time.Millisecond, "no queue presence live after the instances stopped", func() error {
		live, err := c.rdb.ZRangeByScore(ctx, "flashsale:queues", &redis.ZRangeBy{Min: strconv.FormatInt(time.Now().UnixMilli(), 10), Max: "+inf"}).Result()
		if err != nil || len(live) != 0 {
			return fmt.Errorf("live: %v (%v)", live, err)
		}
		return nil
	})
	for _, i := range []int{A, B} {
		c.inst[i].env["FLASHSALE_NATS_URL"] = "" // unset: an embedded NATS
		c.inst[i].env["FLASHSALE_NATS_PORT"] = strconv.Itoa(testenv.FreePort(t))
	}
	c.inst = c.inst[:2]
	c.start(A, nil)
	c.waitReady(A)
}

// queueOrdersOnA holds the writers back while 300 shoppers buy on A, so that A's queue holds at
// least 50 acknowledged orders; it returns them, how many are unwritten, when the first was
// acknowledged, and the release of the writers.
func queueOrdersOnA(t *testing.T, c *cluster, s sale, l *ledger) ([]string, int, time.Time, func()) {
	const A, B = 0, 1
	ctx := context.Background()
	release := c.lockOrders(t)
	c.run(l, s, pickOnly(shoppersFor(s, 1, 300), A), loadOpts{attempts: 6, retryPause: 300 * time.Millisecond})
	ackedByA := l.ackedIDs()
	have, err := c.db.ExistingOrders(ctx, ackedByA)
	if err != nil {
		t.Fatal(err)
	}
	if len(ackedByA)-len(have) < 50 {
		t.Fatalf("A's queue holds %d unwritten orders of %d acknowledged, want at least 50", len(ackedByA)-len(have), len(ackedByA))
	}
	queued := len(ackedByA) - len(have)
	oldestA := time.Now()
	l.mu.Lock()
	for _, at := range l.ackedAt {
		if at.Before(oldestA) {
			oldestA = at
		}
	}
	l.mu.Unlock()
	return ackedByA, queued, oldestA, release
}

// startBWhenALapsed starts B with its own embedded NATS, again while it is refused (A's
// registration or presence not lapsed yet), up to 20 s after A was stopped; it returns the tries.
func startBWhenALapsed(t *testing.T, c *cluster, pausedAt time.Time) int {
	const A, B = 0, 1
	tries := 0
	testenv.EventuallyEvery(t, time.Until(pausedAt.Add(20*time.Second)), 500*time.Millisecond,
		"instance B (its own embedded NATS) started: A's registration and presence lapsed", func() error {
			tries++
			c.start(B, nil)
			// ready, or exited (refused): up to 60 s
			err := testenv.Poll(60*time.Second, 100*time.Millisecond, func() error {
				if st, body := c.readyz(B); st != http.StatusOK && !c.inst[B].proc.exited() {
					return fmt.Errorf("/readyz %d %s", st, body)
				}
				return nil
			})
			if err == nil && !c.inst[B].proc.exited() {
				return nil
			}
			if !c.inst[B].proc.exited() {
				t.Fatalf("instance B not ready: %v\n%s", err, logTail(c.inst[B].log, 30))
			}
			return fmt.Errorf("refused %d times, the last %.1f s after A was stopped\n%s",
				tries, time.Since(pausedAt).Seconds(), logTail(c.inst[B].log, 20))
		})
	return tries
}

// probeAYields has 10 shoppers buy on A while B runs its own embedded NATS: each must be answered
// 503; it returns the answers by status.
func probeAYields(t *testing.T, r *result, c *cluster, l *ledger, s sale) map[int]int {
	const A, B = 0, 1
	probesA := map[int]int{}
	for k := range 10 {
		u := int64(50001 + k)
		st, ans := c.probeBuy(A, u, s.items[k%2], s.id)
		probesA[st]++
		switch st {
		case http.StatusServiceUnavailable:
		case http.StatusAccepted:
			l.mu.Lock()
			l.acked[ans.str("orderId")] = u
			l.ackedAt[ans.str("orderId")] = time.Now()
			l.mu.Unlock()
			fallthrough
		default:
			r.Violations++
			t.Errorf("purchase on A while B runs its own embedded NATS: %d %s, want 503", st, ans.raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return probesA
}

// checkADrains checks that A's writer writes every order A acknowledged while A yields, and that
// A's queue drains; it returns the age of A's oldest order once all were written.
func checkADrains(t *testing.T, r *result, c *cluster, ackedByA []string, unwritten int, continuedAt, oldestA time.Time) time.Duration {
	const A, B = 0, 1
	// A's writer drains A's queue while A yields
	if _, err := c.waitDurable(ackedByA, 30*time.Second); err != nil {
		r.Violations++
		t.Errorf("A's acknowledged orders after SIGCONT: %v", err)
	}
	r.Durable = fmt.Sprintf("%.1fs after SIGCONT (%d orders A acknowledged, %d of them unwritten at SIGCONT)", time.Since(continuedAt).Seconds(), len(ackedByA), unwritten)
	writtenAge := time.Since(oldestA)
	aURL := c.embeddedURL(t, A)
	if err := testenv.Poll(20*time.Second, 200*time.Millisecond, func() error {
		if n, err := backlogOf(aURL); err != nil || n != 0 {
			return fmt.Errorf("backlog %d (%v)", n, err)
		}
		return nil
	}); err != nil {
		r.Violations++
		t.Errorf("A's queue not drained after its orders were written: %v", err)
	}
	return writtenAge
}

// checkAYieldsToB checks, once B's shoppers are done, that A still yields (503 naming the queue
// registration), that its log says so and that its queue-judging jobs wait, that A's orders were
// written under the orphan age, and that B is ready; it returns A's log line saying it yields.
func checkAYieldsToB(t *testing.T, r *result, c *cluster, writtenAge time.Duration) string {
	const A, B = 0, 1
	if st, body := c.readyz(A); st != http.StatusServiceUnavailable || !strings.Contains(body, "queue registration") {
		r.Violations++
		t.Errorf("A's /readyz with B live: %d %s, want 503 naming \"queue registration\"", st, body)
	}
	yielded := firstLine(c.inst[A].log, "another instance took the embedded NATS registration")
	if yielded == "" {
		yielded = firstLine(c.inst[A].log, "queue registration lapsed")
	}
	waited := firstLine(c.inst[A].log, "queue depth unknown")
	if yielded == "" || waited == "" {
		r.Violations++
		t.Errorf("A's log does not say it yields (%q) and that its queue-judging jobs wait (%q)", yielded, waited)
	}
	if writtenAge >= embeddedPauseOrphanAge {
		t.Errorf("A's oldest order was %.1f s old when A's queue was written, not under the orphan age %s: the scenario proves nothing about the yield", writtenAge.Seconds(), embeddedPauseOrphanAge)
	}
	if st, _ := c.readyz(B); st != http.StatusOK {
		r.Violations++
		t.Errorf("B's /readyz: %d, want 200", st)
	}
	return yielded
}

// scenarioEmbeddedPauseCluster (20b on the cluster, whose instances share an external NATS
// cluster). 1,200 shoppers buy on instances 1 and 2; a second in, instance 0 is stopped (SIGSTOP)
// for 7 s, past its queue presence's 6 s lease, and an instance with an embedded NATS is started
// on the same Redis: it must be refused (ErrAnotherQueue: instances 1 and 2 are live on another
// queue) and exit naming FLASHSALE_NATS_URL, leaving no embedded-NATS registration behind. Then
// instance 0 is continued: it must be ready again (the same queue, no other live) and sell. A
// last wave buys on all three; the end of every scenario holds.
func scenarioEmbeddedPauseCluster(t *testing.T, r *result) {
	c := newCluster(t, clusterOpts{})
	s := c.createSale(time.Now().Add(-time.Second), 0, 800, 800)
	l := newLedger()
	done := c.goRun(l, s, pickOnly(shoppersFor(s, 1, 1200), 1, 2), loadOpts{attempts: 20, retryPause: 300 * time.Millisecond})
	time.Sleep(time.Second)
	c.inst[0].proc.signal(syscall.SIGSTOP)
	stoppedAt := time.Now()
	defer c.inst[0].proc.signal(syscall.SIGCONT)
	time.Sleep(time.Until(stoppedAt.Add(7 * time.Second)))

	refusal, exitCode := startRefusedEmbedded(t, r, c)

	// instance 0 continued: the same queue, it sells again
	c.inst[0].proc.signal(syscall.SIGCONT)
	stoppedFor := time.Since(stoppedAt)
	continuedAt := time.Now()
	c.waitReadyz(t, 0, 30*time.Second, "instance 0 ready after SIGCONT")
	readyIn := time.Since(continuedAt)
	st, ans, u := c.probeBuyWhile503(0, func(try int) int64 { return int64(900001 + try) }, s.items[0], s.id, 15*time.Second)
	if st == http.StatusAccepted {
		l.mu.Lock()
		l.acked[ans.str("orderId")] = u
		l.ackedAt[ans.str("orderId")] = time.Now()
		l.mu.Unlock()
	} else {
		r.Violations++
		t.Errorf("a purchase on instance 0 once continued: %d %s, want 202", st, ans.raw)
	}
	r.Faults = fmt.Sprintf("instance 0 SIGSTOP for %.1f s mid-rush; an instance with an embedded NATS started on the same Redis %.1f s into it; SIGCONT",
		stoppedFor.Seconds(), 7.0)
	<-done
	last := c.waveBuys(t, r, l, s, shoppersFor(s, 100001, 300), "the last wave")
	c.instancesAlive(t, r, "during the scenario")
	c.finish(t, r, l, s)
	r.Note = fmt.Sprintf("the embedded instance: %q (exit %d); instance 0 ready %.1f s after SIGCONT and sold (202); last wave %d answered 202; ",
		refusal, exitCode, readyIn.Seconds(), last) + r.Note
}

// startRefusedEmbedded starts an instance with an embedded NATS on the same Redis as the
// cluster's: it must be refused (ErrAnotherQueue naming FLASHSALE_NATS_URL) and leave no
// embedded-NATS registration behind. It returns the refusal and the exit code.
func startRefusedEmbedded(t *testing.T, r *result, c *cluster) (string, int) {
	ctx := context.Background()
	// an instance with an embedded NATS, on the same Redis
	dir := filepath.Join(c.dir, "embedded")
	extra := map[string]string{
		"FLASHSALE_NATS_URL":      "", // unset: an embedded NATS
		"FLASHSALE_NATS_REPLICAS": "1",
		"FLASHSALE_NATS_PORT":     strconv.Itoa(testenv.FreePort(t)),
		"FLASHSALE_DATA_DIR":      dir,
		"FLASHSALE_ADDR":          "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)),
		"FLASHSALE_METRICS_ADDR":  "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)),
	}
	logPath := filepath.Join(c.dir, "embedded.log")
	p := startProc(t, "flashsale-embedded", logPath, c.environ(-1, extra), c.bin, "serve")
	t.Cleanup(p.kill)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the embedded-NATS instance was not refused within 60 s\n%s", logTail(logPath, 20))
	}
	refusal := firstLine(logPath, store.ErrAnotherQueue.Error())
	if p.state.ExitCode() == 0 || refusal == "" || !strings.Contains(refusal, "FLASHSALE_NATS_URL") {
		r.Violations++
		t.Errorf("the embedded-NATS instance beside live instances on the NATS cluster: exit %v, %q; want refused with ErrAnotherQueue naming FLASHSALE_NATS_URL\n%s",
			p.state, refusal, logTail(logPath, 20))
	}
	if n, err := c.rdb.Exists(ctx, "flashsale:embedded-nats").Result(); err != nil || n != 0 {
		r.Violations++
		t.Errorf("the refused instance left its embedded-NATS registration behind (%d, %v)", n, err)
	}
	return refusal, p.state.ExitCode()
}
