package testenv

import (
	"fmt"
	"syscall"
)

// Pause stops node i with SIGSTOP: it neither serves its clients nor answers its routes (a hung
// server, not a dead one) until Resume. The fault suite pauses the orders stream's leader.
func (c *NATSCluster) Pause(i int) error { return c.signal(i, syscall.SIGSTOP) }

// Resume continues node i after Pause.
func (c *NATSCluster) Resume(i int) error { return c.signal(i, syscall.SIGCONT) }

func (c *NATSCluster) signal(i int, sig syscall.Signal) error {
	c.mu.Lock()
	p := c.Nodes[i].proc
	c.mu.Unlock()
	if p == nil || p.exited() {
		return fmt.Errorf("nats %s: %v: not running", c.Nodes[i].Name, sig)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("nats %s: %v: %w", c.Nodes[i].Name, sig, err)
	}
	fmt.Fprintf(c.log, "nats %s: %v\n", c.Nodes[i].Name, sig)
	return nil
}

// RestartAll kills every node still running (SIGKILL) and starts all of them again at once on
// their stores, then waits until they are healthy and agree on a meta leader. A node restarted
// alone waits for a quorum of others: when every node must restart (each one's disk was full,
// say), they have to come back together.
func (c *NATSCluster) RestartAll() error {
	c.Stop()
	for _, node := range c.Nodes {
		if err := c.spawn(node); err != nil {
			return err
		}
	}
	_, err := c.WaitReady(natsStartTimeout)
	return err
}
