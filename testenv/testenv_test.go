package testenv_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestFreePort(t *testing.T) {
	t.Parallel()
	seen := map[int]bool{}
	for range 20 {
		port := testenv.FreePort(t)
		if seen[port] {
			t.Fatalf("FreePort returned %d twice", port)
		}
		seen[port] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatalf("listen on the free port %d: %v", port, err)
		}
		l.Close()
	}
}

// get reads key through a new client, so that no pooled connection from before a restart is used.
func get(t *testing.T, r *testenv.RedisServer, key string) (string, error) {
	t.Helper()
	opt, err := redis.ParseURL(r.URL())
	if err != nil {
		t.Fatalf("ParseURL(%q): %v", r.URL(), err)
	}
	if opt.Addr != r.Addr {
		t.Fatalf("URL %q has addr %q, want %q", r.URL(), opt.Addr, r.Addr)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	return rdb.Get(context.Background(), key).Result()
}

func TestRedisKillStartWipe(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := testenv.Redis(t)
	if !strings.HasPrefix(r.Addr, "127.0.0.1:") {
		t.Fatalf("Addr = %q, want 127.0.0.1:port", r.Addr)
	}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	if err := rdb.Set(ctx, "k", "before-kill", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	time.Sleep(1500 * time.Millisecond) // past one appendfsync everysec window

	r.Kill(t)
	if c, err := net.Dial("tcp", r.Addr); err == nil {
		c.Close()
		t.Fatal("the server still accepts connections after Kill")
	}
	r.Start(t)
	if got, err := get(t, r, "k"); err != nil || got != "before-kill" {
		t.Fatalf("after Kill and Start: GET k = %q, %v; want %q", got, err, "before-kill")
	}

	rdb2 := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb2.Close()
	if err := rdb2.Set(ctx, "k", "before-stop", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	r.Stop(t) // graceful: no wait needed, SHUTDOWN flushes the AOF
	r.Start(t)
	if got, err := get(t, r, "k"); err != nil || got != "before-stop" {
		t.Fatalf("after Stop and Start: GET k = %q, %v; want %q", got, err, "before-stop")
	}

	r.Wipe(t)
	if got, err := get(t, r, "k"); !errors.Is(err, redis.Nil) {
		t.Fatalf("after Wipe: GET k = %q, %v; want redis.Nil", got, err)
	}
}

func TestRedisServersAreIndependent(t *testing.T) {
	t.Parallel()
	a, b := testenv.Redis(t), testenv.Redis(t)
	if a.Addr == b.Addr {
		t.Fatalf("two servers on one address %s", a.Addr)
	}
	rdb := redis.NewClient(&redis.Options{Addr: a.Addr})
	defer rdb.Close()
	if err := rdb.Set(context.Background(), "only-a", "1", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if _, err := get(t, b, "only-a"); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET on the other server: %v, want redis.Nil", err)
	}
}

// connect opens a connection to dsn, closed at the end of the test.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return conn
}

// dbName returns the database a DSN names.
func dbName(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse %q: %v", dsn, err)
	}
	if got := u.Query().Get("sslmode"); got != "disable" {
		t.Errorf("DSN %q: sslmode = %q, want disable", dsn, got)
	}
	return strings.TrimPrefix(u.Path, "/")
}

func TestPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn1 := testenv.Postgres(t)
	conn1 := connect(t, dsn1)
	var current string
	if err := conn1.QueryRow(ctx, "SELECT current_database()").Scan(&current); err != nil {
		t.Fatalf("query: %v", err)
	}
	if want := dbName(t, dsn1); current != want || !strings.HasPrefix(current, "t_") {
		t.Fatalf("current_database() = %q, want %q starting with t_", current, want)
	}
	if _, err := conn1.Exec(ctx, "CREATE TABLE only_in_first (id int)"); err != nil {
		t.Fatalf("create table: %v", err)
	}

	var second string
	t.Run("second", func(t *testing.T) {
		dsn2 := testenv.Postgres(t)
		if second = dbName(t, dsn2); second == current {
			t.Fatalf("both tests got database %q", second)
		}
		conn2 := connect(t, dsn2)
		var tables int
		if err := conn2.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables); err != nil {
			t.Fatalf("query: %v", err)
		}
		if tables != 0 {
			t.Fatalf("new database has %d tables, want none", tables)
		}
	})

	var exists bool
	if err := conn1.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", second).Scan(&exists); err != nil {
		t.Fatalf("query: %v", err)
	}
	if exists {
		t.Fatalf("database %q still exists after its test's cleanup", second)
	}
}

func TestPostgresParallel(t *testing.T) {
	t.Parallel()
	for i := range 4 {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			conn := connect(t, testenv.Postgres(t))
			if _, err := conn.Exec(context.Background(), "CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)"); err != nil {
				t.Fatalf("exec: %v", err)
			}
		})
	}
}

// A private cluster crashed with pg_ctl stop -m immediate refuses connections, and started again
// on the same port keeps every committed row (crash recovery from its WAL).
func TestPrivatePostgresCrashRestart(t *testing.T) {
	t.Parallel()
	p := testenv.PrivatePostgres(t)
	ctx := context.Background()
	exec := func(sql string) error {
		conn, err := pgx.Connect(ctx, p.DSN())
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec(`CREATE TABLE t (v int); INSERT INTO t SELECT generate_series(1, 1000)`); err != nil {
		t.Fatal(err)
	}
	port := p.Port()
	p.Stop(t, "immediate")
	if p.Running() {
		t.Fatal("running after Stop")
	}
	if err := exec(`SELECT 1`); err == nil {
		t.Fatal("a crashed cluster answered")
	}
	p.Start(t)
	if p.Port() != port || !p.Running() {
		t.Fatalf("restarted on port %d (running %v), want %d", p.Port(), p.Running(), port)
	}
	conn, err := pgx.Connect(ctx, p.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 1000 {
		t.Fatalf("after the crash: %d rows (%v), want 1000", n, err)
	}
}
