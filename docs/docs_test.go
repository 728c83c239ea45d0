// Package docs holds the project's documents beyond the top-level ones; this test keeps all of
// them, the top-level ones included, readable by a newcomer: a short README, relative links that
// lead somewhere, and sentences that stand on their own.
package docs

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository, seen from this package's folder.
const root = ".."

// maxReadmeLines: the README says what the project is, shows it, gives the two commands and says
// where to read on; everything else has a document of its own.
const maxReadmeLines = 200

// skipped are folders that hold no project document: generated output, local data, build results.
var skipped = map[string]bool{
	"bench-results":   true,
	"node_modules":    true,
	"vendor":          true,
	"tests/chaos/out": true, // the fault suite's tables, written by each run (gitignored)
}

// markdownFiles lists every Markdown document of the project, relative to root.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || skipped[rel]) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".md") {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no Markdown file found")
	}
	return files
}

func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n >= maxReadmeLines {
		t.Errorf("README.md has %d lines, want under %d: move the detail to docs/ and link it", n, maxReadmeLines)
	}
}

// A line of prose, with what is inside code (fenced blocks, inline spans) told apart.
type line struct {
	n     int    // 1-based
	text  string // the whole line
	prose string // the line without inline code spans; "" inside a fenced block
}

var inlineCode = regexp.MustCompile("`[^`]*`")

func readLines(t *testing.T, file string) []line {
	t.Helper()
	f, err := os.Open(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []line
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(text), "```") {
			fenced = !fenced
			lines = append(lines, line{n: n, text: text})
			continue
		}
		l := line{n: n, text: text}
		if !fenced {
			l.prose = inlineCode.ReplaceAllString(text, "")
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

var heading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)

// anchors returns the anchors GitHub gives the headings of a document: lower case, punctuation
// dropped, spaces as hyphens, a repeated heading numbered -1, -2, ...
func anchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	seen := map[string]int{}
	out := map[string]bool{}
	for _, l := range readLines(t, file) {
		m := heading.FindStringSubmatch(l.text)
		if m == nil || l.prose == "" { // not a heading, or a comment in a fenced block
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		slug := b.String()
		if k := seen[slug]; k > 0 {
			out[slug+"-"+strconv.Itoa(k)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// Inline links and images, [text](target "title"), and reference definitions, [label]: target.
var (
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`^\s*\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// Every relative link of every document leads to a file or folder of the repository, and its
// #anchor, if any, to a heading of the Markdown document it names.
func TestRelativeLinksResolve(t *testing.T) {
	anchorCache := map[string]map[string]bool{}
	for _, file := range markdownFiles(t) {
		for _, l := range readLines(t, file) {
			if l.prose == "" {
				continue
			}
			var targets []string
			for _, m := range inlineLink.FindAllStringSubmatch(l.prose, -1) {
				targets = append(targets, m[1])
			}
			if m := refLink.FindStringSubmatch(l.prose); m != nil {
				targets = append(targets, m[1])
			}
			for _, target := range targets {
				if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
					continue // an absolute URL
				}
				path, anchor, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					if strings.HasPrefix(path, "/") {
						t.Errorf("%s:%d: link %q is absolute; make it relative to the document", file, l.n, target)
						continue
					}
					dest = filepath.ToSlash(filepath.Join(filepath.Dir(file), path))
					if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
						t.Errorf("%s:%d: link %q leads nowhere (%s does not exist)", file, l.n, target, dest)
						continue
					}
				}
				if anchor == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				if anchorCache[dest] == nil {
					anchorCache[dest] = anchors(t, dest)
				}
				if !anchorCache[dest][anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", file, l.n, target, dest, anchor)
				}
			}
		}
	}
}

// What a reader cannot look up: a numbered issue of the project's tracker ("issue 18", "Issue 11",
// "issues 8 and 9", "#12"), or the source articles the work was drawn from ("seed 003"). A
// sentence says what was done and why instead. The verb stays allowed ("seeds the demo sale", "the
// floors are seeded from Postgres"), as do Redis Cluster's seed nodes and a random seed.
var unreadable = []struct {
	re   *regexp.Regexp
	what string
}{
	{regexp.MustCompile(`\b[Ii]ssues?\s+#?\d+(\.\d+)?`), "names a numbered issue"},
	{regexp.MustCompile(`(^|[\s(\[,;:])#\d+\b`), "names a numbered issue"},
	{regexp.MustCompile(`(?i)\bseeds?\s+\d+`), `names a source article ("seed NNN")`},
	{regexp.MustCompile(`(?i)\bseeds?\s+(article|source|document)s?\b`), "names the source articles"},
}

func TestNoUnreadableReferences(t *testing.T) {
	for _, file := range markdownFiles(t) {
		for _, l := range readLines(t, file) {
			for _, u := range unreadable {
				if m := u.re.FindString(l.text); m != "" {
					t.Errorf("%s:%d: %s (%q): say what was done and why instead", file, l.n, u.what, strings.TrimSpace(m))
				}
			}
		}
	}
}

// The checks themselves: each pattern catches what it is for, and lets the real uses pass.
func TestUnreadablePatterns(t *testing.T) {
	bad := []string{"issue 18", "Issue 11 on the 2-core machine", "issues 8 and 9", "issue 18.1",
		"see #12", "(#3)", "seed 003's case", "Seed 000", "the seed articles"}
	good := []string{"seeds the demo accounts", "`1` seeds the demo merchant", "seeded from Postgres",
		"by its seed nodes", "with a fixed seed, so", "user JWT and seed", "a token issued 18 s ago",
		"sale-phone.png#x", "DEPLOYMENT.md#on-a-redis-cluster", "C# code", "issue a token"}
	match := func(s string) bool {
		for _, u := range unreadable {
			if u.re.MatchString(s) {
				return true
			}
		}
		return false
	}
	for _, s := range bad {
		if !match(s) {
			t.Errorf("%q passes the checks, want it caught", s)
		}
	}
	for _, s := range good {
		if match(s) {
			t.Errorf("%q is caught, want it allowed", s)
		}
	}
}
