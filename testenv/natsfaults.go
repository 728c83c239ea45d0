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
	if err := signalStop(p.cmd.Process, sig); err != nil {
		return fmt.Errorf("nats %s: %v: %w", c.Nodes[i].Name, sig, err)
	}
	fmt.Fprintf(c.log, "nats %s: %v\n", c.Nodes[i].Name, sig)
	return nil
}
