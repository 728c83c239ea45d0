package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	mu   sync.Mutex
	bin  string
	dir  string
	data string
	log  string
	port int
	cred *syscall.Credential
	proc *process // the running postmaster, nil while stopped
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
	p := &PGCluster{bin: bin, dir: dir, data: filepath.Join(dir, "data"), log: filepath.Join(dir, "postgres.log")}
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.proc != nil {
			p.proc.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
			if err := p.proc.wait(30 * time.Second); err != nil {
				t.Errorf("testenv: private postgres: %v", err)
			}
			p.proc = nil
		}
		os.RemoveAll(dir)
	})
	if p.cred, err = postgresUser(dir); err != nil {
		t.Fatalf("testenv: private postgres: %v", err)
	}
	initLog := filepath.Join(dir, "initdb.log")
	initdb, err := spawn(initLog, dir, p.cred, filepath.Join(bin, "initdb"),
		"-D", p.data, "--auth=trust", "-U", "postgres", "-E", "UTF8", "--locale=C")
	if err == nil {
		<-initdb.done
		err = initdb.err
	}
	if err != nil {
		t.Fatalf("testenv: private postgres: initdb: %v\n%s", err, logTail(initLog))
	}
	for attempt := 1; ; attempt++ {
		if p.port, err = freePort(); err != nil {
			t.Fatalf("testenv: private postgres: %v", err)
		}
		err = p.start()
		if err == nil {
			return p
		}
		if attempt == 3 || !strings.Contains(err.Error(), "could not bind") {
			t.Fatalf("testenv: private postgres: %v", err)
		}
	}
}

// DSN is the admin DSN of the cluster's "postgres" database.
func (p *PGCluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

// Port is the cluster's port, the same across restarts.
func (p *PGCluster) Port() int { return p.port }

// LogPath is the server's log file (every start appends to it).
func (p *PGCluster) LogPath() string { return p.log }

// Running reports whether the postmaster is running.
func (p *PGCluster) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proc != nil && !p.proc.exited()
}

// Stop stops the cluster with `pg_ctl stop -m MODE`: "immediate" is a crash (every server
// process quits at once, nothing flushed; the next start runs crash recovery from the WAL),
// "fast" and "smart" are clean shutdowns.
func (p *PGCluster) Stop(t testing.TB, mode string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc == nil {
		t.Fatalf("testenv: private postgres: stop: not running")
	}
	ctl, err := spawn(p.log, p.dir, p.cred, filepath.Join(p.bin, "pg_ctl"), "stop", "-D", p.data, "-m", mode, "-w", "-t", "60")
	if err == nil {
		err = ctl.wait(90 * time.Second)
		if err == nil {
			err = ctl.err
		}
	}
	if err != nil {
		t.Fatalf("testenv: private postgres: pg_ctl stop -m %s: %v\n%s", mode, err, logTail(p.log))
	}
	if err := p.proc.wait(30 * time.Second); err != nil {
		t.Fatalf("testenv: private postgres: after pg_ctl stop: %v", err)
	}
	p.proc = nil
}

// Start starts the stopped cluster again on its data directory and port, and waits until it
// accepts connections (after a crash: until its recovery is done).
func (p *PGCluster) Start(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proc != nil {
		t.Fatalf("testenv: private postgres: start: running")
	}
	if err := p.start(); err != nil {
		t.Fatalf("testenv: private postgres: %v", err)
	}
}

func (p *PGCluster) start() error {
	proc, err := spawn(p.log, p.dir, p.cred, filepath.Join(p.bin, "postgres"),
		"-D", p.data, "-p", strconv.Itoa(p.port), "-k", p.data,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300", "-c", "shared_buffers=128MB")
	if err != nil {
		return err
	}
	if err := waitReady(proc, p.DSN()); err != nil {
		proc.kill()
		return fmt.Errorf("postgres on port %d: %v\n%s", p.port, err, logTail(p.log))
	}
	p.proc = proc
	return nil
}
