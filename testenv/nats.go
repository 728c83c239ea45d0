package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsServerModule is the module the standalone nats-server is built from: the same version as
// the one go.mod pins for the embedded server.
const natsServerModule = "github.com/nats-io/nats-server/v2"

// natsStartTimeout bounds a node's start, including JetStream catching up after a restart.
const natsStartTimeout = 30 * time.Second

var natsBuild struct {
	once sync.Once
	path string
	err  error
}

// BuildNATSServer builds the nats-server of go.mod's version (go build -o DIR/nats-server
// github.com/nats-io/nats-server/v2) into a cache folder under cacheDir, once per process, and
// returns its path. A binary already built for that version is reused. cacheDir "" is the
// user's cache folder (os.UserCacheDir) or, failing that, the temporary folder.
func BuildNATSServer(cacheDir string) (string, error) {
	natsBuild.once.Do(func() { natsBuild.path, natsBuild.err = buildNATSServer(cacheDir) })
	return natsBuild.path, natsBuild.err
}

func buildNATSServer(cacheDir string) (string, error) {
	if cacheDir == "" {
		if d, err := os.UserCacheDir(); err == nil {
			cacheDir = d
		} else {
			cacheDir = os.TempDir()
		}
	}
	version := natsServerVersion()
	dir := filepath.Join(cacheDir, "flashsale-testenv", "nats-server-"+version)
	bin := filepath.Join(dir, "nats-server")
	if version != "unknown" {
		if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return bin, nil
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build nats-server: %w", err)
	}
	// Built under a name of its own and renamed, so two processes building at once never run a
	// half-written binary.
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	out, err := exec.Command("go", "build", "-o", tmp, natsServerModule).CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("go build %s: %v\n%s", natsServerModule, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("build nats-server: %w", err)
	}
	return bin, nil
}

// natsServerVersion is the nats-server module version this binary was built with (go.mod's).
func natsServerVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == natsServerModule {
				if d.Replace != nil {
					return "unknown" // a local replacement: always rebuilt
				}
				return d.Version
			}
		}
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", natsServerModule).Output()
	if v := strings.TrimSpace(string(out)); err == nil && v != "" {
		return v
	}
	return "unknown"
}

// NATSNode is one nats-server process of a NATSCluster.
type NATSNode struct {
	Name        string // server_name: n1, n2, …
	Port        int    // client port on 127.0.0.1
	ClusterPort int    // route port on 127.0.0.1
	HTTPPort    int    // monitoring port on 127.0.0.1 (/healthz, /jsz)
	Dir         string // config, log and JetStream store (Dir/js)
	Log         string // the server's output

	conf string
	proc *process // nil while down
}

// URL is the node's client URL.
func (n *NATSNode) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(n.Port) }

// NATSCluster is a real NATS cluster of nats-server processes on loopback: JetStream on every
// node with fsync on every write (sync_interval: always), each node its own store, routes between
// all of them.
type NATSCluster struct {
	Name  string
	Nodes []*NATSNode

	bin string
	log io.Writer
	mu  sync.Mutex
}

// StartNATSCluster builds nats-server (BuildNATSServer) and starts a cluster of n nodes with
// their files under dir, writing what it does to log (nil: nowhere), and waits until every node is
// healthy and JetStream has elected its meta leader. Stop it with Stop.
func StartNATSCluster(dir string, n int, log io.Writer) (*NATSCluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("nats cluster: want at least one node, got %d", n)
	}
	if log == nil {
		log = io.Discard
	}
	bin, err := BuildNATSServer("")
	if err != nil {
		return nil, err
	}
	c := &NATSCluster{Name: "flashsale", bin: bin, log: log}
	if err := c.layOut(dir, n); err != nil {
		return nil, err
	}
	if err := c.writeConfigs(); err != nil {
		return nil, err
	}
	for _, node := range c.Nodes {
		if err := c.spawn(node); err != nil {
			c.Stop()
			return nil, err
		}
	}
	leader, err := c.WaitReady(natsStartTimeout)
	if err != nil {
		c.Stop()
		return nil, err
	}
	fmt.Fprintf(log, "nats cluster %s: %d nodes at %s, meta leader %s\n", c.Name, n, c.URLs(), leader)
	return c, nil
}

// layOut gives each of n nodes its name, folder under dir, files and free ports.
func (c *NATSCluster) layOut(dir string, n int) error {
	var err error
	for i := range n {
		node := &NATSNode{Name: fmt.Sprintf("n%d", i+1), Dir: filepath.Join(dir, fmt.Sprintf("n%d", i+1))}
		for _, p := range []*int{&node.Port, &node.ClusterPort, &node.HTTPPort} {
			if *p, err = freePort(); err != nil {
				return fmt.Errorf("nats cluster: %w", err)
			}
		}
		node.conf = filepath.Join(node.Dir, "nats.conf")
		node.Log = filepath.Join(node.Dir, "nats.log")
		c.Nodes = append(c.Nodes, node)
	}
	return nil
}

// writeConfigs writes each node's nats.conf: JetStream with fsync on every write, and a cluster
// routed to every node.
func (c *NATSCluster) writeConfigs() error {
	var routes []string
	for _, node := range c.Nodes {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", node.ClusterPort))
	}
	for _, node := range c.Nodes {
		if err := os.MkdirAll(node.Dir, 0o755); err != nil {
			return fmt.Errorf("nats cluster: %w", err)
		}
		conf := fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
jetstream {
  store_dir: %q
  sync_interval: always
}
cluster {
  name: %s
  listen: 127.0.0.1:%d
  routes: [%s]
}
`, node.Name, node.Port, node.HTTPPort, filepath.Join(node.Dir, "js"), c.Name, node.ClusterPort, strings.Join(routes, ", "))
		if err := os.WriteFile(node.conf, []byte(conf), 0o644); err != nil {
			return fmt.Errorf("nats cluster: %w", err)
		}
	}
	return nil
}

// spawn starts node's process and waits until its client port accepts connections.
func (c *NATSCluster) spawn(node *NATSNode) error {
	p, err := spawn(node.Log, node.Dir, nil, c.bin, "-c", node.conf)
	if err != nil {
		return fmt.Errorf("nats %s: %w", node.Name, err)
	}
	deadline := time.Now().Add(natsStartTimeout)
	for {
		if conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", node.Port), 200*time.Millisecond); err == nil {
			conn.Close()
			break
		}
		if p.exited() || time.Now().After(deadline) {
			p.kill()
			return fmt.Errorf("nats %s did not start\n%s", node.Name, logTail(node.Log))
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.mu.Lock()
	node.proc = p
	c.mu.Unlock()
	fmt.Fprintf(c.log, "nats %s: pid %d, client %s, routes 127.0.0.1:%d, monitoring http://127.0.0.1:%d, log %s\n",
		node.Name, p.cmd.Process.Pid, node.URL(), node.ClusterPort, node.HTTPPort, node.Log)
	return nil
}

// URLs is the client URL of every node, comma-separated: FLASHSALE_NATS_URL for the cluster.
func (c *NATSCluster) URLs() string {
	var us []string
	for _, n := range c.Nodes {
		us = append(us, n.URL())
	}
	return strings.Join(us, ",")
}

// Node returns the node named name (n1, n2, …) and its index, or nil and -1.
func (c *NATSCluster) Node(name string) (*NATSNode, int) {
	for i, n := range c.Nodes {
		if n.Name == name {
			return n, i
		}
	}
	return nil, -1
}

// Running reports whether node i's process is up.
func (c *NATSCluster) Running(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Nodes[i].proc != nil && !c.Nodes[i].proc.exited()
}

// Kill kills node i with SIGKILL, as a crash would, and waits for it to exit.
func (c *NATSCluster) Kill(i int) error {
	c.mu.Lock()
	node := c.Nodes[i]
	p := node.proc
	node.proc = nil
	c.mu.Unlock()
	if p == nil {
		return fmt.Errorf("nats %s: kill: not running", node.Name)
	}
	p.kill()
	fmt.Fprintf(c.log, "nats %s: killed (SIGKILL)\n", node.Name)
	return nil
}

// Restart starts node i again on its ports and store, and waits until it is healthy (JetStream
// caught up with the others).
func (c *NATSCluster) Restart(i int) error {
	if c.Running(i) {
		return fmt.Errorf("nats %s: restart: already running", c.Nodes[i].Name)
	}
	if err := c.spawn(c.Nodes[i]); err != nil {
		return err
	}
	return c.waitHealthy(c.Nodes[i], natsStartTimeout)
}

// Stop kills every node still running.
func (c *NATSCluster) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.Nodes {
		if n.proc != nil {
			n.proc.kill()
			n.proc = nil
		}
	}
}

// WaitReady waits up to d until every running node answers /healthz and all agree on one
// JetStream meta leader, and returns the leader's name.
func (c *NATSCluster) WaitReady(d time.Duration) (string, error) {
	deadline := time.Now().Add(d)
	for i, n := range c.Nodes {
		if !c.Running(i) {
			continue
		}
		if err := c.waitHealthy(n, time.Until(deadline)); err != nil {
			return "", err
		}
	}
	for {
		leader, err := c.metaLeader()
		if err == nil {
			return leader, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("nats cluster: no meta leader after %v: %v", d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var monitorClient = &http.Client{Timeout: 2 * time.Second}

// waitHealthy polls the node's /healthz (JetStream enabled and current) for up to d.
func (c *NATSCluster) waitHealthy(n *NATSNode, d time.Duration) error {
	deadline := time.Now().Add(d)
	var last string
	for {
		resp, err := monitorClient.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", n.HTTPPort))
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = strings.TrimSpace(string(b))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nats %s not healthy after %v: %s\n%s", n.Name, d, last, logTail(n.Log))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// metaLeader asks every running node's /jsz for the meta leader; they must all name the same one.
func (c *NATSCluster) metaLeader() (string, error) {
	leader := ""
	for i, n := range c.Nodes {
		if !c.Running(i) {
			continue
		}
		resp, err := monitorClient.Get(fmt.Sprintf("http://127.0.0.1:%d/jsz", n.HTTPPort))
		if err != nil {
			return "", fmt.Errorf("%s: %w", n.Name, err)
		}
		var jsz struct {
			Meta *struct {
				Leader string `json:"leader"`
			} `json:"meta_cluster"`
		}
		err = json.NewDecoder(resp.Body).Decode(&jsz)
		resp.Body.Close()
		switch {
		case err != nil:
			return "", fmt.Errorf("%s: /jsz: %w", n.Name, err)
		case jsz.Meta == nil || jsz.Meta.Leader == "":
			return "", fmt.Errorf("%s knows no meta leader", n.Name)
		case leader != "" && jsz.Meta.Leader != leader:
			return "", fmt.Errorf("nodes disagree on the meta leader: %s and %s", leader, jsz.Meta.Leader)
		}
		leader = jsz.Meta.Leader
	}
	if leader == "" {
		return "", errors.New("no node is running")
	}
	return leader, nil
}

// Connect connects a client to the cluster (every node's URL; it fails over between them).
func (c *NATSCluster) Connect() (*nats.Conn, error) {
	return nats.Connect(c.URLs(), nats.Name("testenv"), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
}

// StreamInfo asks JetStream (STREAM.INFO) about a stream: its config, state and cluster (leader
// and replicas).
func (c *NATSCluster) StreamInfo(ctx context.Context, stream string) (*jetstream.StreamInfo, error) {
	nc, err := c.Connect()
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", stream, err)
	}
	return s.CachedInfo(), nil
}

// StreamLeader returns the name of the node leading the stream's replicas ("" while none does).
func (c *NATSCluster) StreamLeader(ctx context.Context, stream string) (string, error) {
	info, err := c.StreamInfo(ctx, stream)
	if err != nil {
		return "", err
	}
	if info.Cluster == nil {
		return "", fmt.Errorf("stream %s: no cluster information", stream)
	}
	return info.Cluster.Leader, nil
}

// MoveStreamLeader asks the stream's leader to step down in favour of node (JetStream's
// STREAM.LEADER.STEPDOWN with a preferred placement) and waits until node leads it. The
// preference is a wish, not an order: a node not caught up at that moment is passed over, and
// the election settles on another; then the new leader is asked again, every two seconds, until
// node leads or ctx ends.
func (c *NATSCluster) MoveStreamLeader(ctx context.Context, stream, node string) error {
	leader, err := c.StreamLeader(ctx, stream)
	if err != nil {
		return err
	}
	if leader == node {
		return nil
	}
	nc, err := c.Connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	asked := time.Now()
	if err := stepDown(ctx, nc, stream, node); err != nil {
		return err
	}
	for {
		// Each question gets a second: one asked while the stream has no leader is never answered.
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		leader, err := c.StreamLeader(qctx, stream)
		cancel()
		if err == nil && leader == node {
			return nil
		}
		if err == nil && leader != "" && time.Since(asked) > 2*time.Second {
			asked = time.Now() // settled on another node: ask that one
			if err := stepDown(ctx, nc, stream, node); err != nil && ctx.Err() == nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stream %s: %s does not lead it (leader %q, err %v)", stream, node, leader, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stepDown asks the stream's leader to step down, preferring node as the next one.
func stepDown(ctx context.Context, nc *nats.Conn, stream, node string) error {
	req, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": node}})
	msg, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, req)
	if err != nil {
		return fmt.Errorf("stream %s: step down: %w", stream, err)
	}
	var resp struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return fmt.Errorf("stream %s: step down: %w", stream, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("stream %s: step down: %s", stream, resp.Error.Description)
	}
	return nil
}

// NATS starts a NATS cluster of n nodes (StartNATSCluster) for the test, its files in
// t.TempDir(), and stops it in t.Cleanup; the node logs' tails are shown if the test failed.
func NATS(t testing.TB, n int) *NATSCluster {
	t.Helper()
	c, err := StartNATSCluster(t.TempDir(), n, testLog{t})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Log(logTail(n.Log))
			}
		}
	})
	return c
}

// KillT is Kill failing the test on an error.
func (c *NATSCluster) KillT(t testing.TB, i int) {
	t.Helper()
	if err := c.Kill(i); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// RestartT is Restart failing the test on an error.
func (c *NATSCluster) RestartT(t testing.TB, i int) {
	t.Helper()
	if err := c.Restart(i); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// testLog writes to the test's log.
type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
