package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeAptGet puts on PATH an apt-get that fails with apt's lock message until the file free
// exists, counting its runs in the file runs, and succeeds after.
func fakeAptGet(t *testing.T) (dir string) {
	t.Helper()
	dir = t.TempDir()
	script := `#!/bin/sh
echo run >> "` + dir + `/runs"
echo "$@" >> "` + dir + `/args"
if [ ! -e "` + dir + `/free" ]; then
  echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (apt-get)" >&2
  echo "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?" >&2
  exit 100
fi
echo installed
`
	if err := os.WriteFile(filepath.Join(dir, "apt-get"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return dir
}

func runs(t *testing.T, dir string) int {
	b, _ := os.ReadFile(filepath.Join(dir, "runs"))
	return strings.Count(string(b), "run")
}

// A held lock is waited for, said once, and the install goes on when it is let go.
func TestAptWaitsForTheLock(t *testing.T) {
	dir := fakeAptGet(t)
	var out, errOut bytes.Buffer
	a := aptRunner{stdout: &out, stderr: &errOut, wait: 10 * time.Second, poll: 50 * time.Millisecond}
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = os.WriteFile(filepath.Join(dir, "free"), nil, 0o644)
	}()
	if err := a.run("install", "-y", "redis-server"); err != nil {
		t.Fatalf("apt-get after the lock was let go: %v\n%s", err, errOut.String())
	}
	if n := runs(t, dir); n < 2 {
		t.Errorf("apt-get ran %d times, want a retry after the lock message", n)
	}
	if c := strings.Count(out.String(), "holds the package lock; waiting up to 10s"); c != 1 {
		t.Errorf("said the wait %d times, want once: %q", c, out.String())
	}
	if !strings.Contains(out.String(), "installed") {
		t.Errorf("the install's own output is missing: %q", out.String())
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	if !strings.Contains(string(args), "-o DPkg::Lock::Timeout=10 install -y redis-server") {
		t.Errorf("apt-get's arguments %q: want dpkg's own lock timeout before the command", args)
	}
}

// A lock never let go ends in an error that says what held it up, after the wait.
func TestAptGivesUpOnAHeldLock(t *testing.T) {
	dir := fakeAptGet(t)
	var out, errOut bytes.Buffer
	a := aptRunner{stdout: &out, stderr: &errOut, wait: 300 * time.Millisecond, poll: 50 * time.Millisecond}
	start := time.Now()
	err := a.run("update", "-q")
	if err == nil || !strings.Contains(err.Error(), "another apt or dpkg process held the package lock for 300ms") {
		t.Fatalf("a lock never let go: %v, want an error naming the lock and the wait", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("gave up after %v, want the whole wait", d)
	}
	if n := runs(t, dir); n < 3 {
		t.Errorf("apt-get ran %d times in the wait, want retries", n)
	}
}

// Any other failure is not waited on.
func TestAptOtherFailureIsFinal(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "apt-get"), []byte("#!/bin/sh\necho 'E: Unable to locate package nosuch' >&2\nexit 100\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out, errOut bytes.Buffer
	a := aptRunner{stdout: &out, stderr: &errOut, wait: time.Minute, poll: time.Second}
	start := time.Now()
	if err := a.run("install", "nosuch"); err == nil {
		t.Fatal("a missing package: no error")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a missing package took %v: it was waited on", d)
	}
	if strings.Contains(out.String(), "waiting") {
		t.Errorf("said it waits for a lock on another failure: %q", out.String())
	}
}
