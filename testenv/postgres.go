package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// adminEnv names an admin DSN to an existing cluster (for `make test`, the one `make services`
// runs); without it the process starts a private cluster.
const adminEnv = "FLASHSALE_TEST_DATABASE_URL"

// clusterPrefix starts the name of every private cluster's directory, followed by the owning
// process id, so that directories left by crashed test processes can be found and removed.
const clusterPrefix = "flashsale-pg-"

// cluster is the Postgres cluster this process uses, found or started once.
var cluster struct {
	sync.Mutex
	done  bool
	admin string // admin DSN, to the "postgres" database
	err   error
	proc  *process // the private cluster's postmaster, nil when none was started
	dir   string   // the private cluster's directory
	log   string
}

// Postgres returns the DSN (postgres://...?sslmode=disable) of a fresh, empty database created
// for this test and dropped (WITH (FORCE)) in t.Cleanup.
//
// The database lives in the cluster that FLASHSALE_TEST_DATABASE_URL (an admin DSN) points at
// when it is set; otherwise the first call in the process starts a private throwaway cluster on
// a free loopback port (as the postgres OS user when running as root), which Main stops and
// deletes.
func Postgres(t testing.TB) string {
	t.Helper()
	admin, err := adminDSN()
	if err != nil {
		t.Fatalf("testenv: postgres: %v", err)
	}
	name := "t_" + randomHex(8)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := adminExec(ctx, admin, `CREATE DATABASE "`+name+`"`); err != nil {
		t.Fatalf("testenv: postgres: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := adminExec(ctx, admin, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`); err != nil {
			t.Errorf("testenv: postgres: drop database %s: %v", name, err)
		}
	})
	dsn, err := withDatabase(admin, name)
	if err != nil {
		t.Fatalf("testenv: postgres: %v", err)
	}
	return dsn
}

// adminDSN returns the admin DSN of the cluster, starting the private cluster on first use. A
// failure is remembered: the tests after it fail the same way, fast.
func adminDSN() (string, error) {
	cluster.Lock()
	defer cluster.Unlock()
	if !cluster.done {
		cluster.admin, cluster.err = findCluster()
		cluster.done = true
	}
	return cluster.admin, cluster.err
}

func findCluster() (string, error) {
	admin := os.Getenv(adminEnv)
	if admin == "" {
		return startCluster()
	}
	if _, err := withDatabase(admin, "postgres"); err != nil {
		return "", fmt.Errorf("%s: %w", adminEnv, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("%s=%s: %w (is `make services` running?)", adminEnv, admin, err)
	}
	conn.Close(ctx)
	return admin, nil
}

// adminExec runs one statement on a new admin connection.
func adminExec(ctx context.Context, admin, sql string) error {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase returns the DSN dsn with its database replaced by name.
func withDatabase(dsn, name string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("%q is not a postgres:// URL", dsn)
	}
	u.Path = "/" + name
	u.RawPath = ""
	q := u.Query()
	if q.Get("sslmode") == "" {
		q.Set("sslmode", "disable")
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// startCluster creates and starts the private cluster. Durability is traded for speed (fsync
// off) because the cluster is thrown away when the process ends.
func startCluster() (string, error) {
	bin, err := pgBinDir()
	if err != nil {
		return "", err
	}
	removeStaleClusters()
	dir, err := os.MkdirTemp("", clusterPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", err
	}
	cred, err := postgresUser(dir)
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	data := filepath.Join(dir, "data")
	initLog := filepath.Join(dir, "initdb.log")
	initdb, err := spawn(initLog, dir, cred, filepath.Join(bin, "initdb"),
		"-D", data, "--auth=trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync")
	if err == nil {
		<-initdb.done
		err = initdb.err
	}
	if err != nil {
		tail := logTail(initLog)
		os.RemoveAll(dir)
		if cred != nil {
			tail += "\n(as root, Postgres runs as the postgres OS user, which must be able to reach " + dir + ")"
		}
		return "", fmt.Errorf("initdb: %v\n%s", err, tail)
	}
	log := filepath.Join(dir, "postgres.log")
	// Another process may take the chosen port before the postmaster binds it: try another one.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return "", err
		}
		proc, err := spawn(log, dir, cred, filepath.Join(bin, "postgres"),
			"-D", data, "-p", strconv.Itoa(port), "-k", data,
			"-c", "listen_addresses=127.0.0.1",
			"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
			"-c", "max_connections=300", "-c", "shared_buffers=128MB")
		if err != nil {
			os.RemoveAll(dir)
			return "", err
		}
		admin := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
		err = waitReady(proc, admin)
		if err == nil {
			cluster.proc, cluster.dir, cluster.log = proc, dir, log
			return admin, nil
		}
		proc.kill()
		tail := logTail(log)
		if attempt == 3 || !strings.Contains(tail, "could not bind") {
			os.RemoveAll(dir)
			return "", fmt.Errorf("postgres on port %d: %v\n%s", port, err, tail)
		}
	}
}

// waitReady waits until the postmaster accepts connections.
func waitReady(proc *process, admin string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		if proc.exited() {
			return fmt.Errorf("postgres exited at start: %v", proc.err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		conn, err := pgx.Connect(ctx, admin)
		if err == nil {
			conn.Close(ctx)
			cancel()
			return nil
		}
		cancel()
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after a minute: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopCluster stops the private cluster with a fast shutdown and deletes it.
func stopCluster() error {
	cluster.Lock()
	defer cluster.Unlock()
	if cluster.proc == nil {
		return nil
	}
	var err error
	cluster.proc.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
	if werr := cluster.proc.wait(30 * time.Second); werr != nil {
		err = fmt.Errorf("stop postgres: %v\n%s", werr, logTail(cluster.log))
	}
	cluster.proc = nil
	return errors.Join(err, os.RemoveAll(cluster.dir))
}

// pgBinDir finds the directory holding the Postgres server binaries: pg_config's bindir if it
// has them (Debian's /usr/bin/pg_config may describe only the client), else the highest version
// under /usr/lib/postgresql.
func pgBinDir() (string, error) {
	has := func(dir string) bool {
		for _, b := range []string{"initdb", "postgres"} {
			if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
				return false
			}
		}
		return true
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); has(dir) {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(dir string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int {
		switch va, vb := version(a), version(b); {
		case va > vb:
			return -1
		case va < vb:
			return 1
		}
		return 0
	})
	for _, dir := range dirs {
		if has(dir) {
			return dir, nil
		}
	}
	return "", errors.New("Postgres server binaries (initdb, postgres) not found via pg_config or in /usr/lib/postgresql/*/bin: run `make deps` (Debian package postgresql-15)")
}

// postgresUser returns the credentials to run Postgres with. Postgres refuses to run as root, so
// as root it runs as the postgres OS user, which is given the cluster directory.
func postgresUser(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs the postgres OS user to run Postgres (%v): run `make deps`", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	if err := os.Chown(dir, int(uid), int(gid)); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// removeStaleClusters deletes the private clusters of test processes that no longer exist
// (killed by a timeout or a signal before Main could clean up).
func removeStaleClusters() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), clusterPrefix+"*"))
	for _, dir := range dirs {
		rest := strings.TrimPrefix(filepath.Base(dir), clusterPrefix)
		pid, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, '-'), 0)])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(dir)
		}
	}
}
