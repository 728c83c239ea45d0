package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
)

// The script's modules and the stylesheet are served from the embedded files with their
// JavaScript or CSS content type (a module script with another type is refused by the browser
// under nosniff), the static cache header and the strict CSP; the old single script is gone.
func TestStaticAssets(t *testing.T) {
	t.Parallel()
	h := fuzzRouter(auth.NewAuth(nil, []byte("static-secret-of-some-length"), time.Hour, time.Now))
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	for _, c := range []struct{ path, ctype, body string }{
		{"/static/js/main.js", "text/javascript; charset=utf-8", "import("},
		{"/static/js/sale.js", "text/javascript; charset=utf-8", "export function initSalePage"},
		{"/static/js/dom.js", "text/javascript; charset=utf-8", "export function byTestId"},
		{"/static/style.css", "text/css; charset=utf-8", "{"},
	} {
		rec := get(c.path)
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", c.path, rec.Code)
			continue
		}
		if got := rec.Header().Get("Content-Type"); got != c.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", c.path, got, c.ctype)
		}
		if got := rec.Header().Get("Cache-Control"); got != "public, max-age=300" {
			t.Errorf("GET %s: Cache-Control %q, want public, max-age=300", c.path, got)
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
	for _, path := range []string{"/static/app.js", "/static/js/nope.js", "/static/", "/static/js/", "/static/js//"} {
		if rec := get(path); rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, rec.Code)
		}
	}
}
