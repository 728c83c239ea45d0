package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale/testenv"
)

// localSet is one redis-server and one Postgres cluster under cfg.data, what `make run` and
// `make test` use.
func localSet(cfg *config) (*set, error) {
	r := &redisService{node: testenv.RedisNode{Dir: filepath.Join(cfg.data, "redis"), Port: cfg.redisPort}}
	p := localPostgres(cfg)
	admin := p.srv.DSN("postgres")
	return &set{
		services: []service{r, p},
		env: []string{
			"FLASHSALE_DATABASE_URL=" + p.srv.DSN(cfg.db),
			"FLASHSALE_REDIS_URL=" + r.node.URL(),
			// an admin connection: the tests create one database per test in this cluster
			"FLASHSALE_TEST_DATABASE_URL=" + admin,
		},
		adminDSN: admin,
	}, nil
}

// localPostgres is the Postgres cluster under cfg.data, with the database cfg.db: the local
// set's, and the cluster set's (with a database of its own).
func localPostgres(cfg *config) *postgresService {
	return &postgresService{cfg: cfg, srv: &testenv.PGServer{
		Bin:       cfg.pgBin,
		Data:      filepath.Join(cfg.data, "pg"),
		Port:      cfg.pgPort,
		SocketDir: filepath.Join(cfg.data, "pgsock"),
		Log:       filepath.Join(cfg.data, "pg.log"),
		Locale:    "C.UTF-8",
		// fsync stays on: this cluster holds the dev data, and acknowledged orders must survive
		// a crash.
		Settings:     []string{"fsync=on", "max_connections=200", "shared_buffers=256MB"},
		Detached:     true,
		StartTimeout: 2 * time.Minute,
	}}
}

// redisService is the redis-server of the local set (AOF, appendfsync everysec).
type redisService struct {
	node testenv.RedisNode
}

func (r *redisService) Name() string { return "redis" }

func (r *redisService) Up(ctx context.Context, out io.Writer) error {
	if pid, ok := r.node.RunningPID(); ok {
		fmt.Fprintf(out, "redis: running (pid %d)\n", pid)
		// it may still be loading a large append-only file
		if !waitFor(ctx, 30*time.Second, func() bool { return testenv.RedisCommand(r.node.Addr(), "PING") == nil }) {
			return fmt.Errorf("no answer on port %d\n%s", r.node.Port, tail(r.node.LogPath()))
		}
	} else {
		bin, err := exec.LookPath("redis-server")
		if err != nil {
			return fmt.Errorf("redis-server not found (%v): run make deps", err)
		}
		r.node.Bin = bin
		if testenv.RedisCommand(r.node.Addr(), "PING") == nil {
			return fmt.Errorf("port %d is taken by another Redis: set REDIS_PORT", r.node.Port)
		}
		if err := r.node.Start(); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "redis: ready on %s\n", r.node.Addr())
	return nil
}

func (r *redisService) Down(out io.Writer) error {
	if _, ok := r.node.RunningPID(); !ok {
		return nil
	}
	if err := r.node.Stop(); err != nil {
		return err
	}
	fmt.Fprintln(out, "redis: stopped")
	return nil
}

func (r *redisService) Status() (bool, string) {
	if pid, ok := r.node.RunningPID(); ok {
		return true, fmt.Sprintf("running (pid %d) on %s, data in %s", pid, r.node.Addr(), r.node.Dir)
	}
	return false, "stopped"
}

// postgresService is the Postgres cluster of the local set.
type postgresService struct {
	cfg *config
	srv *testenv.PGServer
	// leaveIfFound: Down leaves Postgres running when Up found it running (the cluster set
	// shares the Postgres of `make services`, which other work may be using).
	leaveIfFound bool
	found        bool
}

func (p *postgresService) Name() string { return "postgres" }

// prepare finds the binaries and the OS user Postgres runs as, and makes the directories it
// needs reachable by that user.
func (p *postgresService) prepare(out io.Writer) error {
	if p.srv.Bin == "" {
		bin, err := testenv.PGBinDir(p.cfg.pgVersion)
		if err != nil {
			return err
		}
		p.srv.Bin = bin
	}
	if err := os.MkdirAll(p.srv.SocketDir, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(p.cfg.data, 0o755); err != nil {
		return err
	}
	for _, f := range []string{p.srv.Log, p.initLog()} {
		if err := touch(f); err != nil {
			return err
		}
	}
	// As root, Postgres runs as the postgres OS user: it gets its socket directory and logs, and
	// must be able to reach .data/ (a checkout under /root is not reachable).
	cred, err := testenv.PostgresUser(p.srv.SocketDir, p.srv.Log, p.initLog())
	if err != nil {
		return err
	}
	p.srv.Cred = cred
	changed, err := testenv.Traversable(cred, p.cfg.data)
	for _, d := range changed {
		fmt.Fprintf(out, "postgres: chmod o+x %s, so that the postgres user can reach %s\n", d, p.cfg.data)
	}
	return err
}

func (p *postgresService) initLog() string { return filepath.Join(p.cfg.data, "initdb.log") }

func (p *postgresService) Up(ctx context.Context, out io.Writer) error {
	if err := p.prepare(out); err != nil {
		return err
	}
	switch v := p.srv.Version(); v {
	case "":
		if err := p.srv.InitDB(p.initLog()); err != nil {
			return err
		}
		fmt.Fprintf(out, "postgres: created the cluster in %s\n", p.srv.Data)
	case p.cfg.pgVersion:
	default:
		return fmt.Errorf("%s is a Postgres %s cluster, not %s: make clean (deletes it), or set PG_VERSION=%s", p.srv.Data, v, p.cfg.pgVersion, v)
	}
	admin := p.srv.DSN("postgres")
	if pid, ok := p.srv.RunningPID(); ok {
		p.found = true
		fmt.Fprintf(out, "postgres: running (pid %d)\n", pid)
		if !waitFor(ctx, time.Minute, func() bool { return ping(ctx, admin) == nil }) {
			return fmt.Errorf("not ready on port %d: %v\n%s", p.srv.Port, ping(ctx, admin), tail(p.srv.Log))
		}
	} else {
		if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.srv.Port)), time.Second); err == nil {
			c.Close()
			return fmt.Errorf("port %d is taken by another server: set PG_PORT", p.srv.Port)
		}
		// stale lock files name a dead postmaster, which Postgres takes for alive while it is a
		// zombie or its pid is reused
		if err := p.srv.RemoveStaleLock(); err != nil {
			return err
		}
		if err := p.srv.Start(); err != nil {
			return fmt.Errorf("did not start: %w", err)
		}
	}
	created, err := testenv.CreateDatabase(ctx, admin, p.cfg.db)
	if err != nil {
		return fmt.Errorf("create database %s: %w", p.cfg.db, err)
	}
	if created {
		fmt.Fprintf(out, "postgres: created database %s\n", p.cfg.db)
	}
	fmt.Fprintf(out, "postgres: ready on 127.0.0.1:%d\n", p.srv.Port)
	return nil
}

func (p *postgresService) Down(out io.Writer) error {
	if _, ok := p.srv.RunningPID(); !ok {
		return nil
	}
	if p.leaveIfFound && p.found {
		fmt.Fprintln(out, "postgres: left running (it was running before; make stop stops it)")
		return nil
	}
	if err := p.prepare(io.Discard); err != nil {
		return err
	}
	if err := p.srv.Stop("fast"); err != nil {
		return err
	}
	fmt.Fprintln(out, "postgres: stopped")
	return nil
}

func (p *postgresService) Status() (bool, string) {
	if pid, ok := p.srv.RunningPID(); ok {
		return true, fmt.Sprintf("running (pid %d) on 127.0.0.1:%d, data in %s", pid, p.srv.Port, p.srv.Data)
	}
	if p.srv.Version() == "" {
		return false, "stopped (no cluster yet)"
	}
	return false, "stopped"
}

// dropDBs drops the per-test databases left behind.
func (s *set) dropDBs(ctx context.Context, out io.Writer) error {
	dropped, err := testenv.DropTestDatabases(ctx, s.adminDSN)
	for _, name := range dropped {
		fmt.Fprintf(out, "postgres: dropped the leftover test database %s\n", name)
	}
	return err
}

// ping connects to Postgres once.
func ping(ctx context.Context, dsn string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

func touch(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// tail is the end of a log file, for error messages.
func tail(path string) string { return testenv.LogTail(path) }
