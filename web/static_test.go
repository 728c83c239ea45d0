package web

import (
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/static"
)

// The script's modules and the stylesheet are served from the embedded files with their
// JavaScript or CSS content type (a module script with another type is refused by the browser
// under nosniff) and the strict CSP: under their hashed names (static.Path) cached for good,
// under their plain names revalidated; the old single script is gone. static/assets_test.go
// tests the names themselves.
func TestStaticAssets(t *testing.T) {
	t.Parallel()
	h := fuzzRouter(auth.New(auth.Config{Secret: []byte("static-secret-of-some-length"), TTL: time.Hour}, auth.Deps{Now: time.Now}))
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	const immutable, plain = "public, max-age=31536000, immutable", "no-cache"
	for _, c := range []struct{ path, ctype, cache, body string }{
		{static.Path("js/main.js"), "text/javascript; charset=utf-8", immutable, "import("},
		{static.Path("js/sale.js"), "text/javascript; charset=utf-8", immutable, "as initSalePage"}, // minified
		{static.Path("js/dom.js"), "text/javascript; charset=utf-8", immutable, "as byTestId"},
		{"/static/js/sale.js", "text/javascript; charset=utf-8", plain, "export function initSalePage"}, // as embedded
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

var (
	// pageAsset is an asset a page names: its stylesheet, its entry module and its preloads.
	pageAsset = regexp.MustCompile(`(?:href|src)="(/static/[^"]+)"`)
	// moduleImport is a relative import of a served module, static or dynamic.
	moduleImport = regexp.MustCompile(`\b(?:from|import)\s*\(?\s*'(\.\.?/[^']+)'`)
)

// A page, served by the router, names its assets by their hashed names; each is served for good,
// and so is every module those modules import, by the hashed name the served module says.
func TestPagesLoadOneBuild(t *testing.T) {
	t.Parallel()
	h := fuzzRouter(auth.New(auth.Config{Secret: []byte("static-secret-of-some-length"), TTL: time.Hour}, auth.Deps{Now: time.Now}))
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	seen := map[string]bool{}
	var fetch func(from, url string)
	fetch = func(from, url string) {
		if seen[url] {
			return
		}
		seen[url] = true
		rec := get(url)
		if rec.Code != http.StatusOK || rec.Header().Get("Cache-Control") != "public, max-age=31536000, immutable" {
			t.Errorf("%s names %s: %d, Cache-Control %q; want 200, immutable", from, url, rec.Code, rec.Header().Get("Cache-Control"))
			return
		}
		for _, m := range moduleImport.FindAllStringSubmatch(rec.Body.String(), -1) {
			fetch(url, path.Join(path.Dir(url), m[1]))
		}
	}
	for _, page := range []string{"/admin", "/orders", "/no-such-page"} {
		names := pageAsset.FindAllStringSubmatch(get(page).Body.String(), -1)
		if len(names) < 3 {
			t.Errorf("%s names %d assets, want its stylesheet, its entry and its preloads", page, len(names))
		}
		for _, m := range names {
			fetch(page, m[1])
		}
	}
	if len(seen) < 20 {
		t.Errorf("fetched %d assets from the pages; want every module the merchant's page loads", len(seen))
	}
}
