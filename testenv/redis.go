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
	conf := fmt.Sprintf(`bind 127.0.0.1
port %d
dir %q
appendonly yes
appendfsync everysec
save ""
daemonize no
logfile ""
`, port, r.dataDir)
	return os.WriteFile(r.conf, []byte(conf), 0o644)
}

// start runs redis-server and waits for PING; r.mu is held.
func (r *RedisServer) start() error {
	p, err := spawn(r.log, r.dir, nil, r.bin, r.conf)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(redisStartTimeout)
	for {
		if p.exited() {
			return fmt.Errorf("redis-server exited at start: %v", p.err)
		}
		if r.command("PING") == nil {
			r.proc = p
			return nil
		}
		if time.Now().After(deadline) {
			p.kill()
			return fmt.Errorf("redis-server not answering PING after %v", redisStartTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// command sends one inline command and checks the reply: PING must answer +PONG; SHUTDOWN
// succeeds when the server closes the connection without an error reply.
func (r *RedisServer) command(cmd string) error {
	c, err := net.DialTimeout("tcp", r.Addr, time.Second)
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
