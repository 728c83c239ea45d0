package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale/bench/internal/proc"
	"github.com/flashsale/flashsale/bench/internal/refs"
	"github.com/flashsale/flashsale/bench/internal/report"
	"github.com/flashsale/flashsale/bench/internal/target"
	"github.com/flashsale/flashsale/loadgen"
	"github.com/flashsale/flashsale/loadgen/tokens"
)

// tFlashsale names the server under test in reports (the references are refs.Gin, refs.Redis).
const tFlashsale = "flashsale"

// Runner runs one scenario (possibly several times) against a running flashsale: what every
// scenario needs (the server's API and stores, its processes, fresh shoppers, pools,
// measured phases, the references) in one place.
type Runner struct {
	o      Options
	sc     Scenario
	out    io.Writer
	prog   *loadgen.Progress
	api    *target.API
	addr   string
	mint   tokens.Minter
	be     *target.Backends // nil with -no-verify
	procs  []proc.Watched   // the server, its Redis and its Postgres
	nextID int64            // next shopper id: a fresh range per run, so reruns never collide
	sales  []*target.Sale

	refDummy *tokens.Arena // the constant token the references hand out
	refJWTs  *tokens.Arena // shopper tokens sent to the references
	tokenTTL time.Duration
}

// NewRunner checks the server answers and connects to its Postgres and Redis.
func NewRunner(ctx context.Context, o Options, stdout, stderr io.Writer) (*Runner, error) {
	sc := o.scenario()
	if sc == nil {
		return nil, fmt.Errorf("unknown scenario %q", o.Scenario)
	}
	addr, err := loadgen.LoopbackAddr(o.URL)
	if err != nil {
		return nil, err
	}
	r := &Runner{o: o, sc: sc, out: stdout, addr: addr, mint: tokens.Minter{Secret: []byte(o.Secret), TTL: 6 * time.Hour},
		nextID: time.Now().Unix() * 10_000_000}
	merchant, err := r.mint.Merchant(o.MerchantID)
	if err != nil {
		return nil, err
	}
	r.api = target.NewAPI(o.URL, o.MetricsURL, merchant)
	if err := r.api.Ready(ctx, 10*time.Second); err != nil {
		return nil, err
	}
	if !o.NoVerify {
		if r.be, err = target.Open(ctx, o.DatabaseURL, o.RedisURL); err != nil {
			return nil, fmt.Errorf("%w (the invariant check needs the server's Postgres and Redis; -no-verify skips it)", err)
		}
	}
	pids := o.ServerPIDs
	if len(pids) == 0 {
		pids = []int{proc.ListeningPID(portOf(o.URL))}
	}
	pid := pids[0]
	if err := r.preflight(ctx); err != nil {
		return nil, err
	}
	r.procs = append(r.procs, proc.Watched{Name: "server", PID: pid, More: pids[1:]})
	var redisPIDs []int
	for _, h := range redisHosts(o.RedisURL) {
		if _, p, err := net.SplitHostPort(h); err == nil {
			n, _ := strconv.Atoi(p)
			redisPIDs = append(redisPIDs, proc.ListeningPID(n))
		}
	}
	if len(redisPIDs) > 0 {
		r.procs = append(r.procs, proc.Watched{Name: "redis", PID: redisPIDs[0], More: redisPIDs[1:]})
	}
	if p := portOfDSN(o.DatabaseURL); p > 0 {
		r.procs = append(r.procs, proc.Watched{Name: "postgres", PID: proc.ListeningPID(p), Group: true})
	}
	if o.ProxyPID > 0 {
		r.procs = append(r.procs, proc.Watched{Name: "proxy", PID: o.ProxyPID, Group: true})
	}
	r.prog = loadgen.NewProgress(stderr, !o.Quiet)
	if pid == 0 {
		r.prog.Note("bench: the server's process was not found (not listening on this machine's /proc?): no server CPU or memory figures; pass -server-pid")
	}
	r.refDummy = tokens.Of(refs.Token)
	// The generator keeps a few big pointer-free arrays; collect less often.
	debug.SetGCPercent(400)
	return r, nil
}

// Close releases the runner's connections.
func (r *Runner) Close() {
	r.prog.Close()
	r.be.Close()
}

func portOfDSN(dsn string) int {
	if i := strings.Index(dsn, "@"); i >= 0 {
		rest := dsn[i+1:]
		if j := strings.IndexAny(rest, "/?"); j >= 0 {
			rest = rest[:j]
		}
		if _, p, ok := strings.Cut(rest, ":"); ok {
			n, _ := strconv.Atoi(p)
			return n
		}
		return 5432
	}
	return 0
}

// preflight checks, on a sale of its own, that the server takes the tool's tokens and the test
// captcha, so a misconfigured server fails here with a hint rather than as a run of 403s.
func (r *Runner) preflight(ctx context.Context) error {
	s, err := r.api.CreateSale(ctx, "bench preflight", time.Now().Add(-time.Second), time.Minute, 1)
	if err != nil {
		if strings.Contains(err.Error(), "HTTP 401") {
			return fmt.Errorf("%w: the server refuses the tool's merchant token: pass its FLASHSALE_JWT_SECRET with -secret", err)
		}
		return fmt.Errorf("preflight: %w", err)
	}
	var tok struct {
		ExpiresAt time.Time `json:"expiresAt"`
	}
	st, body, err := r.api.Do(ctx, "POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", s.SaleID), string(r.users(1).Get(0)),
		map[string]string{"captchaId": "bench", "answer": "test"}, &tok)
	switch {
	case err != nil:
		return fmt.Errorf("preflight: %w", err)
	case st == 403 && strings.Contains(string(body), "CAPTCHA_FAILED"):
		return errors.New("preflight: the server refuses the test captcha: start it with FLASHSALE_CAPTCHA=test (make bench does)")
	case st == 429:
		return errors.New("preflight: rate limited: start the server with FLASHSALE_RATE_LIMITS=off (make bench does)")
	case st != 200:
		return target.HTTPErrorf(st, body, "preflight: purchase token")
	}
	r.tokenTTL = time.Until(tok.ExpiresAt)
	return nil
}

// users reserves n fresh shopper ids and mints their tokens.
func (r *Runner) users(n int) *tokens.Arena {
	first := r.nextID
	r.nextID += int64(n)
	return r.mint.Shoppers(first, n)
}

func (r *Runner) newPool(url string, workers int) (*loadgen.Pool, error) {
	return loadgen.NewPool(r.o.Client, url, workers, r.o.Timeout)
}

// Run runs the scenario o.Runs times and returns the report (with medians).
func (r *Runner) Run(ctx context.Context) (*Report, error) {
	rep := &Report{Tool: "flashsale bench", Scenario: r.o.Scenario, Options: r.o, Started: time.Now(),
		Machine: MachineInfo{CPUs: runtime.NumCPU(), LoadStart: proc.LoadAvg(), Go: runtime.Version()}, Commit: gitCommit()}
	rep.Options.Secret = "****"
	for i := 1; i <= r.o.Runs; i++ {
		if r.o.Runs > 1 {
			r.prog.Note("bench: %s run %d of %d", r.o.Scenario, i, r.o.Runs)
		}
		res, err := r.runOnce(ctx, i)
		if res != nil {
			rep.Runs = append(rep.Runs, res)
		}
		if err != nil {
			rep.Finished = time.Now()
			rep.Machine.LoadEnd = proc.LoadAvg()
			rep.finish()
			return rep, err
		}
		if r.o.Runs > 1 {
			printRun(r.out, r.o, res, fmt.Sprintf("run %d of %d", i, r.o.Runs))
		}
	}
	rep.Finished = time.Now()
	rep.Machine.LoadEnd = proc.LoadAvg()
	rep.finish()
	return rep, nil
}

func (r *Runner) runOnce(ctx context.Context, i int) (*RunResult, error) {
	res := &RunResult{Run: i, Started: time.Now(), Metrics: map[string]float64{}, Phases: []report.PhaseReport{}}
	r.sales = nil
	err := r.sc.Run(ctx, r, res)
	if err == nil && !r.o.NoVerify {
		r.prog.Note("bench: checking the invariants (waiting for the queue to drain)")
		res.Invariants = target.Verify(ctx, r.be, r.api, r.sales, r.o.DrainTimeout)
	}
	for _, s := range r.sales {
		s.NAcked = len(s.Acked)
	}
	var limited int64
	for _, p := range append(append([]report.PhaseReport{}, res.Phases...), res.Steps...) {
		if p.Target == tFlashsale {
			limited += p.Count("429")
		}
	}
	if limited > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("the server rate-limited %d requests: benchmarks need FLASHSALE_RATE_LIMITS=off", limited))
	}
	res.Sales = r.sales
	res.Finished = time.Now()
	res.evaluate(r.sc, r.o)
	return res, err
}

// measure runs a phase against one target while sampling the processes involved.
func (r *Runner) measure(ctx context.Context, pool *loadgen.Pool, ph *loadgen.Phase, tgt string, procs []proc.Watched, rate float64, window time.Duration) (report.PhaseReport, *loadgen.Stats) {
	var before map[string]float64
	if tgt == tFlashsale {
		before, _ = r.api.Scrape(ctx)
	}
	forks := r.be.RedisForks(ctx)
	smp := proc.StartSampler(procs, ph.Base)
	st := pool.Run(ctx, ph, r.prog)
	pr, mach := smp.Finish()
	rep := report.Build(ph.Name, tgt, st, len(ph.Offsets), rate, window, r.o.ErrorLimit)
	rep.Procs, rep.Machine = pr, mach
	rep.Start = time.Now().Add(-time.Since(ph.Base)).Round(time.Millisecond)
	if forks >= 0 {
		if after := r.be.RedisForks(ctx); after >= forks {
			rep.RedisForks = after - forks
		}
	}
	if rep.Requests > 0 {
		rep.GenCPUPerReq = mach.GenCPU / float64(rep.Requests) * 1e6
		for k, p := range rep.Procs {
			p.CPUPerRq = p.CPU / float64(rep.Requests) * 1e6
			rep.Procs[k] = p
		}
	}
	if before != nil {
		if after, err := r.api.Scrape(ctx); err == nil {
			rep.Server = target.ServerDiag(before, after)
		}
	}
	return rep, st
}

// refRun starts a reference server, hands it to f and stops it. It first waits for flashsale's
// queue to drain: its writer would otherwise still be writing the orders just accepted, taking
// CPU, Redis and Postgres from the reference being measured.
func (r *Runner) refRun(ctx context.Context, res *RunResult, name string, f func(pool *loadgen.Pool, procs []proc.Watched) error) error {
	if r.be != nil {
		r.prog.Note("bench: waiting for flashsale's queue to drain before measuring %s", name)
		if _, err := r.be.WaitDrained(ctx, r.sales, r.o.DrainTimeout); err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("%s measured while flashsale was still writing orders: %v", name, err))
		}
	}
	p, err := refs.Start(ctx, name, r.o.RedisURL)
	if err != nil {
		return err
	}
	defer p.Stop()
	pool, err := r.newPool(p.URL, r.o.Workers)
	if err != nil {
		return err
	}
	defer pool.Close()
	procs := []proc.Watched{{Name: "server", PID: p.PID()}}
	for _, w := range r.procs[1:] {
		if w.Name != "proxy" { // the references are measured without the proxy
			procs = append(procs, w)
		}
	}
	return f(pool, procs)
}

func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += "+dirty"
	}
	return c
}

var errInvariants = errors.New("invariants violated")
