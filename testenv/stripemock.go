package testenv

import (
	"errors"
	"fmt"
	"net"
	"net/http"
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

// StripeMockModule and StripeMockVersion are what the tests' stripe-mock is built from
// (go install StripeMockModule@StripeMockVersion). stripe-mock answers Stripe's API from its
// OpenAPI document and fixtures, and refuses (400) a request that does not fit the document.
const (
	StripeMockModule  = "github.com/stripe/stripe-mock"
	StripeMockVersion = "v0.203.0"
)

// stripeMockStartTimeout bounds a start (stripe-mock loads its OpenAPI document first).
const stripeMockStartTimeout = 30 * time.Second

var stripeMockBuild struct {
	once sync.Once
	path string
	err  error
}

// BuildStripeMock builds stripe-mock StripeMockVersion (go install with GOBIN) into a cache folder
// under cacheDir, once per process, and returns its path. A binary already built for that version
// is reused; test processes building at once take turns on a file lock. cacheDir "" is the
// user's cache folder (os.UserCacheDir) or, failing that, the temporary folder, as for
// BuildNATSServer.
func BuildStripeMock(cacheDir string) (string, error) {
	stripeMockBuild.once.Do(func() { stripeMockBuild.path, stripeMockBuild.err = buildStripeMock(cacheDir) })
	return stripeMockBuild.path, stripeMockBuild.err
}

func buildStripeMock(cacheDir string) (string, error) {
	if cacheDir == "" {
		if d, err := os.UserCacheDir(); err == nil {
			cacheDir = d
		} else {
			cacheDir = os.TempDir()
		}
	}
	dir := filepath.Join(cacheDir, "flashsale-testenv", "stripe-mock-"+StripeMockVersion)
	bin := filepath.Join(dir, "stripe-mock")
	built := func() bool {
		fi, err := os.Stat(bin)
		return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
	}
	if built() {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build stripe-mock: %w", err)
	}
	// One process builds, the others wait for it on the lock and then find the binary: go install
	// of the same module at once would download and build it twice, for nothing.
	lock, err := os.OpenFile(filepath.Join(dir, "build.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return "", fmt.Errorf("build stripe-mock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("build stripe-mock: lock: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if built() {
		return bin, nil
	}
	// Installed into a folder of its own and renamed, so that no process ever runs a
	// half-written binary.
	tmp, err := os.MkdirTemp(dir, "gobin-")
	if err != nil {
		return "", fmt.Errorf("build stripe-mock: %w", err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "install", StripeMockModule+"@"+StripeMockVersion)
	cmd.Dir = tmp // outside any module: go install mod@version ignores go.mod anyway
	cmd.Env = append(os.Environ(), "GOBIN="+tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %v\n%s", StripeMockModule, StripeMockVersion, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "stripe-mock"), bin); err != nil {
		return "", fmt.Errorf("build stripe-mock: %w", err)
	}
	return bin, nil
}

// stripeMock is the stripe-mock this process started, once, shared by its tests.
var stripeMock struct {
	sync.Mutex
	url  string
	dir  string // holds the log
	proc *process
	err  error // a failed start, given to every later caller
}

// StripeMock returns the base URL ("http://127.0.0.1:PORT", without /v1) of a stripe-mock started
// for this test process: built (BuildStripeMock) and started on the first call, shared by every
// test after it, stopped by Main at the end (and killed with the process in any case). A build
// or a start that fails fails the test: it is never skipped. stripe-mock keeps no state: a
// created object is not there to retrieve, and every answer is its fixture.
func StripeMock(t testing.TB) string {
	t.Helper()
	stripeMock.Lock()
	defer stripeMock.Unlock()
	if stripeMock.url == "" && stripeMock.err == nil {
		stripeMock.url, stripeMock.err = startStripeMock()
	}
	if stripeMock.err != nil {
		t.Fatalf("testenv: stripe-mock: %v", stripeMock.err)
	}
	return stripeMock.url
}

func startStripeMock() (string, error) {
	bin, err := BuildStripeMock("")
	if err != nil {
		return "", fmt.Errorf("%v\n(stripe-mock is built with `go install %s@%s`: it needs Go and the module proxy; `make deps-test` builds it ahead)",
			err, StripeMockModule, StripeMockVersion)
	}
	dir, err := os.MkdirTemp("", "flashsale-stripe-mock-"+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", err
	}
	stripeMock.dir = dir
	log := filepath.Join(dir, "stripe-mock.log")
	// Another process may take a chosen port before stripe-mock binds it: then try others.
	for attempt := 1; ; attempt++ {
		httpPort, err := freePort()
		if err != nil {
			return "", err
		}
		// stripe-mock opens an HTTPS port too (12112 by default, on every address): given one of
		// its own on loopback, so that two processes never clash on it.
		httpsPort, err := freePort()
		if err != nil {
			return "", err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort))
		p, err := spawn(log, dir, nil, bin,
			"-http-addr", addr, "-https-addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(httpsPort)))
		if err != nil {
			return "", err
		}
		err = waitStripeMock(p, addr)
		if err == nil {
			stripeMock.proc = p
			return "http://" + addr, nil
		}
		p.kill()
		if attempt == 3 || !strings.Contains(logTail(log), "address already in use") {
			return "", fmt.Errorf("on %s: %v\n%s", addr, err, logTail(log))
		}
	}
}

// waitStripeMock waits until stripe-mock answers HTTP at addr (any status: it answers 401 to a
// request without a key).
func waitStripeMock(p *process, addr string) error {
	c := http.Client{Timeout: time.Second}
	deadline := time.Now().Add(stripeMockStartTimeout)
	for {
		if p.exited() {
			return fmt.Errorf("exited: %v", p.err)
		}
		resp, err := c.Get("http://" + addr + "/v1/charges")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within %v: %v", stripeMockStartTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopStripeMock stops the stripe-mock this process started, if any, and removes its log.
func stopStripeMock() error {
	stripeMock.Lock()
	defer stripeMock.Unlock()
	if stripeMock.proc == nil {
		return nil
	}
	stripeMock.proc.cmd.Process.Signal(syscall.SIGTERM)
	err := stripeMock.proc.wait(10 * time.Second)
	stripeMock.proc, stripeMock.url = nil, ""
	if err != nil {
		return errors.Join(fmt.Errorf("stop stripe-mock: %v", err), os.RemoveAll(stripeMock.dir))
	}
	return os.RemoveAll(stripeMock.dir)
}
