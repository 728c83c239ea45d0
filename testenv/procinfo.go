package testenv

// Process ids and free ports for commands outside the tests (devenv's cluster set prints what
// runs where, and checks that down leaves nothing running).

// FreeTCPPort returns a free TCP port on 127.0.0.1, as FreePort does, without a testing.TB.
func FreeTCPPort() (int, error) { return freePort() }

// PID is the node's redis-server process id (0 while it is not running).
func (n *RedisClusterNode) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil || n.proc.exited() {
		return 0
	}
	return n.proc.cmd.Process.Pid
}

// LogPath is the node's log file.
func (n *RedisClusterNode) LogPath() string { return n.log }

// PID is node i's nats-server process id (0 while it is not running).
func (c *NATSCluster) PID(i int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.Nodes[i].proc
	if p == nil || p.exited() {
		return 0
	}
	return p.cmd.Process.Pid
}

// PID is nginx's master process id (0 once it has exited).
func (n *NginxServer) PID() int {
	if n.proc == nil || n.proc.exited() {
		return 0
	}
	return n.proc.cmd.Process.Pid
}
