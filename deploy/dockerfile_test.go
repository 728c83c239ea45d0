package deploy_test

import (
	"debug/buildinfo"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestDockerfileBuild builds the binary exactly as the Dockerfile does: its `go build` line, run
// in a copy of the build context (the repository less .dockerignore), with no GOFLAGS; the
// binary must be static, as distroless/static needs.
func TestDockerfileBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the whole binary with -trimpath (not in the build cache of other tests)")
	}
	build := dockerfileBuildLine(t)
	out := buildLikeDockerfile(t, build)
	checkStaticBinary(t, out)
	// The binary runs and has the healthcheck the image's HEALTHCHECK calls.
	help, err := exec.Command(out, "help").CombinedOutput()
	if err != nil || !strings.Contains(string(help), "healthcheck") {
		t.Errorf("%s help: %v\n%s", out, err, help)
	}
}

// dockerfileBuildLine returns the Dockerfile's one `RUN ... go build` line, after checking it
// and the lines of the image around it.
func dockerfileBuildLine(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(raw)
	var build string
	for _, line := range strings.Split(df, "\n") {
		if rest, ok := strings.CutPrefix(line, "RUN "); ok && strings.Contains(rest, "go build") {
			if build != "" {
				t.Fatalf("the Dockerfile has two go build lines: %q and %q", build, rest)
			}
			build = rest
		}
	}
	// `make docker-check` greps for this line.
	if build != `CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /flashsale .` {
		t.Errorf("the Dockerfile's build line is %q", build)
	}
	for _, want := range []string{"FROM golang:1.26 AS build", "FROM gcr.io/distroless/static-debian12:nonroot",
		"USER nonroot:nonroot", "EXPOSE 8080", "ENV FLASHSALE_ADDR=0.0.0.0:8080", `CMD ["/flashsale", "healthcheck"]`, "COPY --from=build /flashsale /flashsale"} {
		if !strings.Contains(df, want) {
			t.Errorf("the Dockerfile lacks %q", want)
		}
	}
	return build
}

// buildLikeDockerfile runs the build line in a copy of the build context, its variables as the
// environment less GOFLAGS, and returns the binary it wrote (instead of /flashsale).
func buildLikeDockerfile(t *testing.T, build string) string {
	t.Helper()
	words := shellWords(t, build)
	var env []string
	for len(words) > 0 && strings.Contains(words[0], "=") {
		env, words = append(env, words[0]), words[1:]
	}
	out := filepath.Join(t.TempDir(), "flashsale")
	if i := slices.Index(words, "-o"); i < 0 || i+1 >= len(words) || words[i+1] != "/flashsale" {
		t.Fatalf("build line %q: no -o /flashsale", build)
	} else {
		words[i+1] = out
	}
	src := buildContext(t)
	cmd := exec.Command(words[0], words[1:]...)
	cmd.Dir = src
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOFLAGS=") }), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s (in a copy of the build context): %v\n%s", build, err, b)
	}
	return out
}

// checkStaticBinary: no dynamic loader or shared library, no symbols or DWARF, and built with
// CGO_ENABLED=0 and -trimpath.
func checkStaticBinary(t *testing.T, out string) {
	t.Helper()
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary names a dynamic loader (PT_INTERP): not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v: not static", libs)
	}
	// -ldflags="-s -w": no symbol table, no DWARF (Go leaves -ldflags out of the build info
	// under -trimpath, so it is checked in the file).
	if _, err := f.Symbols(); err == nil {
		t.Error("the binary has a symbol table: not built with -s")
	}
	if f.Section(".debug_info") != nil {
		t.Error("the binary has DWARF: not built with -w")
	}
	bi, err := buildinfo.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("build settings %v, want CGO_ENABLED=0 and -trimpath", settings)
	}
}

// shellWords splits a simple shell command line: words separated by blanks, double-quoted
// parts kept together without their quotes.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case r == '\'' || r == '\\' || r == '$' || r == '`':
			t.Fatalf("build line %q: %q is more shell than this test reads", line, r)
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("build line %q: unbalanced quote", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// buildContext copies the repository less what .dockerignore leaves out (its patterns matched
// against top-level names and paths, as `make docker-check` does) to a temporary folder.
func buildContext(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, strings.Trim(line, "/"))
		}
	}
	ignored := func(rel string) bool {
		for _, p := range patterns {
			if ok, _ := filepath.Match(p, rel); ok {
				return true
			}
			if ok, _ := filepath.Match(p, filepath.Base(rel)); ok && !strings.Contains(p, "/") {
				return true
			}
		}
		return false
	}
	dst := filepath.Join(t.TempDir(), "src")
	err = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", path)
		if rel == "." {
			return os.MkdirAll(dst, 0o755)
		}
		if ignored(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}
