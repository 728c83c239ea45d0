package testenv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
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

// PGServer is one Postgres cluster: where its files are and how its server runs. It is the one
// implementation of a Postgres server in this repository: the test helpers (Postgres,
// PrivatePostgres) and the devenv command behind `make services` all start and stop clusters
// through it. Its methods are not safe for concurrent use.
type PGServer struct {
	Bin       string              // the directory of initdb, postgres and pg_ctl (PGBinDir)
	Data      string              // the data directory (absolute)
	Port      int                 // the loopback port
	SocketDir string              // the directory of the Unix socket; "" is Data
	Log       string              // the server's log; every start appends to it
	Locale    string              // initdb --locale; "" is C
	NoSync    bool                // initdb --no-sync, for a throwaway cluster
	Settings  []string            // server settings, "name=value" each (postgres -c)
	Cred      *syscall.Credential // the OS user Postgres runs as; nil is this process's (see PostgresUser)
	// Detached: the server outlives this process, in a session of its own (devenv). Otherwise it
	// is killed when this process dies, so a crashed test leaves no server behind.
	Detached bool
	// StartTimeout bounds a start, crash recovery included; 0 is one minute.
	StartTimeout time.Duration

	proc *process // the postmaster this value started, nil when none
}

// DSN is the URL of database db on the server, as the superuser postgres.
func (s *PGServer) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// Version returns the major version of the cluster in Data ("" when there is none yet).
func (s *PGServer) Version() string {
	b, err := os.ReadFile(filepath.Join(s.Data, "PG_VERSION"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// InitDB creates the cluster in Data (trust authentication, superuser postgres, UTF8), creating
// the directory (mode 0700, given to Cred's user) if needed; initdb's output goes to initLog.
func (s *PGServer) InitDB(initLog string) error {
	if err := os.MkdirAll(s.Data, 0o700); err != nil {
		return err
	}
	if err := chownTo(s.Cred, s.Data, initLog); err != nil {
		return err
	}
	args := []string{"-D", s.Data, "--auth=trust", "-U", "postgres", "-E", "UTF8", "--locale=" + cmp.Or(s.Locale, "C")}
	if s.NoSync {
		args = append(args, "--no-sync")
	}
	initdb, err := spawn(initLog, filepath.Dir(s.Data), s.Cred, filepath.Join(s.Bin, "initdb"), args...)
	if err == nil {
		<-initdb.done
		err = initdb.err
	}
	if err != nil {
		tail := logTail(initLog)
		if s.Cred != nil {
			tail += "\n(as root, Postgres runs as the postgres OS user, which must be able to reach " + s.Data + ")"
		}
		return fmt.Errorf("initdb: %v\n%s", err, tail)
	}
	return nil
}

// Start starts the server on Data and Port and waits until it accepts connections (after a
// crash: until its recovery is done). The log's tail is in the error.
func (s *PGServer) Start() error {
	args := []string{"-D", s.Data, "-p", strconv.Itoa(s.Port), "-k", cmp.Or(s.SocketDir, s.Data),
		"-c", "listen_addresses=127.0.0.1"}
	for _, kv := range s.Settings {
		args = append(args, "-c", kv)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.Port), time.Second); err == nil {
		c.Close()
		return fmt.Errorf("postgres on port %d: %w", s.Port, errPortTaken)
	}
	// After a postmaster was killed (kill -9), its children may still hold its shared memory for a
	// moment: the new one refuses to start ("pre-existing shared memory block ... is still in
	// use") until they are gone, so it is asked again for a few seconds.
	for attempt := 1; ; attempt++ {
		proc, err := spawnProc(s.Log, filepath.Dir(s.Data), s.Cred, s.Detached, filepath.Join(s.Bin, "postgres"), args...)
		if err != nil {
			return err
		}
		err = waitReadyFor(proc, s.DSN("postgres"), s.Data, cmp.Or(s.StartTimeout, time.Minute))
		if err == nil {
			s.proc = proc
			return nil
		}
		proc.kill()
		tail := logTail(s.Log)
		if attempt < 20 && strings.Contains(tail, "pre-existing shared memory block") {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		return fmt.Errorf("postgres on port %d: %w\n%s", s.Port, err, tail)
	}
}

// startOnFreePort starts the server on a free port: another process may take the chosen port
// before the postmaster binds it, then another one is tried.
func (s *PGServer) startOnFreePort() error {
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		s.Port = port
		err = s.Start()
		if err == nil || attempt == 3 || !(errors.Is(err, errPortTaken) || strings.Contains(err.Error(), "could not bind")) {
			return err
		}
	}
}

// Stop stops the server with `pg_ctl stop -m MODE`: "immediate" is a crash (every server process
// quits at once, nothing flushed; the next start runs crash recovery from the WAL), "fast" and
// "smart" are clean shutdowns. It works on a server another process started, too.
func (s *PGServer) Stop(mode string) error {
	ctl, err := spawn(s.Log, filepath.Dir(s.Data), s.Cred, filepath.Join(s.Bin, "pg_ctl"), "stop", "-D", s.Data, "-m", mode, "-w", "-t", "60")
	if err == nil {
		err = ctl.wait(90 * time.Second)
		if err == nil {
			err = ctl.err
		}
	}
	if err != nil {
		return fmt.Errorf("pg_ctl stop -m %s: %v\n%s", mode, err, logTail(s.Log))
	}
	if s.proc != nil {
		err := s.proc.wait(30 * time.Second)
		s.proc = nil
		if err != nil {
			return fmt.Errorf("after pg_ctl stop: %v", err)
		}
	}
	return nil
}

// Started reports whether the postmaster this value started is running.
func (s *PGServer) Started() bool { return s.proc != nil && !s.proc.exited() }

// RunningPID returns the pid of the postmaster running on Data, whoever started it. Its
// postmaster.pid alone is no proof: after a crash or a reboot the pid in it may be gone, a zombie
// or another process, so the process must be alive and a postgres on this data directory.
func (s *PGServer) RunningPID() (int, bool) {
	pid := readPID(filepath.Join(s.Data, "postmaster.pid"))
	if !PIDAlive(pid) {
		return 0, false
	}
	if cmdline := pidCmdline(pid); cmdline != "" && !strings.Contains(cmdline, "-D\x00"+s.Data+"\x00") {
		return 0, false // the pid now names another process
	}
	return pid, true
}

// RemoveStaleLock deletes the lock files a dead postmaster left (postmaster.pid and the socket's
// lock), which Postgres would take for a running server when their pid is reused or a zombie.
// Call it only when RunningPID says no postmaster runs.
func (s *PGServer) RemoveStaleLock() error {
	sock := filepath.Join(cmp.Or(s.SocketDir, s.Data), ".s.PGSQL."+strconv.Itoa(s.Port))
	var errs []error
	for _, f := range []string{filepath.Join(s.Data, "postmaster.pid"), sock, sock + ".lock"} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// PGBinDir finds the directory of the Postgres server binaries of major version (e.g. "15"), or,
// with version "", of the installed version pg_config names or else the highest one.
func PGBinDir(version string) (string, error) {
	if version == "" {
		return pgBinDir()
	}
	dir := filepath.Join("/usr/lib/postgresql", version, "bin")
	for _, b := range []string{"initdb", "postgres", "pg_ctl"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("Postgres %s server binaries not found (%v): run `make deps` (Debian package postgresql-%s)", version, err, version)
		}
	}
	return dir, nil
}

// PostgresUser returns the credentials Postgres runs with: nil unless this process is root;
// Postgres refuses to run as root, so as root it runs as the postgres OS user, which is given
// dirs (chown).
func PostgresUser(dirs ...string) (*syscall.Credential, error) {
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
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	return cred, chownTo(cred, dirs...)
}

// chownTo gives paths (those that exist) to cred's user; nothing when cred is nil.
func chownTo(cred *syscall.Credential, paths ...string) error {
	if cred == nil {
		return nil
	}
	for _, p := range paths {
		if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Traversable makes every directory above dir (and dir) searchable by cred's user, adding o+x
// where that user could not pass (a checkout under /root is not reachable by the postgres user),
// and returns the directories it changed. Nothing when cred is nil.
func Traversable(cred *syscall.Credential, dir string) ([]string, error) {
	if cred == nil {
		return nil, nil
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	var changed []string
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return changed, err
		}
		mode := fi.Mode().Perm()
		st, ok := fi.Sys().(*syscall.Stat_t)
		can := mode&0o001 != 0 ||
			(ok && st.Uid == cred.Uid && mode&0o100 != 0) ||
			(ok && st.Gid == cred.Gid && mode&0o010 != 0)
		if !can {
			if err := os.Chmod(d, fi.Mode()|0o001); err != nil {
				return changed, err
			}
			changed = append(changed, d)
		}
		if d == filepath.Dir(d) {
			return changed, nil
		}
	}
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
