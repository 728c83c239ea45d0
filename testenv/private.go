package testenv

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// PGCluster is a private Postgres cluster of one test, which the test may crash and start again
// (the fault suite's Postgres restart). Unlike the shared cluster of Postgres, it runs with the
// durability settings of production (fsync, synchronous_commit and full_page_writes on), so that
// a crash loses nothing that was committed.
type PGCluster struct {
	mu  sync.Mutex
	dir string
	srv *PGServer // its postmaster is running while srv.Started()
}

// PrivatePostgres initdb's and starts a Postgres cluster of the test's own (as the postgres OS
// user when running as root), on a free loopback port, and stops and deletes it in t.Cleanup.
func PrivatePostgres(t testing.TB) *PGCluster {
	t.Helper()
	bin, err := pgBinDir()
	if err != nil {
		t.Fatalf("testenv: private postgres: %v", err)
	}
	removeStaleClusters()
	dir, err := os.MkdirTemp("", clusterPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		t.Fatal(err)
	}
	p := &PGCluster{dir: dir, srv: &PGServer{Bin: bin, Data: filepath.Join(dir, "data"), Log: filepath.Join(dir, "postgres.log"),
		Settings: []string{"max_connections=300", "shared_buffers=128MB"}}}
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.srv.proc != nil {
			p.srv.proc.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
			if err := p.srv.proc.wait(30 * time.Second); err != nil {
				t.Errorf("testenv: private postgres: %v", err)
			}
			p.srv.proc = nil
		}
		os.RemoveAll(dir)
	})
	if p.srv.Cred, err = postgresUser(dir); err != nil {
		t.Fatalf("testenv: private postgres: %v", err)
	}
	if err := p.srv.InitDB(filepath.Join(dir, "initdb.log")); err != nil {
		t.Fatalf("testenv: private postgres: %v", err)
	}
	if err := p.srv.startOnFreePort(); err != nil {
		t.Fatalf("testenv: private postgres: %v", err)
	}
	return p
}

// DSN is the admin DSN of the cluster's "postgres" database.
func (p *PGCluster) DSN() string { return p.srv.DSN("postgres") }

// Port is the cluster's port, the same across restarts.
func (p *PGCluster) Port() int { return p.srv.Port }

// LogPath is the server's log file (every start appends to it).
func (p *PGCluster) LogPath() string { return p.srv.Log }

// Running reports whether the postmaster is running.
func (p *PGCluster) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.srv.Started()
}

// Stop stops the cluster with `pg_ctl stop -m MODE`: "immediate" is a crash (every server
// process quits at once, nothing flushed; the next start runs crash recovery from the WAL),
// "fast" and "smart" are clean shutdowns.
func (p *PGCluster) Stop(t testing.TB, mode string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv.proc == nil {
		t.Fatalf("testenv: private postgres: stop: not running")
	}
	if err := p.srv.Stop(mode); err != nil {
		t.Fatalf("testenv: private postgres: %v", err)
	}
}

// Start starts the stopped cluster again on its data directory and port, and waits until it
// accepts connections (after a crash: until its recovery is done).
func (p *PGCluster) Start(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv.proc != nil {
		t.Fatalf("testenv: private postgres: start: running")
	}
	if err := p.srv.Start(); err != nil {
		t.Fatalf("testenv: private postgres: %v", err)
	}
}
