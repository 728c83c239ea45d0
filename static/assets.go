package static

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Every asset is served under two names:
//
//   - its content-hashed name, /static/js/sale.1a2b3c4d5e.js, with
//     Cache-Control: public, max-age=31536000, immutable. The pages name assets only this way
//     (Path). A module's hash covers its imports' hashed names: it is hashed after its imports,
//     with its import specifiers rewritten to their hashed names, so a change anywhere below a
//     module renames it too, and a page can never load a new main.js with an old sale.js (or the
//     reverse) from a cache, however long that cache keeps them.
//   - its plain name, /static/js/sale.js, for pages cached before a deploy that introduced or
//     renamed an asset and for people typing the address: the embedded file as it is (its
//     imports plain too, so the graph is one version), with Cache-Control: no-cache and an ETag,
//     so a cache asks again every time and gets a 304 while nothing changed.
//
// A hashed name that is not this build's (an older or newer deploy's, or made up) is a 404 with
// no-store: serving the current bytes under another version's immutable name would pin the wrong
// bytes in caches for a year. So a page rendered by the previous build (a CDN keeps a page up to
// 35 s: max-age=5, stale-while-revalidate=30) finds its modules only where a cache still holds
// them; while instances of two builds serve side by side, a page from one may ask the other for
// its modules and get 404s. A deploy that must avoid that keeps the previous build's /static/
// reachable for a minute (a CDN that caches for good does).

// Prefix is where the assets are served.
const Prefix = "/static/"

const (
	cacheImmutable = "public, max-age=31536000, immutable"
	cachePlain     = "no-cache"
	hashLen        = 10 // hex digits of SHA-256 in a hashed name: 40 bits
)

// importSpec finds the relative specifiers of a module's imports: `import … from './x.js'`,
// `export … from './x.js'`, `import './x.js'` and `import('./x.js')`. Group 1 is the specifier.
var importSpec = regexp.MustCompile(`\b(?:from|import)\s*\(?\s*['"](\.\.?/[^'"\s]+)['"]`)

// asset is one embedded file.
type asset struct {
	name    string   // as embedded: "js/sale.js"
	hashed  string   // "js/sale.1a2b3c4d5e.js"
	source  []byte   // the embedded bytes, served under name
	min     []byte   // source minified (minify.go): what body is made of
	body    []byte   // served under hashed: min, its imports rewritten to their hashed names
	imports []string // the embedded names of its imports, in order of appearance
	loads   []string // those of its static imports: what loading it loads (not import())
	ctype   string
	etag    string // of body
	srcTag  string // of source
	gzBody  []byte // body and source gzipped once, at start (nil where it would not be smaller)
	gzSrc   []byte
}

// assetSet is a build's assets, by plain and by hashed name.
type assetSet struct {
	byName   map[string]*asset
	byHashed map[string]*asset
}

// buildAssets reads every file of fsys and names it by its content and its imports'. An import
// of a module fsys does not hold, or an import cycle (its hash would depend on itself), is an error.
func buildAssets(fsys fs.FS) (*assetSet, error) {
	set := &assetSet{byName: map[string]*asset{}, byHashed: map[string]*asset{}}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		m, err := minify(p, b)
		if err != nil {
			return err
		}
		set.byName[p] = &asset{name: p, source: b, min: m, ctype: contentType(p)}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, a := range set.byName {
		if err := a.findImports(set.byName); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(set.byName))
	for n := range set.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	state := map[string]int{} // 1: being hashed, 2: hashed
	for _, n := range names {
		if err := set.hash(n, state, nil); err != nil {
			return nil, err
		}
	}
	return set, nil
}

// findImports reads a module's relative imports; other files have none.
func (a *asset) findImports(all map[string]*asset) error {
	if !strings.HasSuffix(a.name, ".js") {
		return nil
	}
	for _, m := range importSpec.FindAllSubmatch(a.source, -1) {
		target := path.Join(path.Dir(a.name), string(m[1]))
		if all[target] == nil {
			return fmt.Errorf("static: %s imports %q, which is not embedded", a.name, m[1])
		}
		a.imports = append(a.imports, target)
		if !strings.Contains(string(m[0]), "(") {
			a.loads = append(a.loads, target)
		}
	}
	return nil
}

// hash names the asset n after its imports, bottom-up.
func (s *assetSet) hash(n string, state map[string]int, chain []string) error {
	switch state[n] {
	case 2:
		return nil
	case 1:
		return fmt.Errorf("static: import cycle %s -> %s: a module's name cannot depend on itself", strings.Join(chain, " -> "), n)
	}
	state[n] = 1
	a := s.byName[n]
	for _, imp := range a.imports {
		if err := s.hash(imp, state, append(chain, n)); err != nil {
			return err
		}
	}
	a.body = a.rewrite(s.byName)
	sum := sha256.Sum256(a.body)
	h := hex.EncodeToString(sum[:])[:hashLen]
	ext := path.Ext(n)
	a.hashed = strings.TrimSuffix(n, ext) + "." + h + ext
	a.etag = `"` + h + `"`
	src := sha256.Sum256(a.source)
	a.srcTag = `"` + hex.EncodeToString(src[:])[:hashLen] + `"`
	a.gzBody, a.gzSrc = gzipped(a.body), gzipped(a.source)
	s.byHashed[a.hashed] = a
	state[n] = 2
	return nil
}

// rewrite returns the module with each relative import specifier replaced by its import's
// hashed name, relative the same way (./sale.js becomes ./sale.1a2b3c4d5e.js).
func (a *asset) rewrite(all map[string]*asset) []byte {
	if len(a.imports) == 0 {
		return a.min
	}
	return importSpec.ReplaceAllFunc(a.min, func(m []byte) []byte {
		sub := importSpec.FindSubmatchIndex(m)
		spec := string(m[sub[2]:sub[3]])
		target := all[path.Join(path.Dir(a.name), spec)]
		renamed := path.Join(path.Dir(spec), path.Base(target.hashed))
		if strings.HasPrefix(spec, "./") && !strings.HasPrefix(renamed, ".") {
			renamed = "./" + renamed
		}
		return bytes.Join([][]byte{m[:sub[2]], []byte(renamed), m[sub[3]:]}, nil)
	})
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		// A module script must come as JavaScript (the answers are nosniff): say so here rather
		// than trust the host's MIME table to map .js.
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// path returns the URL of the asset name ("js/sale.js", "style.css"): its hashed name. A name
// that is not embedded keeps its plain URL (a page test checks that every asset a page names is
// hashed).
func (s *assetSet) path(name string) string {
	if a := s.byName[name]; a != nil {
		return Prefix + a.hashed
	}
	return Prefix + name
}

// preloads returns the URLs of the modules roots and every module they import statically,
// directly or not, each once, depth first in the order of the imports.
func (s *assetSet) preloads(roots ...string) []string {
	seen := map[string]bool{}
	var urls []string
	var visit func(string)
	visit = func(n string) {
		a := s.byName[n]
		if a == nil || seen[n] {
			return
		}
		seen[n] = true
		urls = append(urls, Prefix+a.hashed)
		for _, imp := range a.loads {
			visit(imp)
		}
	}
	for _, r := range roots {
		visit(r)
	}
	return urls
}

// ServeHTTP serves the asset that r's path names under Prefix: a hashed name immutable, a plain
// name to be revalidated, anything else 404.
func (s *assetSet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, Prefix)
	var a *asset
	if ok {
		a = s.byHashed[name]
	}
	body, gz, cache, etag := []byte(nil), []byte(nil), cacheImmutable, ""
	switch {
	case a != nil:
		body, gz, etag = a.body, a.gzBody, a.etag
	case ok && s.byName[name] != nil:
		a = s.byName[name]
		body, gz, cache, etag = a.source, a.gzSrc, cachePlain, a.srcTag
	default:
		w.Header().Set("Cache-Control", "no-store")
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Cache-Control", cache)
	h.Set("Content-Type", a.ctype)
	if gz != nil {
		// Both encodings may be asked for by the same cache: each has a tag of its own, so
		// that a revalidation never takes one for the other.
		h.Add("Vary", "Accept-Encoding")
		if AcceptsGzip(r.Header.Get("Accept-Encoding")) {
			h.Set("Content-Encoding", "gzip")
			body, etag = gz, strings.TrimSuffix(etag, `"`)+`-gz"`
		}
	}
	h.Set("ETag", etag)
	http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(body))
}

// gzipped returns b compressed at gzip's best level, or nil where that is not smaller by a tenth
// at least (a tiny file): done once per asset, at start.
func gzipped(b []byte) []byte {
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestCompression)
	_, _ = zw.Write(b)
	_ = zw.Close()
	if out.Len() > len(b)*9/10 {
		return nil
	}
	return out.Bytes()
}

// AcceptsGzip says whether an Accept-Encoding header value accepts gzip (and does not refuse it
// with q=0). The static assets and the compression of the other answers (web) both ask it.
func AcceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding != "gzip" && coding != "x-gzip" && coding != "*" {
			continue
		}
		q := strings.ReplaceAll(strings.ToLower(params), " ", "")
		if v, ok := strings.CutPrefix(q, "q="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f <= 0 {
				return false
			}
		}
		return true
	}
	return false
}

// assets are the embedded files of this build.
var assets = func() *assetSet {
	s, err := buildAssets(FS)
	if err != nil {
		panic(err) // the embedded files are this build's: TestEmbeddedAssets fails first
	}
	return s
}()

// Path returns the URL a page names the asset by: Path("js/main.js") is
// "/static/js/main.1a2b3c4d5e.js". Every page names its stylesheet and modules through it.
func Path(name string) string {
	return assets.path(name)
}

// Preloads returns the URLs of the modules ("js/sale.js") and of every module they import
// statically, directly or not, by their hashed names: what a page loads with them, to be named
// in its <link rel="modulepreload"> hints. A dynamic import() is left out: main.js loads only the
// module of the page it is on.
func Preloads(modules ...string) []string {
	return assets.preloads(modules...)
}

// Handler serves the assets under Prefix (the request's whole path, /static/…).
func Handler() http.Handler {
	return assets
}
