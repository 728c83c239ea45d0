// Package testenv starts the real services that integration tests need (redis-server and a
// Postgres cluster) on free loopback ports, and removes them when the tests are done.
//
// Nothing is mocked: a missing binary fails the test with a hint to run `make deps`, because a
// skipped real component would hide a defect.
//
// The servers are started by one core that returns errors (PGServer, RedisConf and startRedis,
// RedisNode); the testing.TB helpers (Postgres, PrivatePostgres, Redis) are thin wrappers over it,
// and the devenv command (testenv/cmd/devenv, behind `make services`) starts the persistent
// services of .data/ with the same core, detached.
package testenv

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
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

// Main wraps testing.M: it runs the tests, then stops the Postgres cluster and the stripe-mock
// this process started (if any). Use it in TestMain: func TestMain(m *testing.M) { testenv.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if err := errors.Join(stopCluster(), stopStripeMock()); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// ports remembers the ports FreePort handed out, so two tests of one process never get the same.
var ports struct {
	sync.Mutex
	given map[int]bool
}

// FreePort returns a free TCP port on 127.0.0.1.
//
// The port is chosen below the kernel's ephemeral range, so a client connection cannot take it
// between a server's stop and its restart on the same port.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatalf("testenv: free port: %v", err)
	}
	return port
}

func freePort() (int, error) {
	ports.Lock()
	defer ports.Unlock()
	if ports.given == nil {
		ports.given = make(map[int]bool)
	}
	lo, hi := 15000, ephemeralLow()
	for range 200 {
		port := 0 // the kernel's choice, when the range below is too small
		if hi-lo >= 1000 {
			port = lo + mrand.IntN(hi-lo)
		}
		port, err := probePort(port)
		if err != nil {
			continue
		}
		if ports.given[port] || !reservePort(port) {
			continue
		}
		ports.given[port] = true
		return port, nil
	}
	return 0, errors.New("no free port on 127.0.0.1")
}

// portLocks is a file shared by every process on the machine that uses this package: a process
// holds a POSIX record lock on byte N of it while port N is its own. Each test package runs as a
// process of its own, and devenv is a child of a test: without it, two of them could pick the same
// port, the second server failing to start (or, worse, a preflight finding the port taken half a
// minute after it was chosen). Record locks go with the process: nothing to clean up after a
// crash, and a forked child does not inherit them.
var portLocks struct {
	once sync.Once
	fd   int // -1: no shared file (then only this process's own picks are kept apart)
}

// reservePort takes port for this process unless another live process holds it.
func reservePort(port int) bool {
	portLocks.once.Do(func() {
		portLocks.fd = -1
		path := filepath.Join(os.TempDir(), "flashsale-test-ports.lock")
		fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CREAT|syscall.O_CLOEXEC, 0o666)
		if err != nil {
			return
		}
		syscall.Fchmod(fd, 0o666) // a test run as another user shares it too
		portLocks.fd = fd
	})
	if portLocks.fd < 0 {
		return true
	}
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: int64(port), Len: 1}
	return syscall.FcntlFlock(uintptr(portLocks.fd), syscall.F_SETLK, &lk) == nil
}

// probePort checks that port (0: any) is free on 127.0.0.1 by binding a socket to it, and returns
// it. The probe never listens: a closed listening socket was seen to keep its port for a moment,
// enough to fail a server started right after. It holds ForkLock so that no child forked meanwhile
// inherits the socket.
func probePort(port int) (int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return 0, err
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return 0, err
	}
	return sa.(*syscall.SockaddrInet4).Port, nil
}

// ephemeralLow returns the first port of the kernel's range for outgoing connections.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}

// process is a server started by this package, with its exit awaited in the background.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // the exit status, once done is closed
}

// spawn starts a server process with its output appended to logPath. The child gets SIGKILL if
// this test process dies first, so a crashed or timed-out test leaves no server behind.
func spawn(logPath, dir string, cred *syscall.Credential, name string, args ...string) (*process, error) {
	return spawnProc(logPath, dir, cred, false, name, args...)
}

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to d for the process to exit and kills it when it does not.
func (p *process) wait(d time.Duration) error {
	select {
	case <-p.done:
		return nil
	case <-time.After(d):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within %v: killed", p.cmd.Path, d)
	}
}

// kill sends SIGKILL and waits for the exit.
func (p *process) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// LogTail returns the last lines of a log file, for failure messages.
func LogTail(path string) string { return logTail(path) }

// logTail returns the last lines of a log file, for failure messages.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	return "--- " + path + " (tail)\n" + strings.Join(lines, "\n")
}

// randomHex returns n random bytes as hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// StartCmd starts cmd as a child that gets SIGKILL when this test process exits (on Linux), as
// the servers of this package are started: for tests that run their own server processes.
func StartCmd(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = sysProcAttr(nil)
	}
	return startCmd(cmd)
}
