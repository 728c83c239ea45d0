package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RefuseNoReplicas: the master's min-replicas-to-write is set above the replicas it has, so every
// write answers "NOREPLICAS Not enough good replicas to write." while reads are served and the
// data kept. It is the refusal a Redis Cluster master can be made to give while it serves its
// slots in place of RefuseReadOnly: cluster mode refuses REPLICAOF ("ERR REPLICAOF not allowed in
// cluster mode"), and a master turned replica by a failover answers MOVED to its slots' new
// master, which a cluster client follows, never READONLY.
const RefuseNoReplicas Refusal = "noreplicas"

// refusalPrefix is the kind a refused write answers with.
var refusalPrefix = map[Refusal]string{RefuseOOM: "OOM", RefuseMISCONF: "MISCONF", RefuseReadOnly: "READONLY", RefuseNoReplicas: "NOREPLICAS"}

// Refuse makes the cluster node, a master, refuse writes as kind says (RefuseOOM, RefuseMISCONF
// as RedisRefuse does them on one server, or RefuseNoReplicas; RefuseReadOnly is an error, see
// RefuseNoReplicas) and returns the function that lifts the refusal (writes accepted again, the
// data untouched). It returns once a write to one of the node's slots is refused. The other nodes
// are left alone.
//
// RedisRefuse cannot be used on a cluster node as it is: its check writes one fixed key, which a
// node that does not serve that key's slot answers with MOVED.
func (c *RedisCluster) Refuse(ctx context.Context, node *RedisClusterNode, kind Refusal) (lift func() error, err error) {
	probe, err := c.keyServedBy(ctx, node)
	if err != nil {
		return nil, err
	}
	addr := node.Addr
	switch kind {
	case RefuseOOM:
		policy, err := configGet(addr, "maxmemory-policy")
		if err != nil {
			return nil, err
		}
		if err := redisDoAll(addr, []string{"CONFIG", "SET", "maxmemory-policy", "noeviction"}, []string{"CONFIG", "SET", "maxmemory", "1"}); err != nil {
			return nil, err
		}
		lift = func() error {
			return redisDoAll(addr, []string{"CONFIG", "SET", "maxmemory", "0"}, []string{"CONFIG", "SET", "maxmemory-policy", policy})
		}
	case RefuseMISCONF:
		// As RedisRefuse: the snapshot's final name a directory, a save point set, a snapshot
		// asked for; it fails to be moved into place and Redis refuses writes until lifted.
		final := filepath.Join(node.dir, "dump.rdb")
		if err := os.Mkdir(final, 0o755); err != nil {
			return nil, fmt.Errorf("a directory in place of the snapshot: %w", err)
		}
		if err := redisDoAll(addr, []string{"CONFIG", "SET", "save", "3600 1"}); err != nil {
			_ = os.Remove(final)
			return nil, err
		}
		lift = func() error {
			err := redisDoAll(addr, []string{"CONFIG", "SET", "save", ""})
			_ = os.RemoveAll(final)
			matches, _ := filepath.Glob(filepath.Join(node.dir, "temp-*.rdb"))
			for _, m := range matches {
				_ = os.Remove(m)
			}
			return err
		}
		if err := waitSnapshotFailed(addr); err != nil {
			_ = lift()
			return nil, err
		}
	case RefuseNoReplicas:
		old, err := configGet(addr, "min-replicas-to-write")
		if err != nil {
			return nil, err
		}
		info, err := redisDo(addr, "INFO", "replication")
		if err != nil {
			return nil, err
		}
		replicas, _ := strconv.Atoi(infoFields(info)["connected_slaves"])
		if err := redisDoAll(addr, []string{"CONFIG", "SET", "min-replicas-to-write", strconv.Itoa(replicas + 1)}); err != nil {
			return nil, err
		}
		lift = func() error { return redisDoAll(addr, []string{"CONFIG", "SET", "min-replicas-to-write", old}) }
	case RefuseReadOnly:
		return nil, fmt.Errorf("redis cluster node %s: a cluster node cannot be made read-only while it serves slots (cluster mode refuses REPLICAOF); RefuseNoReplicas is the refusal a master can give", addr)
	default:
		return nil, fmt.Errorf("unknown refusal %q", kind)
	}
	_, err = redisDo(addr, "SET", probe, "1")
	if want := refusalPrefix[kind]; err == nil || !strings.HasPrefix(err.Error(), want) {
		_ = lift()
		return nil, fmt.Errorf("redis cluster node %s: a write of %s after the %s refusal answered %v, want %s", addr, probe, kind, err, want)
	}
	return lift, nil
}

// MustRefuse is Refuse for a test: it fails the test on an error, and lifts the refusal when the
// test ends if the returned function was not called.
func (c *RedisCluster) MustRefuse(t testing.TB, node *RedisClusterNode, kind Refusal) (lift func()) {
	t.Helper()
	l, err := c.Refuse(context.Background(), node, kind)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	done := false
	lift = func() {
		if done {
			return
		}
		done = true
		if err := l(); err != nil {
			t.Fatalf("testenv: redis cluster node %s: lift %s: %v", node.Addr, kind, err)
		}
	}
	t.Cleanup(func() {
		if !done {
			done = true
			_ = l()
		}
	})
	return lift
}

// keyServedBy finds a key whose slot the master node serves now.
func (c *RedisCluster) keyServedBy(ctx context.Context, node *RedisClusterNode) (string, error) {
	view, err := node.view(ctx)
	if err != nil {
		return "", fmt.Errorf("redis cluster node %s: %w", node.Addr, err)
	}
	for i := range 100000 {
		key := fmt.Sprintf("testenv:refusal-probe:%d", i)
		if view.addrs[view.masterOf(KeySlot(key))] == node.Addr {
			return key, nil
		}
	}
	return "", fmt.Errorf("redis cluster node %s serves no slot", node.Addr)
}

// waitSnapshotFailed asks the Redis at addr for a snapshot until one has failed (a save in
// progress is waited for), up to 20 s.
func waitSnapshotFailed(addr string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := redisDo(addr, "BGSAVE"); err != nil && !strings.Contains(err.Error(), "in progress") {
			return err
		}
		time.Sleep(50 * time.Millisecond)
		info, _ := redisDo(addr, "INFO", "persistence")
		if strings.Contains(info, "rdb_last_bgsave_status:err") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis %s: the failing snapshot never failed", addr)
		}
	}
}
