package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RedisServer is a redis-server process owned by one test, with append-only persistence so that
// tests can kill and restart it like a production node.
type RedisServer struct {
	// Addr is the server's address, "127.0.0.1:port"; it stays the same across restarts.
	Addr string

	bin     string
	dir     string // holds the config and the log
	dataDir string // holds the AOF; Wipe empties it
	conf    string
	log     string

	mu   sync.Mutex
	proc *process // nil while stopped
}

// redisStartTimeout bounds how long a start, including loading the AOF, may take.
const redisStartTimeout = 30 * time.Second

// Redis starts a fresh redis-server (appendonly yes, appendfsync everysec) on a free loopback
// port with its data in t.TempDir(); it is stopped in t.Cleanup.
func Redis(t testing.TB) *RedisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("testenv: redis-server not found (%v): run `make deps` (Debian package redis-server)", err)
	}
	dir := t.TempDir()
	r := &RedisServer{
		bin:     bin,
		dir:     dir,
		dataDir: filepath.Join(dir, "data"),
		conf:    filepath.Join(dir, "redis.conf"),
		log:     filepath.Join(dir, "redis.log"),
	}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.proc != nil {
			r.proc.kill()
			r.proc = nil
		}
	})
	if err := os.Mkdir(r.dataDir, 0o755); err != nil {
		t.Fatalf("testenv: redis: %v", err)
	}
	// Another process may take the chosen port before redis binds it: then try another one.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatalf("testenv: redis: %v", err)
		}
		r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err := r.writeConf(port); err != nil {
			t.Fatalf("testenv: redis: %v", err)
		}
		r.mu.Lock()
		err = r.start()
		r.mu.Unlock()
		if err == nil {
			return r
		}
		if attempt == 3 || !strings.Contains(logTail(r.log), "Address already in use") {
			t.Fatalf("testenv: redis on %s: %v\n%s", r.Addr, err, logTail(r.log))
		}
	}
}

// URL returns the server's URL for go-redis: "redis://127.0.0.1:port/0".
func (r *RedisServer) URL() string { return "redis://" + r.Addr + "/0" }

// Stop shuts the server down gracefully with SHUTDOWN (the AOF is flushed and kept) and waits
// for it to exit.
func (r *RedisServer) Stop(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		t.Fatalf("testenv: redis %s: Stop: not running", r.Addr)
	}
	if err := r.command("SHUTDOWN"); err != nil {
		t.Fatalf("testenv: redis %s: SHUTDOWN: %v\n%s", r.Addr, err, logTail(r.log))
	}
	err := r.proc.wait(redisStartTimeout)
	r.proc = nil
	if err != nil {
		t.Fatalf("testenv: redis %s: %v\n%s", r.Addr, err, logTail(r.log))
	}
}

// Kill kills the server with SIGKILL, as a crash would, and waits for it to exit.
func (r *RedisServer) Kill(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		t.Fatalf("testenv: redis %s: Kill: not running", r.Addr)
	}
	r.proc.kill()
	r.proc = nil
}

// Start starts the server again on the same port and data dir, so data written before a Stop or
// Kill comes back from the AOF, and waits until it answers PING.
func (r *RedisServer) Start(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		t.Fatalf("testenv: redis %s: Start: already running", r.Addr)
	}
	if err := r.start(); err != nil {
		t.Fatalf("testenv: redis %s: %v\n%s", r.Addr, err, logTail(r.log))
	}
}

// Wipe stops the server, deletes its data files and starts it empty on the same port, as if the
// node had lost its disk.
func (r *RedisServer) Wipe(t testing.TB) {
	t.Helper()
	r.replaceData(t, "")
}

func (r *RedisServer) writeConf(port int) error {
	return os.WriteFile(r.conf, []byte(RedisConf(port, r.dataDir, "")), 0o644)
}

// start runs redis-server and waits for PING; r.mu is held.
func (r *RedisServer) start() error {
	p, err := startRedis(r.bin, r.conf, r.log, r.dir, r.Addr, false)
	if err != nil {
		return err
	}
	r.proc = p
	return nil
}

// RedisConf is the configuration of a redis-server on 127.0.0.1:port keeping its append-only
// file (appendfsync everysec) in dataDir, logging to its standard output (the log file the
// starter gives it) and, when pidFile is not "", writing its pid there. extra lines follow
// (a cluster node's settings, say).
func RedisConf(port int, dataDir, pidFile string, extra ...string) string {
	conf := fmt.Sprintf(`bind 127.0.0.1
port %d
dir %q
appendonly yes
appendfsync everysec
save ""
daemonize no
logfile ""
`, port, dataDir)
	if pidFile != "" {
		conf += fmt.Sprintf("pidfile %q\n", pidFile)
	}
	for _, l := range extra {
		conf += l + "\n"
	}
	return conf
}

// startRedis runs redis-server with the config file conf (a child of this process, or detached)
// and waits until it answers PING on addr, loading its AOF included.
func startRedis(bin, conf, logPath, dir, addr string, detached bool) (*process, error) {
	p, err := spawnProc(logPath, dir, nil, detached, bin, conf)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(redisStartTimeout)
	for {
		if p.exited() {
			return nil, fmt.Errorf("redis-server exited at start: %v", p.err)
		}
		if RedisCommand(addr, "PING") == nil {
			return p, nil
		}
		if time.Now().After(deadline) {
			p.kill()
			return nil, fmt.Errorf("redis-server not answering PING after %v", redisStartTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// command sends one inline command to the server (RedisCommand).
func (r *RedisServer) command(cmd string) error { return RedisCommand(r.Addr, cmd) }

// RedisCommand sends one inline command to the Redis at addr and checks the reply: PING must
// answer +PONG; SHUTDOWN succeeds when the server closes the connection without an error reply.
func RedisCommand(addr, cmd string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	timeout := 2 * time.Second
	if cmd == "SHUTDOWN" {
		timeout = redisStartTimeout // it fsyncs the AOF first
	}
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	line = strings.TrimSpace(line)
	switch {
	case cmd == "SHUTDOWN" && line == "" && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)):
		return nil // the server closed the connection: it is exiting
	case err != nil:
		return err
	case cmd == "PING" && line == "+PONG":
		return nil
	default:
		return fmt.Errorf("%s: %s", cmd, line)
	}
}

// CopyData copies the server's data files (the append-only file) as they are on disk now, while
// it runs, and returns where the copy is: what an OS crash at this moment would leave (with
// appendfsync everysec, up to a second behind what clients were told).
func (r *RedisServer) CopyData(t testing.TB) string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	dst := filepath.Join(t.TempDir(), "redis-data-copy")
	if err := os.CopyFS(dst, os.DirFS(r.dataDir)); err != nil {
		t.Fatalf("testenv: redis %s: copy data: %v", r.Addr, err)
	}
	return dst
}

// Restore kills the server (SIGKILL), replaces its data files with a copy made by CopyData and
// starts it again on the same port: Redis comes back having lost every write since the copy.
func (r *RedisServer) Restore(t testing.TB, copyDir string) {
	t.Helper()
	r.replaceData(t, copyDir)
}

// replaceData kills the server, replaces its data dir with copyDir ("" for empty) and starts it.
func (r *RedisServer) replaceData(t testing.TB, copyDir string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		r.proc.kill()
		r.proc = nil
	}
	if err := os.RemoveAll(r.dataDir); err != nil {
		t.Fatalf("testenv: redis %s: replace data: %v", r.Addr, err)
	}
	var err error
	if copyDir == "" {
		err = os.Mkdir(r.dataDir, 0o755)
	} else {
		err = os.CopyFS(r.dataDir, os.DirFS(copyDir))
	}
	if err != nil {
		t.Fatalf("testenv: redis %s: replace data: %v", r.Addr, err)
	}
	if err := r.start(); err != nil {
		t.Fatalf("testenv: redis %s: %v\n%s", r.Addr, err, logTail(r.log))
	}
}

// RedisNode is a persistent redis-server (the devenv command's, behind `make services`): its
// config, append-only file, log and pid file in Dir, on 127.0.0.1:Port, started detached so that
// it outlives the command that started it. RedisServer is the test's own kind; both start
// through RedisConf and startRedis.
type RedisNode struct {
	Bin  string // the redis-server binary
	Dir  string // holds redis.conf, redis.log, redis.pid and the AOF (absolute)
	Port int
}

// Addr is "127.0.0.1:port".
func (n *RedisNode) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(n.Port)) }

// URL is the server's URL for go-redis: "redis://127.0.0.1:port/0".
func (n *RedisNode) URL() string { return "redis://" + n.Addr() + "/0" }

// LogPath is the server's log file.
func (n *RedisNode) LogPath() string { return filepath.Join(n.Dir, "redis.log") }

func (n *RedisNode) pidFile() string { return filepath.Join(n.Dir, "redis.pid") }

// RunningPID returns the pid of the redis-server of this node, found by its pid file: the pid
// must be alive and a redis-server (after a crash or a reboot it may name another process).
func (n *RedisNode) RunningPID() (int, bool) {
	pid := readPID(n.pidFile())
	if !PIDAlive(pid) {
		return 0, false
	}
	if comm := pidComm(pid); comm != "" && comm != "redis-server" {
		return 0, false
	}
	return pid, true
}

// Start writes the config and starts the server detached (a stale pid file is removed first),
// and waits until it answers PING, which takes a while when it loads a large AOF. It refuses a
// port where another server answers: a Redis there is not this node's.
func (n *RedisNode) Start() error {
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return err
	}
	if RedisCommand(n.Addr(), "PING") == nil {
		return fmt.Errorf("port %d is taken by another Redis", n.Port)
	}
	if err := os.Remove(n.pidFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	conf := filepath.Join(n.Dir, "redis.conf")
	if err := os.WriteFile(conf, []byte(RedisConf(n.Port, n.Dir, n.pidFile())), 0o644); err != nil {
		return err
	}
	if _, err := startRedis(n.Bin, conf, n.LogPath(), n.Dir, n.Addr(), true); err != nil {
		return fmt.Errorf("%v\n%s", err, logTail(n.LogPath()))
	}
	return nil
}

// Stop shuts the running server down (SHUTDOWN flushes the AOF; SIGTERM if it does not answer)
// and waits for it to exit. Nothing when it does not run.
func (n *RedisNode) Stop() error {
	pid, ok := n.RunningPID()
	if !ok {
		return nil
	}
	if err := RedisCommand(n.Addr(), "SHUTDOWN"); err != nil {
		syscall.Kill(pid, syscall.SIGTERM)
	}
	if !waitGone(pid, redisStartTimeout) {
		return fmt.Errorf("redis-server (pid %d) still running %v after SHUTDOWN", pid, redisStartTimeout)
	}
	return nil
}
