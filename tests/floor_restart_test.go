package tests

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// Redis restored behind (it lost its last writes), then an instance restarted: the restarted
// instance has seen no seq, and with a floor starting at 0 it sold on, reissuing the lost seqs;
// once the counter passed the lost maximum nothing could see the loss any more. Its floors start
// at the highest seq Postgres holds, so its first purchase finds Redis's counter behind: 503,
// the sale marked lost (fail closed), nothing sold twice. The instances run no keeper here (the
// keeper compares the same seqs at its own pace): the purchase path alone must catch it. One
// sale of one stock shard, one of three.
func TestFloorsOfARestartedInstanceComeFromPostgres(t *testing.T) {
	t.Parallel()
	for _, k := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d shards", k), func(t *testing.T) {
			t.Parallel()
			quiet := map[string]string{"FLASHSALE_KEEPER_INTERVAL": "1h"} // one pass at start, before the sale exists
			a := newHarness(t, harnessOpts{env: quiet})
			s := a.createSaleWith(map[string]any{"stockShards": k}, time.Now().Add(-time.Second), 100)
			a.buyN(s, s.items[0], 1000, 20)
			a.drain(s)
			snapshot := a.redis.CopyData(t) // what survives the crash
			lost := a.buyN(s, s.items[0], 2000, 20)
			a.drain(s) // written: Postgres holds their seqs
			if len(lost) != 20 {
				t.Fatalf("accepted %d of the purchases Redis will lose, want 20", len(lost))
			}
			a.redis.Restore(t, snapshot)

			// The restarted instance: a fresh process on the same Redis, Postgres and NATS.
			b := newInstance(t, a, instanceOpts{env: quiet})
			// A new shopper of a shard that sold in the lost writes.
			var lostShard int
			for u := range lost {
				lostShard = store.ShardOf(u, k)
				break
			}
			shopper := int64(3000)
			for store.ShardOf(shopper, k) != lostShard {
				shopper++
			}
			tok := b.token(shopper, auth.RoleShopper)
			r := b.buy(tok, s.items[0], b.purchaseToken(tok, s.sale))
			if r.Status != http.StatusServiceUnavailable {
				t.Fatalf("first purchase on the restarted instance after Redis lost writes: %d %s, want 503 (the loss found)", r.Status, r.Raw)
			}
			st, err := b.app.Stock.State(context.Background(), s.sale)
			if err != nil || !st.Lost {
				t.Fatalf("sale state after the purchase: %+v, %v; want marked lost", st, err)
			}
			if got := b.sqlInt(`SELECT count(*) FROM orders WHERE item_id = ? AND status IN ('PENDING','PAID')`, s.items[0]); got != 40 {
				t.Errorf("live orders = %d, want 40 (nothing sold past the loss)", got)
			}

			// Rebuilt from Postgres, the sale sells again on the restarted instance, and every
			// invariant holds.
			if _, err := b.app.Loader.Load(context.Background(), s.sale); err != nil {
				t.Fatalf("rebuild: %v", err)
			}
			if r := b.buy(tok, s.items[0], b.purchaseToken(tok, s.sale)); r.Status != http.StatusAccepted {
				t.Fatalf("purchase after the rebuild: %d %s, want 202", r.Status, r.Raw)
			}
			b.mu.Lock()
			a.mu.Lock()
			b.acked = append(b.acked, a.acked...)
			a.mu.Unlock()
			b.mu.Unlock()
			b.checkInvariants(s)
		})
	}
}

// The floors are read from Postgres once per sale and instance, at its first purchase there: with
// Postgres unreachable then, the purchase fails closed (503, nothing reserved, the token still
// good) rather than run with a floor of 0; once Postgres answers again, the same token buys.
func TestFloorSeedFailsClosedWithoutPostgres(t *testing.T) {
	t.Parallel()
	quiet := map[string]string{"FLASHSALE_KEEPER_INTERVAL": "1h"}
	a := newHarness(t, harnessOpts{env: quiet})
	s := a.liveSale(5)
	pg := newCuttableProxy(t, a.cfg.DatabaseURL)
	b := newInstance(t, a, instanceOpts{env: quiet, databaseURL: pg.dsn})
	alice := b.token(1, auth.RoleShopper)
	pt := b.purchaseToken(alice, s.sale)
	// The item and its sale in the instance's catalog cache (a refused token reads no seq).
	if r := b.buy(alice, s.items[0], "not-a-token"); r.Status != http.StatusForbidden {
		t.Fatalf("setup, a bad token: %d %s", r.Status, r.Raw)
	}

	pg.cut(true)
	r := b.buy(alice, s.items[0], pt)
	if r.Status != http.StatusServiceUnavailable || r.str("error") != "UNAVAILABLE" {
		t.Errorf("first purchase of the sale with Postgres unreachable: %d %s, want 503 UNAVAILABLE", r.Status, r.Raw)
	}
	if got := b.redisStock(s, s.items[0]); got != 5 {
		t.Errorf("redis stock = %d, want 5 (nothing reserved)", got)
	}
	pg.cut(false)
	// retried while 503 for up to 10 s; the check below says it if it never got through
	_ = testenv.Poll(10*time.Second, 100*time.Millisecond, func() error {
		if r = b.buy(alice, s.items[0], pt); r.Status == http.StatusServiceUnavailable {
			return fmt.Errorf("%d %s", r.Status, r.Raw)
		}
		return nil
	})
	if r.Status != http.StatusAccepted {
		t.Fatalf("the same token once Postgres answers: %d %s, want 202", r.Status, r.Raw)
	}
	a.mu.Lock()
	a.acked = append(a.acked, r.str("orderId"))
	a.mu.Unlock()
	a.checkInvariants(s)
}

type instanceOpts struct {
	env         map[string]string
	databaseURL string // reach Postgres here instead (a proxy in front of it)
}

// newInstance starts another instance on shared's Redis, Postgres and NATS, with its writer and
// without its keeper (a restarted process whose background jobs have not run yet).
func newInstance(t *testing.T, shared *harness, o instanceOpts) *harness {
	t.Helper()
	dir := t.TempDir()
	env := mergeEnv(shared.env, o.env)
	env["FLASHSALE_NATS_URL"] = shared.app.NATSURL
	env["FLASHSALE_DATA_DIR"] = dir
	if o.databaseURL != "" {
		env["FLASHSALE_DATABASE_URL"] = o.databaseURL
	}
	cfg, err := app.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := app.New(context.Background(), cfg, log)
	if err != nil {
		t.Fatalf("new instance: %v", err)
	}
	a.Start(context.Background(), true, false)
	srv := httptest.NewServer(a.Handler)
	h := &harness{t: t, cfg: cfg, env: env, app: a, srv: srv, redis: shared.redis, natsDir: dir, db: testenv.SQL(t, cfg.DatabaseURL),
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	t.Cleanup(func() {
		srv.Close()
		a.Close()
	})
	return h
}

// cuttableProxy forwards TCP connections to a Postgres; cut drops every connection and refuses
// new ones until it is undone.
type cuttableProxy struct {
	ln     net.Listener
	dsn    string
	target string
	mu     sync.Mutex
	isCut  bool
	conns  map[net.Conn]bool
}

func newCuttableProxy(t *testing.T, dsn string) *cuttableProxy {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttableProxy{ln: ln, target: u.Host, conns: map[net.Conn]bool{}}
	u.Host = ln.Addr().String()
	p.dsn = u.String()
	t.Cleanup(func() { ln.Close(); p.cut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *cuttableProxy) serve(c net.Conn) {
	p.mu.Lock()
	if p.isCut {
		p.mu.Unlock()
		c.Close()
		return
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		p.mu.Unlock()
		c.Close()
		return
	}
	p.conns[c], p.conns[s] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(s, c); s.Close() }()
	_, _ = io.Copy(c, s)
	c.Close()
}

func (p *cuttableProxy) cut(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isCut = on
	if on {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
}
