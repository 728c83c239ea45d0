//go:build linux

package chaos

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
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
	var err error
	for range 50 { // the port may linger a moment after a cut
		var ln net.Listener
		if ln, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p.port)); err == nil {
			p.mu.Lock()
			p.ln = ln
			p.mu.Unlock()
			go p.accept(ln)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
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
// the rush. While cut, instance 2 answers 503 (never 500, never 202); the others keep selling.
func scenarioPartition(t *testing.T, r *result) {
	c := newCluster(t, clusterOpts{partition: true})
	s := c.createSale(time.Now().Add(-time.Second), 0, 800, 800)
	l := newLedger()
	done := c.goRun(l, s, shoppersFor(s, 1, 2000), loadOpts{attempts: 20, retryPause: 200 * time.Millisecond})
	time.Sleep(1500 * time.Millisecond)
	c.proxy.cut()
	cutAt := time.Now()
	r.Faults = "instance 2 cut off from Redis for 3 s (proxy closed)"
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
	if err := c.proxy.heal(); err != nil {
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

// scenarioPostgresCut: Postgres is shared with other work here and cannot be restarted, so the
// suite does what a restart does to clients: it terminates every connection to the sale's
// database, every 100 ms for 3 s, during the rush. The writer must retry and resume, nothing lost
// or doubled.
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

// scenarioNATSFull: the NATS server's JetStream store is limited to a few kilobytes, so the
// order stream fills during the rush: publishes fail, purchases answer 503 and their units come
// back; every 202 is in Postgres.
func scenarioNATSFull(t *testing.T, r *result) {
	c := newCluster(t, clusterOpts{natsMax: "64KB"})
	s := c.createSale(time.Now().Add(-time.Second), 0, 1000, 1000)
	l := newLedger()
	c.run(l, s, shoppersFor(s, 1, 1500), loadOpts{attempts: 2})
	r.Faults = "JetStream max_file_store 64KB"
	l.mu.Lock()
	unavailable := l.status[503]
	l.mu.Unlock()
	if unavailable == 0 {
		r.Violations++
		t.Errorf("the store never filled: answers %v", l.status)
	}
	r.Note = fmt.Sprintf("answers %v", l.status)
	c.finish(t, r, l, s)
}
