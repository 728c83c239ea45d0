package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services"
	"github.com/flashsale/flashsale/static"
)

// The script's modules and the stylesheet are served from the embedded files with their
// JavaScript or CSS content type (a module script with another type is refused by the browser
// under nosniff) and the strict CSP: under their hashed names (static.Path) cached for good,
// under their plain names revalidated; the old single script is gone. static/assets_test.go
// tests the names themselves.
func TestStaticAssets(t *testing.T) {
	t.Parallel()
	h := fuzzRouter(services.NewAuth(nil, []byte("static-secret-of-some-length"), time.Hour, time.Now))
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	const immutable, plain = "public, max-age=31536000, immutable", "no-cache"
	for _, c := range []struct{ path, ctype, cache, body string }{
		{static.Path("js/main.js"), "text/javascript; charset=utf-8", immutable, "import("},
		{static.Path("js/sale.js"), "text/javascript; charset=utf-8", immutable, "export function initSalePage"},
		{static.Path("js/dom.js"), "text/javascript; charset=utf-8", immutable, "export function byTestId"},
		{static.Path("style.css"), "text/css; charset=utf-8", immutable, "{"},
		{"/static/js/main.js", "text/javascript; charset=utf-8", plain, "import("},
		{"/static/style.css", "text/css; charset=utf-8", plain, "{"},
	} {
		rec := get(c.path)
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", c.path, rec.Code)
			continue
		}
		if got := rec.Header().Get("Content-Type"); got != c.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", c.path, got, c.ctype)
		}
		if got := rec.Header().Get("Cache-Control"); got != c.cache {
			t.Errorf("GET %s: Cache-Control %q, want %s", c.path, got, c.cache)
		}
		if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q, want nosniff", c.path, got)
		}
		if got := rec.Header().Get("Content-Security-Policy"); !strings.Contains(got, "script-src 'self'") {
			t.Errorf("GET %s: CSP %q, want script-src 'self'", c.path, got)
		}
		if !strings.Contains(rec.Body.String(), c.body) {
			t.Errorf("GET %s: the body does not contain %q", c.path, c.body)
		}
	}
	for _, path := range []string{"/static/app.js", "/static/js/nope.js", "/static/js/main.0123456789.js", "/static/", "/static/js/", "/static/js//"} {
		if rec := get(path); rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, rec.Code)
		}
	}
}
