// Command devenv runs the local services of flashsale for development and the tests: what
// `make services`, `make stop`, `make run` and `make test` call. It starts the same servers the
// same way as the test helpers of package testenv, through the same code (testenv.PGServer,
// testenv.RedisNode), but persistent: under .data/, on fixed loopback ports, detached so that
// they outlive the command.
//
//	go run ./testenv/cmd/devenv [flags] up|down|status|env|dropdbs|with -- CMD...
//
// Run it without arguments for the whole usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const usage = `usage: devenv [flags] VERB [ARGS]

The local services (the set "local": redis-server and a Postgres cluster under -data, on
loopback ports that do not clash with a system Redis or Postgres), persistent across runs.
The set "cluster" (-set cluster, make cluster) is the multi-engine setup on this machine: the
same Postgres (database PG_DB_cluster), a Redis Cluster (3 masters, 3 replicas), a 3-node NATS
cluster, three flashsale instances and nginx on -cluster-port; its up runs in the foreground
until Ctrl-C or TERM, then stops everything; state under -data/cluster/.

verbs:
  up            start the services that do not run yet and wait until they answer; create the
                database (-db); idempotent: a running service is left as it is (-set cluster:
                start all, print what runs where, wait for Ctrl-C or TERM, stop all)
  down          stop the services of -data (quiet when none runs; -set cluster: stop the devenv
                running it, which stops everything)
  status        say which services run; exit status 3 when one does not
  env           print the FLASHSALE_* settings that point flashsale and the tests at the services
  dropdbs       drop the per-test databases (t_…) interrupted test runs left behind
  with -- CMD   up, run CMD (with the settings of env, where not set already) in a process group of
                its own, pass Ctrl-C and TERM on to it, then down; exit with CMD's status
  deps [-test] [-cluster]
                install with apt-get what is missing: what serving needs (redis-server,
                redis-tools, postgresql-PG_VERSION), with -cluster also nginx-light, and with
                -test what the tests also need (chromium, chromium-driver, nginx-light;
                fonts-noto-cjk as best effort) and stripe-mock (go install, into the
                user's cache folder)
  checkviews    fail when views/*_templ.go differ from what go tool templ generate wrote, or are
                not committed (in a git checkout only)
  chaos [-cluster] [WHICH]
                the fault suite (tests/chaos), on this Postgres when it answers; WHICH as in
                FLASHSALE_CHAOS (all, or 01,12); -cluster: against the clustered setup
                (FLASHSALE_CHAOS_CLUSTER=1); log in tests/chaos/out/run.log
  bench [ARGS]  benchmark (go run ./bench ARGS) a flashsale built and started on -bench-port with
                rate limits off, unless one answers there already; results in bench-results/
  bench-compare -base REF [-pairs 3] [-scenarios rush,soldout,reserve]
                build REF and the working tree, run the scenarios against each in turn (pairs,
                alternated; each run a server of its own on -bench-port with a fresh Redis,
                database and data folder) and print the budget: base and head, medians and
                spread (bench pairs); files in bench-results/compare/
  docker-check  build the binary exactly as the Dockerfile does, in a copy of the build context

flags:
`

// config is what the flags say.
type config struct {
	set       string
	data      string // absolute
	redisPort int
	pgPort    int
	pgVersion string
	pgBin     string
	db        string
	benchPort int

	// the cluster set
	clusterPort  int
	bench        bool
	flashsaleBin string
	engines      string // "cluster", or "single": one redis-server and one nats-server
	instances    int
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func newFlagSet(cfg *config, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("devenv", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nservice sets (-set): %s\n", strings.Join(setNames(), ", "))
	}
	fs.StringVar(&cfg.set, "set", "local", "the service set")
	fs.StringVar(&cfg.data, "data", ".data", "the directory holding the services' data")
	fs.IntVar(&cfg.redisPort, "redis-port", envInt("REDIS_PORT", 6380), "Redis port ($REDIS_PORT)")
	fs.IntVar(&cfg.pgPort, "pg-port", envInt("PG_PORT", 5433), "Postgres port ($PG_PORT)")
	fs.StringVar(&cfg.pgVersion, "pg-version", envStr("PG_VERSION", "15"), "Postgres major version ($PG_VERSION)")
	fs.StringVar(&cfg.pgBin, "pg-bin", os.Getenv("PG_BIN"), "Postgres server binaries ($PG_BIN; default /usr/lib/postgresql/VERSION/bin)")
	fs.StringVar(&cfg.db, "db", envStr("PG_DB", "flashsale"), "the database flashsale uses ($PG_DB)")
	fs.IntVar(&cfg.benchPort, "bench-port", envInt("BENCH_PORT", 8080), "bench: the server's port ($BENCH_PORT)")
	fs.IntVar(&cfg.clusterPort, "cluster-port", envInt("CLUSTER_PORT", 8080), "cluster set: nginx's port ($CLUSTER_PORT)")
	fs.BoolVar(&cfg.bench, "bench", false, "cluster set: for benchmarks only: FLASHSALE_RATE_LIMITS=off, FLASHSALE_CAPTCHA=test, nginx without its per-address limit_req")
	fs.StringVar(&cfg.engines, "engines", "cluster", "cluster set: cluster (Redis Cluster, 3 NATS nodes, R3), or single (one redis-server, one nats-server, R1: the same three instances on one engine each, to measure what the clusters cost)")
	fs.IntVar(&cfg.instances, "instances", 3, "cluster set: how many flashsale instances nginx sends to")
	fs.StringVar(&cfg.flashsaleBin, "flashsale", "", "cluster set: the flashsale binary the instances run (default: go build into DATA/cluster/bin)")
	return fs
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg := &config{}
	fs := newFlagSet(cfg, stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	verb, rest := fs.Arg(0), fs.Args()[1:]
	var err error
	if cfg.data, err = filepath.Abs(cfg.data); err != nil {
		fmt.Fprintln(stderr, "devenv:", err)
		return 1
	}

	// Verbs that need no service set.
	switch verb {
	case "deps":
		err = deps(cfg, slices.Contains(rest, "-test"), slices.Contains(rest, "-cluster"), stdout, stderr)
		return exitCode(err, stderr)
	case "checkviews":
		return exitCode(checkViews(stdout), stderr)
	case "docker-check":
		return exitCode(dockerCheck(stdout), stderr)
	}

	build, ok := sets[cfg.set]
	if !ok {
		fmt.Fprintf(stderr, "devenv: no service set %q (there are: %s)\n", cfg.set, strings.Join(setNames(), ", "))
		return 2
	}
	s, err := build(cfg)
	if err != nil {
		return exitCode(err, stderr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if code, known := setVerb(ctx, stop, s, cfg, verb, rest, stdout, stderr); known {
		return code
	}
	fmt.Fprintf(stderr, "devenv: unknown verb %q\n", verb)
	fs.Usage()
	return 2
}

// setVerb runs a verb on the service set s; known is false for a verb it does not know.
func setVerb(ctx context.Context, stop context.CancelFunc, s *set, cfg *config, verb string, rest []string, stdout, stderr io.Writer) (code int, known bool) {
	if s.foreground != nil {
		switch verb {
		case "up":
			return exitCode(s.serveForeground(ctx, stdout), stderr), true
		case "down":
			return exitCode(s.downForeground(stdout), stderr), true
		case "status":
			if !s.statusForeground(stdout) {
				return 3, true
			}
			return 0, true
		case "env":
			if st, ok := s.foreground.read(); ok && s.foreground.holder() != 0 {
				s.env = st.Env
			}
		}
	}
	switch verb {
	case "up":
		return exitCode(s.up(ctx, stdout), stderr), true
	case "down":
		return exitCode(s.down(stdout), stderr), true
	case "status":
		if !s.status(stdout) {
			return 3, true
		}
		return 0, true
	case "env":
		for _, kv := range s.env {
			name, value, _ := strings.Cut(kv, "=")
			fmt.Fprintf(stdout, "%s='%s'\n", name, value)
		}
		return 0, true
	case "dropdbs":
		return exitCode(s.dropDBs(ctx, stdout), stderr), true
	case "with":
		if len(rest) > 0 && rest[0] == "--" {
			rest = rest[1:]
		}
		if len(rest) == 0 {
			fmt.Fprintln(stderr, "devenv: with needs a command: devenv with -- CMD [ARGS]")
			return 2, true
		}
		stop() // the command gets the signals, through with
		return with(s, rest, stdout, stderr), true
	case "chaos":
		return exitCode(chaos(ctx, s, rest, stdout), stderr), true
	case "bench":
		return exitCode(bench(ctx, cfg, s, rest, stdout), stderr), true
	case "bench-compare":
		return exitCode(benchCompare(ctx, cfg, s, rest, stdout, stderr), stderr), true
	}
	return 0, false
}

// exitCode prints err and turns it into an exit status.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() > 0 {
		return ee.ExitCode()
	}
	fmt.Fprintln(stderr, "devenv:", err)
	return 1
}

// A service is one server of a set.
type service interface {
	// Name names it in messages ("redis", "postgres").
	Name() string
	// Up starts it unless it runs, waits until it answers and says what it did.
	Up(ctx context.Context, out io.Writer) error
	// Down stops it if it runs; quiet when it does not.
	Down(out io.Writer) error
	// Status reports whether it runs, and how ("running (pid 123) on 127.0.0.1:6380").
	Status() (bool, string)
}

// A set is what one setup runs: services, started in order and stopped in reverse, and the
// FLASHSALE_* settings that point flashsale and the tests at them.
type set struct {
	services []service
	env      []string // NAME=value; a service that is an envProvider adds its own once up
	adminDSN string   // the Postgres admin DSN (dropdbs, chaos)
	// foreground is set for a set whose servers are children of devenv (cluster.go): up runs
	// in the foreground until Ctrl-C, status and down go through its state file.
	foreground *clusterState
}

// sets are the service sets -set chooses from, each built from the flags: a function returning
// its services and settings; up, down, status, env and with work on each.
var sets = map[string]func(cfg *config) (*set, error){
	"local":   localSet,
	"cluster": clusterSet,
}

func setNames() []string {
	var names []string
	for n := range sets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (s *set) up(ctx context.Context, out io.Writer) error {
	for _, svc := range s.services {
		if err := svc.Up(ctx, out); err != nil {
			return fmt.Errorf("%s: %w", svc.Name(), err)
		}
		if e, ok := svc.(envProvider); ok {
			s.env = append(s.env, e.Env()...)
		}
	}
	return nil
}

func (s *set) down(out io.Writer) error {
	var errs []error
	for _, svc := range slices.Backward(s.services) {
		if err := svc.Down(out); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", svc.Name(), err))
		}
	}
	return errors.Join(errs...)
}

func (s *set) status(out io.Writer) bool {
	all := true
	for _, svc := range s.services {
		ok, detail := svc.Status()
		all = all && ok
		fmt.Fprintf(out, "%s: %s\n", svc.Name(), detail)
	}
	return all
}

// environ is this process's environment with the set's settings added where not set already, so
// that a variable set by the user wins (as `make run`'s FLASHSALE_DATABASE_URL ?= did).
func (s *set) environ(extra ...string) []string {
	env := os.Environ()
	for _, kv := range append(slices.Clone(s.env), extra...) {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := os.LookupEnv(name); !ok {
			env = append(env, kv)
		}
	}
	return env
}

// with brackets a command with up and down: it runs in a process group of its own (so that
// Ctrl-C reaches it once, through here, and `go run` passes it on to the server it runs), gets
// SIGINT when this process gets SIGINT, SIGTERM or SIGHUP, and the services stop after it exits,
// however it ends.
func with(s *set, argv []string, stdout, stderr io.Writer) int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	defer func() {
		if err := s.down(stdout); err != nil {
			fmt.Fprintln(stderr, "devenv:", err)
		}
	}()
	if code := upUnlessInterrupted(s, sigs, stdout, stderr); code != 0 {
		return code
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = s.environ()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "devenv:", err)
		return 127
	}
	return exitStatus(waitForwarding(cmd, sigs), stderr)
}

// upUnlessInterrupted starts the set, a signal cancelling the start: 0 when it is up, 1 when
// it failed, 130 when a signal came meanwhile.
func upUnlessInterrupted(s *set, sigs chan os.Signal, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := s.up(ctx, stdout); err != nil {
		cancel()
		fmt.Fprintln(stderr, "devenv:", err)
		return 1
	}
	cancel()
	select {
	case <-sigs: // interrupted while starting
		return 130
	default:
	}
	return 0
}

// waitForwarding waits for cmd, sending its process group SIGINT for each signal this process
// gets meanwhile.
func waitForwarding(cmd *exec.Cmd, sigs chan os.Signal) error {
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-sigs:
				syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
			case <-done:
				return
			}
		}
	}()
	err := cmd.Wait()
	close(done)
	return err
}

// exitStatus is the exit code for a command that ended with err: its own, or 128+N when
// signal N killed it.
func exitStatus(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	fmt.Fprintln(stderr, "devenv:", err)
	return 1
}

func envStr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

// waitFor polls ok every 100 ms until it says true, ctx ends or d passes.
func waitFor(ctx context.Context, d time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}
