//go:build linux

package chaos

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale/testenv"
)

// tcpProxy forwards a loopback port to a target; cut closes the port and every connection through
// it (the instance behind it sees connections reset, then refused), heal opens it again.
type tcpProxy struct {
	port   int
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
}

func newProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{port: testenv.FreePort(t), target: target, conns: map[net.Conn]bool{}}
	if err := p.heal(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.cut)
	return p
}

func (p *tcpProxy) url() string { return "redis://127.0.0.1:" + strconv.Itoa(p.port) + "/0" }

func (p *tcpProxy) heal() error {
	// the port may linger a moment after a cut: up to 5 s
	var ln net.Listener
	err := testenv.Poll(5*time.Second, 100*time.Millisecond, func() error {
		var err error
		ln, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p.port))
		return err
	})
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go p.accept(ln)
	return nil
}

func (p *tcpProxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.ln != ln { // cut meanwhile
			p.mu.Unlock()
			c.Close()
			up.Close()
			return
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); up.Close(); c.Close() }()
		go func() { _, _ = io.Copy(c, up); up.Close(); c.Close() }()
	}
}

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// scenarioPartition: instance 2 reaches Redis through a proxy that the suite cuts for 3 s during
// the rush (on the cluster: instance 2 is cut off from the sale's master only, see
// redisCluster.cut). While cut, instance 2 answers 503 (never 500, never 202); the others keep
// selling.
func scenarioPartition(t *testing.T, r *result) {
	c := newCluster(t, clusterOpts{partition: true})
	s := c.createSale(time.Now().Add(-time.Second), 0, 800, 800)
	l := newLedger()
	done := c.goRun(l, s, shoppersFor(s, 1, 2000), loadOpts{attempts: 20, retryPause: 200 * time.Millisecond})
	time.Sleep(1500 * time.Millisecond)
	what, how := c.redis.cut(t, s.id)
	cutAt := time.Now()
	r.Faults = fmt.Sprintf("instance 2 cut off from %s for 3 s (%s)", what, how)
	// A probe shopper on the cut instance: 503 only.
	probe := map[int]int{}
	for k := range 10 {
		bearer := bearerOf(int64(500000 + k))
		ans, err := c.do(2, "POST", fmt.Sprintf("/api/flash-sales/%d/captcha", s.id), bearer, nil)
		if err == nil && ans.status == 200 {
			pt, err := c.do(2, "POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", s.id), bearer,
				map[string]string{"captchaId": ans.str("captchaId"), "answer": "test"})
			if err == nil && pt.status == 200 {
				ans, err = c.do(2, "POST", fmt.Sprintf("/api/flash-sales/items/%d/purchase", s.items[0]), bearer, nil, "X-Purchase-Token", pt.str("purchaseToken"))
			} else {
				ans = pt
			}
		}
		if err != nil {
			probe[0]++
		} else {
			probe[ans.status]++
		}
		time.Sleep(200 * time.Millisecond)
	}
	before := len(l.ackedBefore(cutAt))
	time.Sleep(time.Until(cutAt.Add(3 * time.Second)))
	during := len(l.ackedBefore(time.Now())) - before
	if err := c.redis.heal(t); err != nil {
		t.Fatal(err)
	}
	<-done
	// 503, or 410 once it knows (from its own flag, no Redis call) that the items sold out
	for st, n := range probe {
		if st != 503 && st != 410 {
			r.Violations++
			t.Errorf("the cut-off instance answered %d (%d times), want 503 (or 410 once sold out): %v", st, n, probe)
		}
	}
	if probe[503] == 0 {
		r.Violations++
		t.Errorf("the cut-off instance never answered 503: %v", probe)
	}
	if during == 0 {
		r.Violations++
		t.Errorf("nothing was sold while one instance was cut off")
	}
	r.Note = fmt.Sprintf("probe on the cut instance %v; %d sold by the others during the cut", probe, during)
	c.finish(t, r, l, s)
}

// scenarioPostgresRestart: the scenario's own Postgres cluster (testenv.PrivatePostgres, with
// production's durability settings) is crashed mid-rush (`pg_ctl stop -m immediate`: every server
// process quits at once, nothing flushed), kept down 2 s, and started again on the same data
// directory and port, where it runs crash recovery from its WAL. Purchases do not need Postgres
// and go on; the writers fail, retry, and resume: every order acknowledged is written once.
func scenarioPostgresRestart(t *testing.T, r *result) {
	c := newCluster(t, clusterOpts{privatePG: true})
	s := c.createSale(time.Now().Add(-time.Second), 0, 800, 800)
	l := newLedger()
	done := c.goRun(l, s, shoppersFor(s, 1, 2000), loadOpts{attempts: 20, retryPause: 200 * time.Millisecond})
	time.Sleep(1500 * time.Millisecond)
	ctx := context.Background()
	writtenBefore, _ := c.orders(ctx, s.id)
	crashedAt := time.Now()
	c.pg.Stop(t, "immediate")
	// down: nothing answers on its port
	probe, cancel := context.WithTimeout(ctx, time.Second)
	if conn, err := pgx.Connect(probe, c.dsn); err == nil {
		conn.Close(ctx)
		r.Violations++
		t.Errorf("postgres answered after pg_ctl stop -m immediate")
	}
	cancel()
	time.Sleep(time.Until(crashedAt.Add(2 * time.Second)))
	c.pg.Start(t)
	restartedAt := time.Now()
	r.Faults = fmt.Sprintf("Postgres crashed (pg_ctl stop -m immediate) %d orders in, down %.1f s, restarted (crash recovery)",
		len(writtenBefore), restartedAt.Sub(crashedAt).Seconds())
	// the writers resume: every order acknowledged before the restart reaches Postgres
	before := l.ackedBefore(restartedAt)
	took, err := c.waitDurable(before, 20*time.Second)
	if err != nil {
		r.Violations++
		t.Errorf("after the Postgres restart: %v", err)
	}
	r.Durable = fmt.Sprintf("%.1fs after the restart (%d orders)", took.Seconds(), len(before))
	<-done
	if len(writtenBefore) == 0 {
		t.Errorf("no order was written before the crash: the fault did not land mid-rush")
	}
	b, _ := os.ReadFile(c.pg.LogPath())
	if !strings.Contains(string(b), "automatic recovery in progress") {
		r.Violations++
		t.Errorf("postgres did not run crash recovery at its restart\n%s", b)
	}
	// nothing written before the crash was lost by it (committed means durable)
	have, err := c.db.ExistingOrders(ctx, idsOf(writtenBefore))
	if err != nil || len(have) != len(writtenBefore) {
		r.Violations++
		t.Errorf("of %d orders in postgres before the crash, %d are there after it (%v)", len(writtenBefore), len(have), err)
	}
	c.finish(t, r, l, s)
}

// scenarioPostgresCut (09b) does to the clients what a restart does, without one, on the shared
// cluster: it terminates every connection to the sale's database, every 100 ms for 3 s, during
// the rush. The writer must retry and resume, nothing lost or doubled.
func scenarioPostgresCut(t *testing.T, r *result) {
	c := newCluster(t, clusterOpts{})
	s := c.createSale(time.Now().Add(-time.Second), 0, 800, 800)
	l := newLedger()
	done := c.goRun(l, s, shoppersFor(s, 1, 2000), loadOpts{attempts: 20, retryPause: 200 * time.Millisecond})
	time.Sleep(1500 * time.Millisecond)
	ctx := context.Background()
	killed := 0
	until := time.Now().Add(3 * time.Second)
	for time.Now().Before(until) {
		conn, err := pgx.Connect(ctx, c.dsn)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		var n int
		_ = conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n)
		conn.Close(ctx)
		killed += n
		time.Sleep(100 * time.Millisecond)
	}
	r.Faults = fmt.Sprintf("%d Postgres connections terminated over 3 s", killed)
	if killed == 0 {
		t.Errorf("no connection was terminated")
	}
	<-done
	c.finish(t, r, l, s)
}

// idsOf returns the ids of orders.
func idsOf(orders []pgOrder) []string {
	ids := make([]string, 0, len(orders))
	for _, o := range orders {
		ids = append(ids, o.id)
	}
	return ids
}

// natsDisk is the size of the tmpfs under the NATS store in scenario 16: it fills a few hundred
// orders into the rush.
const natsDisk = "256k"

// scenarioNATSFull: the disk under the NATS server fills during the rush. As root, the JetStream
// store is a tmpfs of its own of natsDisk (and JetStream's own limit far above it), so a write of
// the order stream fails with ENOSPC and the stream keeps the write error, refusing every later
// write until nats-server restarts; elsewhere the store is limited by max_file_store instead.
// Publishes fail, purchases answer 503 (never 500) and their units come back. Then space is freed
// (the tmpfs grown) and nats-server restarted on its store, as an operator would: every 202 is in
// Postgres and the end-of-scenario checks hold.
func scenarioNATSFull(t *testing.T, r *result) {
	c := newCluster(t, clusterOpts{natsDisk: natsDisk, natsMax: "64KB"})
	if nc, ok := c.nats.(*natsCluster); ok {
		nc.leadFromFullDisk(t) // the disk fills under the orders stream's leader
	}
	s := c.createSale(time.Now().Add(-time.Second), 0, 1000, 1000)
	l := newLedger()
	// with JetStream disabled a publish waits out FLASHSALE_PUBLISH_TIMEOUT (2 s; 12 s on the
	// cluster) before its 503: enough shoppers in flight at once that the rush still lasts
	// seconds, not minutes
	c.run(l, s, shoppersFor(s, 1, 1500), loadOpts{attempts: 2, concurrency: 1000})
	l.mu.Lock()
	unavailable, accepted := l.status[503], len(l.acked)
	r.Note = fmt.Sprintf("answers %v", l.status)
	l.mu.Unlock()
	// On the cluster only one of three nodes fills: the stream keeps a quorum and may go on
	// taking orders without a 503 (what is required there is that the full disk was met, below,
	// and the end-of-scenario checks).
	if accepted == 0 || (unavailable == 0 && !clusterMode()) {
		r.Violations++
		t.Errorf("the store did not fill mid-rush (%d answered 202, %d 503): answers %v", accepted, unavailable, l.status)
	}
	if !c.nats.onTmpfs() {
		r.Faults = "JetStream max_file_store 64KB (no tmpfs: not root, or mount refused)"
		c.finish(t, r, l, s)
		return
	}
	full := c.nats.logLine("no space left")
	if full == "" {
		r.Violations++
		t.Errorf("nats-server never reported its disk full\n%s", c.nats.logTails())
	}
	r.Note += "; nats-server: " + full
	if nc, ok := c.nats.(*natsCluster); ok {
		_, leader := nc.leader(t)
		r.Note += "; the orders stream's leader when the rush ended: " + leader
	}
	// free space and restart nats-server on its store (the stream keeps its write error until then)
	c.nats.freeDisk(t, "64m")
	r.Faults = "NATS store on a " + natsDisk + " tmpfs, full mid-rush (ENOSPC); space freed, nats-server restarted"
	if clusterMode() {
		r.Faults = "the store of n1, the orders stream's leader, on a " + natsDisk + " tmpfs, full mid-rush (ENOSPC); space freed, n1 restarted"
	}
	took, err := c.waitDurable(l.ackedIDs(), 30*time.Second)
	if err != nil {
		r.Violations++
		t.Errorf("after space was freed: %v", err)
	}
	r.Durable = fmt.Sprintf("%.1fs after the restart (%d orders)", took.Seconds(), accepted)
	c.finish(t, r, l, s)
}
