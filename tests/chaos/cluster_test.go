//go:build linux

// Package chaos is the fault suite (RELIABILITY.md): three flashsale processes, a standalone
// nats-server process, one redis-server with an append-only file and one Postgres database, and
// real signals (SIGKILL, SIGSTOP) at named steps of a purchase. With FLASHSALE_CHAOS_CLUSTER=1
// the same scenarios run against a Redis Cluster and a NATS cluster (backends_test.go).
package chaos

import (
	"bytes"
	"context"
	"fmt"
	"gorm.io/gorm"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// binaries are the programs TestChaos built for its scenarios (in its temporary folder).
var binaries struct {
	flashsale string
	nats      string
}

// buildBinaries builds the flashsale binary and a standalone nats-server into dir.
func buildBinaries(t *testing.T, dir string) {
	t.Helper()
	binaries.flashsale = filepath.Join(dir, "flashsale")
	binaries.nats = filepath.Join(dir, "nats-server")
	for _, b := range [][2]string{
		{binaries.flashsale, "github.com/flashsale/flashsale"},
		{binaries.nats, "github.com/nats-io/nats-server/v2"},
	} {
		out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput()
		if err != nil {
			t.Fatalf("go build %s: %v\n%s", b[1], err, out)
		}
	}
}

// instance is one flashsale process.
type instance struct {
	idx         int
	port        int
	metricsPort int
	dataDir     string
	log         string
	env         map[string]string // this instance's own settings on top of the cluster's
	proc        *proc
}

func (in *instance) url() string { return "http://127.0.0.1:" + strconv.Itoa(in.port) }

// cluster is one scenario's world.
type cluster struct {
	t       *testing.T
	dir     string
	bin     string
	redis   redisBackend       // one redis-server, or a Redis Cluster (FLASHSALE_CHAOS_CLUSTER=1)
	pg      *testenv.PGCluster // with clusterOpts.privatePG: the scenario's own Postgres cluster
	dsn     string
	nats    natsBackend // one nats-server (*natsServer), or a NATS cluster
	inst    []*instance
	env     map[string]string // settings of every instance
	rdb     redis.UniversalClient
	db      *store.DB
	sql     *gorm.DB // the scenario's own look at Postgres (testenv.SQL)
	client  *http.Client
	started time.Time
}

type clusterOpts struct {
	env       map[string]string   // on top of the defaults, for every instance
	instEnv   []map[string]string // per instance, on top of env
	faults    map[int]string      // FLASHSALE_FAULT of an instance's first start only (a restart is clean)
	natsMax   string              // JetStream max_file_store
	natsDisk  string              // the NATS store on a tmpfs of this size (root only; "" = the ordinary disk)
	privatePG bool                // a private Postgres cluster (c.pg) the scenario may crash and restart
	partition bool                // instance 2 reaches Redis in a way the test can cut (c.redis.cut)
	serial    bool                // start the instances one after another (the first takes the lease)
}

func newCluster(t *testing.T, o clusterOpts) *cluster {
	t.Helper()
	bin := binaries.flashsale
	if bin == "" {
		t.Fatal("the binaries are not built (TestChaos builds them)")
	}
	// A shopper's request is given up after 10 s; on the cluster after 20 s, since a publish may
	// wait out FLASHSALE_PUBLISH_TIMEOUT (12 s there, longer than a NATS election) before its 503.
	// Given up after 10 s, such a request would count as unanswered, and its shopper's retry
	// would meet the reservation still in flight (409) instead of the 503.
	timeout := 10 * time.Second
	if clusterMode() {
		timeout = 20 * time.Second
	}
	c := &cluster{t: t, dir: t.TempDir(), bin: bin, started: time.Now(),
		client: &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 128}}}
	if o.privatePG {
		c.pg = testenv.PrivatePostgres(t)
		c.dsn = c.pg.DSN()
	} else {
		c.dsn = testenv.Postgres(t)
	}
	c.startBackends(o)
	c.env = map[string]string{
		"FLASHSALE_DATABASE_URL":       c.dsn,
		"FLASHSALE_REDIS_URL":          c.redis.url(),
		"FLASHSALE_NATS_URL":           c.nats.url(),
		"FLASHSALE_RATE_LIMITS":        "off",
		"FLASHSALE_CAPTCHA":            "test",
		"FLASHSALE_LOG_LEVEL":          "warn",
		"FLASHSALE_PUBLISH_TIMEOUT":    "2s",
		"FLASHSALE_ORPHAN_AGE":         "6s",
		"FLASHSALE_KEEPER_INTERVAL":    "250ms",
		"FLASHSALE_RECONCILE_INTERVAL": "1s",
		"FLASHSALE_PURCHASE_TOKEN_TTL": "1m",
		"FLASHSALE_DB_MAX_CONNS":       "8",
		"FLASHSALE_REDIS_POOL":         "64",
	}
	for k, v := range c.nats.env() {
		c.env[k] = v
	}
	for k, v := range o.env {
		c.env[k] = v
	}
	c.addInstances(o)
	c.cleanUpAtTheEnd()
	c.startAll(o)
	c.openClients()
	return c
}

// addInstances makes the three instances (not started), each with its own ports, data directory,
// log and settings; with clusterOpts.partition instance 2 reaches Redis through the cut.
func (c *cluster) addInstances(o clusterOpts) {
	t := c.t
	cutURL := ""
	if o.partition {
		cutURL = c.redis.cutURL(t)
	}
	for i := range 3 {
		in := &instance{idx: i, port: testenv.FreePort(t), metricsPort: testenv.FreePort(t), dataDir: filepath.Join(c.dir, fmt.Sprintf("i%d", i)),
			log: filepath.Join(c.dir, fmt.Sprintf("i%d.log", i)), env: map[string]string{}}
		if i < len(o.instEnv) {
			for k, v := range o.instEnv[i] {
				in.env[k] = v
			}
		}
		if o.partition && i == 2 {
			in.env["FLASHSALE_REDIS_URL"] = cutURL
		}
		c.inst = append(c.inst, in)
	}
}

// startBackends starts the scenario's Redis and NATS: a Redis Cluster and a NATS cluster on the
// clustered setup, else one redis-server and one nats-server of its own.
func (c *cluster) startBackends(o clusterOpts) {
	t := c.t
	t.Helper()
	natsBin := binaries.nats
	if clusterMode() {
		c.redis = &redisCluster{cl: testenv.NewRedisCluster(t, 3, 1)}
		nc := &natsCluster{cl: testenv.NATS(t, 3)}
		if o.natsDisk != "" {
			nc.limitDisk(t, o.natsDisk, o.natsMax)
		}
		c.nats = nc
	} else {
		c.redis = &redisSingle{srv: testenv.Redis(t)}
		ns := &natsServer{port: testenv.FreePort(t), dir: filepath.Join(c.dir, "nats"), bin: natsBin}
		if o.natsDisk == "" {
			ns.maxFile = o.natsMax
		}
		if err := os.MkdirAll(ns.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		ns.conf = filepath.Join(ns.dir, "nats.conf")
		if o.natsDisk != "" && !ns.mountTmpfs(t, o.natsDisk) {
			ns.maxFile = o.natsMax // no tmpfs here: the store limit instead
		} else if o.natsDisk != "" {
			ns.maxFile = "1GB" // far above the tmpfs: the disk, not JetStream's limit, runs out
		}
		ns.start(t)
		c.nats = ns
	}
}

// cleanUpAtTheEnd kills the instances and closes the backends and clients when the test ends,
// logging their last lines if it failed.
func (c *cluster) cleanUpAtTheEnd() {
	t := c.t
	t.Cleanup(func() {
		for _, in := range c.inst {
			if in.proc != nil {
				in.proc.kill()
			}
		}
		c.nats.close()
		if c.rdb != nil {
			c.rdb.Close()
		}
		if c.db != nil {
			c.db.Close()
		}
		if t.Failed() {
			for _, in := range c.inst {
				t.Log(logTail(in.log, 30))
			}
			t.Log(c.nats.logTails())
		}
	})
}

// startAll starts the three instances, each with its fault of clusterOpts for the first start:
// the first alone (it applies the migrations), the others together, or one after another
// (clusterOpts.serial).
func (c *cluster) startAll(o clusterOpts) {
	c.t.Helper()
	// The first instance applies the migrations alone; the others start together.
	first := func(i int) map[string]string {
		if f, ok := o.faults[i]; ok {
			return map[string]string{"FLASHSALE_FAULT": f}
		}
		return nil
	}
	c.start(0, first(0))
	c.waitReady(0)
	if o.serial {
		c.start(1, first(1))
		c.waitReady(1)
		c.start(2, first(2))
		c.waitReady(2)
	} else {
		c.start(1, first(1))
		c.start(2, first(2))
		c.waitReady(1)
		c.waitReady(2)
	}
}

// openClients opens the scenario's own Redis and Postgres clients (c.rdb, c.db).
func (c *cluster) openClients() {
	t := c.t
	var err error
	ctx := context.Background()
	if c.rdb, err = store.OpenRedis(ctx, c.redis.url(), 8); err != nil {
		t.Fatal(err)
	}
	if c.db, err = store.OpenDB(ctx, c.dsn, 4); err != nil {
		t.Fatal(err)
	}
	c.sql = testenv.SQL(t, c.dsn)
}

// environ is the process environment of instance i (nil: the cluster's tool commands) with
// extra settings on top.
func (c *cluster) environ(i int, extra map[string]string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	m := map[string]string{}
	for k, v := range c.env {
		m[k] = v
	}
	if i >= 0 {
		in := c.inst[i]
		m["FLASHSALE_ADDR"] = "127.0.0.1:" + strconv.Itoa(in.port)
		m["FLASHSALE_DATA_DIR"] = in.dataDir
		m["FLASHSALE_METRICS_ADDR"] = "127.0.0.1:" + strconv.Itoa(in.metricsPort)
		for k, v := range in.env {
			m[k] = v
		}
	}
	for k, v := range extra {
		m[k] = v
	}
	for k, v := range m {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// start starts instance i (again), with extra settings for this run only (a fault, say).
func (c *cluster) start(i int, extra map[string]string) {
	c.t.Helper()
	in := c.inst[i]
	if in.proc != nil && !in.proc.exited() {
		c.t.Fatalf("instance %d is running", i)
	}
	if err := os.MkdirAll(in.dataDir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	in.proc = startProc(c.t, fmt.Sprintf("flashsale-%d", i), in.log, c.environ(i, extra), c.bin, "serve")
}

// waitStopped waits up to 30 s, looking every interval, for instance i to stop itself (SIGSTOP,
// as a ":stop@n" fault does); what names the awaited state in the failure.
func (c *cluster) waitStopped(t *testing.T, i int, interval time.Duration, what string) {
	t.Helper()
	p := c.inst[i].proc
	testenv.EventuallyEvery(t, 30*time.Second, interval, what, func() error {
		if p.exited() {
			t.Fatalf("%s: it exited instead", what)
		}
		return testenv.Until(p.stopped, "still running")()
	})
}

// waitReady waits for GET /readyz to answer 200.
func (c *cluster) waitReady(i int) {
	c.t.Helper()
	in := c.inst[i]
	err := testenv.Poll(60*time.Second, 100*time.Millisecond, func() error {
		resp, err := c.client.Get(in.url() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz answers %d", resp.StatusCode)
		}
		if in.proc.exited() {
			c.t.Fatalf("instance %d exited at start (%v)\n%s", i, in.proc.state, logTail(in.log, 30))
		}
		return err
	})
	if err != nil {
		c.t.Fatalf("instance %d not ready: %v\n%s", i, err, logTail(in.log, 30))
	}
}

// restart starts every instance that is not running (a stopped one is continued) and waits until
// all answer ready.
func (c *cluster) restartDown() (restarted int) {
	c.t.Helper()
	if c.pg != nil && !c.pg.Running() {
		c.pg.Start(c.t)
	}
	c.redis.ensureUp(c.t)
	c.nats.ensureUp(c.t)
	for i, in := range c.inst {
		switch {
		case in.proc.exited():
			c.start(i, nil)
			restarted++
		case in.proc.stopped():
			in.proc.signal(syscall.SIGCONT)
		}
	}
	for i := range c.inst {
		c.waitReady(i)
	}
	return restarted
}

// waitExit waits up to d for instance i to exit, and reports whether it did.
func (c *cluster) waitExit(i int, d time.Duration) bool {
	select {
	case <-c.inst[i].proc.done:
		return true
	case <-time.After(d):
		return false
	}
}

// tool runs a flashsale command (reconcile, token) with the cluster's settings.
func (c *cluster) tool(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = c.environ(-1, nil)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.String(), err
}

// waitSettled waits until the sale is loaded in Redis and not marked lost (a rebuild after a
// Redis loss takes a few seconds) and no reservation of the sale is in flight (orphans go back
// after FLASHSALE_ORPHAN_AGE), up to d.
func (c *cluster) waitSettled(saleID int64, d time.Duration) error {
	ctx := context.Background()
	return testenv.Poll(d, 200*time.Millisecond, func() error {
		meta, merr := c.rdb.HGetAll(ctx, store.MetaKey(saleID)).Result()
		n, err := c.rdb.HLen(ctx, store.InFlightKey(saleID)).Result()
		loaded := merr == nil && len(meta) > 0 && meta["lost"] != "1"
		if err == nil && n == 0 && loaded {
			return nil
		}
		return fmt.Errorf("%d reservations still in flight (err %v), sale loaded in redis: %v", n, err, loaded)
	})
}

// merchantToken makes a merchant's identity token with the binary's own command.
func (c *cluster) merchantToken() string {
	c.t.Helper()
	out, err := c.tool("token", "-user", "9000", "-role", "merchant")
	if err != nil {
		c.t.Fatalf("flashsale token: %v\n%s", err, out)
	}
	return strings.TrimSpace(out)
}

// secret is the instances' JWT secret (the development default: FLASHSALE_ENV is development).
var secret = []byte(app.DevJWTSecret)

// redelivered sums the writers' count of orders they found already written (a message delivered
// again), from each running instance's /metrics.
func (c *cluster) redelivered() int {
	total := 0
	for _, in := range c.inst {
		resp, err := c.client.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", in.metricsPort))
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, `flashsale_writer_orders_total{result="redelivered"} `); ok {
				f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
				total += int(f)
			}
		}
	}
	return total
}
