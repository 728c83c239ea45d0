package testenv_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flashsale/flashsale/testenv"
)

// The core of the NATS cluster: a real three-node cluster with a meta leader, clients fail over
// between its URLs, kill and restart keep a node's ports and store, and misuse is an error.
func TestNATSCluster(t *testing.T) {
	t.Parallel()
	var log bytes.Buffer
	c, err := testenv.StartNATSCluster(t.TempDir(), 3, &log)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if !strings.Contains(log.String(), "meta leader n") {
		t.Errorf("start log names no meta leader:\n%s", log.String())
	}
	if urls := strings.Split(c.URLs(), ","); len(urls) != 3 {
		t.Fatalf("URLs() = %q, want three", c.URLs())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	li := keptStream(t, ctx, c)
	// A follower is killed (the leader's death, and the election after it, is the subject of
	// tests/natscluster_test.go).
	oi := (li + 2) % 3
	if err := c.Kill(oi); err != nil {
		t.Fatal(err)
	}
	if c.Running(oi) {
		t.Errorf("node %s runs after Kill", c.Nodes[oi].Name)
	}
	if err := c.Kill(oi); err == nil {
		t.Errorf("Kill of a dead node: no error")
	}
	if err := c.Restart(oi); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(oi); err == nil {
		t.Errorf("Restart of a running node: no error")
	}
	if _, err := c.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	waitStreamKept(t, ctx, c)
	if _, err := testenv.StartNATSCluster(t.TempDir(), 0, nil); err == nil {
		t.Errorf("a cluster of no node: no error")
	}
}

// keptStream creates stream T (R3) with one message, moves its leader to the next node, and
// returns the index of the node that led it first.
func keptStream(t *testing.T, ctx context.Context, c *testenv.NATSCluster) int {
	t.Helper()
	nc, err := c.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "t", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	leader, err := c.StreamLeader(ctx, "T")
	if err != nil || leader == "" {
		t.Fatalf("stream leader: %q, %v", leader, err)
	}
	_, li := c.Node(leader)
	other := c.Nodes[(li+1)%3].Name
	if err := c.MoveStreamLeader(ctx, "T", other); err != nil {
		t.Fatal(err)
	}
	if got, err := c.StreamLeader(ctx, "T"); err != nil || got != other {
		t.Fatalf("after moving the leader to %s: %q, %v", other, got, err)
	}
	return li
}

// waitStreamKept waits for stream T to have a leader again and checks that the message
// acknowledged before the kill is still there.
func waitStreamKept(t *testing.T, ctx context.Context, c *testenv.NATSCluster) {
	t.Helper()
	for {
		qctx, qcancel := context.WithTimeout(ctx, time.Second)
		info, err := c.StreamInfo(qctx, "T")
		qcancel()
		if err == nil && info.Cluster != nil && info.Cluster.Leader != "" {
			if info.State.Msgs != 1 {
				t.Errorf("stream holds %d messages after the leader's kill, want 1", info.State.Msgs)
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("no stream leader after the restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
