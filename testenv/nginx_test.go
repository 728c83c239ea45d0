package testenv_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flashsale/flashsale/deploy"
	"github.com/flashsale/flashsale/testenv"
)

func TestRenderNginx(t *testing.T) {
	t.Parallel()
	site := testenv.NginxSite{Upstreams: []string{"127.0.0.1:1001", "127.0.0.1:1002"}, Listen: "127.0.0.1:2000", CacheDir: "/tmp/x/cache"}
	out, err := testenv.RenderNginx("", site)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"    server 127.0.0.1:1001 max_fails=3 fail_timeout=5s;\n    server 127.0.0.1:1002 max_fails=3 fail_timeout=5s;\n    # Idle",
		"listen 127.0.0.1:2000;",
		"proxy_cache_path /tmp/x/cache levels=1:2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered config lacks %q", want)
		}
	}
	for _, gone := range []string{"flashsale1:8080", "listen 80;", "/var/cache/nginx"} {
		if strings.Contains(out, gone) {
			t.Errorf("rendered config still has %q", gone)
		}
	}
	// Everything else is the deployment's file, line for line.
	if !strings.Contains(out, "limit_req zone=flashsale_buy burst=10 nodelay;") || !strings.Contains(out, "proxy_cache_lock on;") {
		t.Error("rendered config lost the deployment's directives")
	}
	// A config without the lines the rendering replaces is refused, not half rendered.
	for name, conf := range map[string]string{
		"no upstream":   strings.Replace(deploy.NginxConf, "upstream flashsale {", "upstream other {", 1),
		"two listens":   strings.Replace(deploy.NginxConf, "listen 80;", "listen 80;\n    listen 81;", 1),
		"no cache path": strings.Replace(deploy.NginxConf, "\nproxy_cache_path", "\n# proxy_cache_path", 1),
	} {
		if _, err := testenv.RenderNginx(conf, site); err == nil {
			t.Errorf("%s: rendered without an error", name)
		}
	}
}

// TestNginxInFront starts nginx before a stand-in upstream: a cacheable answer is served from
// the cache the second time, a no-store one never.
func TestNginxInFront(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/sales/1" {
			w.Header().Set("Cache-Control", "public, max-age=60")
		} else {
			w.Header().Set("Cache-Control", "no-store")
		}
		io.WriteString(w, "ok "+r.URL.Path)
	}))
	defer up.Close()
	n := testenv.Nginx(t, strings.TrimPrefix(up.URL, "http://"))
	get := func(path string) (string, string) {
		t.Helper()
		resp, err := http.Get(n.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != "ok "+path {
			t.Fatalf("GET %s: %d %q", path, resp.StatusCode, b)
		}
		return resp.Header.Get("X-Cache-Status"), resp.Header.Get("Cache-Control")
	}
	if s, _ := get("/sales/1"); s != "MISS" {
		t.Errorf("first GET /sales/1: X-Cache-Status %q, want MISS", s)
	}
	if s, _ := get("/sales/1"); s != "HIT" {
		t.Errorf("second GET /sales/1: X-Cache-Status %q, want HIT", s)
	}
	get("/orders")
	if s, cc := get("/orders"); s != "" || cc != "no-store" {
		t.Errorf("GET /orders: X-Cache-Status %q, Cache-Control %q; want none, no-store", s, cc)
	}
	if got := hits.Load(); got != 3 {
		t.Errorf("upstream saw %d requests, want 3 (one for the cached page, two for /orders)", got)
	}
}

// TestNginxOwnAnswers: what nginx answers itself is in the contract's {"error","message"} shape:
// 503 UNAVAILABLE when no instance can be reached, 400 INVALID_INPUT for a body over 1 MiB.
func TestNginxOwnAnswers(t *testing.T) {
	t.Parallel()
	// An upstream that refuses connections: a free port nobody listens on.
	n := testenv.Nginx(t, "127.0.0.1:"+strconv.Itoa(testenv.FreePort(t)))
	check := func(method, path string, body io.Reader, status int, code string) {
		t.Helper()
		req, _ := http.NewRequest(method, n.URL()+path, body)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got struct{ Error, Message string }
		raw, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(raw, &got); err != nil || resp.StatusCode != status || got.Error != code || got.Message == "" ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("%s %s: %d %s %q, want %d with {\"error\":%q}", method, path, resp.StatusCode, resp.Header.Get("Content-Type"), raw, status, code)
		}
	}
	check("GET", "/api/time", nil, http.StatusServiceUnavailable, "UNAVAILABLE")
	check("POST", "/api/flash-sales/items/1/purchase", nil, http.StatusServiceUnavailable, "UNAVAILABLE")
	check("POST", "/api/admin/sales", strings.NewReader(strings.Repeat("x", 2<<20)), http.StatusBadRequest, "INVALID_INPUT")
}
