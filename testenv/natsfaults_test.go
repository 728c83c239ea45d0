package testenv_test

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/testenv"
)

// Pause stops a node (it accepts TCP connections, the kernel does, but never answers the
// protocol's greeting), Resume continues it, and both are errors on a node that is down.
func TestNATSClusterPauseResume(t *testing.T) {
	t.Parallel()
	c := testenv.NATS(t, 3)
	greets := func() bool {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(c.Nodes[0].Port), time.Second)
		if err != nil {
			return false
		}
		defer conn.Close()
		conn.SetReadDeadline(time.Now().Add(time.Second))
		b := make([]byte, 4)
		n, _ := conn.Read(b)
		return strings.HasPrefix(string(b[:n]), "INFO")
	}
	if !greets() {
		t.Fatal("a running node does not greet a client with INFO")
	}
	if err := c.Pause(0); err != nil {
		t.Fatal(err)
	}
	if greets() {
		t.Error("a paused node greeted a client")
	}
	if err := c.Resume(0); err != nil {
		t.Fatal(err)
	}
	if !greets() {
		t.Error("a resumed node does not greet a client")
	}
	c.KillT(t, 1)
	if err := c.Pause(1); err == nil {
		t.Error("Pause of a killed node: no error")
	}
	if err := c.Resume(1); err == nil {
		t.Error("Resume of a killed node: no error")
	}
}
