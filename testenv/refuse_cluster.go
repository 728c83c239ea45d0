package testenv

import (
	"context"
	"fmt"
	"testing"
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
	if kind == RefuseReadOnly {
		return nil, fmt.Errorf("redis cluster node %s: a cluster node cannot be made read-only while it serves slots (cluster mode refuses REPLICAOF); RefuseNoReplicas is the refusal a master can give", node.Addr)
	}
	return refuseAt(node.Addr, node.dir, kind, probe)
}

// MustRefuse is Refuse for a test: it fails the test on an error, and lifts the refusal when the
// test ends if the returned function was not called.
func (c *RedisCluster) MustRefuse(t testing.TB, node *RedisClusterNode, kind Refusal) (lift func()) {
	t.Helper()
	l, err := c.Refuse(context.Background(), node, kind)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return mustLift(t, fmt.Sprintf("redis cluster node %s: %s", node.Addr, kind), l)
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
