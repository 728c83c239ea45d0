package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

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

// healthy is one look at the cluster: every running node's view agrees, every slot's master
// runs, and every running replica is in sync with its master.
func (c *RedisCluster) healthy(ctx context.Context) error {
	ref, err := c.agreedView(ctx)
	if err != nil {
		return err
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
		if err := replicaInSync(ctx, n, m); err != nil {
			return err
		}
	}
	return nil
}

// agreedView returns the topology every running node sees, each saying cluster_state:ok with
// every slot served, or why not.
func (c *RedisCluster) agreedView(ctx context.Context) (*topology, error) {
	var ref *topology
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		v, err := n.do(ctx, "cluster", "info")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.Addr, err)
		}
		info := infoFields(fmt.Sprint(v))
		if info["cluster_state"] != "ok" || info["cluster_slots_ok"] != "16384" {
			return nil, fmt.Errorf("%s: cluster_state %s, slots ok %s", n.Addr, info["cluster_state"], info["cluster_slots_ok"])
		}
		t, err := n.view(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n.Addr, err)
		}
		if ref == nil {
			ref = &t
			continue
		}
		if err := c.sameView(n, *ref, t); err != nil {
			return nil, err
		}
	}
	if ref == nil {
		return nil, errors.New("no node running")
	}
	return ref, nil
}

// sameView compares node n's view t with the first node's, ref: the same master for every
// slot range, the same role for every running node.
func (c *RedisCluster) sameView(n *RedisClusterNode, ref, t topology) error {
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
	return nil
}

// replicaInSync: replica n has its link to master m up and has caught up with m's offset.
func replicaInSync(ctx context.Context, n, m *RedisClusterNode) error {
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
