package tests

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/testenv"
)

// `flashsale migrate status` lists every migration pending on a fresh database and applied (with
// a time) after `flashsale migrate`; a stray argument is refused with the usage.
func TestMigrateCommandAndStatus(t *testing.T) {
	t.Parallel()
	env := map[string]string{"FLASHSALE_DATABASE_URL": testenv.Postgres(t), "FLASHSALE_LOG_LEVEL": "warn"}
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := app.Run(context.Background(), args, func(k string) string { return env[k] }, &out)
		return out.String(), err
	}
	out, err := run("migrate", "status")
	if err != nil {
		t.Fatalf("migrate status: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "VERSION") || strings.Join(strings.Fields(lines[1]), " ") != "1 001_init.sql pending" ||
		!strings.Contains(lines[len(lines)-1], "pending") {
		t.Fatalf("status of a fresh database:\n%s", out)
	}
	for _, l := range lines[1 : len(lines)-1] {
		if !strings.HasSuffix(l, "pending") {
			t.Errorf("fresh database: %q is not pending", l)
		}
	}
	if out, err := run("migrate"); err != nil || !strings.Contains(out, "migrations applied") {
		t.Fatalf("migrate: %q, %v", out, err)
	}
	out, err = run("migrate", "status")
	if err != nil {
		t.Fatal(err)
	}
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[len(lines)-1], "all ") {
		t.Errorf("after migrate, status ends with %q, want all applied", lines[len(lines)-1])
	}
	for _, l := range lines[1 : len(lines)-1] {
		f := strings.Fields(l)
		if len(f) != 4 || !strings.HasSuffix(f[1], ".sql") || len(f[2]) != len("2006-01-02") {
			t.Errorf("after migrate: %q, want VERSION NAME DATE TIME", l)
		}
	}
	if _, err := run("migrate", "sideways"); err == nil || !strings.Contains(err.Error(), "usage") {
		t.Errorf("migrate sideways: %v, want the usage", err)
	}
}
