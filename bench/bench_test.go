package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/bench/internal/proc"
	"github.com/flashsale/flashsale/bench/internal/refs"
	"github.com/flashsale/flashsale/bench/internal/report"
	"github.com/flashsale/flashsale/bench/internal/target"
	"github.com/flashsale/flashsale/loadgen/tokens"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

func TestMain(m *testing.M) {
	// The tool starts its reference servers by running its own executable, which in a test is
	// this test binary: serve them here instead of running the tests.
	if refs.IsChild() && len(os.Args) > 1 {
		ctx, stop := signalContext()
		err := refs.Serve(ctx, os.Args[1], os.Args[2:], os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	testenv.Main(m)
}

// server is a flashsale binary started for a test, on real Redis and Postgres.
type server struct {
	url         string
	metricsURL  string
	databaseURL string
	redisURL    string
	cmd         *exec.Cmd
	log         *bytes.Buffer
}

// startServer builds the flashsale binary and runs it as a subprocess, configured the way
// `make bench` runs it.
func startServer(t *testing.T) *server {
	t.Helper()
	bin := buildServer(t)
	rs := testenv.Redis(t)
	s := &server{databaseURL: testenv.Postgres(t), redisURL: rs.URL(), log: &bytes.Buffer{}}
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	s.url = "http://" + addr
	maddr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	s.metricsURL = "http://" + maddr + "/metrics"
	s.cmd = exec.Command(bin, "serve")
	s.cmd.Env = append(os.Environ(),
		"FLASHSALE_DATABASE_URL="+s.databaseURL,
		"FLASHSALE_REDIS_URL="+s.redisURL,
		"FLASHSALE_DATA_DIR="+t.TempDir(),
		"FLASHSALE_NATS_PORT="+strconv.Itoa(testenv.FreePort(t)),
		"FLASHSALE_ADDR="+addr,
		"FLASHSALE_METRICS_ADDR="+maddr,
		"FLASHSALE_RATE_LIMITS=off",
		"FLASHSALE_CAPTCHA=test",
		"FLASHSALE_PURCHASE_TOKEN_TTL=2m",
		"FLASHSALE_LOG_LEVEL=warn",
	)
	done := s.start(t)
	s.waitReady(t, done)
	return s
}

// buildServer builds the flashsale binary into the test's temporary directory.
func buildServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "flashsale")
	build := exec.Command("go", "build", "-o", bin, "github.com/flashsale/flashsale")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the server: %v\n%s", err, out)
	}
	return bin
}

// start starts the server with its output in s.log; the test's cleanup stops it (SIGTERM, then
// SIGKILL after 15 s) and shows the log if the test failed. done is closed when it exits.
func (s *server) start(t *testing.T) (done chan struct{}) {
	t.Helper()
	s.cmd.Stdout, s.cmd.Stderr = &lockedWriter{w: s.log}, &lockedWriter{w: s.log}
	s.cmd.SysProcAttr = proc.ChildAttr()
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start the server: %v", err)
	}
	done = make(chan struct{})
	go func() {
		s.cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			s.cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("server log:\n%s", s.log.String())
		}
	})
	return done
}

// waitReady polls /readyz until the server answers 200, failing the test if it exits first or
// is not ready within a minute.
func (s *server) waitReady(t *testing.T, done chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-done:
			t.Fatalf("the server exited at start:\n%s", s.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server was not ready within a minute:\n%s", s.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRushSmall runs the tool once, small, against a real server, the units spread over three
// items: the outcome counts must add up, every item sell out and the invariants hold; then the
// stores are corrupted and the same check must fail.
// Nothing here asserts a time.
func TestRushSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server, Redis and Postgres")
	}
	srv := startServer(t)
	const shoppers, units = 300, 50
	o, err := parseOptions("rush", []string{"-url", srv.url, "-metrics-url", srv.metricsURL, "-database-url", srv.databaseURL, "-redis-url", srv.redisURL,
		"-server-pid", strconv.Itoa(srv.cmd.Process.Pid), "-n", strconv.Itoa(shoppers), "-units", strconv.Itoa(units),
		"-window", "1s", "-double-click", "0.1", "-workers", "64", "-quiet", "-drain-timeout", "60s", "-items", "3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ctx := context.Background()
	rep, err := Bench(ctx, o, &out, &out)
	if err != nil {
		t.Fatalf("Bench: %v\n%s", err, out.String())
	}
	printReport(&out, rep)
	t.Logf("report:\n%s", out.String())
	if len(rep.Runs) != 1 || rep.Runs[0].Rush == nil {
		t.Fatalf("want one rush run, got %d runs", len(rep.Runs))
	}
	res := rep.Runs[0]
	p := res.phase("rush", tFlashsale)
	if p == nil {
		t.Fatal("no flashsale rush phase")
	}
	checkRushCounts(t, res, p, shoppers, units)
	if !res.Invariants.Checked || !res.Invariants.OK {
		t.Fatalf("invariants: %+v", res.Invariants)
	}
	checkRushItems(t, ctx, o, res, units)
	if !rep.OK {
		t.Error("report not OK")
	}
	checkRushReplay(t, res, p, shoppers)
	checkVerifyCatches(t, ctx, o, res.Sales)
}

// checkRushCounts: exactly one 202 per unit, every shopper answered 202, 409 or 410, no error.
func checkRushCounts(t *testing.T, res *RunResult, p *report.PhaseReport, shoppers, units int64) {
	t.Helper()
	shopper := func(c string) int64 { return p.Outcome("shopper", c).Count }
	if got := shopper("202"); got != units {
		t.Errorf("shoppers answered 202: %d, want exactly %d", got, units)
	}
	if got := res.Rush.Accepted; got != units {
		t.Errorf("202 answers: %d, want exactly %d (one per unit, double-clicks included)", got, units)
	}
	if got := shopper("202") + shopper("409") + shopper("410"); got != shoppers {
		t.Errorf("shoppers answered 202, 409 or 410: %d, want all %d", got, shoppers)
	}
	for _, c := range []string{"5xx", "timeout", "neterr", "4xx", "425", "429"} {
		if n := p.Count(c); n != 0 {
			t.Errorf("%d requests answered %s, want none", n, c)
		}
	}
	if got := p.Outcome("dup", "202").Count + p.Outcome("purchase", "202").Count; got != units {
		t.Errorf("purchase+dup 202s: %d, want %d", got, units)
	}
}

// checkRushItems: the sale has three items, each sold to its share of the units, and sold out
// with its last unit.
func checkRushItems(t *testing.T, ctx context.Context, o Options, res *RunResult, units int) {
	t.Helper()
	if ids := res.Sales[0].ItemIDs; len(ids) != 3 || res.Rush.Items != 3 {
		t.Errorf("the rush's sale has items %v (report: %d), want 3", ids, res.Rush.Items)
	} else {
		g := testenv.SQL(t, o.DatabaseURL)
		for i, id := range ids {
			var n int64
			if err := g.WithContext(ctx).Raw(`SELECT count(*) FROM orders WHERE item_id = ?`, id).Scan(&n).Error; err != nil {
				t.Fatal(err)
			}
			if want := splitUnits(units, 3)[i]; n != int64(want) {
				t.Errorf("item %d: %d orders, want its %d units", id, n, want)
			}
		}
	}
	if res.Rush.SoldOutAt < 0 || res.Rush.SoldOutAt != res.Rush.Last202At {
		t.Errorf("sold out at %v, last 202 at %v: with three items, the sale sells out with its last unit", res.Rush.SoldOutAt, res.Rush.Last202At)
	}
}

// checkRushReplay: the reference replays the same shoppers, each sending the requests it sent
// to flashsale, and the ratio is reported.
func checkRushReplay(t *testing.T, res *RunResult, p *report.PhaseReport, shoppers int64) {
	t.Helper()
	if ref := res.phase("rush", refs.Gin); ref == nil {
		t.Error("no ref-gin rush phase")
	} else {
		if ref.Requests != p.Requests {
			t.Errorf("ref-gin got %d requests, flashsale %d: want the same", ref.Requests, p.Requests)
		}
		if got := ref.Outcome("shopper", "200").Count + ref.Outcome("shopper", "410").Count; got != shoppers {
			t.Errorf("ref-gin answered %d shoppers, want %d", got, shoppers)
		}
	}
	if res.Metrics["ratio.rush_answered_vs_ref_gin"] <= 0 {
		t.Errorf("no rush ratio: %v", res.Metrics["ratio.rush_answered_vs_ref_gin"])
	}
}

// checkVerifyCatches: the check must fail when the stores disagree: first a unit too many in
// Redis, then an acknowledged order lost from Postgres.
func checkVerifyCatches(t *testing.T, ctx context.Context, o Options, sales []*target.Sale) {
	t.Helper()
	be, err := target.Open(ctx, o.DatabaseURL, o.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	merchant, _ := tokens.Minter{Secret: []byte(o.Secret), TTL: time.Hour}.Merchant(o.MerchantID)
	a := target.NewAPI(o.URL, o.MetricsURL, merchant)
	item := sales[0].ItemIDs[0]
	if err := be.Redis.IncrBy(ctx, store.StockKey(sales[0].SaleID, item), 1).Err(); err != nil {
		t.Fatal(err)
	}
	inv := target.Verify(ctx, be, a, sales, 2*time.Second)
	if inv.OK || !anyContains(inv.Violations, "conservation") {
		t.Errorf("after INCRBY stock: violations %q, want a conservation violation", inv.Violations)
	}
	if err := be.Redis.DecrBy(ctx, store.StockKey(sales[0].SaleID, item), 1).Err(); err != nil {
		t.Fatal(err)
	}
	if inv := target.Verify(ctx, be, a, sales, 2*time.Second); !inv.OK {
		t.Fatalf("after repairing Redis: %q", inv.Violations)
	}
	gone := sales[0].Acked[0]
	if err := testenv.SQL(t, o.DatabaseURL).WithContext(ctx).Exec(`DELETE FROM orders WHERE id = ?::uuid`, gone).Error; err != nil {
		t.Fatal(err)
	}
	inv = target.Verify(ctx, be, a, sales, 2*time.Second)
	if inv.OK || !anyContains(inv.Violations, "acknowledged means durable") {
		t.Errorf("after deleting order %s: violations %q, want an acknowledged-means-durable violation", gone, inv.Violations)
	}
}

// TestPathScenariosSmall runs soldout and reserve for a couple of short ladder steps, to prove
// the prefetch, the ladder and the references work; no figure is asserted.
func TestPathScenariosSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server, Redis and Postgres")
	}
	srv := startServer(t)
	for _, scenario := range []string{"soldout", "reserve"} {
		o, err := parseOptions(scenario, []string{"-url", srv.url, "-metrics-url", srv.metricsURL, "-database-url", srv.databaseURL, "-redis-url", srv.redisURL,
			"-start-rate", "100", "-max-steps", "2", "-refine", "0", "-duration", "500ms", "-workers", "32", "-quiet"}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		rep, err := Bench(context.Background(), o, &out, &out)
		if err != nil {
			t.Fatalf("%s: %v\n%s", scenario, err, out.String())
		}
		printReport(&out, rep)
		t.Logf("%s:\n%s", scenario, out.String())
		res := rep.Runs[0]
		if len(res.Ladders) != 2 || len(res.Phases) != 2 {
			t.Errorf("%s: %d ladders and %d load phases, want 2 and 2", scenario, len(res.Ladders), len(res.Phases))
		}
		want := map[string]string{"soldout": "410", "reserve": "202"}[scenario]
		for _, p := range res.Phases {
			if got := p.Outcome("shopper", want).Count; got != int64(p.Arrivals) || p.Dropped > 0 {
				// a dropped arrival on a loaded machine is possible; every sent one must be right
				if got+p.Dropped != int64(p.Arrivals) {
					t.Errorf("%s %s @ %s: %d of %d arrivals answered %s (%d dropped)", scenario, p.Name, p.Target, got, p.Arrivals, want, p.Dropped)
				}
			}
		}
		if !res.Invariants.OK {
			t.Errorf("%s: invariants: %q", scenario, res.Invariants.Violations)
		}
	}
}

func anyContains(list []string, s string) bool {
	for _, v := range list {
		if strings.Contains(v, s) {
			return true
		}
	}
	return false
}

// lockedWriter serialises a child process's stdout and stderr into one buffer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
