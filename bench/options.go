package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale/bench/internal/target"
	"github.com/flashsale/flashsale/loadgen"
)

// Options are every setting of a benchmark run (the "options" of the JSON report). The fields
// marked rush are the rush scenario's own flags (scenario_rush.go); the rest are common.
type Options struct {
	Scenario    string
	URL         string // the flashsale under test
	MetricsURL  string // its /metrics, served on FLASHSALE_METRICS_ADDR
	Secret      string
	DatabaseURL string
	RedisURL    string
	ServerPIDs  []int // the server's processes (several instances are summed as one server)
	ProxyPID    int   // a proxy in front of them (nginx), measured as "proxy"
	MerchantID  int64

	N           int           // rush: shoppers
	Window      time.Duration // rush: arrival window
	Units       int           // rush: units for sale
	Items       int           // rush: items the units are spread over
	DoubleClick float64       // rush: fraction of shoppers who click twice
	Lead        time.Duration // rush: how far ahead the sale starts

	Rate       float64       // constant-rate run at this rate (skips the ladder search)
	Duration   time.Duration // each constant-rate run and ladder step
	StartRate  float64
	Step       float64 // ladder: rate multiplier per step
	MaxRate    float64
	MaxSteps   int
	Refine     int     // ladder: bisection steps after the first unstable rate
	ErrorLimit float64 // ladder: a step is unstable above this fraction of errors + dropped arrivals
	LoadFactor float64 // latency run at this fraction of the stable rate

	Workers      int
	Client       string // raw or std
	Timeout      time.Duration
	MaxWait      time.Duration // bound on a phase beyond its window
	DrainTimeout time.Duration
	Settle       time.Duration // before each ladder step, wait up to this for the queue to drain
	Arrivals     string        // poisson or uniform
	Seed         uint64

	Runs     int
	JSON     string
	NoRef    bool
	NoVerify bool
	Quiet    bool

	// sc is the scenario named Scenario as parsed, holding any flags it keeps in itself (a
	// scenario's flags go in the fields above only to appear in the report's "options").
	sc Scenario
}

// scenario returns the scenario to run: the parsed one, or a fresh one of that name (nil if
// none is registered).
func (o Options) scenario() Scenario {
	if o.sc != nil {
		return o.sc
	}
	return scenarioNamed(o.Scenario)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// parseOptions reads a scenario's flags.
func parseOptions(scenario string, args []string, stderr io.Writer) (Options, error) {
	o := Options{Scenario: scenario}
	fs := flag.NewFlagSet(scenario, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.URL, "url", envOr("FLASHSALE_BENCH_URL", target.DefaultURL), "flashsale under test (loopback only; env FLASHSALE_BENCH_URL)")
	fs.StringVar(&o.MetricsURL, "metrics-url", envOr("FLASHSALE_BENCH_METRICS_URL", "http://127.0.0.1:9090/metrics"), "the server's /metrics, on its FLASHSALE_METRICS_ADDR (loopback only; env FLASHSALE_BENCH_METRICS_URL)")
	fs.StringVar(&o.Secret, "secret", envOr("FLASHSALE_JWT_SECRET", target.DevJWTSecret), "the server's JWT secret (env FLASHSALE_JWT_SECRET)")
	fs.StringVar(&o.DatabaseURL, "database-url", envOr("FLASHSALE_DATABASE_URL", target.DefaultDatabaseURL), "the server's Postgres, for the invariant check (env FLASHSALE_DATABASE_URL)")
	fs.StringVar(&o.RedisURL, "redis-url", envOr("FLASHSALE_REDIS_URL", target.DefaultRedisURL), "the server's Redis, for the invariant check and ref-redis (env FLASHSALE_REDIS_URL)")
	fs.Var((*pidList)(&o.ServerPIDs), "server-pid", "pid of the server, for its CPU and memory; several instances: a comma-separated list, summed (default: the process listening on -url's port)")
	fs.IntVar(&o.ProxyPID, "proxy-pid", 0, "pid of a proxy in front of the server (nginx's master; its workers are counted with it), reported as \"proxy\"")
	fs.Int64Var(&o.MerchantID, "merchant", 900000001, "merchant id the tool creates its sales as")

	// Every command accepts every scenario's flags, as it always has (scripts pass them freely).
	all := scenarios()
	for _, s := range all {
		s.Flags(fs, &o)
		if s.Name() == scenario {
			o.sc = s
		}
	}

	fs.Float64Var(&o.Rate, "rate", 0, "arrivals per second of one constant-rate run (soldout, reserve, ladder); 0: search with a ladder")
	fs.DurationVar(&o.Duration, "duration", 3*time.Second, "length of a constant-rate run and of each ladder step")
	fs.Float64Var(&o.StartRate, "start-rate", 1000, "ladder: first rate")
	fs.Float64Var(&o.Step, "step", 1.5, "ladder: rate multiplier between steps")
	fs.Float64Var(&o.MaxRate, "max-rate", 300_000, "ladder: highest rate tried")
	fs.IntVar(&o.MaxSteps, "max-steps", 20, "ladder: most steps before refining")
	fs.IntVar(&o.Refine, "refine", 3, "ladder: bisection steps between the last stable and the first unstable rate")
	fs.Float64Var(&o.ErrorLimit, "error-limit", 0.01, "ladder: a step is stable while errors + dropped arrivals stay at or under this fraction")
	fs.Float64Var(&o.LoadFactor, "load", 0.8, "soldout, reserve: after the ladder, a latency run at this fraction of the stable rate")

	fs.IntVar(&o.Workers, "workers", 1000, "generator workers (each with one keep-alive connection, two for double-clicks)")
	fs.StringVar(&o.Client, "client", "raw", "HTTP client: raw (lean HTTP/1.1 over reused connections) or std (net/http)")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Second, "a request without an answer after this is a timeout")
	fs.DurationVar(&o.MaxWait, "max-wait", 60*time.Second, "a phase ends at most this long after its last arrival")
	fs.DurationVar(&o.DrainTimeout, "drain-timeout", 120*time.Second, "how long to wait for every accepted order to reach Postgres")
	fs.DurationVar(&o.Settle, "settle", 30*time.Second, "ladder: before each step, wait up to this for the server's queue to drain")
	fs.StringVar(&o.Arrivals, "arrivals", "poisson", "arrival process: poisson (random, fixed seed) or uniform")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the poisson arrivals")

	fs.IntVar(&o.Runs, "runs", 1, "repeat the scenario (with its ceilings) this many times and report medians")
	fs.StringVar(&o.JSON, "json", "", "write the results to this JSON file (for bench compare)")
	fs.BoolVar(&o.NoRef, "no-ref", false, "skip the reference servers (no ceilings, no ratios)")
	fs.BoolVar(&o.NoVerify, "no-verify", false, "skip the invariant check")
	fs.BoolVar(&o.Quiet, "quiet", false, "no progress line")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: bench %s [flags]\n\n", scenario)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return o, o.validate(all)
}

// validate checks the options, the scenarios' own (as parsed into all) after the target's.
func (o *Options) validate(all []Scenario) error {
	var errs []error
	if _, err := loadgen.LoopbackAddr(o.URL); err != nil {
		errs = append(errs, fmt.Errorf("-url: %w", err))
	}
	if u, err := url.Parse(o.MetricsURL); err != nil || !loadgen.IsLoopbackHost(u.Hostname()) {
		errs = append(errs, fmt.Errorf("-metrics-url %q: only a loopback server is measured", o.MetricsURL))
	}
	if hosts := redisHosts(o.RedisURL); len(hosts) == 0 {
		errs = append(errs, fmt.Errorf("-redis-url %q: not a Redis URL", o.RedisURL))
	} else {
		for _, h := range hosts {
			if host, _, err := net.SplitHostPort(h); err != nil || !loadgen.IsLoopbackHost(host) {
				errs = append(errs, fmt.Errorf("-redis-url %q: only a loopback Redis may be loaded (ref-redis)", o.RedisURL))
				break
			}
		}
	}
	if len(o.Secret) < 16 {
		errs = append(errs, errors.New("-secret: at least 16 bytes"))
	}
	for _, s := range all {
		errs = append(errs, s.Validate(o)...)
	}
	if o.Rate < 0 || o.Duration <= 0 || o.StartRate <= 0 || o.Step <= 1 || o.MaxRate < o.StartRate || o.MaxSteps < 1 || o.Refine < 0 {
		errs = append(errs, errors.New("ladder flags: want -rate >= 0, -duration > 0, -start-rate > 0, -step > 1, -max-rate >= -start-rate, -max-steps >= 1, -refine >= 0"))
	}
	if o.LoadFactor <= 0 || o.LoadFactor > 1 || o.ErrorLimit < 0 || o.ErrorLimit >= 1 {
		errs = append(errs, errors.New("-load must be in (0, 1] and -error-limit in [0, 1)"))
	}
	if o.Workers < 1 || o.Workers > 20000 {
		errs = append(errs, errors.New("-workers must be between 1 and 20000"))
	}
	if o.Client != "raw" && o.Client != "std" {
		errs = append(errs, errors.New("-client is raw or std"))
	}
	if o.Arrivals != "poisson" && o.Arrivals != "uniform" {
		errs = append(errs, errors.New("-arrivals is poisson or uniform"))
	}
	if o.Timeout <= 0 || o.MaxWait <= 0 || o.DrainTimeout <= 0 || o.Lead < time.Second { // -lead is the rush's: checked here to keep the message whole
		errs = append(errs, errors.New("-timeout, -max-wait and -drain-timeout must be positive, -lead at least 1s"))
	}
	if o.Runs < 1 || o.Runs > 20 {
		errs = append(errs, errors.New("-runs must be between 1 and 20"))
	}
	return errors.Join(errs...)
}

// pidList is a comma-separated list of process ids (-server-pid).
type pidList []int

func (l *pidList) String() string {
	if l == nil {
		return ""
	}
	s := make([]string, len(*l))
	for i, p := range *l {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

func (l *pidList) Set(v string) error {
	*l = nil
	for _, f := range strings.Split(v, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p <= 0 {
			return fmt.Errorf("%q is not a process id", f)
		}
		*l = append(*l, p)
	}
	return nil
}

// redisHosts are the host:port addresses a Redis URL names: one for redis://, every seed of a
// cluster URL (redis-cluster://h1:p1,h2:p2, and ParseClusterURL's ?addr=).
func redisHosts(raw string) []string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || !strings.HasPrefix(scheme, "redis") {
		return nil
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	hostPart, query, _ := strings.Cut(rest, "?")
	hostPart, _, _ = strings.Cut(hostPart, "/")
	var out []string
	for _, h := range strings.Split(hostPart, ",") {
		if h = strings.TrimSpace(h); h != "" {
			if !strings.Contains(h, ":") {
				h += ":6379"
			}
			out = append(out, h)
		}
	}
	if q, err := url.ParseQuery(query); err == nil {
		out = append(out, q["addr"]...)
	}
	return out
}

func portOf(raw string) int {
	u, err := url.Parse(raw)
	if err != nil {
		return 0
	}
	p, _ := strconv.Atoi(u.Port())
	return p
}
