package deploy_test

import (
	"context"
	"debug/buildinfo"
	"debug/elf"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/deploy"
	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type healthcheck struct {
	Test        []string `yaml:"test"`
	Interval    string   `yaml:"interval"`
	Timeout     string   `yaml:"timeout"`
	StartPeriod string   `yaml:"start_period"`
	Retries     int      `yaml:"retries"`
}

// service is what compose.yaml uses of a compose service: an unknown (misspelt) key fails the
// decoding.
type service struct {
	Build       *struct{ Context, Dockerfile string } `yaml:"build"`
	Image       string                                `yaml:"image"`
	Restart     string                                `yaml:"restart"`
	StopGrace   string                                `yaml:"stop_grace_period"`
	ReadOnly    bool                                  `yaml:"read_only"`
	Command     []string                              `yaml:"command"`
	Environment map[string]string                     `yaml:"environment"`
	Healthcheck *healthcheck                          `yaml:"healthcheck"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Expose   []string `yaml:"expose"`
	Ports    []string `yaml:"ports"`
	Volumes  []string `yaml:"volumes"`
	Networks any      `yaml:"networks"` // a list of names, or names with settings
}

type compose struct {
	Services map[string]service
	Networks map[string]any
	Volumes  map[string]any
}

func loadCompose(t *testing.T) compose {
	t.Helper()
	raw, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := yaml.Unmarshal(raw, &top); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	for k := range top {
		if !strings.HasPrefix(k, "x-") && !slices.Contains([]string{"name", "services", "networks", "volumes"}, k) {
			t.Errorf("compose.yaml: unknown top-level key %q", k)
		}
	}
	var c compose
	// The services again, strictly: anchors and merge keys are resolved by now.
	svc, err := yaml.Marshal(top["services"])
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalWithOptions(svc, &c.Services, yaml.DisallowUnknownField()); err != nil {
		t.Fatalf("compose.yaml services: %v", err)
	}
	c.Networks, _ = top["networks"].(map[string]any)
	c.Volumes, _ = top["volumes"].(map[string]any)
	return c
}

// flashsaleServices are the services built from the repository's Dockerfile.
func (c compose) flashsaleServices() []string {
	var out []string
	for name, s := range c.Services {
		if s.Build != nil && s.Build.Context == ".." {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func (c compose) servicesNamed(prefix string) []string {
	var out []string
	for name := range c.Services {
		if strings.HasPrefix(name, prefix) && strings.TrimLeft(strings.TrimPrefix(name, prefix), "0123456789") == "" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// exampleEnv is flashsale.env.example: what compose interpolates ${VAR} with.
func exampleEnv(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("flashsale.env.example")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("flashsale.env.example: %q is not NAME=value", line)
		}
		env[k] = v
	}
	return env
}

var interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?[?-][^}]*)?\}`)

// interpolate replaces ${VAR}, ${VAR:?message} and ${VAR:-default} as compose does, from env;
// a variable env lacks is an error.
func interpolate(t *testing.T, s string, env map[string]string) string {
	t.Helper()
	return interpolation.ReplaceAllStringFunc(s, func(m string) string {
		name := interpolation.FindStringSubmatch(m)[1]
		v, ok := env[name]
		if !ok {
			t.Errorf("compose.yaml uses ${%s}, which flashsale.env.example does not set", name)
		}
		return v
	})
}

func known(name string) bool {
	return slices.ContainsFunc(app.ConfigVars, func(v app.ConfigVar) bool { return v.Name == name })
}

func TestComposeFile(t *testing.T) {
	c := loadCompose(t)
	env := exampleEnv(t)
	want := []string{"flashsale1", "flashsale2", "flashsale3", "nginx", "postgres", "redis-cluster-init",
		"redis-1", "redis-2", "redis-3", "redis-4", "redis-5", "redis-6", "nats-1", "nats-2", "nats-3"}
	for _, name := range want {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("no service %q", name)
		}
	}
	if got := c.flashsaleServices(); !slices.Equal(got, []string{"flashsale1", "flashsale2", "flashsale3"}) {
		t.Errorf("services built from the Dockerfile: %v, want flashsale1..3", got)
	}
	for k := range env {
		if strings.HasPrefix(k, "FLASHSALE_") && !known(k) {
			t.Errorf("flashsale.env.example sets %s, which is not a flashsale setting", k)
		}
	}

	for name, s := range c.Services {
		if s.Image == "" {
			t.Errorf("%s: no image", name)
		}
		// depends_on names services, with a condition the named service can meet.
		for dep, d := range s.DependsOn {
			target, ok := c.Services[dep]
			if !ok {
				t.Errorf("%s depends on %q, which is not a service", name, dep)
				continue
			}
			switch d.Condition {
			case "service_healthy":
				if target.Healthcheck == nil {
					t.Errorf("%s waits for %s to be healthy, which has no health check", name, dep)
				}
			case "service_completed_successfully":
				if target.Restart != "no" {
					t.Errorf("%s waits for %s to complete, which is restarted (%q)", name, dep, target.Restart)
				}
			case "service_started":
			default:
				t.Errorf("%s depends on %s with condition %q", name, dep, d.Condition)
			}
		}
		// A service that keeps running is restarted and checked.
		if s.Restart != "no" {
			if s.Restart != "unless-stopped" && s.Restart != "always" {
				t.Errorf("%s: restart %q", name, s.Restart)
			}
			if s.Healthcheck == nil || len(s.Healthcheck.Test) < 2 || s.Healthcheck.Test[0] != "CMD" {
				t.Errorf("%s: no health check (CMD form)", name)
			}
		}
		// Mounted files exist in the repository; named volumes are declared.
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 || len(parts) > 3 || !strings.HasPrefix(parts[1], "/") || (len(parts) == 3 && parts[2] != "ro" && parts[2] != "rw") {
				t.Errorf("%s: volume %q is not SOURCE:/TARGET[:ro]", name, v)
				continue
			}
			if src := parts[0]; strings.HasPrefix(src, ".") {
				if fi, err := os.Stat(src); err != nil || fi.IsDir() {
					t.Errorf("%s mounts %s, which is not a file of the repository (%s): %v", name, src, filepath.Join("deploy", src), err)
				}
			} else if _, ok := c.Volumes[src]; !ok {
				t.Errorf("%s mounts volume %q, which is not declared", name, src)
			}
		}
		// Networks are declared.
		var nets []string
		switch n := s.Networks.(type) {
		case []any:
			for _, x := range n {
				nets = append(nets, x.(string))
			}
		case map[string]any:
			for k := range n {
				nets = append(nets, k)
			}
		case nil:
			t.Errorf("%s: no network named", name)
		}
		for _, n := range nets {
			if _, ok := c.Networks[n]; !ok {
				t.Errorf("%s: network %q is not declared", name, n)
			}
		}
		// Every FLASHSALE_* variable is a setting flashsale knows.
		for k := range s.Environment {
			if strings.HasPrefix(k, "FLASHSALE_") && !known(k) {
				t.Errorf("%s: %s is not a flashsale setting (app.ConfigVars)", name, k)
			}
		}
		// Only nginx is reachable from outside.
		if len(s.Ports) > 0 && name != "nginx" {
			t.Errorf("%s publishes ports %v: only nginx should", name, s.Ports)
		}
	}

	// The instances: production settings that flashsale accepts, the cluster URLs naming every
	// node, nginx's address trusted, the health check a command the binary has.
	var usage strings.Builder
	_ = app.Run(context.Background(), []string{"help"}, func(string) string { return "" }, &usage)
	nginxIP := ""
	if n, ok := c.Services["nginx"].Networks.(map[string]any); ok {
		if front, ok := n["front"].(map[string]any); ok {
			nginxIP, _ = front["ipv4_address"].(string)
		}
	}
	for _, name := range c.flashsaleServices() {
		s := c.Services[name]
		e := map[string]string{}
		for k, v := range s.Environment {
			e[k] = interpolate(t, v, env)
		}
		cfg, err := app.LoadConfig(func(k string) string { return e[k] })
		if err != nil {
			t.Errorf("%s: flashsale refuses compose.yaml's settings: %v", name, err)
			continue
		}
		if cfg.Env != "production" {
			t.Errorf("%s: FLASHSALE_ENV=%q, want production", name, cfg.Env)
		}
		if db, err := url.Parse(cfg.DatabaseURL); err != nil || db.Hostname() != "postgres" || db.User.Username() != c.Services["postgres"].Environment["POSTGRES_USER"] {
			t.Errorf("%s: FLASHSALE_DATABASE_URL=%q (%v), want the postgres service's user at postgres", name, cfg.DatabaseURL, err)
		}
		redisURL, err := url.Parse(strings.Replace(cfg.RedisURL, ",", "/", 1))
		if err != nil || redisURL.Scheme != "redis-cluster" {
			t.Errorf("%s: FLASHSALE_REDIS_URL=%q, want redis-cluster://host:port,...", name, cfg.RedisURL)
		}
		if got := hosts(strings.TrimPrefix(cfg.RedisURL, "redis-cluster://")); !slices.Equal(got, c.servicesNamed("redis-")) {
			t.Errorf("%s: FLASHSALE_REDIS_URL names %v, want every Redis node %v", name, got, c.servicesNamed("redis-"))
		}
		if got := hosts(cfg.NATSURL); !slices.Equal(got, c.servicesNamed("nats-")) {
			t.Errorf("%s: FLASHSALE_NATS_URL names %v, want every NATS server %v", name, got, c.servicesNamed("nats-"))
		}
		if e["FLASHSALE_NATS_REPLICAS"] != "3" {
			t.Errorf("%s: FLASHSALE_NATS_REPLICAS=%q, want 3 (R3 on three servers)", name, e["FLASHSALE_NATS_REPLICAS"])
		}
		if nginxIP == "" || !slices.Equal(cfg.TrustedProxies, []string{nginxIP}) {
			t.Errorf("%s: FLASHSALE_TRUSTED_PROXIES %v, want nginx's fixed address %q only", name, cfg.TrustedProxies, nginxIP)
		}
		if _, port, _ := net.SplitHostPort(cfg.Addr); !slices.Contains(s.Expose, port) {
			t.Errorf("%s: listens on %s but exposes %v", name, cfg.Addr, s.Expose)
		}
		if hc := s.Healthcheck; hc == nil || !slices.Equal(hc.Test, []string{"CMD", "/flashsale", "healthcheck"}) ||
			!strings.Contains(usage.String(), "\n  healthcheck") {
			t.Errorf("%s: health check %v, want /flashsale healthcheck (a command of the binary)", name, hc)
		}
		for _, dep := range append(c.servicesNamed("nats-"), "postgres", "redis-cluster-init") {
			if _, ok := s.DependsOn[dep]; !ok {
				t.Errorf("%s does not wait for %s", name, dep)
			}
		}
	}
	if init := c.Services["redis-cluster-init"]; !slices.Equal(init.Command[2:], c.servicesNamed("redis-")) {
		t.Errorf("redis-cluster-init forms %v, want every Redis node %v", init.Command[2:], c.servicesNamed("redis-"))
	}

	// nginx proxies to exactly the flashsale services, on the port they listen on, and
	// publishes the port its config listens on.
	var upstreams []string
	for _, m := range regexp.MustCompile(`(?m)^\s*server\s+([^\s;]+)`).FindAllStringSubmatch(upstreamBlock(t), -1) {
		host, port, err := net.SplitHostPort(m[1])
		if err != nil || port != "8080" {
			t.Errorf("nginx upstream server %q: want NAME:8080", m[1])
		}
		upstreams = append(upstreams, host)
	}
	slices.Sort(upstreams)
	if !slices.Equal(upstreams, c.flashsaleServices()) {
		t.Errorf("nginx's upstream servers %v, want the flashsale services %v", upstreams, c.flashsaleServices())
	}
	ngx := c.Services["nginx"]
	if len(ngx.Ports) != 1 || !strings.HasSuffix(ngx.Ports[0], ":80") || !strings.Contains(deploy.NginxConf, "\n    listen 80;") {
		t.Errorf("nginx publishes %v; its config must listen on the published container port 80", ngx.Ports)
	}
	if !slices.Contains(ngx.Volumes, "./nginx/flashsale.conf:/etc/nginx/conf.d/default.conf:ro") {
		t.Errorf("nginx does not mount deploy/nginx/flashsale.conf as its site: %v", ngx.Volumes)
	}
	for _, name := range c.flashsaleServices() {
		if _, ok := ngx.DependsOn[name]; !ok {
			t.Errorf("nginx starts without waiting for %s (it resolves the upstream names at start)", name)
		}
	}
}

// hosts returns the sorted host names of a comma-separated list of host:port or URLs.
func hosts(list string) []string {
	var out []string
	for _, part := range strings.Split(list, ",") {
		if u, err := url.Parse(part); err == nil && u.Host != "" {
			part = u.Host
		}
		h, _, err := net.SplitHostPort(part)
		if err != nil {
			h = part
		}
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

func upstreamBlock(t *testing.T) string {
	t.Helper()
	b := regexp.MustCompile(`(?ms)^upstream flashsale \{\n.*?^\}`).FindString(deploy.NginxConf)
	if b == "" {
		t.Fatal("nginx/flashsale.conf: no upstream flashsale block")
	}
	return b
}

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

// TestDockerfileBuild builds the binary exactly as the Dockerfile does: its `go build` line, run
// in a copy of the build context (the repository less .dockerignore), with no GOFLAGS; the
// binary must be static, as distroless/static needs.
func TestDockerfileBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the whole binary with -trimpath (not in the build cache of other tests)")
	}
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(raw)
	var build string
	for _, line := range strings.Split(df, "\n") {
		if rest, ok := strings.CutPrefix(line, "RUN "); ok && strings.Contains(rest, "go build") {
			if build != "" {
				t.Fatalf("the Dockerfile has two go build lines: %q and %q", build, rest)
			}
			build = rest
		}
	}
	// `make docker-check` greps for this line.
	if build != `CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /flashsale .` {
		t.Errorf("the Dockerfile's build line is %q", build)
	}
	for _, want := range []string{"FROM golang:1.26 AS build", "FROM gcr.io/distroless/static-debian12:nonroot",
		"USER nonroot:nonroot", "EXPOSE 8080", "ENV FLASHSALE_ADDR=0.0.0.0:8080", `CMD ["/flashsale", "healthcheck"]`, "COPY --from=build /flashsale /flashsale"} {
		if !strings.Contains(df, want) {
			t.Errorf("the Dockerfile lacks %q", want)
		}
	}

	words := shellWords(t, build)
	var env []string
	for len(words) > 0 && strings.Contains(words[0], "=") {
		env, words = append(env, words[0]), words[1:]
	}
	out := filepath.Join(t.TempDir(), "flashsale")
	if i := slices.Index(words, "-o"); i < 0 || i+1 >= len(words) || words[i+1] != "/flashsale" {
		t.Fatalf("build line %q: no -o /flashsale", build)
	} else {
		words[i+1] = out
	}
	src := buildContext(t)
	cmd := exec.Command(words[0], words[1:]...)
	cmd.Dir = src
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOFLAGS=") }), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s (in a copy of the build context): %v\n%s", build, err, b)
	}

	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary names a dynamic loader (PT_INTERP): not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v: not static", libs)
	}
	// -ldflags="-s -w": no symbol table, no DWARF (Go leaves -ldflags out of the build info
	// under -trimpath, so it is checked in the file).
	if _, err := f.Symbols(); err == nil {
		t.Error("the binary has a symbol table: not built with -s")
	}
	if f.Section(".debug_info") != nil {
		t.Error("the binary has DWARF: not built with -w")
	}
	bi, err := buildinfo.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("build settings %v, want CGO_ENABLED=0 and -trimpath", settings)
	}
	// The binary runs and has the healthcheck the image's HEALTHCHECK calls.
	help, err := exec.Command(out, "help").CombinedOutput()
	if err != nil || !strings.Contains(string(help), "healthcheck") {
		t.Errorf("%s help: %v\n%s", out, err, help)
	}
}

// shellWords splits a simple shell command line: words separated by blanks, double-quoted
// parts kept together without their quotes.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case r == '\'' || r == '\\' || r == '$' || r == '`':
			t.Fatalf("build line %q: %q is more shell than this test reads", line, r)
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("build line %q: unbalanced quote", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// buildContext copies the repository less what .dockerignore leaves out (its patterns matched
// against top-level names and paths, as `make docker-check` does) to a temporary folder.
func buildContext(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, strings.Trim(line, "/"))
		}
	}
	ignored := func(rel string) bool {
		for _, p := range patterns {
			if ok, _ := filepath.Match(p, rel); ok {
				return true
			}
			if ok, _ := filepath.Match(p, filepath.Base(rel)); ok && !strings.Contains(p, "/") {
				return true
			}
		}
		return false
	}
	dst := filepath.Join(t.TempDir(), "src")
	err = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", path)
		if rel == "." {
			return os.MkdirAll(dst, 0o755)
		}
		if ignored(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}
