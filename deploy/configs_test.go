package deploy_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/deploy"
	"github.com/flashsale/flashsale/testenv"
)

// TestNginxConfigIsValid runs `nginx -t` on nginx/flashsale.conf with the compose names of the
// upstream servers swapped for loopback addresses (they resolve only inside compose).
func TestNginxConfigIsValid(t *testing.T) {
	out, err := testenv.CheckNginx(testenv.NginxOptions{Dir: t.TempDir(),
		Upstreams: []string{"127.0.0.1:18081", "127.0.0.1:18082", "127.0.0.1:18083"}})
	if err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	if !strings.Contains(out, "test is successful") {
		t.Errorf("nginx -t: %s", out)
	}
}

// The routes nginx caches cannot be driven past its cache: every cacheable location but the
// static files is limited per client address (zone flashsale_read, keyed by the address), and
// none keys its cache by the whole query string (a made-up argument would be a copy of its own);
// the routes of the purchase path keep their own zone; everything else is not cached.
func TestNginxLimitsTheCacheableReads(t *testing.T) {
	conf := deploy.NginxConf
	zone := regexp.MustCompile(`(?m)^limit_req_zone \$binary_remote_addr zone=flashsale_read:\S+ rate=(\d+)r/s;`).FindStringSubmatch(conf)
	if zone == nil {
		t.Fatal("nginx/flashsale.conf: no `limit_req_zone $binary_remote_addr zone=flashsale_read:... rate=N r/s`")
	}
	if n, _ := strconv.Atoi(zone[1]); n < 10 || n > 1000 {
		t.Errorf("flashsale_read allows %s a second per address: want a shopper's polling and an office through (>= 10), a script not (<= 1000)", zone[1])
	}
	locations := regexp.MustCompile(`(?ms)^    location ([^{\n]+?) \{\n(.*?)^    \}`).FindAllStringSubmatch(conf, -1)
	if len(locations) < 8 {
		t.Fatalf("found %d location blocks, want the config's (at least 8)", len(locations))
	}
	// The public reads, by a path each: which location serves it is checked below.
	reads := map[string]bool{"= /": false, "^~ /sales/": false, "~ ^/api/flash-sales/[0-9]+/stock$": false, "~ ^/api/flash-sales(/[0-9]+)?$": false}
	for _, loc := range locations {
		name, body := loc[1], loc[2]
		if strings.HasPrefix(name, "@") {
			continue
		}
		cached := !strings.Contains(body, "proxy_cache off;")
		key := regexp.MustCompile(`proxy_cache_key ([^;]+);`).FindStringSubmatch(body)
		limited := regexp.MustCompile(`limit_req zone=(\w+)`).FindStringSubmatch(body)
		if _, ok := reads[name]; ok {
			reads[name] = true
			if !cached {
				t.Errorf("location %s: a public read, not cached", name)
			}
			if limited == nil || limited[1] != "flashsale_read" {
				t.Errorf("location %s: a cacheable read without `limit_req zone=flashsale_read`", name)
			}
			if key == nil || strings.Contains(key[1], "$request_uri") || strings.Contains(key[1], "$args") || strings.Contains(key[1], "$query_string") || strings.Contains(key[1], "$is_args") {
				t.Errorf("location %s: cache key %v: want one naming only the arguments the route reads ($arg_…), not the whole query string", name, key)
			}
			continue
		}
		switch {
		case name == "^~ /static/":
			// the embedded files: a made-up path is a 404 from memory, no lookup
		case !cached:
		default:
			t.Errorf("location %s: cached, but not one of the public reads this test knows: add it, limited, with its key", name)
		}
		if strings.Contains(name, "purchase") && (limited == nil || limited[1] != "flashsale_buy") {
			t.Errorf("location %s: the purchase path without its own zone", name)
		}
	}
	for name, seen := range reads {
		if !seen {
			t.Errorf("no location %s in nginx/flashsale.conf", name)
		}
	}
}

// Every cache key names the host nginx passes on to the instances ($host, the Host header they
// read) and the scheme (X-Forwarded-Proto): an answer that names the shop's address, a sale's
// calendar file with FLASHSALE_PUBLIC_URL unset, is kept per address, never handed to the other
// visitors with the address one client forged.
func TestNginxCacheKeysNameTheHost(t *testing.T) {
	conf := deploy.NginxConf
	if !regexp.MustCompile(`(?m)^    proxy_set_header Host \$host;`).MatchString(conf) {
		t.Fatal("nginx/flashsale.conf: no `proxy_set_header Host $host;` in the server block: the key below names what the instances read")
	}
	keys := regexp.MustCompile(`proxy_cache_key ([^;]+);`).FindAllStringSubmatch(conf, -1)
	if len(keys) < 4 {
		t.Fatalf("found %d proxy_cache_key lines, want one per cacheable read (at least 4)", len(keys))
	}
	for _, k := range keys {
		if !strings.Contains(k[1], "$host") || !strings.Contains(k[1], "$scheme") {
			t.Errorf("proxy_cache_key %s: want the host ($host) and the scheme in every key", k[1])
		}
	}
}

// Through nginx itself: a cached answer that names the Host it was asked with (as the calendar
// file does with no public address set) is a copy per host; the second request with the same
// Host is a hit.
func TestNginxCachesPerHost(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=60")
		w.Header().Set("Content-Type", "text/calendar; charset=utf-8")
		fmt.Fprintf(w, "URL:http://%s/sales/1\r\n", r.Host)
	}))
	defer up.Close()
	n := testenv.Nginx(t, strings.TrimPrefix(up.URL, "http://"))
	get := func(host string) (string, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, n.URL()+"/sales/1/calendar.ics", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b), resp.Header.Get("X-Cache-Status")
	}
	if body, st := get("shop.example.com"); body != "URL:http://shop.example.com/sales/1\r\n" || st != "MISS" {
		t.Fatalf("first GET: %q %s", body, st)
	}
	if body, st := get("evil.example"); body != "URL:http://evil.example/sales/1\r\n" || st != "MISS" {
		t.Errorf("GET with another Host: %q (X-Cache-Status %s), want its own answer, a MISS: the cache key lacks the host", body, st)
	}
	if body, st := get("shop.example.com"); body != "URL:http://shop.example.com/sales/1\r\n" || st != "HIT" {
		t.Errorf("GET with the first Host again: %q (X-Cache-Status %s), want the first copy, a HIT", body, st)
	}
}

// nginx compresses text (HTML, CSS, JavaScript, JSON, YAML) at the server level, for proxied
// answers too, with Vary, past a minimum size, and asks the instances for plain answers so that
// its cache holds one copy per key; no location sets proxy_set_header of its own (it would drop
// the server's, Accept-Encoding among them).
func TestNginxCompressesText(t *testing.T) {
	conf := deploy.NginxConf
	server := conf[strings.Index(conf, "\nserver {"):]
	server = server[:strings.Index(server, "\n    location ")]
	directive := func(name string) string {
		m := regexp.MustCompile(`(?m)^    ` + name + ` ([^;]*);`).FindStringSubmatch(server)
		if m == nil {
			t.Errorf("nginx/flashsale.conf: no `%s` in the server block", name)
			return ""
		}
		return m[1]
	}
	if got := directive("gzip"); got != "on" {
		t.Errorf("gzip %s, want on", got)
	}
	if got := directive("gzip_proxied"); got != "any" {
		t.Errorf("gzip_proxied %s, want any (every answer comes from an instance)", got)
	}
	if got := directive("gzip_vary"); got != "on" {
		t.Errorf("gzip_vary %s, want on", got)
	}
	if n, err := strconv.Atoi(directive("gzip_min_length")); err != nil || n < 256 || n > 4096 {
		t.Errorf("gzip_min_length %d: want a small answer (a purchase's) left alone, a page compressed", n)
	}
	types := strings.Fields(directive("gzip_types"))
	for _, want := range []string{"text/css", "text/javascript", "application/json", "application/yaml"} {
		if !slices.Contains(types, want) {
			t.Errorf("gzip_types %v: %s missing", types, want)
		}
	}
	if got := directive("proxy_set_header Accept-Encoding"); got != `""` {
		t.Errorf(`proxy_set_header Accept-Encoding %s, want "" (plain answers from the instances, one cached copy)`, got)
	}
	if strings.Count(conf, "proxy_set_header") != strings.Count(server, "proxy_set_header") {
		t.Errorf("a location sets proxy_set_header: it would drop the server's, Accept-Encoding among them")
	}
}

// TestNATSConfig reads nats/nats.conf as nats-server does (the same module flashsale embeds):
// JetStream with fsync on every write, a cluster routed to every NATS service, clients
// authenticated.
func TestNATSConfig(t *testing.T) {
	t.Setenv("NATS_SERVER_NAME", "nats-2")
	t.Setenv("NATS_PASSWORD", "a-password")
	opts, err := server.ProcessConfigFile("nats/nats.conf")
	if err != nil {
		t.Fatalf("nats/nats.conf: %v", err)
	}
	if opts.ServerName != "nats-2" || !opts.JetStream || !opts.SyncAlways || opts.StoreDir != "/data/jetstream" {
		t.Errorf("nats.conf: server %q, JetStream %v, sync always %v, store %q", opts.ServerName, opts.JetStream, opts.SyncAlways, opts.StoreDir)
	}
	if opts.Username != "flashsale" || opts.Password != "a-password" {
		t.Errorf("nats.conf: clients authenticate as %q/%q, want flashsale and $NATS_PASSWORD", opts.Username, opts.Password)
	}
	var routes []string
	for _, r := range opts.Routes {
		routes = append(routes, r.Hostname())
	}
	slices.Sort(routes)
	if want := loadCompose(t).servicesNamed("nats-"); !slices.Equal(routes, want) || opts.Cluster.Name == "" {
		t.Errorf("nats.conf: cluster %q routes %v, want every NATS service %v", opts.Cluster.Name, routes, want)
	}
}

// TestRedisConfig starts redis-server with redis/redis.conf (on a free loopback port and a
// temporary dir instead of compose's) and reads back the settings that matter.
func TestRedisConfig(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found (%v): run `make deps`", err)
	}
	conf, err := filepath.Abs("redis/redis.conf")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The cluster bus gets a free port of its own: the default, port+10000, may be taken.
	port, busPort := testenv.FreePort(t), testenv.FreePort(t)
	cmd := exec.Command(bin, conf, "--port", strconv.Itoa(port), "--cluster-port", strconv.Itoa(busPort),
		"--bind", "127.0.0.1", "--dir", dir, "--cluster-announce-hostname", "redis-1")
	logf, err := os.Create(filepath.Join(dir, "redis.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := testenv.StartCmd(cmd); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	rdb := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), MaxRetries: -1})
	defer rdb.Close()
	ctx := context.Background()
	deadline := time.Now().Add(15 * time.Second)
	for rdb.Ping(ctx).Err() != nil {
		select {
		case <-exited:
			deadline = time.Time{}
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server with redis/redis.conf does not answer:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for k, want := range map[string]string{"appendonly": "yes", "appendfsync": "everysec", "maxmemory-policy": "noeviction",
		"cluster-preferred-endpoint-type": "hostname", "cluster-announce-hostname": "redis-1", "cluster-require-full-coverage": "yes"} {
		got, err := rdb.ConfigGet(ctx, k).Result()
		if err != nil || got[k] != want {
			t.Errorf("CONFIG GET %s: %v (%v), want %q", k, got, err, want)
		}
	}
	info, err := rdb.Info(ctx, "cluster").Result()
	if err != nil || !strings.Contains(info, "cluster_enabled:1") {
		t.Errorf("INFO cluster: %q (%v), want cluster_enabled:1", info, err)
	}
}
