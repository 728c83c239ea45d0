package views

import (
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/static"
)

// The script's words: every key a shopper module passes to t() has its Chinese in i18n.js's ZH,
// with the same {placeholders}, and ZH holds no key that no module uses.

var (
	// zhEntry is one line of the ZH table: 'key': 'value',
	zhEntry = regexp.MustCompile(`(?m)^\s*'((?:[^'\\]|\\.)*)': '((?:[^'\\]|\\.)*)',?\s*$`)
	// jsString is a single-quoted JavaScript string literal.
	jsString    = regexp.MustCompile(`'((?:[^'\\]|\\.)*)'`)
	placeholder = regexp.MustCompile(`\{\w+\}`)
	// tCall is the start of a call of i18n.js's t.
	tCall = regexp.MustCompile(`(^|[^\w.$])t\(`)
)

// dynamicKeys are keys a module passes as a value, not a literal: the roles of session.js.
var dynamicKeys = []string{"shopper", "merchant"}

// jsUnquote decodes the text of a single-quoted JavaScript literal (\u2019, \', \\).
func jsUnquote(t *testing.T, s string) string {
	t.Helper()
	q := `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\'`, `'`), `"`, `\"`) + `"`
	u, err := strconv.Unquote(q)
	if err != nil {
		t.Fatalf("cannot decode the JavaScript string '%s': %v", s, err)
	}
	return u
}

// firstArgument returns the source of the first argument of the call whose "(" is at open.
func firstArgument(src string, open int) string {
	depth := 0
	for i := open; i < len(src); i++ {
		switch c := src[i]; c {
		case '\'':
			for i++; i < len(src) && src[i] != '\''; i++ {
				if src[i] == '\\' {
					i++
				}
			}
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			depth--
			if depth == 0 {
				return src[open+1 : i]
			}
		case ',':
			if depth == 1 {
				return src[open+1 : i]
			}
		}
	}
	return src[open+1:]
}

// usedKeys returns the literal keys of every t() call in src: the literals of its first
// argument, but not those compared with (st === 'PENDING' ? 'a' : 'b').
func usedKeys(t *testing.T, src string) []string {
	var keys []string
	for _, loc := range tCall.FindAllStringIndex(src, -1) {
		arg := firstArgument(src, loc[1]-1)
		for _, m := range jsString.FindAllStringSubmatchIndex(arg, -1) {
			before := strings.TrimSpace(arg[:m[0]])
			if strings.HasSuffix(before, "===") || strings.HasSuffix(before, "!==") {
				continue
			}
			keys = append(keys, jsUnquote(t, arg[m[2]:m[3]]))
		}
	}
	return keys
}

func TestScriptWordsInChinese(t *testing.T) {
	zh := map[string]string{}
	for _, table := range []struct{ module, name string }{{"i18n.js", "const ZH = {"}, {"i18n_zh_admin.js", "addWords({"}} {
		src := readModule(t, table.module)
		start := strings.Index(src, table.name)
		end := strings.Index(src[max(start, 0):], "\n}") + max(start, 0)
		if start < 0 || end < start {
			t.Fatalf("%s: no table %q", table.module, table.name)
		}
		for _, m := range zhEntry.FindAllStringSubmatch(src[start:end], -1) {
			k, v := jsUnquote(t, m[1]), jsUnquote(t, m[2])
			if _, dup := zh[k]; dup {
				t.Errorf("%s: %q twice", table.module, k)
			}
			zh[k] = v
		}
	}
	if len(zh) < 100 {
		t.Fatalf("read %d ZH entries; the table's format changed?", len(zh))
	}

	entries, err := fs.ReadDir(static.FS, "js")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, e := range entries {
		if e.Name() == "i18n.js" || e.Name() == "i18n_zh_admin.js" || !strings.HasSuffix(e.Name(), ".js") {
			continue
		}
		for _, k := range usedKeys(t, readModule(t, e.Name())) {
			used[k] = true
			v, ok := zh[k]
			if !ok {
				t.Errorf("%s: t(%q) has no Chinese in i18n.js", e.Name(), k)
				continue
			}
			kp, vp := placeholder.FindAllString(k, -1), placeholder.FindAllString(v, -1)
			slices.Sort(kp)
			slices.Sort(vp)
			if !slices.Equal(kp, vp) {
				t.Errorf("%q: placeholders %v, its Chinese %q has %v", k, kp, v, vp)
			}
		}
	}
	for k := range zh {
		if !used[k] && !slices.Contains(dynamicKeys, k) {
			t.Errorf("ZH has %q, which no module uses", k)
		}
	}
	for _, must := range []string{"Buy", "Sold out", "Awaiting payment", "Pay now", "{n} left", "Starts in {d}"} {
		if !used[must] {
			t.Errorf("no module translates %q", must)
		}
	}
}
