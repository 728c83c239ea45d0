package deploy_test

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

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

// TestComposeFile checks compose.yaml against itself, the example environment, flashsale's
// settings and nginx's config: every service sound (checkService), the flashsale instances
// configured for production on every node (checkInstance), nginx in front of exactly them.
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
		checkService(t, c, name, s)
	}
	checkInstances(t, c, env)
	checkNginxService(t, c)
}

// checkService checks what every service must be: an image, dependencies it can wait for,
// restarted and health-checked if it keeps running, mounts and networks that exist, only
// flashsale's own settings, and no published port but nginx's.
func checkService(t *testing.T, c compose, name string, s service) {
	t.Helper()
	if s.Image == "" {
		t.Errorf("%s: no image", name)
	}
	checkDependsOn(t, c, name, s)
	// A service that keeps running is restarted and checked.
	if s.Restart != "no" {
		if s.Restart != "unless-stopped" && s.Restart != "always" {
			t.Errorf("%s: restart %q", name, s.Restart)
		}
		if s.Healthcheck == nil || len(s.Healthcheck.Test) < 2 || s.Healthcheck.Test[0] != "CMD" {
			t.Errorf("%s: no health check (CMD form)", name)
		}
	}
	checkVolumes(t, c, name, s)
	checkNetworks(t, c, name, s)
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

// checkDependsOn: depends_on names services, with a condition the named service can meet.
func checkDependsOn(t *testing.T, c compose, name string, s service) {
	t.Helper()
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
}

// checkVolumes: mounted files exist in the repository; named volumes are declared.
func checkVolumes(t *testing.T, c compose, name string, s service) {
	t.Helper()
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
}

// checkNetworks: a service names networks, and they are declared.
func checkNetworks(t *testing.T, c compose, name string, s service) {
	t.Helper()
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
}

// checkInstances checks the flashsale instances (checkInstance) and that redis-cluster-init
// forms the cluster of every Redis node.
func checkInstances(t *testing.T, c compose, env map[string]string) {
	t.Helper()
	var usage strings.Builder
	_ = app.Run(context.Background(), []string{"help"}, func(string) string { return "" }, &usage)
	nginxIP := ""
	if n, ok := c.Services["nginx"].Networks.(map[string]any); ok {
		if front, ok := n["front"].(map[string]any); ok {
			nginxIP, _ = front["ipv4_address"].(string)
		}
	}
	for _, name := range c.flashsaleServices() {
		checkInstance(t, c, env, name, usage.String(), nginxIP)
	}
	if init := c.Services["redis-cluster-init"]; !slices.Equal(init.Command[2:], c.servicesNamed("redis-")) {
		t.Errorf("redis-cluster-init forms %v, want every Redis node %v", init.Command[2:], c.servicesNamed("redis-"))
	}
}

// realEnv is the example environment as an operator fills it in: every placeholder replaced by
// a value of their own, the live key for the test key, their own address for the example's.
func realEnv(env map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		v = strings.ReplaceAll(v, "replace-with-at-least-32-random-characters", strings.Repeat("9f3c", 12))
		v = strings.ReplaceAll(v, "replace-me", "5e1f0a7c2b")
		v = strings.Replace(v, "sk_test_", "sk_live_", 1)
		out[k] = strings.ReplaceAll(v, "example.com", "flashsale.test")
	}
	return out
}

// checkInstance: production settings that flashsale accepts, the cluster URLs naming every
// node, nginx's address trusted, the health check a command the binary has (usage is its help).
func checkInstance(t *testing.T, c compose, env map[string]string, name, usage, nginxIP string) {
	t.Helper()
	s := c.Services[name]
	e := map[string]string{}
	for k, v := range s.Environment {
		e[k] = interpolate(t, v, env)
	}
	// The example's values as shipped are refused, each named: a placeholder secret anyone can
	// read here (the webhook's would let anyone forge a payment), a test-mode key, the example
	// address.
	_, err := app.LoadConfig(func(k string) string { return e[k] })
	for _, want := range []string{"FLASHSALE_JWT_SECRET holds the placeholder", "FLASHSALE_STRIPE_WEBHOOK_SECRET holds the placeholder",
		"FLASHSALE_STRIPE_SECRET_KEY holds the placeholder", "FLASHSALE_DATABASE_URL holds the placeholder", "FLASHSALE_STRIPE_SECRET_KEY is a test-mode key",
		"is the documentation's example address"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: the example's placeholders: %v, want a refusal saying %q", name, err, want)
		}
	}
	// With every placeholder replaced, as deploy/flashsale.env.example asks, it starts.
	for k, v := range s.Environment {
		e[k] = interpolate(t, v, realEnv(env))
	}
	cfg, err := app.LoadConfig(func(k string) string { return e[k] })
	if err != nil {
		t.Errorf("%s: flashsale refuses compose.yaml's settings: %v", name, err)
		return
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
		!strings.Contains(usage, "\n  healthcheck") {
		t.Errorf("%s: health check %v, want /flashsale healthcheck (a command of the binary)", name, hc)
	}
	for _, dep := range append(c.servicesNamed("nats-"), "postgres", "redis-cluster-init") {
		if _, ok := s.DependsOn[dep]; !ok {
			t.Errorf("%s does not wait for %s", name, dep)
		}
	}
}

// checkNginxService: nginx proxies to exactly the flashsale services, on the port they listen
// on, publishes the port its config listens on, and starts after them.
func checkNginxService(t *testing.T, c compose) {
	t.Helper()
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
