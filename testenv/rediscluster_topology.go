package testenv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

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
