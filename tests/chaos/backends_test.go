//go:build linux

package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// The suite's Redis and NATS are one server each (the default) or, with
// FLASHSALE_CHAOS_CLUSTER=1, a Redis Cluster of three masters and three replicas and a NATS
// cluster of three nodes (the orders stream R3). Every scenario runs the same code in both
// modes: it names a fault ("Redis restarted", "NATS paused") and the backend maps it onto its
// engine (RELIABILITY.md, "The suite on the clustered setup").

// clusterMode reports whether the suite runs against the clustered engines.
func clusterMode() bool { return os.Getenv("FLASHSALE_CHAOS_CLUSTER") == "1" }

// redisBackend is the scenario's Redis. Each fault method does its fault (and waits as long as
// the fault lasts) and returns what it did, for the table's "faults injected" cell.
type redisBackend interface {
	url() string // FLASHSALE_REDIS_URL of every instance and of the suite's own client
	// cutURL prepares a partition of one instance (scenario 17) and returns that instance's
	// FLASHSALE_REDIS_URL; cut isolates it (from what, and how, is returned), heal ends it.
	cutURL(t *testing.T) string
	cut(t *testing.T, saleID int64) (what, how string)
	heal(t *testing.T) error
	restart(t *testing.T, saleID int64) string                 // 05: a stop (one server) or a failover to a replica in sync (the cluster)
	rewind(t *testing.T, saleID int64, d time.Duration) string // 06: back in time by the last d of writes
	wipe(t *testing.T, saleID int64) string                    // 07: the sale's data gone entirely
	ensureUp(t *testing.T)                                     // the end of a scenario: whatever is down, started again
}

// natsBackend is the scenario's NATS.
type natsBackend interface {
	url() string                // FLASHSALE_NATS_URL
	env() map[string]string     // settings the instances need on top (the cluster's replicas, publish timeout)
	kill(t *testing.T) string   // 08: SIGKILL (the server, or the orders stream's leader); returns which
	restartKilled(t *testing.T) // 08: start what kill killed, on its store
	pause(t *testing.T) string  // 08b: SIGSTOP (the server, or the orders stream's leader); returns which
	resume(t *testing.T)        // 08b: SIGCONT
	ensureUp(t *testing.T)      // the end of a scenario: whatever is down started, whatever is stopped continued
	close()                     // kill everything (t.Cleanup)
	logTails() string           // for a failed scenario's log
	// Scenario 16: the store on a small tmpfs of its own (set up by newCluster, clusterOpts.natsDisk)
	onTmpfs() bool                      // false: not root, or the mount refused (a store limit instead)
	logLine(substr string) string       // the first line of the server logs containing substr, or ""
	freeDisk(t *testing.T, size string) // the tmpfs grown to size, the server(s) restarted on the store
}

// ---- one redis-server ----

// redisSingle is one redis-server with its append-only file (testenv.Redis).
type redisSingle struct {
	srv   *testenv.RedisServer
	proxy *tcpProxy // scenario 17: between instance 2 and Redis
}

func (r *redisSingle) url() string { return r.srv.URL() }

func (r *redisSingle) cutURL(t *testing.T) string {
	r.proxy = newProxy(t, r.srv.Addr)
	return r.proxy.url()
}

func (r *redisSingle) cut(t *testing.T, saleID int64) (string, string) {
	r.proxy.cut()
	return "Redis", "proxy closed"
}

func (r *redisSingle) heal(t *testing.T) error { return r.proxy.heal() }

func (r *redisSingle) restart(t *testing.T, saleID int64) string {
	r.srv.Stop(t)
	time.Sleep(time.Second)
	r.srv.Start(t)
	return "Redis SHUTDOWN (AOF flushed), down 1 s, restarted"
}

func (r *redisSingle) rewind(t *testing.T, saleID int64, d time.Duration) string {
	snapshot := r.srv.CopyData(t)
	time.Sleep(d)
	r.srv.Restore(t, snapshot)
	return fmt.Sprintf("Redis SIGKILL, restarted from its AOF as it was %s earlier", d)
}

func (r *redisSingle) wipe(t *testing.T, saleID int64) string {
	r.srv.Wipe(t)
	return "Redis SIGKILL, restarted with no data"
}

func (r *redisSingle) ensureUp(t *testing.T) {} // every scenario starts its Redis again itself

// ---- one nats-server ----

func (n *natsServer) env() map[string]string { return nil }

func (n *natsServer) kill(t *testing.T) string {
	n.proc.kill()
	return "nats-server"
}

func (n *natsServer) restartKilled(t *testing.T) { n.start(t) }

func (n *natsServer) pause(t *testing.T) string {
	n.proc.signal(syscall.SIGSTOP)
	return "nats-server"
}

func (n *natsServer) resume(t *testing.T) { n.proc.signal(syscall.SIGCONT) }

func (n *natsServer) ensureUp(t *testing.T) {
	switch {
	case n.proc.exited():
		n.start(t)
	case n.proc.stopped():
		n.proc.signal(syscall.SIGCONT)
	}
}

func (n *natsServer) close() {
	if n.proc != nil {
		n.proc.kill()
	}
}

func (n *natsServer) logTails() string { return logTail(filepath.Join(n.dir, "nats.log"), 15) }

func (n *natsServer) onTmpfs() bool { return n.tmpfs != "" }

func (n *natsServer) logLine(substr string) string {
	return firstLine(filepath.Join(n.dir, "nats.log"), substr)
}

func (n *natsServer) freeDisk(t *testing.T, size string) {
	if err := n.growTmpfs(size); err != nil {
		t.Fatalf("grow the tmpfs: %v", err)
	}
	n.proc.kill()
	n.start(t)
}

// firstLine is the first line of the file at path that contains substr, trimmed, or "".
func firstLine(path, substr string) string {
	b, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, substr) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// ---- a Redis Cluster: three masters, three replicas ----

// The Redis user of the instance scenario 17 cuts off: on the cluster the partition is between
// that instance and the sale's master only.
const cutUser, cutPassword = "chaos-cut", "chaos-cut-pw"

// redisCluster is a Redis Cluster of three masters, each with one replica
// (testenv.NewRedisCluster: cluster-node-timeout 1 s, appendfsync everysec). Its faults land on
// the master of the scenario sale's slot (every key of a sale is in one slot).
type redisCluster struct {
	cl      *testenv.RedisCluster
	cutNode *testenv.RedisClusterNode
}

func (r *redisCluster) url() string { return r.cl.URL() }

// masterOf is the node mastering the sale's slot now, and its replica.
func (r *redisCluster) masterOf(t *testing.T, saleID int64) (master, replica *testenv.RedisClusterNode) {
	t.Helper()
	ctx := context.Background()
	master = r.cl.MustMasterOf(t, store.MetaKey(saleID))
	reps, err := r.cl.ReplicasOf(ctx, master)
	if err != nil || len(reps) != 1 {
		t.Fatalf("replicas of the sale's master %s: %v (%v)", master.Addr, reps, err)
	}
	return master, reps[0]
}

// cutURL adds a Redis user of its own for the instance to every node (ACL SETUSER: per node,
// not replicated), and returns the cluster's URL with that user.
func (r *redisCluster) cutURL(t *testing.T) string {
	t.Helper()
	for _, n := range r.cl.Nodes {
		if _, err := n.Do(context.Background(), "acl", "setuser", cutUser, "reset", "on", ">"+cutPassword, "~*", "&*", "+@all"); err != nil {
			t.Fatalf("acl setuser on %s: %v", n.Addr, err)
		}
	}
	return strings.Replace(r.cl.URL(), "://", "://"+cutUser+":"+cutPassword+"@", 1)
}

// cut partitions the instance from the sale's master: its user is switched off on that node and
// its connections there are closed (CLIENT KILL USER), so every command and every new connection
// of that instance to the master fails, while the five other nodes (the slot map, the other
// slots) still answer it. (No iptables here to drop packets per port: the single-server mode's
// proxy cannot sit in front of one node either, since a cluster client dials the addresses the
// nodes announce.)
func (r *redisCluster) cut(t *testing.T, saleID int64) (string, string) {
	t.Helper()
	ctx := context.Background()
	m, _ := r.masterOf(t, saleID)
	if _, err := m.Do(ctx, "acl", "setuser", cutUser, "off"); err != nil {
		t.Fatalf("acl setuser off on %s: %v", m.Addr, err)
	}
	if _, err := m.Do(ctx, "client", "kill", "user", cutUser); err != nil {
		t.Fatalf("client kill user on %s: %v", m.Addr, err)
	}
	r.cutNode = m
	return "the sale's Redis master " + m.Addr, "its Redis user switched off on that node, its connections killed; the other five nodes reachable"
}

func (r *redisCluster) heal(t *testing.T) error {
	if r.cutNode == nil {
		return nil
	}
	_, err := r.cutNode.Do(context.Background(), "acl", "setuser", cutUser, "on")
	r.cutNode = nil
	return err
}

// restart (05): the sale's master is killed (SIGKILL); its replica, in sync, is promoted; the old
// master is started again on its files and comes back as the new master's replica.
func (r *redisCluster) restart(t *testing.T, saleID int64) string {
	t.Helper()
	m, _ := r.masterOf(t, saleID)
	killedAt := time.Now()
	r.cl.MustKill(t, m)
	heir := r.cl.MustWaitFailover(t, m)
	took := time.Since(killedAt)
	r.cl.MustRestart(t, m)
	return fmt.Sprintf("SIGKILL of the sale's master, its replica %s promoted after %.1f s, the old master restarted as its replica", heir.Addr, took.Seconds())
}

// rewind (06): what a cluster loses is what the replica had not received when its master died.
// As tests/rediscluster_test.go does, the loss is made certain: the replica is paused (SIGSTOP),
// a 24 MB filler written to its master fills the sockets between them, the rush goes on for d
// (every reservation of it acknowledged by the master only), then the master is killed, the
// replica continued and promoted without that last stretch of writes, and the old master
// restarted (it rejoins as a replica and resyncs, dropping what it had alone).
func (r *redisCluster) rewind(t *testing.T, saleID int64, d time.Duration) string {
	t.Helper()
	ctx := context.Background()
	m, replica := r.masterOf(t, saleID)
	filler := ""
	for i := 0; filler == ""; i++ {
		if k := fmt.Sprintf("chaos-filler:%d", i); r.cl.MustMasterOf(t, k) == m {
			filler = k
		}
	}
	if err := r.cl.Pause(replica); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Do(ctx, "set", filler, strings.Repeat("x", 24<<20)); err != nil {
		_ = r.cl.Resume(replica)
		t.Fatalf("filler on %s: %v", m.Addr, err)
	}
	time.Sleep(d)
	r.cl.MustKill(t, m)
	if err := r.cl.Resume(replica); err != nil {
		t.Fatal(err)
	}
	heir := r.cl.MustWaitFailover(t, m)
	if heir != replica {
		t.Fatalf("%s took over the sale's slot, want its replica %s", heir.Addr, replica.Addr)
	}
	if n, err := heir.Do(ctx, "strlen", filler); err != nil || n != int64(0) {
		t.Errorf("the promoted replica has the filler (%v bytes, %v): no write was lost", n, err)
	}
	r.cl.MustRestart(t, m)
	return fmt.Sprintf("the sale's replica SIGSTOPped behind a 24 MB filler, %.0f s of writes, the master SIGKILLed, the replica promoted without them", d.Seconds())
}

// wipe (07): the sale's whole shard loses its data: its replica and its master are killed
// (the replica first, so that nothing fails over), both append-only files deleted (the nodes
// files kept: they come back as the same master and replica of the same slots), and both
// started again, empty.
func (r *redisCluster) wipe(t *testing.T, saleID int64) string {
	t.Helper()
	ctx := context.Background()
	m, replica := r.masterOf(t, saleID)
	var dirs []string
	for _, n := range []*testenv.RedisClusterNode{m, replica} {
		v, err := n.Do(ctx, "config", "get", "dir")
		kv, _ := v.(map[any]any)
		dir, _ := kv["dir"].(string)
		if l, ok := v.([]any); ok && len(l) == 2 {
			dir, _ = l[1].(string)
		}
		if err != nil || dir == "" {
			t.Fatalf("config get dir on %s: %v %v", n.Addr, v, err)
		}
		dirs = append(dirs, dir)
	}
	r.cl.MustKill(t, replica)
	r.cl.MustKill(t, m)
	for _, dir := range dirs {
		if err := os.RemoveAll(filepath.Join(dir, "appendonlydir")); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.cl.Restart(m); err != nil {
		t.Fatal(err)
	}
	r.cl.MustRestart(t, replica)
	return "SIGKILL of the sale's replica and master, both restarted with no data (AOF deleted)"
}

func (r *redisCluster) ensureUp(t *testing.T) {
	t.Helper()
	down := false
	for _, n := range r.cl.Nodes {
		if !n.Running() {
			down = true
			if err := r.cl.Restart(n); err != nil {
				t.Fatal(err)
			}
		}
	}
	if down {
		if err := r.cl.WaitHealthy(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// ---- a NATS cluster of three nodes ----

// natsCluster is three nats-server processes (testenv.NATS), the orders stream and the writers'
// consumer with three replicas. Its faults land on the node leading the orders stream.
type natsCluster struct {
	cl     *testenv.NATSCluster
	target int      // the node kill killed, or pause stopped
	tmpfs  []string // scenario 16: each node's store, a tmpfs of its own
}

func (n *natsCluster) url() string { return n.cl.URLs() }

// env: three replicas; a publish waits through a leader election (4-9 s measured) rather than
// answering 503 at the first "no responders".
func (n *natsCluster) env() map[string]string {
	return map[string]string{"FLASHSALE_NATS_REPLICAS": "3", "FLASHSALE_PUBLISH_TIMEOUT": "12s"}
}

// leader is the index of the node leading the orders stream (asked until one leads, up to 15 s).
func (n *natsCluster) leader(t *testing.T) (int, string) {
	t.Helper()
	var name string
	i := testenv.EventuallyValue(t, 15*time.Second, "a leader of the orders stream", func() (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var err error
		name, err = n.cl.StreamLeader(ctx, store.OrdersStream)
		cancel()
		if node, i := n.cl.Node(name); err == nil && node != nil {
			return i, nil
		}
		return 0, fmt.Errorf("leader %q %v", name, err)
	})
	return i, name
}

func (n *natsCluster) kill(t *testing.T) string {
	i, name := n.leader(t)
	n.cl.KillT(t, i)
	n.target = i
	return "the orders stream's leader " + name
}

func (n *natsCluster) restartKilled(t *testing.T) { n.cl.RestartT(t, n.target) }

func (n *natsCluster) pause(t *testing.T) string {
	i, name := n.leader(t)
	if err := n.cl.Pause(i); err != nil {
		t.Fatal(err)
	}
	n.target = i
	return "the orders stream's leader " + name
}

func (n *natsCluster) resume(t *testing.T) {
	if err := n.cl.Resume(n.target); err != nil {
		t.Error(err)
	}
}

func (n *natsCluster) ensureUp(t *testing.T) {
	for i := range n.cl.Nodes {
		if !n.cl.Running(i) {
			n.cl.RestartT(t, i)
		} else {
			_ = n.cl.Resume(i) // SIGCONT: nothing to a running process
		}
	}
}

func (n *natsCluster) close() { n.cl.Stop() }

func (n *natsCluster) logTails() string {
	var b strings.Builder
	for _, node := range n.cl.Nodes {
		b.WriteString(logTail(node.Log, 10) + "\n")
	}
	return b.String()
}

// limitDisk (scenario 16) puts the JetStream store of the first node (n1) on a tmpfs of its own
// of size, with JetStream's own limit far above it, so that what runs out is that disk; as in the
// single-server mode it needs root, and falls back to max_file_store fallback on that node
// otherwise. One node, not three: with three replicas the stream needs a quorum of two, and the
// cluster's promise is that one node's trouble (a full disk here) does not stop it. (All three
// filled at once were tried: the streams' state files came back corrupt after space was freed and
// the streams' groups stayed unhealthy for more than 30 s: that is NATS losing its quorum's
// disks, the single-server scenario's case, not the cluster's.) The node is stopped, its store
// moved onto the tmpfs, its configuration given the limit, and it is started again, before any
// instance starts (its store holds only the cluster's meta state then).
func (n *natsCluster) limitDisk(t *testing.T, size, fallback string) {
	t.Helper()
	const i = 0
	node := n.cl.Nodes[i]
	n.cl.KillT(t, i)
	t.Cleanup(func() {
		n.cl.Stop()
		for _, dir := range n.tmpfs {
			if err := syscall.Unmount(dir, 0); err != nil {
				t.Errorf("nats store: umount %s: %v", dir, err)
				_ = syscall.Unmount(dir, syscall.MNT_DETACH)
			}
		}
	})
	js := filepath.Join(node.Dir, "js")
	if os.Geteuid() != 0 {
		t.Logf("nats store: not root, no tmpfs")
	} else {
		disk := js + ".disk"
		if err := os.Rename(js, disk); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(js, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", js, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size="+size); err != nil {
			t.Logf("nats store: mount tmpfs: %v", err)
			_ = os.Remove(js)
			if err := os.Rename(disk, js); err != nil {
				t.Fatal(err)
			}
		} else {
			n.tmpfs = append(n.tmpfs, js)
			if err := os.CopyFS(js, os.DirFS(disk)); err != nil {
				t.Fatalf("nats store onto its tmpfs: %v", err)
			}
			if err := os.RemoveAll(disk); err != nil {
				t.Fatal(err)
			}
		}
	}
	limit := "1GB" // far above the tmpfs: the disk, not JetStream's limit, runs out
	if len(n.tmpfs) == 0 {
		limit = fallback
	}
	conf := filepath.Join(node.Dir, "nats.conf")
	b, err := os.ReadFile(conf)
	if err != nil || !strings.Contains(string(b), "sync_interval: always") {
		t.Fatalf("nats %s: its configuration %s: %v", node.Name, conf, err)
	}
	b = []byte(strings.Replace(string(b), "sync_interval: always", "sync_interval: always\n  max_file_store: "+limit, 1))
	if err := os.WriteFile(conf, b, 0o644); err != nil {
		t.Fatal(err)
	}
	n.cl.RestartT(t, i)
}

// leadFromFullDisk (scenario 16) moves the orders stream's leadership to the node whose disk
// will fill (n1), so that the disk fills under the leader.
func (n *natsCluster) leadFromFullDisk(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.cl.MoveStreamLeader(ctx, store.OrdersStream, n.cl.Nodes[0].Name); err != nil {
		t.Fatal(err)
	}
}

func (n *natsCluster) onTmpfs() bool { return len(n.tmpfs) > 0 }

func (n *natsCluster) logLine(substr string) string {
	for _, node := range n.cl.Nodes {
		if line := firstLine(node.Log, substr); line != "" {
			return node.Name + ": " + line
		}
	}
	return ""
}

// freeDisk grows the full node's tmpfs and restarts that node on its store; it catches up with
// the other two.
func (n *natsCluster) freeDisk(t *testing.T, size string) {
	t.Helper()
	for _, dir := range n.tmpfs {
		if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT|syscall.MS_NOSUID|syscall.MS_NODEV, "size="+size); err != nil {
			t.Fatalf("grow the tmpfs %s: %v", dir, err)
		}
	}
	if n.cl.Running(0) {
		n.cl.KillT(t, 0)
	}
	n.cl.RestartT(t, 0)
}
