package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

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
		// the table goes out before the state file: whoever sees the file (status, a test) finds
		// the table already printed
		printRows(out, rows)
		b, _ := json.MarshalIndent(stateFile{PID: os.Getpid(), Rows: rows, Env: s.env}, "", "  ")
		if err := os.WriteFile(st.path, b, 0o644); err != nil {
			upErr = err
		} else {
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

// Rows is the Postgres row of the table.
func (p *postgresService) Rows() []row {
	pid, _ := p.srv.RunningPID()
	return []row{{"postgres", fmt.Sprintf("127.0.0.1:%d (database %s)", p.srv.Port, p.cfg.db), pid, p.srv.Log}}
}
