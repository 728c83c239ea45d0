package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/flashsale/flashsale/deploy"
	"github.com/flashsale/flashsale/testenv"
)

// The cluster set (`make cluster`): the multi-engine setup of DEPLOYMENT.md on this machine, with
// real processes on loopback. The local Postgres (database PG_DB_cluster), a Redis Cluster of 3
// masters and 3 replicas, a 3-node NATS cluster with JetStream (sync_interval: always), three
// `flashsale serve` instances on them (orders stream R3) and nginx from
// deploy/nginx/flashsale.conf in front, on -cluster-port.
//
// Redis, NATS, the instances and nginx are children of devenv (testenv's cluster helpers start
// them, on free loopback ports; they get SIGKILL if devenv dies): the set runs in the foreground,
// `up` waits for Ctrl-C or TERM and then stops them all, and Postgres if it started it. The
// running devenv writes what runs where to DATA/cluster/state.json, which status and down (from
// another shell) read.
//
// State under DATA/cluster/: redis/ (recreated at every start: a Redis Cluster's nodes file
// names its ports, which change; flashsale loads the stock again from Postgres), nats/ (the
// JetStream store, kept), flashsale1..3/ (each instance's data dir and log), nginx/ (config,
// cache, logs).

// clusterDBSuffix names the cluster set's database: PG_DB plus this.
const clusterDBSuffix = "_cluster"

func clusterSet(cfg *config) (*set, error) {
	dir := filepath.Join(cfg.data, "cluster")
	pgCfg := *cfg
	pgCfg.db = cfg.db + clusterDBSuffix
	pg := localPostgres(&pgCfg)
	pg.leaveIfFound = true
	if cfg.instances < 1 || cfg.instances > 16 {
		return nil, fmt.Errorf("-instances %d: 1 to 16", cfg.instances)
	}
	var single bool
	switch cfg.engines {
	case "cluster":
	case "single":
		single = true
	default:
		return nil, fmt.Errorf("-engines %q: cluster or single", cfg.engines)
	}
	rc := &redisClusterService{dir: filepath.Join(dir, "redis"), single: single}
	nc := &natsClusterService{dir: filepath.Join(dir, "nats"), nodes: 3}
	if single {
		nc = &natsClusterService{dir: filepath.Join(dir, "nats-single"), nodes: 1}
	}
	fs := &instancesService{cfg: cfg, dir: dir, dsn: pg.srv.DSN(pgCfg.db), redis: rc, nats: nc}
	ng := &nginxService{cfg: cfg, dir: filepath.Join(dir, "nginx"), instances: fs}
	admin := pg.srv.DSN("postgres")
	return &set{
		services: []service{pg, rc, nc, fs, ng},
		env: []string{
			"FLASHSALE_DATABASE_URL=" + pg.srv.DSN(pgCfg.db),
			"FLASHSALE_TEST_DATABASE_URL=" + admin,
		},
		adminDSN:   admin,
		foreground: &clusterState{path: filepath.Join(dir, "state.json")},
	}, nil
}

// A row of the table of what runs where.
type row struct {
	Service string `json:"service"`
	Address string `json:"address"`
	PID     int    `json:"pid"`
	Log     string `json:"log"`
}

// A rower lists its processes for the table.
type rower interface{ Rows() []row }

// An envProvider adds FLASHSALE_* settings once it runs (addresses chosen at start).
type envProvider interface{ Env() []string }

// clusterState is the file the foreground devenv writes while the set runs.
type clusterState struct {
	path string
}

type stateFile struct {
	PID  int      `json:"pid"` // the devenv holding the set
	Rows []row    `json:"rows"`
	Env  []string `json:"env"`
}

func (c *clusterState) read() (stateFile, bool) {
	var st stateFile
	b, err := os.ReadFile(c.path)
	if err != nil || json.Unmarshal(b, &st) != nil {
		return st, false
	}
	return st, true
}

// holder is the pid of the devenv running the set, 0 when none does.
func (c *clusterState) holder() int {
	st, ok := c.read()
	if !ok || st.PID == os.Getpid() || !testenv.PIDAlive(st.PID) {
		return 0
	}
	return st.PID
}

// serveForeground is `up` for a foreground set: start everything, print what runs where, wait
// for Ctrl-C or TERM (ctx), stop everything.
func (s *set) serveForeground(ctx context.Context, out io.Writer) error {
	st := s.foreground
	if pid := st.holder(); pid != 0 {
		return fmt.Errorf("the set already runs (devenv pid %d): stop it with Ctrl-C there, or devenv -set cluster down", pid)
	}
	for _, svc := range s.services {
		if p, ok := svc.(interface{ preflight() error }); ok {
			if err := p.preflight(); err != nil {
				return fmt.Errorf("%s: %w", svc.Name(), err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(st.path), 0o755); err != nil {
		return err
	}
	upErr := s.up(ctx, out)
	if upErr == nil && ctx.Err() == nil {
		rows := s.rows()
		b, _ := json.MarshalIndent(stateFile{PID: os.Getpid(), Rows: rows, Env: s.env}, "", "  ")
		if err := os.WriteFile(st.path, b, 0o644); err != nil {
			upErr = err
		} else {
			printRows(out, rows)
			fmt.Fprintf(out, "\nserving on %s; Ctrl-C (or devenv -set cluster down) stops everything\n", s.frontURL())
			<-ctx.Done()
			fmt.Fprintln(out, "stopping")
		}
	}
	downErr := s.down(out)
	os.Remove(st.path)
	return errors.Join(upErr, downErr)
}

// frontURL is where the set serves: its FLASHSALE_BENCH_URL.
func (s *set) frontURL() string {
	for _, kv := range s.env {
		if v, ok := strings.CutPrefix(kv, "FLASHSALE_BENCH_URL="); ok {
			return v
		}
	}
	return ""
}

func (s *set) rows() []row {
	var rows []row
	for _, svc := range s.services {
		if r, ok := svc.(rower); ok {
			rows = append(rows, r.Rows()...)
		}
	}
	return rows
}

func printRows(out io.Writer, rows []row) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tADDRESS\tPID\tLOG")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", r.Service, r.Address, r.PID, relPath(r.Log))
	}
	tw.Flush()
}

// relPath shortens path to one relative to the working directory when it lies below it.
func relPath(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// downForeground is `down` from another shell: TERM to the devenv holding the set, then wait
// until it has stopped everything (it leaves a Postgres it found running); with no devenv
// holding the set (killed with -9), down for whatever it left, Postgres included.
func (s *set) downForeground(out io.Writer) error {
	if pid := s.foreground.holder(); pid != 0 {
		fmt.Fprintf(out, "stopping the devenv running the set (pid %d)\n", pid)
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			return err
		}
		deadline := time.Now().Add(2 * time.Minute)
		for testenv.PIDAlive(pid) {
			if time.Now().After(deadline) {
				return fmt.Errorf("devenv pid %d still runs after 2 minutes", pid)
			}
			time.Sleep(100 * time.Millisecond)
		}
		os.Remove(s.foreground.path)
		return nil
	}
	os.Remove(s.foreground.path)
	return s.down(out)
}

// statusForeground prints the table with each process alive or not; false when the set does not
// run.
func (s *set) statusForeground(out io.Writer) bool {
	st, ok := s.foreground.read()
	if !ok || !testenv.PIDAlive(st.PID) {
		fmt.Fprintln(out, "cluster: stopped")
		s.status(out) // Postgres, which outlives a killed devenv
		return false
	}
	fmt.Fprintf(out, "cluster: running (devenv pid %d)\n", st.PID)
	all := true
	for i, r := range st.Rows {
		if !testenv.PIDAlive(r.PID) {
			st.Rows[i].Service += " (gone)"
			all = false
		}
	}
	printRows(out, st.Rows)
	return all
}

// --- Redis Cluster -------------------------------------------------------------------------

// redisClusterService is the Redis Cluster; with single (-engines single), one redis-server
// instead (AOF, appendfsync everysec, as each cluster node).
type redisClusterService struct {
	dir    string
	single bool
	c      *testenv.RedisCluster
	node   *testenv.RedisNode // single
}

func (r *redisClusterService) Name() string { return "redis cluster" }

func (r *redisClusterService) Up(ctx context.Context, out io.Writer) error {
	// A node's nodes.conf names the ports of the last start: the cluster is created afresh.
	if err := os.RemoveAll(r.dir); err != nil {
		return err
	}
	if r.single {
		bin, err := exec.LookPath("redis-server")
		if err != nil {
			return fmt.Errorf("redis-server not found (%v): run make deps", err)
		}
		port, err := testenv.FreeTCPPort()
		if err != nil {
			return err
		}
		r.node = &testenv.RedisNode{Bin: bin, Dir: r.dir, Port: port}
		if err := r.node.Start(); err != nil {
			r.node = nil
			return err
		}
		fmt.Fprintf(out, "redis: one redis-server at %s (-engines single)\n", r.node.URL())
		return nil
	}
	c, err := testenv.StartRedisCluster(ctx, r.dir, testenv.RedisClusterOptions{
		Masters: 3, Replicas: 1,
		// A master silent this long is failed over: longer than the tests' 1 s, so that a
		// loaded machine (a benchmark on two cores) does not fail one over by mistake.
		NodeTimeout: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	r.c = c
	fmt.Fprintf(out, "redis cluster: 3 masters, 3 replicas at %s\n", c.URL())
	return nil
}

func (r *redisClusterService) Down(out io.Writer) error {
	if r.node != nil {
		err := r.node.Stop()
		r.node = nil
		fmt.Fprintln(out, "redis: stopped")
		return err
	}
	if r.c == nil {
		return nil
	}
	r.c.Close()
	r.c = nil
	fmt.Fprintln(out, "redis cluster: stopped")
	return nil
}

func (r *redisClusterService) Status() (bool, string) {
	if r.c == nil && r.node == nil {
		return false, "stopped"
	}
	return true, "running at " + r.URL()
}

// URL is FLASHSALE_REDIS_URL for the instances.
func (r *redisClusterService) URL() string {
	if r.node != nil {
		return r.node.URL()
	}
	return r.c.URL()
}

func (r *redisClusterService) Env() []string { return []string{"FLASHSALE_REDIS_URL=" + r.URL()} }

func (r *redisClusterService) Rows() []row {
	if r.node != nil {
		pid, _ := r.node.RunningPID()
		return []row{{"redis", r.node.Addr(), pid, r.node.LogPath()}}
	}
	var rows []row
	for i, n := range r.c.Nodes {
		role := "?"
		if v, err := n.Do(context.Background(), "role"); err == nil {
			if a, ok := v.([]any); ok && len(a) > 0 {
				role = strings.Replace(fmt.Sprint(a[0]), "slave", "replica", 1)
			}
		}
		rows = append(rows, row{fmt.Sprintf("redis %d (%s)", i+1, role), n.Addr, n.PID(), n.LogPath()})
	}
	return rows
}

// --- NATS cluster --------------------------------------------------------------------------

type natsClusterService struct {
	dir   string
	nodes int // 3, or 1 with -engines single: one nats-server outside any cluster
	c     *testenv.NATSCluster
	one   *natsSingle
}

// natsSingle is one standalone nats-server with JetStream (sync_interval: always), for
// -engines single: a cluster of one would wait for routes to peers that do not exist.
type natsSingle struct {
	port, http int
	log        string
	cmd        *exec.Cmd
	done       chan struct{}
}

func startNATSSingle(dir string) (*natsSingle, error) {
	bin, err := testenv.BuildNATSServer("")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	n := &natsSingle{log: filepath.Join(dir, "nats.log")}
	for _, p := range []*int{&n.port, &n.http} {
		if *p, err = testenv.FreeTCPPort(); err != nil {
			return nil, err
		}
	}
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "server_name: n1\nlisten: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\njetstream {\n  store_dir: %q\n  sync_interval: always\n}\n",
		n.port, n.http, filepath.Join(dir, "js")), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	n.cmd = exec.Command(bin, "-c", conf)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	if err := testenv.StartCmd(n.cmd); err != nil {
		return nil, err
	}
	n.done = make(chan struct{})
	go func() { n.cmd.Wait(); close(n.done) }()
	healthy := func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", n.http))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	if !waitFor(context.Background(), 30*time.Second, healthy) {
		n.stop()
		return nil, fmt.Errorf("nats-server not healthy\n%s", tail(n.log))
	}
	return n, nil
}

func (n *natsSingle) url() string { return "nats://127.0.0.1:" + strconv.Itoa(n.port) }

func (n *natsSingle) stop() {
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(10 * time.Second):
		n.cmd.Process.Kill()
		<-n.done
	}
}

// URLs is FLASHSALE_NATS_URL for the instances.
func (n *natsClusterService) URLs() string {
	if n.one != nil {
		return n.one.url()
	}
	return n.c.URLs()
}

func (n *natsClusterService) Name() string { return "nats cluster" }

func (n *natsClusterService) Up(ctx context.Context, out io.Writer) error {
	if n.nodes == 1 {
		one, err := startNATSSingle(n.dir)
		if err != nil {
			return err
		}
		n.one = one
		fmt.Fprintf(out, "nats: one nats-server with JetStream at %s (-engines single)\n", one.url())
		return nil
	}
	fmt.Fprintf(out, "nats cluster: building nats-server (once per version) and starting %d node(s)\n", n.nodes)
	c, err := testenv.StartNATSCluster(n.dir, n.nodes, nil)
	if err != nil {
		return err
	}
	n.c = c
	fmt.Fprintf(out, "nats cluster: %d node(s) with JetStream at %s\n", n.nodes, c.URLs())
	return nil
}

func (n *natsClusterService) Down(out io.Writer) error {
	if n.one != nil {
		n.one.stop()
		n.one = nil
		fmt.Fprintln(out, "nats: stopped")
		return nil
	}
	if n.c == nil {
		return nil
	}
	n.c.Stop()
	n.c = nil
	fmt.Fprintln(out, "nats cluster: stopped")
	return nil
}

func (n *natsClusterService) Status() (bool, string) {
	if n.c == nil && n.one == nil {
		return false, "stopped"
	}
	return true, "running at " + n.URLs()
}

func (n *natsClusterService) Env() []string { return []string{"FLASHSALE_NATS_URL=" + n.URLs()} }

func (n *natsClusterService) Rows() []row {
	if n.one != nil {
		return []row{{"nats", fmt.Sprintf("%s (monitor :%d)", n.one.url(), n.one.http), n.one.cmd.Process.Pid, n.one.log}}
	}
	var rows []row
	for i, node := range n.c.Nodes {
		rows = append(rows, row{"nats " + node.Name, fmt.Sprintf("%s (monitor :%d)", node.URL(), node.HTTPPort), n.c.PID(i), node.Log})
	}
	return rows
}

// --- the flashsale instances ---------------------------------------------------------------

type instance struct {
	addr, metrics, dir, log string
	cmd                     *exec.Cmd
	done                    chan struct{}
}

type instancesService struct {
	cfg   *config
	dir   string
	dsn   string
	redis *redisClusterService
	nats  *natsClusterService
	list  []*instance
}

func (f *instancesService) Name() string { return "flashsale" }

// binary returns the flashsale binary to run: -flashsale, or one built now.
func (f *instancesService) binary(out io.Writer) (string, error) {
	if f.cfg.flashsaleBin != "" {
		return filepath.Abs(f.cfg.flashsaleBin)
	}
	bin := filepath.Join(f.dir, "bin", "flashsale")
	fmt.Fprintln(out, "flashsale: building the binary")
	build := exec.Command("go", "build", "-o", bin, "github.com/flashsale/flashsale")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v (run devenv inside the flashsale repository, or pass -flashsale BINARY)\n%s", err, b)
	}
	return bin, nil
}

// instanceEnv is instance i's environment (0-based): the user's, then the settings a user may
// change (FLASHSALE_CAPTCHA, _PUBLISH_TIMEOUT, _DEMO of the first...) where not set, then those
// that make it part of the set, which win.
func (f *instancesService) instanceEnv(i int, in *instance) []string {
	env := os.Environ()
	defaults := []string{"FLASHSALE_PUBLISH_TIMEOUT=12s"}
	if i == 0 {
		defaults = append(defaults, "FLASHSALE_DEMO=1")
	}
	if f.cfg.bench {
		defaults = append(defaults, "FLASHSALE_PURCHASE_TOKEN_TTL=2m", "FLASHSALE_LOG_LEVEL=warn")
	}
	for _, kv := range defaults {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := os.LookupEnv(name); !ok {
			env = append(env, kv)
		}
	}
	env = append(env,
		"FLASHSALE_ADDR="+in.addr,
		"FLASHSALE_METRICS_ADDR="+in.metrics,
		"FLASHSALE_DATA_DIR="+in.dir,
		"FLASHSALE_DATABASE_URL="+f.dsn,
		"FLASHSALE_REDIS_URL="+f.redis.URL(),
		"FLASHSALE_NATS_URL="+f.nats.URLs(),
		"FLASHSALE_NATS_REPLICAS="+strconv.Itoa(f.nats.nodes),
		"FLASHSALE_TRUSTED_PROXIES=127.0.0.1",
	)
	if i > 0 {
		env = append(env, "FLASHSALE_DEMO=0") // one demo sale, seeded by the first
	}
	if f.cfg.bench {
		env = append(env, "FLASHSALE_RATE_LIMITS=off", "FLASHSALE_CAPTCHA=test")
	}
	return env
}

func (f *instancesService) Up(ctx context.Context, out io.Writer) error {
	bin, err := f.binary(out)
	if err != nil {
		return err
	}
	for i := range f.cfg.instances {
		in := &instance{dir: filepath.Join(f.dir, fmt.Sprintf("flashsale%d", i+1))}
		in.log = filepath.Join(in.dir, "flashsale.log")
		for _, a := range []*string{&in.addr, &in.metrics} {
			p, err := testenv.FreeTCPPort()
			if err != nil {
				return err
			}
			*a = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		}
		if err := os.MkdirAll(in.dir, 0o755); err != nil {
			return err
		}
		logf, err := os.OpenFile(in.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		in.cmd = exec.Command(bin, "serve")
		in.cmd.Env = f.instanceEnv(i, in)
		in.cmd.Stdout, in.cmd.Stderr = logf, logf
		// A process group of its own, so that a Ctrl-C on the terminal reaches devenv only,
		// which stops the instances first; SIGKILL if devenv dies.
		in.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		err = testenv.StartCmd(in.cmd)
		logf.Close()
		if err != nil {
			return fmt.Errorf("start instance %d: %w", i+1, err)
		}
		in.done = make(chan struct{})
		go func(in *instance) { in.cmd.Wait(); close(in.done) }(in)
		f.list = append(f.list, in)
		// The first seeds the demo sale and applies the migrations alone; the others follow.
		if i == 0 {
			if err := f.waitReady(ctx, in); err != nil {
				return err
			}
		}
	}
	for _, in := range f.list[1:] {
		if err := f.waitReady(ctx, in); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "flashsale: %d instances ready\n", len(f.list))
	return nil
}

func (f *instancesService) waitReady(ctx context.Context, in *instance) error {
	exited := func() bool {
		select {
		case <-in.done:
			return true
		default:
			return false
		}
	}
	if !waitFor(ctx, 90*time.Second, func() bool { return exited() || ready(in.addr) }) || exited() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("the instance on %s is not ready\n%s", in.addr, tail(in.log))
	}
	return nil
}

func (f *instancesService) Down(out io.Writer) error {
	if len(f.list) == 0 {
		return nil
	}
	for _, in := range f.list {
		in.cmd.Process.Signal(syscall.SIGTERM)
	}
	var errs []error
	for i, in := range f.list {
		select {
		case <-in.done:
		case <-time.After(20 * time.Second):
			in.cmd.Process.Kill()
			<-in.done
			errs = append(errs, fmt.Errorf("instance %d did not stop within 20 s: killed", i+1))
		}
	}
	f.list = nil
	fmt.Fprintln(out, "flashsale: instances stopped")
	return errors.Join(errs...)
}

func (f *instancesService) Status() (bool, string) {
	if len(f.list) == 0 {
		return false, "stopped"
	}
	return true, fmt.Sprintf("%d instances", len(f.list))
}

func (f *instancesService) Rows() []row {
	var rows []row
	for i, in := range f.list {
		rows = append(rows, row{fmt.Sprintf("flashsale %d", i+1), fmt.Sprintf("http://%s (metrics %s)", in.addr, in.metrics), in.cmd.Process.Pid, in.log})
	}
	return rows
}

// --- nginx ---------------------------------------------------------------------------------

type nginxService struct {
	cfg       *config
	dir       string
	instances *instancesService
	n         *testenv.NginxServer
}

func (g *nginxService) Name() string { return "nginx" }

// limitReqLine is a `limit_req zone=...` line of the site config: left out with -bench, where
// every shopper comes from one address.
var limitReqLine = regexp.MustCompile(`(?m)^[ \t]*limit_req[ \t]+zone=[^;\n]*;[ \t]*\n`)

// benchNginxConf is the site config without the per-address limits.
func benchNginxConf() (string, error) {
	conf := limitReqLine.ReplaceAllString(deploy.NginxConf, "")
	if conf == deploy.NginxConf {
		return "", errors.New("nginx: -bench: deploy/nginx/flashsale.conf has no `limit_req zone=` line to leave out")
	}
	return conf, nil
}

// preflight refuses, before anything starts, a missing nginx or a port another server holds.
func (g *nginxService) preflight() error {
	if _, err := exec.LookPath("nginx"); err != nil {
		if _, err := os.Stat("/usr/sbin/nginx"); err != nil {
			return errors.New("nginx not found: make cluster installs it (Debian package nginx-light; or make deps-test)")
		}
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(g.cfg.clusterPort))
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("port %d is taken by another server: set CLUSTER_PORT (devenv -cluster-port)", g.cfg.clusterPort)
	}
	return nil
}

func (g *nginxService) Up(ctx context.Context, out io.Writer) error {
	if err := g.preflight(); err != nil {
		return err
	}
	conf := ""
	if g.cfg.bench {
		var err error
		if conf, err = benchNginxConf(); err != nil {
			return err
		}
	}
	var ups []string
	for _, in := range g.instances.list {
		ups = append(ups, in.addr)
	}
	if err := os.MkdirAll(g.dir, 0o755); err != nil {
		return err
	}
	n, err := testenv.StartNginx(testenv.NginxOptions{Dir: g.dir, Upstreams: ups, Port: g.cfg.clusterPort, Conf: conf})
	if err != nil {
		if strings.Contains(err.Error(), "nginx not found") {
			return errors.New("nginx not found: make cluster installs it (Debian package nginx-light; or make deps-test)")
		}
		return err
	}
	g.n = n
	if g.cfg.bench {
		fmt.Fprintln(out, "nginx: -bench: without the limit_req lines (benchmarks only)")
	}
	fmt.Fprintf(out, "nginx: serving on %s in front of %d instances\n", n.URL(), len(ups))
	return nil
}

func (g *nginxService) Down(out io.Writer) error {
	if g.n == nil {
		return nil
	}
	err := g.n.Stop()
	g.n = nil
	fmt.Fprintln(out, "nginx: stopped")
	return err
}

func (g *nginxService) Status() (bool, string) {
	if g.n == nil {
		return false, "stopped"
	}
	return true, "running on " + g.n.URL()
}

func (g *nginxService) Env() []string { return []string{"FLASHSALE_BENCH_URL=" + g.n.URL()} }

func (g *nginxService) Rows() []row {
	return []row{{"nginx", g.n.URL(), g.n.PID(), g.n.ErrorLog}}
}

// Rows is the Postgres row of the table.
func (p *postgresService) Rows() []row {
	pid, _ := p.srv.RunningPID()
	return []row{{"postgres", fmt.Sprintf("127.0.0.1:%d (database %s)", p.srv.Port, p.cfg.db), pid, p.srv.Log}}
}
