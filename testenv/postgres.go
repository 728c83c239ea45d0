package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
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

// testDBPrefix starts the name of every database Postgres creates for a test (DropTestDatabases).
const testDBPrefix = "t_"

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
	name := testDBPrefix + randomHex(8) // DropTestDatabases knows this form
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
	srv := &PGServer{
		Bin: bin, Data: filepath.Join(dir, "data"), Log: filepath.Join(dir, "postgres.log"), Cred: cred,
		NoSync: true,
		Settings: []string{"fsync=off", "synchronous_commit=off", "full_page_writes=off",
			"max_connections=300", "shared_buffers=128MB"},
	}
	if err := srv.InitDB(filepath.Join(dir, "initdb.log")); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if err := srv.startOnFreePort(); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	cluster.proc, cluster.dir, cluster.log = srv.proc, dir, srv.Log
	return srv.DSN("postgres"), nil
}

// CreateDatabase creates database name on the server of the admin DSN unless it exists, and
// reports whether it did.
func CreateDatabase(ctx context.Context, admin, name string) (bool, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil || exists {
		return false, err
	}
	_, err = conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize())
	return err == nil, err
}

// DropTestDatabases drops the per-test databases (named t_…, see Postgres) on the server of the
// admin DSN: each test drops its own, but an interrupted run leaves them behind. It returns the
// names it dropped.
func DropTestDatabases(ctx context.Context, admin string) ([]string, error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	// Exactly the names Postgres gives (t_ and 16 hex digits): not a LIKE, whose _ matches any
	// character (template0 would match t_%).
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname ~ $1`, "^"+testDBPrefix+"[0-9a-f]{16}$")
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var dropped []string
	for _, name := range names {
		if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			return dropped, fmt.Errorf("drop database %s: %w", name, err)
		}
		dropped = append(dropped, name)
	}
	return dropped, nil
}

// errPortTaken: something already answers on the port a server was to listen on.
var errPortTaken = errors.New("the port is taken by another server")

// waitReadyFor waits up to d until the postmaster accepts connections. A server that answers
// must be the one on dataDir: another test process may run a Postgres on the port just chosen
// (ports are picked per process), and while the new postmaster is failing to bind it, that
// server would answer in its place (a CI run created its database there, and the instances
// found nothing on the port once that server stopped).
func waitReadyFor(proc *process, admin, dataDir string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if proc.exited() {
			return fmt.Errorf("postgres exited at start: %v", proc.err)
		}
		err := answersOn(admin, dataDir)
		if err == nil {
			return nil
		}
		foreign := errors.Is(err, errPortTaken)
		if foreign && proc.exited() {
			return err
		}
		if time.Now().After(deadline) {
			if foreign {
				return err
			}
			return fmt.Errorf("postgres not ready after %v: %v", d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// answersOn reports whether the server of the admin DSN accepts connections and runs on dataDir:
// nil if so, errPortTaken (wrapped) for another server, else why it could not be asked.
func answersOn(admin, dataDir string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var dir string
	if err := conn.QueryRow(ctx, `SELECT current_setting('data_directory')`).Scan(&dir); err != nil {
		return err
	}
	if !sameDir(dir, dataDir) {
		return fmt.Errorf("%w: the server answering runs on %s, not %s", errPortTaken, dir, dataDir)
	}
	return nil
}

// sameDir reports whether a and b name the same directory.
func sameDir(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
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

// postgresUser returns the credentials to run Postgres with (PostgresUser), giving it dir.
func postgresUser(dir string) (*syscall.Credential, error) { return PostgresUser(dir) }

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
