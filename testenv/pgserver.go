package testenv

// A Postgres cluster of the tests' own, started and stopped by the tests and by devenv.

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

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
