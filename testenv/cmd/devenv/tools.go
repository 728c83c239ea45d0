package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/flashsale/flashsale/testenv"
)

// A debPackage is a Debian package and how to tell it is installed.
type debPackage struct {
	name string
	has  func() bool
}

func hasCmd(names ...string) func() bool {
	return func() bool {
		for _, n := range names {
			if _, err := exec.LookPath(n); err == nil {
				return true
			}
			if _, err := os.Stat(filepath.Join("/usr/sbin", n)); err == nil {
				return true // not on a user's PATH
			}
		}
		return false
	}
}

// deps installs with apt-get the packages that are missing, and nothing when none is.
func deps(cfg *config, test, cluster bool, stdout, stderr io.Writer) error {
	pgBin := cfg.pgBin
	if pgBin == "" {
		pgBin = filepath.Join("/usr/lib/postgresql", cfg.pgVersion, "bin")
	}
	pkgs := []debPackage{ // what serving needs (make run)
		{"redis-server", hasCmd("redis-server")},
		{"redis-tools", hasCmd("redis-cli")},
		{"postgresql-" + cfg.pgVersion, func() bool { _, err := os.Stat(filepath.Join(pgBin, "initdb")); return err == nil }},
	}
	if cluster || test { // the proxy of make cluster, and of the caching proxy's test
		pkgs = append(pkgs, debPackage{"nginx-light", hasCmd("nginx")})
	}
	if test { // what the tests also need (make test, make chaos)
		pkgs = append(pkgs,
			debPackage{"chromium", hasCmd("chromium")},
			debPackage{"chromium-driver", hasCmd("chromedriver")},
		)
	}
	var missing []string
	for _, p := range pkgs {
		if !p.has() {
			missing = append(missing, p.name)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(stdout, "deps: installing %s\n", strings.Join(missing, " "))
		if err := aptInstall(stdout, stderr, missing...); err != nil {
			return fmt.Errorf("deps: apt-get install %s: %w", strings.Join(missing, " "), err)
		}
	}
	if test {
		// stripe-mock, the Stripe API of the payment tests: built with go install into the cache
		// folder the tests look in (testenv.StripeMock), so that the tests do not build it.
		bin, err := testenv.BuildStripeMock("")
		if err != nil {
			return fmt.Errorf("deps: stripe-mock: %w", err)
		}
		fmt.Fprintf(stdout, "deps: stripe-mock %s at %s\n", testenv.StripeMockVersion, bin)
	}
	if test && !hasChineseFont() {
		// A Chinese font makes the Chinese pages' screenshots readable; the tests pass without
		// one, so a machine that cannot install it only gets a warning.
		if err := aptInstall(stdout, stderr, "fonts-noto-cjk"); err != nil {
			fmt.Fprintln(stderr, "deps: no Chinese font (fonts-noto-cjk): the Chinese screenshots will show boxes")
		}
	}
	return nil
}

func hasChineseFont() bool {
	out, err := exec.Command("fc-list", ":lang=zh").Output()
	return err == nil && len(bytes.TrimSpace(out)) > 0
}

// aptLockWait is how long deps waits for another apt or dpkg process (an unattended upgrade, a
// browser being installed) to let go of the package lock before it gives up.
const aptLockWait = 5 * time.Minute

// aptInstall runs apt-get update and install (with sudo unless root), waiting up to aptLockWait
// for the package lock when another apt or dpkg process holds it.
func aptInstall(stdout, stderr io.Writer, pkgs ...string) error {
	var sudo []string
	if os.Geteuid() != 0 {
		sudo = []string{"sudo"}
	}
	apt := aptRunner{stdout: stdout, stderr: stderr, prefix: sudo, wait: aptLockWait, poll: 5 * time.Second}
	if err := apt.run("update", "-q"); err != nil {
		return err
	}
	return apt.run(append([]string{"install", "-y", "-q", "--no-upgrade"}, pkgs...)...)
}

// aptRunner runs apt-get; a run refused because another process holds the package lock is
// tried again every poll until wait has passed, saying so once.
type aptRunner struct {
	stdout, stderr io.Writer
	prefix         []string // sudo, when not root
	wait, poll     time.Duration
}

// aptLocked is what apt-get prints when another process holds one of its locks (the dpkg
// frontend lock, the dpkg lock, the lists' or the archives' lock).
var aptLocked = regexp.MustCompile(`Could not get lock|Unable to acquire the dpkg frontend lock|Unable to lock directory|is another process using it`)

func (a aptRunner) run(args ...string) error {
	// apt-get waits for the dpkg lock by itself for this long; the loop below covers the locks
	// it does not wait for (the lists' lock of apt-get update) and older apt versions.
	lockOpt := fmt.Sprintf("DPkg::Lock::Timeout=%d", int(a.wait.Seconds()))
	argv := append(append(append([]string(nil), a.prefix...), "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-o", lockOpt), args...)
	deadline := time.Now().Add(a.wait)
	said := false
	for {
		var errOut bytes.Buffer
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = a.stdout, io.MultiWriter(a.stderr, &errOut)
		err := cmd.Run()
		if err == nil || !aptLocked.Match(errOut.Bytes()) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: another apt or dpkg process held the package lock for %v; wait for it to finish (ps aux | grep -E 'apt|dpkg') and run make again", err, a.wait)
		}
		if !said {
			fmt.Fprintf(a.stdout, "deps: another apt or dpkg process holds the package lock; waiting up to %v for it (apt-get %s)\n", a.wait, args[0])
			said = true
		}
		time.Sleep(a.poll)
	}
}

// checkViews fails when the generated views differ from what is committed, or are not committed.
func checkViews(stdout io.Writer) error {
	if exec.Command("git", "rev-parse", "--is-inside-work-tree").Run() != nil {
		fmt.Fprintln(stdout, "checkviews: not a git checkout: nothing to compare with")
		return nil
	}
	diff := exec.Command("git", "diff", "--exit-code", "--", "views")
	diff.Stdout, diff.Stderr = stdout, os.Stderr
	if err := diff.Run(); err != nil {
		return errors.New("views/*_templ.go are stale: commit what go tool templ generate wrote")
	}
	out, err := exec.Command("git", "ls-files", "--others", "--exclude-standard", "--", "views").Output()
	if err != nil {
		return err
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		return fmt.Errorf("generated files not committed:\n%s", s)
	}
	return nil
}

// chaosLine is what the fault suite's verbose output shows on the terminal; the whole of it goes
// to the log.
var chaosLine = regexp.MustCompile(`^(=== RUN|\s*--- |ok|FAIL|PASS|panic)`)

// chaosArgs reads chaos's arguments: [-cluster] [WHICH].
func chaosArgs(args []string) (which string, cluster bool) {
	which = "all"
	for _, a := range args {
		switch {
		case a == "-cluster":
			cluster = true
		case a != "":
			which = a
		}
	}
	return which, cluster
}

// chaosEnv is the suite's environment: environ less the settings chaos decides, then
// FLASHSALE_CHAOS and, with cluster, FLASHSALE_CHAOS_CLUSTER=1 (the scenarios against the
// clustered setup, issue 12).
func chaosEnv(environ []string, which string, cluster bool) []string {
	env := []string{"FLASHSALE_CHAOS=" + which}
	if cluster {
		env = append(env, "FLASHSALE_CHAOS_CLUSTER=1")
	}
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "FLASHSALE_TEST_DATABASE_URL=") && !strings.HasPrefix(kv, "FLASHSALE_CHAOS=") &&
			!strings.HasPrefix(kv, "FLASHSALE_CHAOS_CLUSTER=") {
			env = append(env, kv)
		}
	}
	return env
}

// chaos runs the fault suite (RELIABILITY.md): each scenario starts its own redis-server,
// nats-server and three flashsale processes; Postgres is the set's when it answers (never stopped
// here), else a private throwaway cluster. The table goes to tests/chaos/out/latest.{md,json}
// (latest-cluster.{md,json} on the clustered setup) and is printed at the end.
func chaos(ctx context.Context, s *set, args []string, stdout io.Writer) error {
	which, cluster := chaosArgs(args)
	out := filepath.Join("tests", "chaos", "out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	// The suite writes the cluster's table under its own name (latest-cluster.md).
	table := "latest"
	if cluster {
		table = "latest-cluster"
	}
	for _, f := range []string{table + ".md", table + ".json"} {
		os.Remove(filepath.Join(out, f))
	}
	if cluster {
		fmt.Fprintln(stdout, "chaos: against the clustered setup (FLASHSALE_CHAOS_CLUSTER=1)")
	}
	env := chaosEnv(os.Environ(), which, cluster)
	if ping(ctx, s.adminDSN) == nil {
		env = append(env, "FLASHSALE_TEST_DATABASE_URL="+s.adminDSN)
	} else {
		fmt.Fprintln(stdout, "chaos: no Postgres of make services answers: the suite starts a private cluster")
	}
	logf, err := os.Create(filepath.Join(out, "run.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command("go", "test", "-count=1", "-timeout", "25m", "-run", "TestChaos", "-v", "./tests/chaos/")
	cmd.Env = env
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return err
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			fmt.Fprintln(logf, sc.Text())
			if chaosLine.MatchString(sc.Text()) {
				fmt.Fprintln(stdout, sc.Text())
			}
		}
		io.Copy(logf, pr)
	}()
	runErr := cmd.Wait()
	pw.Close()
	<-copied
	if b, err := os.ReadFile(filepath.Join(out, table+".md")); err == nil {
		stdout.Write(b)
	}
	if runErr != nil {
		return fmt.Errorf("chaos: failed (%v); the whole log is %s", runErr, filepath.Join(out, "run.log"))
	}
	return nil
}

// bench runs the benchmark tool (bench/, BENCHMARKS.md) against a flashsale it builds and starts
// on -bench-port with rate limits off and the test captcha, on the set's services (started and
// left running); a server already answering there is used as it is (and left running). Results
// go to bench-results/.
func bench(ctx context.Context, cfg *config, s *set, args []string, stdout io.Writer) error {
	if err := s.up(ctx, stdout); err != nil {
		return err
	}
	if err := os.MkdirAll("bench-results", 0o755); err != nil {
		return err
	}
	if len(args) == 0 {
		args = []string{"rush", "-runs", "3", "-json", "bench-results/latest.json"}
	}
	addr := fmt.Sprintf("127.0.0.1:%d", cfg.benchPort)
	env := s.environ("FLASHSALE_BENCH_URL=http://" + addr)
	if ready(addr) {
		fmt.Fprintf(stdout, "bench: using the server already on %s (it needs FLASHSALE_RATE_LIMITS=off, FLASHSALE_CAPTCHA=test)\n", addr)
	} else {
		build := exec.Command("go", "build", "-o", "bench-results/flashsale", ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		build.Stdout, build.Stderr = stdout, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("bench: build: %w", err)
		}
		stop, pid, err := startBenchServer(ctx, "bench-results/flashsale", addr, "bench-results/server.log", append(env, "FLASHSALE_ADDR="+addr,
			"FLASHSALE_DATA_DIR=bench-results/data"))
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer stop()
		fmt.Fprintf(stdout, "bench: started the server on %s (pid %d, log bench-results/server.log)\n", addr, pid)
	}
	cmd := exec.CommandContext(ctx, "go", append([]string{"run", "./bench"}, args...)...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, os.Stderr
	return cmd.Run()
}

// benchSettings are what a benchmarked server runs with (BENCHMARKS.md): no rate limits, the test
// captcha, purchase tokens that outlive a ladder's step, an embedded NATS on no client port, and
// only warnings logged.
var benchSettings = []string{"FLASHSALE_RATE_LIMITS=off", "FLASHSALE_CAPTCHA=test", "FLASHSALE_PURCHASE_TOKEN_TTL=2m",
	"FLASHSALE_NATS_PORT=-1", "FLASHSALE_LOG_LEVEL=warn"}

// startBenchServer starts bin serve with env and benchSettings, its output in logPath, and waits
// until it answers on addr; stop stops it (TERM, then KILL after 30 s).
func startBenchServer(ctx context.Context, bin, addr, logPath string, env []string) (stop func(), pid int, _ error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, 0, err
	}
	srv := exec.Command(bin, "serve")
	srv.Env = append(env, benchSettings...)
	srv.Stdout, srv.Stderr = logf, logf
	if err := srv.Start(); err != nil {
		logf.Close()
		return nil, 0, err
	}
	exited := make(chan struct{})
	go func() { srv.Wait(); logf.Close(); close(exited) }()
	stop = func() {
		srv.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			srv.Process.Kill()
			<-exited
		}
	}
	up := waitFor(ctx, time.Minute, func() bool {
		select {
		case <-exited:
			return true
		default:
			return ready(addr)
		}
	})
	if !up || !ready(addr) {
		stop()
		return nil, 0, fmt.Errorf("the server did not start\n%s", tail(logPath))
	}
	return stop, srv.Process.Pid, nil
}

// ready reports whether GET /readyz answers 200 at addr.
func ready(addr string) bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// dockerBuild is the Dockerfile's build command, which docker-check runs.
const dockerBuild = `CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /flashsale .`

// dockerCheck builds the binary exactly as the Dockerfile does, without a Docker engine: the same
// command, in a copy of the build context (the repository less what .dockerignore leaves out),
// with no GOFLAGS, and checks the result is static.
func dockerCheck(stdout io.Writer) error {
	df, err := os.ReadFile("Dockerfile")
	if err != nil {
		return err
	}
	if !bytes.Contains(df, []byte(dockerBuild)) {
		return fmt.Errorf("docker-check: the Dockerfile no longer runs: %s", dockerBuild)
	}
	tmp, err := os.MkdirTemp("", "docker-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "src")
	if err := copyBuildContext(src, dockerIgnored()); err != nil {
		return err
	}
	bin := filepath.Join(tmp, "flashsale")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	build.Stdout, build.Stderr = stdout, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("docker-check: build: %w", err)
	}
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		return err
	}
	if !bytes.Contains(info, []byte("CGO_ENABLED=0")) {
		return errors.New("docker-check: the binary is not static (no CGO_ENABLED=0 in its build info)")
	}
	fi, err := os.Stat(bin)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "docker-check: static binary built as in the Dockerfile (%.1f MiB)\n", float64(fi.Size())/(1<<20))
	return nil
}

// dockerIgnored is the patterns of .dockerignore (none without one), without their slashes.
func dockerIgnored() []string {
	var ignored []string
	if b, err := os.ReadFile(".dockerignore"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			ignored = append(ignored, strings.TrimSuffix(strings.TrimPrefix(l, "/"), "/"))
		}
	}
	return ignored
}

// copyBuildContext copies the working directory's top-level entries that no ignored pattern
// matches into a new folder src (cp -a).
func copyBuildContext(src string, ignored []string) error {
	if err := os.Mkdir(src, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		return err
	}
	cp := []string{"-a"}
next:
	for _, e := range entries {
		for _, pat := range ignored {
			if ok, _ := filepath.Match(pat, e.Name()); ok {
				continue next
			}
		}
		cp = append(cp, e.Name())
	}
	if out, err := exec.Command("cp", append(cp, src+"/")...).CombinedOutput(); err != nil {
		return fmt.Errorf("docker-check: copy the build context: %v\n%s", err, out)
	}
	return nil
}
