package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flashsale/flashsale/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// devenv runs the command in-process and returns its exit status and output.
func devenv(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := run(args, &out, &out)
	return code, out.String()
}

// The local set: up starts both servers and the database, is idempotent, survives a kill -9 of
// each (stale pid files), drops only leftover test databases, and down stops both.
func TestLocalSetUpDown(t *testing.T) {
	if _, err := testenv.PGBinDir("15"); err != nil {
		t.Fatalf("%v", err)
	}
	data := filepath.Join(t.TempDir(), ".data")
	redisPort, pgPort := testenv.FreePort(t), testenv.FreePort(t)
	flags := []string{"-data", data, "-redis-port", strconv.Itoa(redisPort), "-pg-port", strconv.Itoa(pgPort), "-pg-version", "15", "-db", "devdb"}
	cmd := func(verb ...string) (int, string) { return devenv(t, append(flags, verb...)...) }
	t.Cleanup(func() {
		if code, out := cmd("down"); code != 0 {
			t.Errorf("down at cleanup: %d %s", code, out)
		}
	})
	if os.Geteuid() == 0 {
		// the postgres OS user must reach the data under the test's temp dir
		os.Chmod(filepath.Dir(data), 0o755)
	}

	checkUpTwice(t, cmd, redisPort)
	_, env := cmd("env")
	wantDSN := "postgres://postgres@127.0.0.1:" + strconv.Itoa(pgPort) + "/devdb?sslmode=disable"
	if !strings.Contains(env, "FLASHSALE_DATABASE_URL='"+wantDSN+"'") {
		t.Fatalf("env: %s", env)
	}
	ctx := context.Background()
	checkLocalEngines(t, ctx, wantDSN, redisPort)
	admin := "postgres://postgres@127.0.0.1:" + strconv.Itoa(pgPort) + "/postgres?sslmode=disable"
	checkDropDBs(t, ctx, cmd, admin)

	// kill -9 both: their pid files are stale; up starts them again on the same data.
	killLocalSet(t, data)
	code, out := cmd("status")
	if code != 3 {
		t.Fatalf("status after kill -9: %d %q, want 3", code, out)
	}
	if code, out = cmd("up"); code != 0 || strings.Contains(out, "running") || strings.Contains(out, "created") {
		t.Fatalf("up after kill -9: %d\n%s", code, out)
	}
	if created, err := testenv.CreateDatabase(ctx, admin, "t_keep"); err != nil || created {
		t.Fatalf("after the restart t_keep is gone (created %v, %v)", created, err)
	}

	if code, out = cmd("down"); code != 0 || !strings.Contains(out, "redis: stopped") || !strings.Contains(out, "postgres: stopped") {
		t.Fatalf("down: %d %q", code, out)
	}
	if code, out = cmd("down"); code != 0 || out != "" {
		t.Fatalf("down again: %d %q, want quiet", code, out)
	}
	if code, _ = cmd("status"); code != 3 {
		t.Fatalf("status after down: %d, want 3", code)
	}
}

// checkUpTwice: stopped before up; up creates the cluster, the database and Redis; up again
// finds both running and creates nothing; status says both run.
func checkUpTwice(t *testing.T, cmd func(verb ...string) (int, string), redisPort int) {
	t.Helper()
	if code, out := cmd("status"); code != 3 || !strings.Contains(out, "stopped") {
		t.Fatalf("status before up: %d %q, want 3 and stopped", code, out)
	}
	code, out := cmd("up")
	if code != 0 || !strings.Contains(out, "postgres: created the cluster") || !strings.Contains(out, "created database devdb") ||
		!strings.Contains(out, "redis: ready on 127.0.0.1:"+strconv.Itoa(redisPort)) {
		t.Fatalf("up: %d\n%s", code, out)
	}
	if code, out = cmd("up"); code != 0 || !strings.Contains(out, "redis: running (pid") || !strings.Contains(out, "postgres: running (pid") ||
		strings.Contains(out, "created") {
		t.Fatalf("up again: %d\n%s\nwant both running, nothing created", code, out)
	}
	if code, out = cmd("status"); code != 0 || strings.Count(out, "running (pid") != 2 {
		t.Fatalf("status: %d %q", code, out)
	}
}

// checkLocalEngines: the database up created runs with fsync on, and Redis answers.
func checkLocalEngines(t *testing.T, ctx context.Context, dsn string, redisPort int) {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to the database up created: %v", err)
	}
	var fsync string
	conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync)
	conn.Close(ctx)
	if fsync != "on" {
		t.Errorf("fsync = %q, want on", fsync)
	}
	if err := testenv.RedisCommand("127.0.0.1:"+strconv.Itoa(redisPort), "PING"); err != nil {
		t.Fatalf("redis: %v", err)
	}
}

// checkDropDBs: leftover test databases go; others stay.
func checkDropDBs(t *testing.T, ctx context.Context, cmd func(verb ...string) (int, string), admin string) {
	t.Helper()
	for _, db := range []string{"t_0123456789abcdef", "t_keep", "tkeep"} {
		if _, err := testenv.CreateDatabase(ctx, admin, db); err != nil {
			t.Fatal(err)
		}
	}
	if code, out := cmd("dropdbs"); code != 0 || !strings.Contains(out, "t_0123456789abcdef") || strings.Contains(out, "keep") {
		t.Fatalf("dropdbs: %d %q", code, out)
	}
	for db, want := range map[string]bool{"t_0123456789abcdef": false, "t_keep": true, "tkeep": true, "devdb": true, "template0": true} {
		created, err := testenv.CreateDatabase(ctx, admin, db)
		if err != nil && db != "template0" {
			t.Fatal(err)
		}
		if exists := !created; exists != want {
			t.Errorf("after dropdbs, %s exists = %v, want %v", db, exists, want)
		}
	}
}

// killLocalSet kills Redis and Postgres with -9, leaving their pid files stale, and waits up to
// 10 s each for them to be gone.
func killLocalSet(t *testing.T, data string) {
	t.Helper()
	for _, pidFile := range []string{filepath.Join(data, "redis", "redis.pid"), filepath.Join(data, "pg", "postmaster.pid")} {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
		syscall.Kill(pid, syscall.SIGKILL)
		deadline := time.Now().Add(10 * time.Second)
		for testenv.PIDAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// A port where another Redis answers is refused with what to set; an unknown set is refused.
func TestLocalSetRefuses(t *testing.T) {
	other := testenv.Redis(t)
	_, port, _ := strings.Cut(other.Addr, ":")
	data := filepath.Join(t.TempDir(), ".data")
	code, out := devenv(t, "-data", data, "-redis-port", port, "-pg-port", strconv.Itoa(testenv.FreePort(t)), "up")
	if code != 1 || !strings.Contains(out, "port "+port+" is taken by another Redis: set REDIS_PORT") {
		t.Fatalf("up on another Redis's port: %d %q", code, out)
	}
	if code, out = devenv(t, "-set", "nosuch", "up"); code != 2 || !strings.Contains(out, `no service set "nosuch"`) {
		t.Fatalf("-set nosuch: %d %q", code, out)
	}
	if code, out = devenv(t, "-data", data, "with"); code != 2 {
		t.Fatalf("with and no command: %d %q", code, out)
	}
}
