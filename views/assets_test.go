package views

import (
	"io/fs"
	"path"
	"regexp"
	"slices"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/flashsale/flashsale/static"
)

var (
	// staticImport matches `import { a, b } from './x.js';` (and `import './x.js';`).
	staticImport = regexp.MustCompile(`(?m)^import (?:[^'"]*? from )?'\./([\w.-]+\.js)';`)
	// pageImport matches an entry of PAGES in main.js: { testid: 'sale', load: () => import('./sale.js'), …
	pageImport = regexp.MustCompile(`testid: '([\w-]+)', load: \(\) => import\('\./([\w.-]+\.js)'\)`)
	// hashedAsset is the URL of an asset by its content-hashed name (static.Path).
	hashedAsset = regexp.MustCompile(`^/static/[\w/.-]+\.[0-9a-f]{10}\.(?:js|css)$`)
)

func readModule(t *testing.T, name string) string {
	t.Helper()
	b, err := fs.ReadFile(static.FS, path.Join("js", name))
	if err != nil {
		t.Fatalf("module %s: %v", name, err)
	}
	return string(b)
}

// moduleClosure returns every module the given ones import, directly or not, themselves included.
func moduleClosure(t *testing.T, roots ...string) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	var visit func(string)
	visit = func(m string) {
		if seen[m] {
			return
		}
		seen[m] = true
		for _, imp := range staticImport.FindAllStringSubmatch(readModule(t, m), -1) {
			visit(imp[1])
		}
	}
	for _, r := range roots {
		visit(r)
	}
	return seen
}

// checkModulePreloads checks that a rendered page hints exactly the modules its script will load:
// what main.js imports, plus the module main.js imports for the page's root element, plus what
// those import; and nothing else.
func checkModulePreloads(t *testing.T, doc *goquery.Document) {
	t.Helper()
	roots := []string{"main.js"}
	for _, p := range pageImport.FindAllStringSubmatch(readModule(t, "main.js"), -1) {
		if doc.Find(byTestID(p[1])).Length() > 0 {
			roots = append(roots, p[2])
		}
	}
	want := []string{}
	for m := range moduleClosure(t, roots...) {
		if m != "main.js" { // the script element fetches it
			want = append(want, static.Path("js/"+m))
		}
	}
	got := []string{}
	doc.Find(`head link[rel="modulepreload"]`).Each(func(_ int, s *goquery.Selection) {
		got = append(got, s.AttrOr("href", ""))
	})
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("modulepreload hints %q, want %q (the page module %q and every module imported)", got, want, roots[1:])
	}
}

// Every module of static/js is embedded and reachable from main.js (statically or as a page's module),
// and every page module main.js names is one of the pages' preloads. boot.js is no module: the
// layout runs it as a classic script (TestLayout).
func TestModulesReachable(t *testing.T) {
	entries, err := fs.ReadDir(static.FS, "js")
	if err != nil {
		t.Fatal(err)
	}
	pages := pageImport.FindAllStringSubmatch(readModule(t, "main.js"), -1)
	if len(pages) < 5 {
		t.Fatalf("main.js names %d page modules, want the 5 pages' (is PAGES still in the form the test reads?)", len(pages))
	}
	roots := []string{"main.js"}
	reachable := map[string]bool{"boot.js": true}
	for _, p := range pages {
		roots = append(roots, p[2])
	}
	reach := moduleClosure(t, roots...)
	for _, e := range entries {
		if !reach[e.Name()] && !reachable[e.Name()] {
			t.Errorf("static/js/%s is not imported by any page", e.Name())
		}
	}
	for _, p := range pages {
		found := false
		for _, mod := range pageModules {
			found = found || mod == p[2]
		}
		if !found {
			t.Errorf("main.js loads %s for [data-testid=%q], but no page preloads it", p[2], p[1])
		}
	}
}

// maxScriptBytes is the most a module of static/js may weigh: past it, split it by concern.
const maxScriptBytes = 40_000

// No module of the script is over 40 kB.
func TestScriptSizes(t *testing.T) {
	entries, err := fs.ReadDir(static.FS, "js")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Size() > maxScriptBytes {
			t.Errorf("static/js/%s is %d bytes, over %d: split it into modules by concern", e.Name(), info.Size(), maxScriptBytes)
		}
	}
}
