package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/flashsale/flashsale/testenv"
)

// The cluster set's NATS: a JetStream cluster, or one nats-server with -engines single.

type natsClusterService struct {
	dir   string
	nodes int // 3, or 1 with -engines single: one nats-server outside any cluster
	c     *testenv.NATSCluster
	one   *natsSingle
}

// natsSingle is one standalone nats-server with JetStream (sync_interval: always), for
// -engines single: a cluster of one would wait for routes to peers that do not exist.
type natsSingle struct {
	port, http int
	log        string
	cmd        *exec.Cmd
	done       chan struct{}
}

func startNATSSingle(dir string) (*natsSingle, error) {
	bin, err := testenv.BuildNATSServer("")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	n := &natsSingle{log: filepath.Join(dir, "nats.log")}
	for _, p := range []*int{&n.port, &n.http} {
		if *p, err = testenv.FreeTCPPort(); err != nil {
			return nil, err
		}
	}
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "server_name: n1\nlisten: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\njetstream {\n  store_dir: %q\n  sync_interval: always\n}\n",
		n.port, n.http, filepath.Join(dir, "js")), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	n.cmd = exec.Command(bin, "-c", conf)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	if err := testenv.StartCmd(n.cmd); err != nil {
		return nil, err
	}
	n.done = make(chan struct{})
	go func() { n.cmd.Wait(); close(n.done) }()
	healthy := func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", n.http))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	if !waitFor(context.Background(), 30*time.Second, healthy) {
		n.stop()
		return nil, fmt.Errorf("nats-server not healthy\n%s", tail(n.log))
	}
	return n, nil
}

func (n *natsSingle) url() string { return "nats://127.0.0.1:" + strconv.Itoa(n.port) }

func (n *natsSingle) stop() {
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(10 * time.Second):
		n.cmd.Process.Kill()
		<-n.done
	}
}

// URLs is FLASHSALE_NATS_URL for the instances.
func (n *natsClusterService) URLs() string {
	if n.one != nil {
		return n.one.url()
	}
	return n.c.URLs()
}

func (n *natsClusterService) Name() string { return "nats cluster" }

func (n *natsClusterService) Up(ctx context.Context, out io.Writer) error {
	if n.nodes == 1 {
		one, err := startNATSSingle(n.dir)
		if err != nil {
			return err
		}
		n.one = one
		fmt.Fprintf(out, "nats: one nats-server with JetStream at %s (-engines single)\n", one.url())
		return nil
	}
	fmt.Fprintf(out, "nats cluster: building nats-server (once per version) and starting %d node(s)\n", n.nodes)
	c, err := testenv.StartNATSCluster(n.dir, n.nodes, nil)
	if err != nil {
		return err
	}
	n.c = c
	fmt.Fprintf(out, "nats cluster: %d node(s) with JetStream at %s\n", n.nodes, c.URLs())
	return nil
}

func (n *natsClusterService) Down(out io.Writer) error {
	if n.one != nil {
		n.one.stop()
		n.one = nil
		fmt.Fprintln(out, "nats: stopped")
		return nil
	}
	if n.c == nil {
		return nil
	}
	n.c.Stop()
	n.c = nil
	fmt.Fprintln(out, "nats cluster: stopped")
	return nil
}

func (n *natsClusterService) Status() (bool, string) {
	if n.c == nil && n.one == nil {
		return false, "stopped"
	}
	return true, "running at " + n.URLs()
}

func (n *natsClusterService) Env() []string { return []string{"FLASHSALE_NATS_URL=" + n.URLs()} }

func (n *natsClusterService) Rows() []row {
	if n.one != nil {
		return []row{{"nats", fmt.Sprintf("%s (monitor :%d)", n.one.url(), n.one.http), n.one.cmd.Process.Pid, n.one.log}}
	}
	var rows []row
	for i, node := range n.c.Nodes {
		rows = append(rows, row{"nats " + node.Name, fmt.Sprintf("%s (monitor :%d)", node.URL(), node.HTTPPort), n.c.PID(i), node.Log})
	}
	return rows
}
