package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/flashsale/flashsale/testenv"
)

// The cluster set's Redis: a Redis Cluster, or one redis-server with -engines single.

// redisClusterService is the Redis Cluster; with single (-engines single), one redis-server
// instead (AOF, appendfsync everysec, as each cluster node).
type redisClusterService struct {
	dir    string
	single bool
	c      *testenv.RedisCluster
	node   *testenv.RedisNode // single
}

func (r *redisClusterService) Name() string { return "redis cluster" }

func (r *redisClusterService) Up(ctx context.Context, out io.Writer) error {
	// A node's nodes.conf names the ports of the last start: the cluster is created afresh.
	if err := os.RemoveAll(r.dir); err != nil {
		return err
	}
	if r.single {
		bin, err := exec.LookPath("redis-server")
		if err != nil {
			return fmt.Errorf("redis-server not found (%v): run make deps", err)
		}
		port, err := testenv.FreeTCPPort()
		if err != nil {
			return err
		}
		r.node = &testenv.RedisNode{Bin: bin, Dir: r.dir, Port: port}
		if err := r.node.Start(); err != nil {
			r.node = nil
			return err
		}
		fmt.Fprintf(out, "redis: one redis-server at %s (-engines single)\n", r.node.URL())
		return nil
	}
	c, err := testenv.StartRedisCluster(ctx, r.dir, testenv.RedisClusterOptions{
		Masters: 3, Replicas: 1,
		// A master silent this long is failed over: longer than the tests' 1 s, so that a
		// loaded machine (a benchmark on two cores) does not fail one over by mistake.
		NodeTimeout: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	r.c = c
	fmt.Fprintf(out, "redis cluster: 3 masters, 3 replicas at %s\n", c.URL())
	return nil
}

func (r *redisClusterService) Down(out io.Writer) error {
	if r.node != nil {
		err := r.node.Stop()
		r.node = nil
		fmt.Fprintln(out, "redis: stopped")
		return err
	}
	if r.c == nil {
		return nil
	}
	r.c.Close()
	r.c = nil
	fmt.Fprintln(out, "redis cluster: stopped")
	return nil
}

func (r *redisClusterService) Status() (bool, string) {
	if r.c == nil && r.node == nil {
		return false, "stopped"
	}
	return true, "running at " + r.URL()
}

// URL is FLASHSALE_REDIS_URL for the instances.
func (r *redisClusterService) URL() string {
	if r.node != nil {
		return r.node.URL()
	}
	return r.c.URL()
}

func (r *redisClusterService) Env() []string { return []string{"FLASHSALE_REDIS_URL=" + r.URL()} }

func (r *redisClusterService) Rows() []row {
	if r.node != nil {
		pid, _ := r.node.RunningPID()
		return []row{{"redis", r.node.Addr(), pid, r.node.LogPath()}}
	}
	var rows []row
	for i, n := range r.c.Nodes {
		role := "?"
		if v, err := n.Do(context.Background(), "role"); err == nil {
			if a, ok := v.([]any); ok && len(a) > 0 {
				role = strings.Replace(fmt.Sprint(a[0]), "slave", "replica", 1)
			}
		}
		rows = append(rows, row{fmt.Sprintf("redis %d (%s)", i+1, role), n.Addr, n.PID(), n.LogPath()})
	}
	return rows
}
