package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/testenv"
)

// runningCluster is a devenv -set cluster up run as a process of its own, until stop.
type runningCluster struct {
	flags      []string
	base       string // nginx's URL
	cmd        *exec.Cmd
	out        *testenv.SyncBuffer
	exited     chan error
	state      stateFile
	path       string   // the state file
	localFlags []string // with startClusterAfter(localFirst): the local set's flags
}

// startCluster builds devenv and runs `devenv -set cluster EXTRA... up` on a data folder and
// ports of the test's own, with env added to its environment, until the table is out.
func startCluster(t *testing.T, extra []string, env ...string) *runningCluster {
	return startClusterAfter(t, false, extra, env...)
}

// startClusterAfter is startCluster; with localFirst, the local set (Redis and Postgres of `make
// services`) is up before the cluster set starts, and is stopped in the test's cleanup.
func startClusterAfter(t *testing.T, localFirst bool, extra []string, env ...string) *runningCluster {
	t.Helper()
	if _, err := testenv.PGBinDir("15"); err != nil {
		t.Fatalf("%v", err)
	}
	bin := buildDevenv(t)
	data := filepath.Join(t.TempDir(), ".data")
	if os.Geteuid() == 0 {
		os.Chmod(filepath.Dir(data), 0o755) // the postgres OS user must reach it
	}
	pgPort, port := testenv.FreePort(t), testenv.FreePort(t)
	rc := &runningCluster{
		flags: append([]string{"-data", data, "-pg-port", strconv.Itoa(pgPort), "-pg-version", "15", "-db", "devdb",
			"-set", "cluster", "-cluster-port", strconv.Itoa(port)}, extra...),
		base:   "http://127.0.0.1:" + strconv.Itoa(port),
		out:    &testenv.SyncBuffer{},
		exited: make(chan error, 1),
		path:   filepath.Join(data, "cluster", "state.json"),
	}
	if localFirst {
		rc.localFlags = upLocalSet(t, bin, data, pgPort)
	}
	rc.start(t, bin, env)
	rc.waitState(t)
	waitFor(t.Context(), 5*time.Second, func() bool { return strings.Contains(rc.out.String(), "\nserving on "+rc.base+";") })
	return rc
}

// buildDevenv builds devenv into the test's temporary directory.
func buildDevenv(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "devenv")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build devenv: %v\n%s", err, out)
	}
	return bin
}

// upLocalSet brings the local set up on data and the Postgres port, stops it in the test's
// cleanup, and returns its flags.
func upLocalSet(t *testing.T, bin, data string, pgPort int) []string {
	t.Helper()
	local := []string{"-data", data, "-pg-port", strconv.Itoa(pgPort), "-pg-version", "15", "-db", "devdb",
		"-redis-port", strconv.Itoa(testenv.FreePort(t))}
	if out, err := exec.Command(bin, append(slices.Clone(local), "up")...).CombinedOutput(); err != nil {
		t.Fatalf("devenv up (local set): %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command(bin, append(local, "down")...).Run() })
	return local
}

// start runs `devenv FLAGS up` with env added; the test's cleanup takes the set down unless it
// has exited, and shows its output if the test failed.
func (rc *runningCluster) start(t *testing.T, bin string, env []string) {
	t.Helper()
	rc.cmd = exec.Command(bin, append(slices.Clone(rc.flags), "up")...)
	rc.cmd.Env = append(os.Environ(), env...)
	rc.cmd.Stdout, rc.cmd.Stderr = rc.out, rc.out
	if err := testenv.StartCmd(rc.cmd); err != nil {
		t.Fatal(err)
	}
	go func() { rc.exited <- rc.cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		select {
		case <-rc.exited:
			stopped = true
		default:
		}
		if !stopped {
			devenv(t, append(slices.Clone(rc.flags), "down")...)
			<-rc.exited
		}
		if t.Failed() {
			t.Logf("devenv output:\n%s", rc.out.String())
		}
	})
}

// waitState waits until the running devenv has written its state file (the set is up).
func (rc *runningCluster) waitState(t *testing.T) {
	t.Helper()
	// builds (nats-server, flashsale) and six Redis nodes: on two cores shared with the other
	// packages' tests this has taken two minutes
	deadline := time.Now().Add(4 * time.Minute)
	for {
		if b, err := os.ReadFile(rc.path); err == nil && json.Unmarshal(b, &rc.state) == nil && rc.state.PID == rc.cmd.Process.Pid {
			return
		}
		select {
		case err := <-rc.exited:
			rc.exited <- err
			t.Fatalf("devenv up exited: %v\n%s", err, rc.out.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("devenv up: no state after 4 minutes\n%s", rc.out.String())
		}
	}
}

// checkRows checks the table: want rows of each kind, each with a live pid shown in the output.
func (rc *runningCluster) checkRows(t *testing.T, want map[string]int) {
	t.Helper()
	table := rc.out.String()
	counts := map[string]int{}
	for _, r := range rc.state.Rows {
		counts[strings.Fields(r.Service)[0]]++
		if r.PID <= 0 || !testenv.PIDAlive(r.PID) || r.Log == "" || r.Address == "" {
			t.Errorf("row %+v: want a live pid, an address and a log", r)
		}
		if !strings.Contains(table, strconv.Itoa(r.PID)) {
			t.Errorf("the table does not show pid %d (%s)", r.PID, r.Service)
		}
	}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("%d %s rows, want %d: %+v", counts[k], k, n, rc.state.Rows)
		}
	}
}

// down stops the set from another process (devenv down) and checks that the foreground devenv
// exits and every process of the table is gone.
func (rc *runningCluster) down(t *testing.T) {
	t.Helper()
	code, s := devenv(t, append(slices.Clone(rc.flags), "down")...)
	if code != 0 || !strings.Contains(s, "stopping the devenv") {
		t.Fatalf("down: %d %s", code, s)
	}
	select {
	case err := <-rc.exited:
		rc.exited <- err
		if err != nil {
			t.Errorf("devenv up exited with %v after down", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("devenv up still runs a minute after down")
	}
	for _, r := range rc.state.Rows {
		if rc.localFlags != nil && r.Service == "postgres" {
			continue // it ran before: left running (the caller checks)
		}
		if testenv.PIDAlive(r.PID) {
			t.Errorf("%s (pid %d) still runs after down", r.Service, r.PID)
		}
	}
	if _, err := os.Stat(rc.path); !os.IsNotExist(err) {
		t.Errorf("state file left after down: %v", err)
	}
	if code, s = devenv(t, append(slices.Clone(rc.flags), "status")...); code != 3 || !strings.Contains(s, "cluster: stopped") {
		t.Errorf("status after down: %d %s", code, s)
	}
}

// The cluster set (make cluster): devenv -set cluster up, as a process of its own, starts
// Postgres, a Redis Cluster, a NATS cluster, three instances and nginx, and says what runs
// where; a shopper buys through nginx and the order is written; the stock JSON comes from
// nginx's cache; down from another process stops the foreground devenv, which stops every
// process it listed.
func TestClusterSetUpBuyDown(t *testing.T) {
	// the test captcha and a demo sale that starts at once (a user's setting wins over the
	// set's defaults)
	rc := startCluster(t, nil, "FLASHSALE_CAPTCHA=test", "FLASHSALE_DEMO_START_DELAY=1s")
	flags, base, out, cmd := rc.flags, rc.base, rc.out, rc.cmd
	rc.checkRows(t, map[string]int{"postgres": 1, "redis": 6, "nats": 3, "flashsale": 3, "nginx": 1})
	if code, s := devenv(t, append(flags, "status")...); code != 0 || !strings.Contains(s, "running (devenv pid "+strconv.Itoa(cmd.Process.Pid)) {
		t.Errorf("status: %d %s", code, s)
	}
	if code, s := devenv(t, append(flags, "up")...); code != 1 || !strings.Contains(s, "already runs") {
		t.Errorf("a second up: %d %s, want refused", code, s)
	}
	_, env := devenv(t, append(flags, "env")...)
	if !strings.Contains(env, "FLASHSALE_REDIS_URL='redis-cluster://") || strings.Count(env, "nats://") != 3 {
		t.Errorf("env: %s", env)
	}

	api := &apiClient{t: t, c: &http.Client{Timeout: 15 * time.Second}, base: base}
	buyThroughNginx(t, api)
	checkStockCached(t, api)

	// down, from another process: the foreground devenv stops, and every process it listed.
	rc.down(t)
	for _, w := range []string{"nginx: stopped", "flashsale: instances stopped", "nats cluster: stopped", "redis cluster: stopped", "postgres: stopped"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("devenv up's output lacks %q", w)
		}
	}
}

// apiClient calls the API through nginx for a test, failing it on a transport error.
type apiClient struct {
	t    *testing.T
	c    *http.Client
	base string
}

// do sends method path with the bearer token (if any), body as JSON (if any) and the header
// pairs hdr, and returns the status, the headers and the JSON answer.
func (a *apiClient) do(method, path, bearer string, body any, hdr ...string) (int, http.Header, map[string]any) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.base+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := a.c.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, resp.Header, m
}

// buyThroughNginx: a shopper buys through nginx: login, purchase token, purchase, and the order
// is written.
func buyThroughNginx(t *testing.T, api *apiClient) {
	t.Helper()
	do := api.do
	code, _, m := do("POST", "/api/auth/login", "", map[string]string{"username": "alice", "password": "alice-pass"})
	token, _ := m["token"].(string)
	if code != 200 || token == "" {
		t.Fatalf("login through nginx: %d %v", code, m)
	}
	var ptoken string
	deadline := time.Now().Add(30 * time.Second)
	for { // until the demo sale has started and its stock is loaded
		code, _, m = do("POST", "/api/flash-sales/1/purchase-token", token, map[string]string{"captchaId": "any", "answer": "test"})
		if ptoken, _ = m["purchaseToken"].(string); code == 200 && ptoken != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("purchase token: %d %v", code, m)
		}
		time.Sleep(500 * time.Millisecond)
	}
	code, hdr, m := do("POST", "/api/flash-sales/items/1/purchase", token, nil, "X-Purchase-Token", ptoken)
	orderID, _ := m["orderId"].(string)
	if code != 202 || m["status"] != "QUEUED" || orderID == "" {
		t.Fatalf("purchase through nginx: %d %v", code, m)
	}
	if cs := hdr.Get("X-Cache-Status"); cs != "" {
		t.Errorf("the purchase answer has X-Cache-Status %q: it must not touch the cache", cs)
	}
	deadline = time.Now().Add(30 * time.Second)
	for { // through NATS (R3) and the writer into Postgres
		code, _, m = do("GET", "/api/flash-sales/orders/"+orderID, token, nil)
		if code == 200 && m["status"] == "PENDING" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the order is not written: %d %v", code, m)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkStockCached: the stock JSON carries X-Cache-Status, and a second request within its
// max-age=1 is a HIT.
func checkStockCached(t *testing.T, api *apiClient) {
	t.Helper()
	hits := 0
	for range 5 {
		_, h1, m1 := api.do("GET", "/api/flash-sales/1/stock", "", nil)
		_, h2, _ := api.do("GET", "/api/flash-sales/1/stock", "", nil)
		if h1.Get("X-Cache-Status") == "" || m1["items"] == nil {
			t.Fatalf("stock JSON through nginx: no X-Cache-Status (%v) or no items (%v)", h1, m1)
		}
		if h2.Get("X-Cache-Status") == "HIT" {
			hits++
		}
	}
	if hits == 0 {
		t.Errorf("the stock JSON was never a cache HIT")
	}
}

// -engines single -instances 2 -bench: two instances behind nginx on one redis-server and one
// nats-server, set up for a load test (test captcha, rate limits off, no limit_req): a purchase
// token through nginx, then down leaves nothing running.
func TestClusterSetSingleEngines(t *testing.T) {
	// the Postgres of `make services` runs already: the cluster set uses it and leaves it running
	rc := startClusterAfter(t, true, []string{"-engines", "single", "-instances", "2", "-bench"})
	rc.checkRows(t, map[string]int{"postgres": 1, "redis": 1, "nats": 1, "flashsale": 2, "nginx": 1})
	_, env := devenv(t, append(slices.Clone(rc.flags), "env")...)
	if !strings.Contains(env, "FLASHSALE_REDIS_URL='redis://") || strings.Count(env, "nats://") != 1 {
		t.Errorf("env: %s", env)
	}
	conf, err := os.ReadFile(filepath.Join(filepath.Dir(rc.path), "nginx", "flashsale.conf"))
	if err != nil || strings.Contains(string(conf), "limit_req zone=") || strings.Count(string(conf), "max_fails=3") != 2 {
		t.Errorf("-bench nginx config (err %v): want two upstreams and no limit_req:\n%s", err, conf)
	}
	// 25 requests at once from one address: nginx's limit_req (burst 10) would refuse some
	for i := range 25 {
		resp, err := http.Post(rc.base+"/api/flash-sales/1/captcha", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			t.Fatalf("request %d: 429 with -bench", i)
		}
	}
	rc.down(t)
	if !strings.Contains(rc.out.String(), "postgres: left running") || strings.Contains(rc.out.String(), "postgres: stopped") {
		t.Errorf("the cluster set stopped a Postgres it found running:\n%s", rc.out.String())
	}
	if code, s := devenv(t, append(slices.Clone(rc.localFlags), "status")...); code != 0 || !strings.Contains(s, "postgres: running") {
		t.Errorf("local status after the cluster set's down: %d %s; want Postgres still running", code, s)
	}
}

// -bench leaves nginx's per-address limits out of the site config, and only those lines.
func TestBenchNginxConf(t *testing.T) {
	conf, err := benchNginxConf()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(conf, "limit_req zone=") {
		t.Errorf("-bench config still limits per address")
	}
	for _, keep := range []string{"limit_req_zone", "proxy_cache flashsale;", "location ~ ^/api/flash-sales/items/[^/]+/purchase$"} {
		if !strings.Contains(conf, keep) {
			t.Errorf("-bench config lost %q", keep)
		}
	}
}

// make chaos CLUSTER=1 passes -cluster to devenv chaos, which sets FLASHSALE_CHAOS_CLUSTER=1 for
// the suite (and only then: an inherited one is dropped).
func TestChaosCluster(t *testing.T) {
	for _, tc := range []struct {
		vars string
		want string
	}{{"CLUSTER=1", " chaos -cluster all"}, {"", " chaos  all"}, {"CLUSTER=0", " chaos  all"}} {
		args := []string{"-n", "-C", "../../..", "chaos"}
		if tc.vars != "" {
			args = append(args, tc.vars)
		}
		out, err := exec.Command("make", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("make %v: %v\n%s", args, err, out)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("make chaos %s runs:\n%s\nwant %q", tc.vars, out, tc.want)
		}
	}
	which, cluster := chaosArgs([]string{"-cluster", "01,12"})
	env := strings.Join(chaosEnv([]string{"FLASHSALE_CHAOS_CLUSTER=1", "HOME=/x"}, which, cluster), " ")
	if which != "01,12" || !cluster || env != "FLASHSALE_CHAOS=01,12 FLASHSALE_CHAOS_CLUSTER=1 HOME=/x" {
		t.Errorf("chaos -cluster 01,12: %q %v %q", which, cluster, env)
	}
	which, cluster = chaosArgs([]string{"all"})
	env = strings.Join(chaosEnv([]string{"FLASHSALE_CHAOS_CLUSTER=1", "HOME=/x"}, which, cluster), " ")
	if cluster || env != "FLASHSALE_CHAOS=all HOME=/x" {
		t.Errorf("chaos all: %v %q", cluster, env)
	}
}

// The cluster set's flags are checked before anything starts.
func TestClusterSetFlags(t *testing.T) {
	data := filepath.Join(t.TempDir(), ".data")
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"-engines", "sharded"}, `-engines "sharded": cluster or single`},
		{[]string{"-instances", "0"}, "-instances 0: 1 to 16"},
	} {
		code, out := devenv(t, append([]string{"-data", data, "-set", "cluster"}, append(tc.flags, "up")...)...)
		if code != 1 || !strings.Contains(out, tc.want) {
			t.Errorf("%v: %d %q, want %q", tc.flags, code, out, tc.want)
		}
	}
	// nginx's port taken: refused at once, with what to set, before anything starts
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	code, out := devenv(t, "-data", data, "-pg-port", strconv.Itoa(testenv.FreePort(t)), "-set", "cluster", "-cluster-port", port, "up")
	if code != 1 || !strings.Contains(out, "port "+port+" is taken by another server: set CLUSTER_PORT") || strings.Contains(out, "postgres") {
		t.Errorf("up on a taken port: %d %q", code, out)
	}
	if _, err := os.Stat(filepath.Join(data, "cluster")); !os.IsNotExist(err) {
		t.Errorf("a refused set created %s (%v)", filepath.Join(data, "cluster"), err)
	}
}
