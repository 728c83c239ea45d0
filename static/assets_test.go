package static

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
)

// hashedPath is the URL of a hashed asset: /static/<dir/name>.<10 hex digits>.<ext>.
var hashedPath = regexp.MustCompile(`^/static/([\w/.-]+)\.[0-9a-f]{10}(\.(?:js|css))$`)

func get(t *testing.T, h http.Handler, url string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Every embedded file has a hashed URL that serves it immutable, with its type.
func TestEmbeddedAssets(t *testing.T) {
	set, err := buildAssets(FS)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.byName) < 10 {
		t.Fatalf("%d assets: is js/ embedded?", len(set.byName))
	}
	for name, a := range set.byName {
		url := Path(name)
		m := hashedPath.FindStringSubmatch(url)
		if m == nil || m[1]+m[2] != name {
			t.Errorf("Path(%q) = %q, want /static/%s with a hash before its extension", name, url, name)
			continue
		}
		rec := get(t, Handler(), url)
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d", url, rec.Code)
			continue
		}
		if got := rec.Header().Get("Cache-Control"); got != "public, max-age=31536000, immutable" {
			t.Errorf("GET %s: Cache-Control %q, want immutable for a year", url, got)
		}
		if got, want := rec.Header().Get("Content-Type"), a.ctype; got != want || !strings.Contains(got, "charset=utf-8") {
			t.Errorf("GET %s: Content-Type %q, want %q", url, got, want)
		}
	}
	if Path("js/nope.js") != "/static/js/nope.js" {
		t.Errorf("Path of a file not embedded = %q, want its plain URL", Path("js/nope.js"))
	}
}

// Every import of every served module names a hashed module that is served: the graph a page
// loads is one build's, with no plain name in it.
func TestServedImportsResolve(t *testing.T) {
	n := 0
	for name := range assets.byName {
		if !strings.HasSuffix(name, ".js") {
			continue
		}
		url := Path(name)
		body := get(t, Handler(), url).Body.String()
		for _, m := range importSpec.FindAllStringSubmatch(body, -1) {
			n++
			target := path.Join(path.Dir(url), m[1])
			if !hashedPath.MatchString(target) {
				t.Errorf("%s imports %q: not a hashed name", url, m[1])
				continue
			}
			rec := get(t, Handler(), target)
			if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/javascript; charset=utf-8" {
				t.Errorf("%s imports %q: GET %s answers %d %q", url, m[1], target, rec.Code, rec.Header().Get("Content-Type"))
			}
		}
	}
	if n < 20 {
		t.Errorf("read %d imports in the served modules; the import syntax changed?", n)
	}
}

// A module's name changes when anything it imports changes, directly or not, and only then.
func TestImportChangesImporterName(t *testing.T) {
	files := func(leaf string) fstest.MapFS {
		return fstest.MapFS{
			"js/main.js":  {Data: []byte("import { b } from './b.js';\nconst p = () => import('./page.js');\n")},
			"js/b.js":     {Data: []byte("import { c } from './c.js';\nexport const b = c;\n")},
			"js/c.js":     {Data: []byte("export const c = '" + leaf + "';\n")},
			"js/page.js":  {Data: []byte("import './other.js';\n")},
			"js/other.js": {Data: []byte("export const other = 1;\n")},
			"style.css":   {Data: []byte("body{}\n")},
		}
	}
	before, err := buildAssets(files("one"))
	if err != nil {
		t.Fatal(err)
	}
	after, err := buildAssets(files("two"))
	if err != nil {
		t.Fatal(err)
	}
	for name, changed := range map[string]bool{"js/c.js": true, "js/b.js": true, "js/main.js": true, "js/page.js": false, "js/other.js": false, "style.css": false} {
		if got := before.path(name) != after.path(name); got != changed {
			t.Errorf("%s: renamed %v when c.js changed, want %v (%s, %s)", name, got, changed, before.path(name), after.path(name))
		}
	}
	main := string(after.byName["js/main.js"].body)
	for _, dep := range []string{"js/b.js", "js/page.js"} {
		if want := "./" + path.Base(after.byName[dep].hashed); !strings.Contains(main, `'`+want+`'`) && !strings.Contains(main, `"`+want+`"`) {
			t.Errorf("main.js as served does not import %s as %s:\n%s", dep, want, main)
		}
	}
}

// A module whose import is not embedded, or an import cycle, cannot be named: the build fails.
func TestAssetBuildRefuses(t *testing.T) {
	for what, files := range map[string]fstest.MapFS{
		"missing import": {"js/a.js": {Data: []byte("import { x } from './gone.js';\n")}},
		"cycle": {
			"js/a.js": {Data: []byte("import { b } from './b.js';\n")},
			"js/b.js": {Data: []byte("import { a } from './a.js';\n")},
		},
	} {
		if _, err := buildAssets(files); err == nil {
			t.Errorf("%s: built", what)
		}
	}
}

// A plain name serves the embedded file as it is, to be revalidated (its ETag answers 304); a
// hashed name not of this build, or a made-up file, is a 404 nobody caches.
func TestPlainAndUnknownNames(t *testing.T) {
	rec := get(t, Handler(), "/static/js/main.js")
	src, _ := fs.ReadFile(FS, "js/main.js")
	if rec.Code != http.StatusOK || rec.Body.String() != string(src) {
		t.Fatalf("GET /static/js/main.js: %d, body as embedded %v", rec.Code, rec.Body.String() == string(src))
	}
	if got := rec.Header().Get("Cache-Control"); got != "no-cache" {
		t.Errorf("plain name: Cache-Control %q, want no-cache", got)
	}
	etag := rec.Header().Get("ETag")
	if again := get(t, Handler(), "/static/js/main.js", "If-None-Match", etag); etag == "" || again.Code != http.StatusNotModified {
		t.Errorf("plain name again with its ETag %q: %d, want 304", etag, again.Code)
	}
	hashed := Path("js/main.js")
	if again := get(t, Handler(), hashed, "If-None-Match", get(t, Handler(), hashed).Header().Get("ETag")); again.Code != http.StatusNotModified {
		t.Errorf("hashed name again with its ETag: %d, want 304", again.Code)
	}
	for _, url := range []string{"/static/js/main.0123456789.js", "/static/js/nope.js", "/static/style.abcdefabcd.css", "/static/", "/js/main.js"} {
		rec := get(t, Handler(), url)
		if rec.Code != http.StatusNotFound || rec.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("GET %s: %d %q, want 404 no-store", url, rec.Code, rec.Header().Get("Cache-Control"))
		}
	}
}

// A page preloads what its modules import statically, not what main.js may import() for
// another page.
func TestPreloadsFollowStaticImports(t *testing.T) {
	set, err := buildAssets(fstest.MapFS{
		"js/main.js":  {Data: []byte("import { b } from './b.js';\nconst p = () => import('./page.js');\n")},
		"js/b.js":     {Data: []byte("import { c } from './c.js';\nexport const b = c;\n")},
		"js/c.js":     {Data: []byte("export const c = 1;\n")},
		"js/page.js":  {Data: []byte("import './other.js';\nimport { c } from './c.js';\n")},
		"js/other.js": {Data: []byte("export const other = 1;\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	names := func(urls []string) string {
		var out []string
		for _, u := range urls {
			m := hashedPath.FindStringSubmatch(u)
			out = append(out, strings.TrimPrefix(m[1], "js/")+m[2])
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct {
		roots []string
		want  string
	}{
		{[]string{"js/main.js"}, "main.js,b.js,c.js"},
		{[]string{"js/page.js", "js/main.js"}, "page.js,other.js,c.js,main.js,b.js"},
	} {
		if got := names(set.preloads(c.roots...)); got != c.want {
			t.Errorf("preloads(%v) = %s, want %s", c.roots, got, c.want)
		}
	}
}

// The stylesheet and the modules are served minified under their hashed names (esbuild, at
// start): smaller by a sixth at least, each module's exports and imports kept; the plain names
// serve the files as embedded.
func TestAssetsMinified(t *testing.T) {
	for name, a := range assets.byName {
		// i18n.js and i18n_zh_admin.js are dictionaries: their strings are most of them, and
		// minifying keeps them.
		dictionary := name == "js/i18n.js" || name == "js/i18n_zh_admin.js"
		if len(a.body) > len(a.source)*5/6 && len(a.source) > 1024 && !dictionary || len(a.body) >= len(a.source) && len(a.source) > 1024 {
			t.Errorf("%s: %d bytes served for %d embedded: not minified", name, len(a.body), len(a.source))
		}
		if !strings.HasSuffix(name, ".js") {
			continue
		}
		for _, m := range regexp.MustCompile(`(?m)^export (?:async )?(?:function|const|let|class) (\w+)`).FindAllStringSubmatch(string(a.source), -1) {
			if !regexp.MustCompile(`\bas ` + m[1] + `\b|export\s*(?:function|const|let|class)\s+` + m[1] + `\b|[{,]` + m[1] + `[},]`).Match(a.body) {
				t.Errorf("%s: the export %s is gone from the minified module", name, m[1])
			}
		}
		if got, want := len(importSpec.FindAll(a.body, -1)), len(a.imports); got != want {
			t.Errorf("%s: %d imports minified, %d embedded", name, got, want)
		}
	}
}
