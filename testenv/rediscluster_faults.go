package testenv

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"
)

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
