package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale/testenv"
)

// compareOptions are bench-compare's flags.
type compareOptions struct {
	base      string
	pairs     int
	scenarios []string
	args      map[string][]string // per scenario, what bench runs it with (before -json)
	dir       string
}

// The scenarios bench-compare runs by default, each once per binary and pair: the rush with its
// defaults, the refusal path and the purchase path each at one constant rate (no capacity search:
// the figure compared is the CPU per request at the same load).
var compareDefaults = map[string]string{
	"rush":    "rush -quiet",
	"soldout": "soldout -rate 8000 -duration 5s -quiet",
	"reserve": "reserve -rate 3000 -duration 5s -quiet",
}

func parseCompare(args []string, stderr io.Writer) (compareOptions, error) {
	o := compareOptions{args: map[string][]string{}}
	fs := flag.NewFlagSet("bench-compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.base, "base", "", "the git ref to compare the working tree with (required)")
	fs.IntVar(&o.pairs, "pairs", 3, "pairs of runs, base and head alternated (the order swapped every pair); 3 at least for a figure to quote")
	scen := fs.String("scenarios", "rush,soldout,reserve", "the scenarios, comma-separated")
	fs.StringVar(&o.dir, "dir", filepath.Join("bench-results", "compare"), "where the binaries, logs and JSON files go (emptied first)")
	scenarioArgs := map[string]*string{}
	for name, def := range compareDefaults {
		scenarioArgs[name] = fs.String(name, def, "bench's arguments for the "+name+" runs")
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	for name, a := range scenarioArgs {
		o.args[name] = strings.Fields(*a)
	}
	o.scenarios = strings.Split(*scen, ",")
	for _, s := range o.scenarios {
		if _, ok := compareDefaults[s]; !ok {
			return o, fmt.Errorf("bench-compare: -scenarios: %q is not one of rush, soldout, reserve", s)
		}
	}
	if o.base == "" || fs.NArg() > 0 || o.pairs < 1 {
		return o, errors.New("usage: devenv bench-compare -base GIT_REF [-pairs 3] [-scenarios rush,soldout,reserve]")
	}
	return o, nil
}

// benchCompare builds the base ref and the working tree, runs the scenarios against each in
// turn (pairs of runs, alternated), each run on a server of its own with a fresh database, a
// fresh Redis and a fresh data folder, then prints the budget table (bench pairs).
func benchCompare(ctx context.Context, cfg *config, s *set, args []string, stdout, stderr io.Writer) error {
	o, err := parseCompare(args, stderr)
	if err != nil {
		return err
	}
	if err := s.up(ctx, stdout); err != nil {
		return err
	}
	pg, err := localPG(s)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	bins, err := buildCompared(ctx, o.base, dir, stdout)
	if err != nil {
		return err
	}
	if o.pairs < 3 {
		fmt.Fprintf(stdout, "bench-compare: %d pair(s): a trial, not a figure to quote (3 at least)\n", o.pairs)
	}
	for pair := 1; pair <= o.pairs; pair++ {
		order := []string{"base", "head"}
		if pair%2 == 0 {
			order = []string{"head", "base"}
		}
		for _, side := range order {
			r := compareRun{cfg: cfg, s: s, pg: pg, o: o, dir: dir, bins: bins, side: side, pair: pair}
			if err := r.run(ctx, stdout); err != nil {
				return fmt.Errorf("bench-compare: %s, pair %d: %w", side, pair, err)
			}
		}
	}
	fmt.Fprintf(stdout, "\nbench-compare: %s (base, %s) against the working tree (head), %d pair(s); files in %s\n\n", o.base, bins.baseCommit, o.pairs, dir)
	table := exec.CommandContext(ctx, bins.bench, "pairs", dir)
	table.Stdout, table.Stderr = stdout, stderr
	return table.Run()
}

// comparedBins are the binaries bench-compare runs: the base's server, the working tree's, and
// the working tree's bench tool (the same tool measures both: it speaks the public contract).
type comparedBins struct {
	base, head, bench string
	baseCommit        string
}

func buildCompared(ctx context.Context, ref, dir string, out io.Writer) (comparedBins, error) {
	commit, err := exec.CommandContext(ctx, "git", "rev-parse", "--verify", "--short", ref+"^{commit}").Output()
	if err != nil {
		return comparedBins{}, fmt.Errorf("bench-compare: -base %s is not a commit here: %w", ref, err)
	}
	b := comparedBins{base: filepath.Join(dir, "bin", "flashsale-base"), head: filepath.Join(dir, "bin", "flashsale-head"),
		bench: filepath.Join(dir, "bin", "bench"), baseCommit: strings.TrimSpace(string(commit))}
	src := filepath.Join(dir, "src-base")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return b, err
	}
	// the base's files as committed (git archive), built as the working tree is
	export := exec.CommandContext(ctx, "sh", "-c", `git archive "$1" | tar -x -C "$2"`, "sh", b.baseCommit, src)
	if msg, err := export.CombinedOutput(); err != nil {
		return b, fmt.Errorf("bench-compare: export %s: %v\n%s", b.baseCommit, err, msg)
	}
	for _, bd := range []struct{ dir, out, pkg string }{{src, b.base, "."}, {".", b.head, "."}, {".", b.bench, "./bench"}} {
		fmt.Fprintf(out, "bench-compare: go build -o %s %s (in %s)\n", bd.out, bd.pkg, bd.dir)
		build := exec.CommandContext(ctx, "go", "build", "-o", bd.out, bd.pkg)
		build.Dir, build.Env = bd.dir, append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := build.CombinedOutput(); err != nil {
			return b, fmt.Errorf("bench-compare: build in %s: %v\n%s", bd.dir, err, msg)
		}
	}
	return b, nil
}

// localPG is the set's Postgres server.
func localPG(s *set) (*testenv.PGServer, error) {
	for _, svc := range s.services {
		if p, ok := svc.(*postgresService); ok {
			return p.srv, nil
		}
	}
	return nil, errors.New("bench-compare: the local set's Postgres is needed (-set local)")
}

// compareRun is one binary's run in one pair.
type compareRun struct {
	cfg        *config
	s          *set
	pg         *testenv.PGServer
	o          compareOptions
	dir        string
	bins       comparedBins
	side       string
	pair       int
	redis      testenv.RedisNode
	dsn, addr  string
	metricsURL string
}

func (r *compareRun) run(ctx context.Context, out io.Writer) error {
	name := fmt.Sprintf("%s-%d", r.side, r.pair)
	if err := r.freshEngines(ctx, name); err != nil {
		return err
	}
	defer r.redis.Stop()
	stop, err := r.startServer(ctx, name)
	if err != nil {
		return err
	}
	defer stop()
	if err := os.MkdirAll(filepath.Join(r.dir, r.side), 0o755); err != nil {
		return err
	}
	for _, sc := range r.o.scenarios {
		started := time.Now()
		fmt.Fprintf(out, "bench-compare: pair %d, %s: %s …", r.pair, r.side, sc)
		jsonPath := filepath.Join(r.dir, r.side, fmt.Sprintf("%s-%d.json", sc, r.pair))
		logPath := filepath.Join(r.dir, "logs", fmt.Sprintf("%s-%s.log", name, sc))
		logf, err := os.Create(logPath)
		if err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, r.bins.bench, append(append([]string{}, r.o.args[sc]...), "-json", jsonPath)...)
		cmd.Env = append(os.Environ(), "FLASHSALE_BENCH_URL=http://"+r.addr, "FLASHSALE_BENCH_METRICS_URL="+r.metricsURL,
			"FLASHSALE_DATABASE_URL="+r.dsn, "FLASHSALE_REDIS_URL="+r.redis.URL())
		cmd.Stdout, cmd.Stderr = logf, logf
		err = cmd.Run()
		logf.Close()
		if err != nil {
			return fmt.Errorf("bench %s: %w (log %s)\n%s", sc, err, logPath, tail(logPath))
		}
		fmt.Fprintf(out, " %.0f s\n", time.Since(started).Seconds())
	}
	return nil
}

// freshEngines gives the run a Redis of its own, empty, on a free port, and an empty database.
func (r *compareRun) freshEngines(ctx context.Context, name string) error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("redis-server not found (%v): run make deps", err)
	}
	port, err := freeLoopbackPort()
	if err != nil {
		return err
	}
	r.redis = testenv.RedisNode{Bin: bin, Dir: filepath.Join(r.dir, "redis", name), Port: port}
	if err := os.MkdirAll(r.redis.Dir, 0o755); err != nil {
		return err
	}
	if err := r.redis.Start(); err != nil {
		return err
	}
	db := r.cfg.db + "_compare"
	conn, err := pgx.Connect(ctx, r.s.adminDSN)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, q := range []string{"DROP DATABASE IF EXISTS " + db + " WITH (FORCE)", "CREATE DATABASE " + db} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("postgres: %s: %w", q, err)
		}
	}
	r.dsn = r.pg.DSN(db)
	return nil
}

// startServer starts the side's binary as make bench does (rate limits off, the test captcha,
// purchase tokens for 2 minutes, an embedded NATS of its own) on -bench-port; stop stops it.
func (r *compareRun) startServer(ctx context.Context, name string) (stop func(), _ error) {
	r.addr = fmt.Sprintf("127.0.0.1:%d", r.cfg.benchPort)
	if ready(r.addr) {
		return nil, fmt.Errorf("a server already answers on %s: stop it, or set BENCH_PORT", r.addr)
	}
	mport, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	r.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", mport)
	if err := os.MkdirAll(filepath.Join(r.dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	bin := r.bins.head
	if r.side == "base" {
		bin = r.bins.base
	}
	stop, _, err = startBenchServer(ctx, bin, r.addr, filepath.Join(r.dir, "logs", name+"-server.log"), append(r.s.environ(),
		"FLASHSALE_DATABASE_URL="+r.dsn, "FLASHSALE_REDIS_URL="+r.redis.URL(), "FLASHSALE_ADDR="+r.addr,
		"FLASHSALE_METRICS_ADDR=127.0.0.1:"+strconv.Itoa(mport), "FLASHSALE_DATA_DIR="+filepath.Join(r.dir, "data", name)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.side, err)
	}
	return stop, nil
}

// freeLoopbackPort is a port nothing listens on right now.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
