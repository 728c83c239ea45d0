package tests

import (
	"os"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/internal/app"
)

// The README's configuration table lists every FLASHSALE_* variable with its real default.
func TestReadmeDocumentsEveryVariable(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if strings.HasPrefix(name, "FLASHSALE_") {
			rows[name] = strings.TrimSpace(cells[2])
		}
	}
	for _, v := range app.ConfigVars {
		got, ok := rows[v.Name]
		if !ok {
			t.Errorf("README has no row for %s", v.Name)
			continue
		}
		want := "`" + v.Default + "`"
		if v.Default == "" {
			want = "(empty)"
		}
		if got != want {
			t.Errorf("README default of %s = %s, want %s", v.Name, got, want)
		}
	}
	if len(rows) != len(app.ConfigVars) {
		t.Errorf("README lists %d variables, the binary has %d", len(rows), len(app.ConfigVars))
	}
}
