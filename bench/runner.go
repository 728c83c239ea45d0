package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Target names in reports.
const (
	tFlashsale = "flashsale"
	tRefGin    = "ref-gin"
	tRefRedis  = "ref-redis"
)

// Runner runs one scenario (possibly several times) against a running flashsale.
type Runner struct {
	o      Options
	out    io.Writer
	prog   *progress
	api    *api
	addr   string
	mint   minter
	be     *backends // nil with -no-verify
	procs  []watched // the server, its Redis and its Postgres
	nextID int64     // next shopper id: a fresh range per run, so reruns never collide
	sales  []*saleRecord

	refDummy *arena // the constant token the references hand out
	refJWTs  *arena // shopper tokens sent to the references
	tokenTTL time.Duration
}

// NewRunner checks the server answers and connects to its Postgres and Redis.
func NewRunner(ctx context.Context, o Options, stdout, stderr io.Writer) (*Runner, error) {
	addr, err := loopbackAddr(o.URL)
	if err != nil {
		return nil, err
	}
	r := &Runner{o: o, out: stdout, addr: addr, mint: minter{secret: []byte(o.Secret), ttl: 6 * time.Hour},
		nextID: time.Now().Unix() * 10_000_000}
	merchant, err := r.mint.merchant(o.MerchantID)
	if err != nil {
		return nil, err
	}
	r.api = newAPI(o.URL, merchant)
	r.api.metrics = o.MetricsURL
	if err := r.api.ready(ctx, 10*time.Second); err != nil {
		return nil, err
	}
	if !o.NoVerify {
		if r.be, err = openBackends(ctx, o); err != nil {
			return nil, fmt.Errorf("%w (the invariant check needs the server's Postgres and Redis; -no-verify skips it)", err)
		}
	}
	pid := o.ServerPID
	if pid == 0 {
		pid = pidListening(portOf(o.URL))
	}
	if err := r.preflight(ctx); err != nil {
		return nil, err
	}
	r.procs = append(r.procs, watched{Name: "server", PID: pid})
	r.procs = append(r.procs, watched{Name: "redis", PID: pidListening(portOf(o.RedisURL))})
	if p := portOfDSN(o.DatabaseURL); p > 0 {
		r.procs = append(r.procs, watched{Name: "postgres", PID: pidListening(p), Group: true})
	}
	r.prog = newProgress(stderr, !o.Quiet)
	if pid == 0 {
		r.prog.note("bench: the server's process was not found (not listening on this machine's /proc?): no server CPU or memory figures; pass -server-pid")
	}
	r.refDummy = &arena{buf: []byte(refToken), off: []int32{0, int32(len(refToken))}}
	// The generator keeps a few big pointer-free arrays; collect less often.
	debug.SetGCPercent(400)
	return r, nil
}

// Close releases the runner's connections.
func (r *Runner) Close() {
	r.prog.close()
	r.be.close()
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
	s, err := r.api.createSale(ctx, "bench preflight", time.Now().Add(-time.Second), time.Minute, 1)
	if err != nil {
		if strings.Contains(err.Error(), "HTTP 401") {
			return fmt.Errorf("%w: the server refuses the tool's merchant token: pass its FLASHSALE_JWT_SECRET with -secret", err)
		}
		return fmt.Errorf("preflight: %w", err)
	}
	var tok struct {
		ExpiresAt time.Time `json:"expiresAt"`
	}
	st, body, err := r.api.do(ctx, "POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", s.SaleID), string(r.users(1).get(0)),
		map[string]string{"captchaId": "bench", "answer": "test"}, &tok)
	switch {
	case err != nil:
		return fmt.Errorf("preflight: %w", err)
	case st == 403 && strings.Contains(string(body), "CAPTCHA_FAILED"):
		return errors.New("preflight: the server refuses the test captcha: start it with FLASHSALE_CAPTCHA=test (make bench does)")
	case st == 429:
		return errors.New("preflight: rate limited: start the server with FLASHSALE_RATE_LIMITS=off (make bench does)")
	case st != 200:
		return httpErrorf(st, body, "preflight: purchase token")
	}
	r.tokenTTL = time.Until(tok.ExpiresAt)
	return nil
}

// users reserves n fresh shopper ids and mints their tokens.
func (r *Runner) users(n int) *arena {
	first := r.nextID
	r.nextID += int64(n)
	return r.mint.shoppers(first, n)
}

func (r *Runner) newPool(url string, workers int) (*Pool, error) {
	addr, err := loopbackAddr(url)
	if err != nil {
		return nil, err
	}
	return newPool(newDialer(r.o.Client, url, addr, 2*workers), workers, r.o.Timeout), nil
}

// Run runs the scenario o.Runs times and returns the report (with medians).
func (r *Runner) Run(ctx context.Context) (*Report, error) {
	rep := &Report{Tool: "flashsale bench", Scenario: r.o.Scenario, Options: r.o, Started: time.Now(),
		Machine: MachineInfo{CPUs: numCPU(), LoadStart: loadAvg(), Go: runtime.Version()}, Commit: gitCommit()}
	rep.Options.Secret = "****"
	for i := 1; i <= r.o.Runs; i++ {
		if r.o.Runs > 1 {
			r.prog.note("bench: %s run %d of %d", r.o.Scenario, i, r.o.Runs)
		}
		res, err := r.runOnce(ctx, i)
		if res != nil {
			rep.Runs = append(rep.Runs, res)
		}
		if err != nil {
			rep.Finished = time.Now()
			rep.Machine.LoadEnd = loadAvg()
			rep.finish()
			return rep, err
		}
		if r.o.Runs > 1 {
			printRun(r.out, r.o, res, fmt.Sprintf("run %d of %d", i, r.o.Runs))
		}
	}
	rep.Finished = time.Now()
	rep.Machine.LoadEnd = loadAvg()
	rep.finish()
	return rep, nil
}

func (r *Runner) runOnce(ctx context.Context, i int) (*RunResult, error) {
	res := &RunResult{Run: i, Started: time.Now(), Metrics: map[string]float64{}, Phases: []PhaseReport{}}
	r.sales = nil
	var err error
	switch r.o.Scenario {
	case "rush":
		err = r.rush(ctx, res)
	case "soldout":
		err = r.soldout(ctx, res)
	case "reserve":
		err = r.reserve(ctx, res)
	case "ladder":
		err = r.ladderScenario(ctx, res)
	default:
		err = fmt.Errorf("unknown scenario %q", r.o.Scenario)
	}
	if err == nil && !r.o.NoVerify {
		r.prog.note("bench: checking the invariants (waiting for the queue to drain)")
		res.Invariants = verify(ctx, r.be, r.api, r.sales, r.o.DrainTimeout)
	}
	for _, s := range r.sales {
		s.NAcked = len(s.Acked)
	}
	var limited int64
	for _, p := range append(append([]PhaseReport{}, res.Phases...), res.Steps...) {
		if p.Target == tFlashsale {
			limited += p.count("429")
		}
	}
	if limited > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("the server rate-limited %d requests: benchmarks need FLASHSALE_RATE_LIMITS=off", limited))
	}
	res.Sales = r.sales
	res.Finished = time.Now()
	res.evaluate(r.o)
	return res, err
}

// measure runs a phase against one target while sampling the processes involved.
func (r *Runner) measure(ctx context.Context, pool *Pool, ph *Phase, target string, procs []watched, rate float64, window time.Duration) (PhaseReport, *Stats) {
	var before map[string]float64
	if target == tFlashsale {
		before, _ = r.api.scrape(ctx)
	}
	forks := r.redisForks(ctx)
	smp := startSampler(procs, ph.Base)
	st := pool.run(ctx, ph, r.prog)
	pr, mach := smp.finish()
	rep := buildPhase(ph.Name, target, st, len(ph.Offsets), rate, window, r.o.ErrorLimit)
	rep.Procs, rep.Machine = pr, mach
	rep.Start = time.Now().Add(-time.Since(ph.Base)).Round(time.Millisecond)
	if forks >= 0 {
		if after := r.redisForks(ctx); after >= forks {
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
		if after, err := r.api.scrape(ctx); err == nil {
			rep.Server = serverDiag(before, after)
		}
	}
	return rep, st
}

// redisForks returns how many times Redis has forked (AOF rewrites, snapshots), or -1.
func (r *Runner) redisForks(ctx context.Context) int64 {
	if r.be == nil {
		return -1
	}
	info, err := r.be.rdb.Info(ctx, "stats").Result()
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_forks:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// Paths and bodies of the two purchase-path calls.
func tokenPath(saleID int64) []byte {
	return []byte("/api/flash-sales/" + strconv.FormatInt(saleID, 10) + "/purchase-token")
}
func purchasePath(itemID int64) []byte {
	return []byte("/api/flash-sales/items/" + strconv.FormatInt(itemID, 10) + "/purchase")
}

var tokenBody = []byte(`{"captchaId":"bench","answer":"test"}`)

// doubleClicks tells whether shopper i clicks twice: a fixed, evenly spread fraction.
func doubleClicks(i int, frac float64) bool {
	if frac <= 0 {
		return false
	}
	h := uint32(i) * 2654435761 // Knuth's multiplicative hash
	return float64(h)/float64(math.MaxUint32) < frac
}

// What an arrival of the shopper flow sent besides its first token request, recorded so the
// reference run can send the same requests (the issue compares times for the same number of
// requests: a shopper flashsale refuses at the token step costs one request, not two).
const (
	patToken2   = 1 << iota // a second token (a double-clicker)
	patPurchase             // a purchase
	patDup                  // a second purchase at the same time
)

// shopperFlow is one shopper's whole visit, as in the rush and the ladder: fetch a purchase
// token (the test captcha's answer is "test", so the captcha request itself is skipped: it is
// a static challenge, not part of the contested path), then buy; a double-clicker fetches a
// second token and sends both purchases at once on two connections. With replay set, arrival i
// sends exactly the requests replay[i] names, whatever the answers; with record set, what
// arrival i sent is written to record[i].
func shopperFlow(users *arena, tokPath, buyPath []byte, frac float64, record, replay []uint8) func(w *Worker, s *Stats, i int, sched, deadline time.Time) {
	return func(w *Worker, s *Stats, i int, sched, deadline time.Time) {
		jwt := users.get(i % users.len())
		var pat uint8
		want := func(bit uint8, ok bool) bool {
			if replay != nil {
				return replay[i]&bit != 0
			}
			return ok
		}
		w.req = request{method: "POST", path: tokPath, bearer: jwt, body: tokenBody}
		cl, body, end := exchange(w.c1, &w.req, s, kToken, deadline)
		final := cl
		w.tok1 = append(w.tok1[:0], jsonString(body, "purchaseToken")...)
		dbl := want(patToken2, cl == c200 && doubleClicks(i, frac))
		if dbl {
			pat |= patToken2
			cl2, body2, t2 := exchange(w.c1, &w.req, s, kToken, deadline)
			w.tok2 = append(w.tok2[:0], jsonString(body2, "purchaseToken")...)
			if cl2 != c200 {
				final, end = cl2, t2
			}
		}
		if want(patPurchase, final == c200) {
			pat |= patPurchase
			w.req = request{method: "POST", path: buyPath, bearer: jwt, ptoken: w.tok1}
			if want(patDup, dbl) {
				pat |= patDup
				final, end = doubleClick(w, s, jwt, buyPath, deadline)
			} else {
				var b []byte
				final, b, end = exchange(w.c1, &w.req, s, kPurchase, deadline)
				if final == c202 {
					w.acked = append(w.acked, string(jsonString(b, "orderId")))
				}
			}
		}
		if record != nil {
			record[i] = pat
		}
		s.record(kArrival, final, end.Sub(sched), int64(end.Sub(s.base)))
	}
}

// doubleClick sends w.req (first token) and the same purchase with the second token at once.
func doubleClick(w *Worker, s *Stats, jwt, buyPath []byte, deadline time.Time) (class, time.Time) {
	req2 := request{method: "POST", path: buyPath, bearer: jwt, ptoken: w.tok2}
	t0 := time.Now()
	err1 := w.c1.Send(&w.req, deadline)
	err2 := w.c2.Send(&req2, deadline)
	var cls [2]class
	var end time.Time
	for j, c := range []conn{w.c1, w.c2} {
		k, err := kPurchase, err1
		if j == 1 {
			k, err = kDup, err2
		}
		if err != nil {
			t := time.Now()
			cls[j] = classOf(0, err)
			s.record(k, cls[j], t.Sub(t0), int64(t.Sub(s.base)))
			end = t
			continue
		}
		cl, b, t := finish(c, s, k, t0)
		cls[j], end = cl, t
		if cl == c202 {
			w.acked = append(w.acked, string(jsonString(b, "orderId")))
		}
	}
	// the shopper's outcome: a unit if either click won, else an error if either failed
	switch {
	case cls[0] == c202 || cls[1] == c202:
		return c202, end
	case isError(cls[0]):
		return cls[0], end
	case isError(cls[1]):
		return cls[1], end
	}
	return cls[0], end
}

// purchaseOnly is an arrival that only buys, with a purchase token fetched beforehand: the
// refusal path (soldout) or the winning path (reserve) alone.
func purchaseOnly(users, toks *arena, buyPath []byte) func(w *Worker, s *Stats, i int, sched, deadline time.Time) {
	return func(w *Worker, s *Stats, i int, sched, deadline time.Time) {
		w.req = request{method: "POST", path: buyPath, bearer: users.get(i % users.len()), ptoken: toks.get(i % toks.len())}
		cl, b, end := exchange(w.c1, &w.req, s, kPurchase, deadline)
		if cl == c202 {
			w.acked = append(w.acked, string(jsonString(b, "orderId")))
		}
		s.record(kArrival, cl, end.Sub(sched), int64(end.Sub(s.base)))
	}
}

// prefetchTokens fetches one purchase token per user before a purchase-only phase (closed
// loop, as fast as the server answers), and checks they will outlive the phase.
func (r *Runner) prefetchTokens(ctx context.Context, pool *Pool, users *arena, saleID int64, mustLast time.Duration) (*arena, error) {
	n := users.len()
	toks := newSlots(n, 96)
	path := tokenPath(saleID)
	var minExp int64 = math.MaxInt64
	var expMu sync.Mutex
	do := func(w *Worker, s *Stats, i int, sched, deadline time.Time) {
		w.req = request{method: "POST", path: path, bearer: users.get(i), body: tokenBody}
		cl, body, _ := exchange(w.c1, &w.req, s, kToken, deadline)
		if cl != c200 {
			return
		}
		toks.set(i, jsonString(body, "purchaseToken"))
		if i%64 == 0 { // the earliest expiry, sampled
			if t, err := time.Parse(time.RFC3339Nano, string(jsonString(body, "expiresAt"))); err == nil {
				expMu.Lock()
				minExp = min(minExp, t.UnixNano())
				expMu.Unlock()
			}
		}
	}
	start := time.Now()
	for attempt := 0; attempt < 3; attempt++ {
		var idx []time.Duration
		var which []int
		for i := range n {
			if toks.lens[i] == 0 {
				which = append(which, i)
				idx = append(idx, 0)
			}
		}
		if len(which) == 0 {
			break
		}
		ph := &Phase{Name: "prefetch tokens", Base: time.Now(), Offsets: idx, Deadline: r.o.MaxWait + time.Minute,
			Do: func(w *Worker, s *Stats, j int, sched, deadline time.Time) { do(w, s, which[j], sched, deadline) }}
		st := pool.run(ctx, ph, r.prog)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if bad := int64(len(which)) - st.count(kToken, c200); bad > 0 && attempt == 2 {
			return nil, fmt.Errorf("prefetch: %d of %d purchase tokens refused (%s)", bad, n, codesLine(st, kToken))
		}
	}
	took := time.Since(start)
	if minExp != math.MaxInt64 {
		if left := time.Until(time.Unix(0, minExp)); left < mustLast {
			return nil, fmt.Errorf("prefetching %d purchase tokens took %v and the first expire in %v, before the phase ends (%v): "+
				"start the server with a longer FLASHSALE_PURCHASE_TOKEN_TTL (make bench uses 2m) or use a lower rate or -duration",
				n, took.Round(time.Millisecond), left.Round(time.Millisecond), mustLast)
		}
	}
	return toks, nil
}

func codesLine(st *Stats, k kind) string {
	var parts []string
	for c := class(0); c < nClasses; c++ {
		if n := st.count(k, c); n > 0 {
			parts = append(parts, classNames[c]+":"+strconv.FormatInt(n, 10))
		}
	}
	for i, name := range codeNames {
		if n := st.codes[k][i].Load(); n > 0 {
			parts = append(parts, name+":"+strconv.FormatInt(n, 10))
		}
	}
	return strings.Join(parts, " ")
}

// refRun starts a reference server, hands it to f and stops it. It first waits for flashsale's
// queue to drain: its writer would otherwise still be writing the orders just accepted, taking
// CPU, Redis and Postgres from the reference being measured.
func (r *Runner) refRun(ctx context.Context, res *RunResult, name string, f func(pool *Pool, procs []watched) error) error {
	if r.be != nil {
		r.prog.note("bench: waiting for flashsale's queue to drain before measuring %s", name)
		if _, err := r.be.waitDrained(ctx, r.sales, r.o.DrainTimeout); err != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("%s measured while flashsale was still writing orders: %v", name, err))
		}
	}
	p, err := startRef(ctx, name, r.o.RedisURL)
	if err != nil {
		return err
	}
	defer p.stop()
	pool, err := r.newPool(p.url, r.o.Workers)
	if err != nil {
		return err
	}
	defer pool.close()
	procs := []watched{{Name: "server", PID: p.pid()}}
	for _, w := range r.procs[1:] {
		procs = append(procs, w)
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
