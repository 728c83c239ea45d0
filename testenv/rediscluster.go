package testenv

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisClusterOptions shape a local Redis Cluster.
type RedisClusterOptions struct {
	Masters  int // masters (at least 3, as Redis Cluster needs for a failover vote)
	Replicas int // replicas of each master
	// NodeTimeout is cluster-node-timeout: how long a master may not answer before it is
	// failed over (0: 1s, quick enough for tests).
	NodeTimeout time.Duration
	// Log receives progress lines and redis-cli's output (nil: discarded). Each node writes its
	// own log in its folder.
	Log io.Writer
}

// RedisClusterNode is one redis-server process of a RedisCluster.
type RedisClusterNode struct {
	Addr    string // "127.0.0.1:port", kept across restarts
	ID      string // the cluster node id (kept in its nodes file across restarts)
	BusPort int

	bin, dir, conf, log string

	mu    sync.Mutex
	proc  *process // nil while killed
	slots []int    // the first slot of each range it served when it was killed as a master
}

// RedisCluster is a local Redis Cluster of redis-server processes on free loopback ports, each
// with its folder (config, nodes file, append-only file, log) under one directory. Its core
// functions return errors and take no testing.TB, so a command outside the tests can run one
// (on Linux the processes get SIGKILL when the process that started them exits, as every server
// of this package: such a command stays in the foreground while the cluster serves);
// NewRedisCluster and the Must* methods are the tests' wrappers.
type RedisCluster struct {
	Nodes []*RedisClusterNode

	dir string
	opt RedisClusterOptions
	cli string
}

// clusterWait bounds each wait of the cluster's setup and of a failover.
const clusterWait = 60 * time.Second

// StartRedisCluster starts opt.Masters*(1+opt.Replicas) redis-server processes in dir
// (cluster-enabled, appendonly yes, appendfsync everysec), joins them with
// `redis-cli --cluster create ... --cluster-replicas R --cluster-yes`, and waits until every node
// says cluster_state:ok and every replica is in sync with its master. On error nothing is left
// running.
func StartRedisCluster(ctx context.Context, dir string, opt RedisClusterOptions) (*RedisCluster, error) {
	opt, bin, cli, err := clusterSetup(opt)
	if err != nil {
		return nil, err
	}
	c := &RedisCluster{dir: dir, opt: opt, cli: cli}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	if err := c.startNodes(bin); err != nil {
		return nil, err
	}
	if err := c.create(ctx); err != nil {
		return nil, err
	}
	for _, node := range c.Nodes {
		id, err := node.do(ctx, "cluster", "myid")
		if err != nil {
			return nil, fmt.Errorf("redis cluster: %s: CLUSTER MYID: %w", node.Addr, err)
		}
		node.ID = fmt.Sprint(id)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(opt.Log, "redis cluster: %d masters, %d replicas each, ready at %s\n", opt.Masters, opt.Replicas, c.URL())
	ok = true
	return c, nil
}

// clusterSetup checks the options, fills in their defaults and finds redis-server and redis-cli.
func clusterSetup(opt RedisClusterOptions) (_ RedisClusterOptions, bin, cli string, err error) {
	if opt.Masters < 3 {
		return opt, "", "", fmt.Errorf("redis cluster: %d masters: at least 3 are needed", opt.Masters)
	}
	if opt.Replicas < 0 {
		return opt, "", "", fmt.Errorf("redis cluster: %d replicas per master", opt.Replicas)
	}
	if opt.NodeTimeout <= 0 {
		opt.NodeTimeout = time.Second
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	bin, err = exec.LookPath("redis-server")
	if err != nil {
		return opt, "", "", fmt.Errorf("redis cluster: redis-server not found (%v): install the Debian package redis-server", err)
	}
	cli, err = exec.LookPath("redis-cli")
	if err != nil {
		return opt, "", "", fmt.Errorf("redis cluster: redis-cli not found (%v): install the Debian package redis-tools", err)
	}
	return opt, bin, cli, nil
}

// startNodes starts the cluster's Masters*(1+Replicas) nodes, each in its folder nodeN.
func (c *RedisCluster) startNodes(bin string) error {
	n := c.opt.Masters * (1 + c.opt.Replicas)
	for i := range n {
		node := &RedisClusterNode{bin: bin, dir: filepath.Join(c.dir, fmt.Sprintf("node%d", i))}
		if err := os.MkdirAll(node.dir, 0o755); err != nil {
			return fmt.Errorf("redis cluster: %w", err)
		}
		node.conf, node.log = filepath.Join(node.dir, "redis.conf"), filepath.Join(node.dir, "redis.log")
		c.Nodes = append(c.Nodes, node)
		if err := c.startNew(node); err != nil {
			return err
		}
	}
	return nil
}

// create joins the nodes with redis-cli --cluster create, logging its output.
func (c *RedisCluster) create(ctx context.Context) error {
	args := []string{"--cluster", "create"}
	for _, node := range c.Nodes {
		args = append(args, node.Addr)
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(c.opt.Replicas), "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, clusterWait)
	defer cancel()
	cmd := exec.CommandContext(cctx, c.cli, args...)
	out, err := cmd.CombinedOutput()
	fmt.Fprintf(c.opt.Log, "redis cluster: redis-cli %s\n%s", strings.Join(args, " "), out)
	if err != nil {
		return fmt.Errorf("redis cluster: redis-cli --cluster create: %v\n%s", err, out)
	}
	return nil
}

// startNew picks free ports for a node, writes its config and starts it, trying other ports
// when another process took one first.
func (c *RedisCluster) startNew(node *RedisClusterNode) error {
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return fmt.Errorf("redis cluster: %w", err)
		}
		bus, err := freePort()
		if err != nil {
			return fmt.Errorf("redis cluster: %w", err)
		}
		node.Addr, node.BusPort = net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), bus
		conf := fmt.Sprintf(`bind 127.0.0.1
port %d
cluster-enabled yes
cluster-port %d
cluster-config-file nodes.conf
cluster-node-timeout %d
cluster-replica-validity-factor 0
cluster-require-full-coverage no
dir %q
appendonly yes
appendfsync everysec
save ""
daemonize no
logfile ""
enable-debug-command local
`, port, bus, c.opt.NodeTimeout.Milliseconds(), node.dir)
		if err := os.WriteFile(node.conf, []byte(conf), 0o644); err != nil {
			return fmt.Errorf("redis cluster: %w", err)
		}
		err = node.start()
		if err == nil {
			return nil
		}
		if attempt == 3 || !strings.Contains(logTail(node.log), "Address already in use") {
			return fmt.Errorf("redis cluster: node %s: %v\n%s", node.Addr, err, logTail(node.log))
		}
	}
}

// start runs the node's redis-server and waits until it answers PING.
func (n *RedisClusterNode) start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		return fmt.Errorf("redis cluster node %s: already running", n.Addr)
	}
	p, err := spawn(n.log, n.dir, nil, n.bin, n.conf)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(redisStartTimeout)
	for {
		if p.exited() {
			return fmt.Errorf("redis-server exited at start: %v", p.err)
		}
		if _, err := n.do(context.Background(), "ping"); err == nil {
			n.proc = p
			return nil
		}
		if time.Now().After(deadline) {
			p.kill()
			return fmt.Errorf("redis-server not answering PING after %v", redisStartTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Running reports whether the node's process runs.
func (n *RedisClusterNode) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc != nil
}

// Do sends one command to this node only (no redirection) and returns its reply.
func (n *RedisClusterNode) Do(ctx context.Context, args ...any) (any, error) {
	return n.do(ctx, args...)
}

func (n *RedisClusterNode) do(ctx context.Context, args ...any) (any, error) {
	rdb := redisAt(n.Addr)
	defer rdb.Close()
	return rdb.Do(ctx, args...).Result()
}

// redisAt is a one-shot client of the Redis at addr alone: one connection, no retries, no
// cluster redirection. Close it after use.
func redisAt(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: 5 * time.Second,
		WriteTimeout: time.Second, MaxRetries: -1, PoolSize: 1})
}

// Close kills every node (SIGKILL: nothing of the cluster is kept) and waits for them to exit.
func (c *RedisCluster) Close() {
	for _, n := range c.Nodes {
		n.mu.Lock()
		if n.proc != nil {
			n.proc.kill()
			n.proc = nil
		}
		n.mu.Unlock()
	}
}

// URL is the cluster's URL for FLASHSALE_REDIS_URL: every node as a seed,
// redis-cluster://127.0.0.1:p1,127.0.0.1:p2,...
func (c *RedisCluster) URL() string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr
	}
	return "redis-cluster://" + strings.Join(addrs, ",")
}

// Node returns the node listening on addr, or nil.
func (c *RedisCluster) Node(addr string) *RedisClusterNode {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// NewRedisCluster starts a local Redis Cluster of masters × (1 + replicas) nodes for the test
// (StartRedisCluster in t.TempDir(), logging to the test log) and stops it in t.Cleanup.
func NewRedisCluster(t testing.TB, masters, replicas int) *RedisCluster {
	t.Helper()
	c, err := StartRedisCluster(context.Background(), t.TempDir(), RedisClusterOptions{
		Masters: masters, Replicas: replicas, Log: tbWriter{t}})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// MustMasterOf is MasterOf for a test.
func (c *RedisCluster) MustMasterOf(t testing.TB, key string) *RedisClusterNode {
	t.Helper()
	n, err := c.MasterOf(context.Background(), key)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return n
}

// MustKill is Kill for a test.
func (c *RedisCluster) MustKill(t testing.TB, n *RedisClusterNode) {
	t.Helper()
	if err := c.Kill(context.Background(), n); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// MustRestart restarts a killed node and waits until the cluster is healthy again.
func (c *RedisCluster) MustRestart(t testing.TB, n *RedisClusterNode) {
	t.Helper()
	if err := c.Restart(n); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if err := c.WaitHealthy(context.Background()); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// MustWaitFailover is WaitFailover for a test.
func (c *RedisCluster) MustWaitFailover(t testing.TB, dead *RedisClusterNode) *RedisClusterNode {
	t.Helper()
	n, err := c.WaitFailover(context.Background(), dead)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return n
}

// tbWriter writes to the test log, a line per Write.
type tbWriter struct{ t testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
