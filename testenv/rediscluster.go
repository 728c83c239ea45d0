package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
	if opt.Masters < 3 {
		return nil, fmt.Errorf("redis cluster: %d masters: at least 3 are needed", opt.Masters)
	}
	if opt.Replicas < 0 {
		return nil, fmt.Errorf("redis cluster: %d replicas per master", opt.Replicas)
	}
	if opt.NodeTimeout <= 0 {
		opt.NodeTimeout = time.Second
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis cluster: redis-server not found (%v): install the Debian package redis-server", err)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redis cluster: redis-cli not found (%v): install the Debian package redis-tools", err)
	}
	c := &RedisCluster{dir: dir, opt: opt, cli: cli}
	ok := false
	defer func() {
		if !ok {
			c.Close()
		}
	}()
	n := opt.Masters * (1 + opt.Replicas)
	for i := range n {
		node := &RedisClusterNode{bin: bin, dir: filepath.Join(dir, fmt.Sprintf("node%d", i))}
		if err := os.MkdirAll(node.dir, 0o755); err != nil {
			return nil, fmt.Errorf("redis cluster: %w", err)
		}
		node.conf, node.log = filepath.Join(node.dir, "redis.conf"), filepath.Join(node.dir, "redis.log")
		c.Nodes = append(c.Nodes, node)
		if err := c.startNew(node); err != nil {
			return nil, err
		}
	}
	args := []string{"--cluster", "create"}
	for _, node := range c.Nodes {
		args = append(args, node.Addr)
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(opt.Replicas), "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, clusterWait)
	defer cancel()
	cmd := exec.CommandContext(cctx, cli, args...)
	out, err := cmd.CombinedOutput()
	fmt.Fprintf(opt.Log, "redis cluster: redis-cli %s\n%s", strings.Join(args, " "), out)
	if err != nil {
		return nil, fmt.Errorf("redis cluster: redis-cli --cluster create: %v\n%s", err, out)
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

// KeySlot is the cluster slot of key: CRC16 (XMODEM) of its hash tag, or of the whole key when it
// has none, modulo 16384.
func KeySlot(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	crc := uint16(0)
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// topology is one node's view: the master of each slot range, and each node's role.
type topology struct {
	ranges  []slotRange
	masters map[string]string // node id -> "" for a master, its master's id for a replica
	failed  map[string]bool   // node ids this view flags fail
	addrs   map[string]string // node id -> address
}

type slotRange struct {
	start, end int
	master     string // node id
}

func (t topology) masterOf(slot int) string {
	for _, r := range t.ranges {
		if slot >= r.start && slot <= r.end {
			return r.master
		}
	}
	return ""
}

// view reads CLUSTER NODES from one node.
func (n *RedisClusterNode) view(ctx context.Context) (topology, error) {
	v, err := n.do(ctx, "cluster", "nodes")
	if err != nil {
		return topology{}, err
	}
	t := topology{masters: map[string]string{}, failed: map[string]bool{}, addrs: map[string]string{}}
	for line := range strings.SplitSeq(strings.TrimSpace(fmt.Sprint(v)), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		id, addr, flags, master := f[0], f[1], f[2], f[3]
		if i := strings.IndexByte(addr, '@'); i >= 0 {
			addr = addr[:i]
		}
		t.addrs[id] = addr
		if strings.Contains(flags, "fail") && !strings.Contains(flags, "fail?") {
			t.failed[id] = true
		}
		if strings.Contains(flags, "master") {
			t.masters[id] = ""
		} else {
			t.masters[id] = master
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				continue // a slot being migrated
			}
			a, b, ok := strings.Cut(s, "-")
			if !ok {
				b = a
			}
			start, err1 := strconv.Atoi(a)
			end, err2 := strconv.Atoi(b)
			if err1 == nil && err2 == nil {
				t.ranges = append(t.ranges, slotRange{start, end, id})
			}
		}
	}
	return t, nil
}

// anyView reads the topology from the first running node that answers.
func (c *RedisCluster) anyView(ctx context.Context) (topology, error) {
	var last error = errors.New("no node running")
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		t, err := n.view(ctx)
		if err == nil {
			return t, nil
		}
		last = err
	}
	return topology{}, fmt.Errorf("redis cluster: topology: %w", last)
}

// MasterOf returns the node that masters key's slot, as a running node sees it now.
func (c *RedisCluster) MasterOf(ctx context.Context, key string) (*RedisClusterNode, error) {
	t, err := c.anyView(ctx)
	if err != nil {
		return nil, err
	}
	id := t.masterOf(KeySlot(key))
	if n := c.Node(t.addrs[id]); n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("redis cluster: no known master for slot %d of %q", KeySlot(key), key)
}

// ReplicasOf returns the nodes that replicate master, as a running node sees it now.
func (c *RedisCluster) ReplicasOf(ctx context.Context, master *RedisClusterNode) ([]*RedisClusterNode, error) {
	t, err := c.anyView(ctx)
	if err != nil {
		return nil, err
	}
	var out []*RedisClusterNode
	for id, m := range t.masters {
		if m == master.ID {
			if n := c.Node(t.addrs[id]); n != nil {
				out = append(out, n)
			}
		}
	}
	slices.SortFunc(out, func(a, b *RedisClusterNode) int { return strings.Compare(a.Addr, b.Addr) })
	return out, nil
}

// Kill kills node with SIGKILL, as a crash would (its append-only file keeps what was fsynced),
// and remembers the slots it served, for WaitFailover.
func (c *RedisCluster) Kill(ctx context.Context, node *RedisClusterNode) error {
	t, err := c.anyView(ctx)
	if err != nil {
		return err
	}
	var slots []int
	for _, r := range t.ranges {
		if r.master == node.ID {
			slots = append(slots, r.start)
		}
	}
	node.mu.Lock()
	defer node.mu.Unlock()
	if node.proc == nil {
		return fmt.Errorf("redis cluster node %s: not running", node.Addr)
	}
	node.proc.kill()
	node.proc = nil
	node.slots = slots
	fmt.Fprintf(c.opt.Log, "redis cluster: killed %s (%s, %d slot ranges)\n", node.Addr, node.ID, len(slots))
	return nil
}

// Pause stops node with SIGSTOP: it neither serves nor reads its replication stream until
// Resume. A replica paused while its master takes writes falls behind by what its socket
// buffers cannot hold: with the master then killed, a failover promotes it without those writes.
func (c *RedisCluster) Pause(node *RedisClusterNode) error { return node.signal(syscall.SIGSTOP) }

// Resume continues a node stopped by Pause.
func (c *RedisCluster) Resume(node *RedisClusterNode) error { return node.signal(syscall.SIGCONT) }

func (n *RedisClusterNode) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return fmt.Errorf("redis cluster node %s: not running", n.Addr)
	}
	if err := signalStop(n.proc.cmd.Process, sig); err != nil {
		return fmt.Errorf("redis cluster node %s: %v: %w", n.Addr, sig, err)
	}
	return nil
}

// Restart starts a killed node again on its ports and folder; it rejoins the cluster from its
// nodes file (a master failed over comes back as a replica of its successor). It waits until
// the node answers, not for the cluster: WaitHealthy does.
func (c *RedisCluster) Restart(node *RedisClusterNode) error {
	if err := node.start(); err != nil {
		return fmt.Errorf("redis cluster node %s: %v\n%s", node.Addr, err, logTail(node.log))
	}
	fmt.Fprintf(c.opt.Log, "redis cluster: restarted %s\n", node.Addr)
	return nil
}

// WaitFailover waits until the slots dead served when Kill killed it are served by a running
// node (a replica promoted), every running node agrees and the cluster is healthy (WaitHealthy),
// and returns the new master.
func (c *RedisCluster) WaitFailover(ctx context.Context, dead *RedisClusterNode) (*RedisClusterNode, error) {
	dead.mu.Lock()
	slots := slices.Clone(dead.slots)
	dead.mu.Unlock()
	if len(slots) == 0 {
		return nil, fmt.Errorf("redis cluster: %s served no slots when it was killed: nothing fails over", dead.Addr)
	}
	ctx, cancel := context.WithTimeout(ctx, clusterWait)
	defer cancel()
	var last error
	for {
		var heir *RedisClusterNode
		last = nil
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			t, err := n.view(ctx)
			if err != nil {
				last = fmt.Errorf("%s: %w", n.Addr, err)
				break
			}
			id := t.masterOf(slots[0])
			m := c.Node(t.addrs[id])
			switch {
			case m == nil || m == dead || !m.Running():
				last = fmt.Errorf("%s sees slot %d on %s", n.Addr, slots[0], t.addrs[id])
			case heir != nil && heir != m:
				last = fmt.Errorf("nodes disagree on slot %d: %s and %s", slots[0], heir.Addr, m.Addr)
			default:
				heir = m
			}
			if last != nil {
				break
			}
		}
		if last == nil && heir != nil {
			if err := c.WaitHealthy(ctx); err != nil {
				return nil, err
			}
			fmt.Fprintf(c.opt.Log, "redis cluster: %s took over from %s\n", heir.Addr, dead.Addr)
			return heir, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("redis cluster: no failover of %s: %v", dead.Addr, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitHealthy waits until every running node says cluster_state:ok with every slot served,
// all of them agree on who masters each slot, every such master runs, and every running replica
// has its link up and has caught up with its master's replication offset.
func (c *RedisCluster) WaitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, clusterWait)
	defer cancel()
	for {
		err := c.healthy(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redis cluster: not healthy after %v: %w", clusterWait, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *RedisCluster) healthy(ctx context.Context) error {
	var ref *topology
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		v, err := n.do(ctx, "cluster", "info")
		if err != nil {
			return fmt.Errorf("%s: %w", n.Addr, err)
		}
		info := infoFields(fmt.Sprint(v))
		if info["cluster_state"] != "ok" || info["cluster_slots_ok"] != "16384" {
			return fmt.Errorf("%s: cluster_state %s, slots ok %s", n.Addr, info["cluster_state"], info["cluster_slots_ok"])
		}
		t, err := n.view(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", n.Addr, err)
		}
		if ref == nil {
			ref = &t
			continue
		}
		for _, r := range ref.ranges {
			if got := t.masterOf(r.start); got != r.master {
				return fmt.Errorf("%s sees slot %d on %s, another node on %s", n.Addr, r.start, got, r.master)
			}
		}
		for id, m := range ref.masters {
			if node := c.Node(ref.addrs[id]); node != nil && node.Running() && t.masters[id] != m {
				return fmt.Errorf("%s and another node disagree on the role of %s", n.Addr, ref.addrs[id])
			}
		}
	}
	if ref == nil {
		return errors.New("no node running")
	}
	for _, r := range ref.ranges {
		if m := c.Node(ref.addrs[r.master]); m == nil || !m.Running() {
			return fmt.Errorf("slot %d is on %s, which is down", r.start, ref.addrs[r.master])
		}
	}
	for id, master := range ref.masters {
		n := c.Node(ref.addrs[id])
		if master == "" || n == nil || !n.Running() {
			continue
		}
		m := c.Node(ref.addrs[master])
		if m == nil || !m.Running() {
			return fmt.Errorf("replica %s follows %s, which is down", n.Addr, ref.addrs[master])
		}
		mv, err := m.do(ctx, "info", "replication")
		if err != nil {
			return fmt.Errorf("%s: %w", m.Addr, err)
		}
		rv, err := n.do(ctx, "info", "replication")
		if err != nil {
			return fmt.Errorf("%s: %w", n.Addr, err)
		}
		mi, ri := infoFields(fmt.Sprint(mv)), infoFields(fmt.Sprint(rv))
		if ri["master_link_status"] != "up" || ri["master_port"] != strconv.Itoa(portOf(m.Addr)) {
			return fmt.Errorf("replica %s: link to %s %s", n.Addr, ri["master_port"], ri["master_link_status"])
		}
		if ri["slave_repl_offset"] != mi["master_repl_offset"] {
			return fmt.Errorf("replica %s at offset %s, its master %s at %s", n.Addr, ri["slave_repl_offset"], m.Addr, mi["master_repl_offset"])
		}
	}
	return nil
}

// infoFields parses an INFO or CLUSTER INFO reply.
func infoFields(s string) map[string]string {
	out := map[string]string{}
	for line := range strings.SplitSeq(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out
}

func portOf(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
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
