package app

import (
	"io"
	"log/slog"
	"runtime/debug"
	"testing"
)

// The server collects garbage at DefaultGCPercent unless GOGC is set, when the environment wins.
func TestGCTarget(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	was := debug.SetGCPercent(100)
	defer debug.SetGCPercent(was)
	for _, c := range []struct {
		gogc string
		want int
	}{{"", DefaultGCPercent}, {"50", 100}} {
		debug.SetGCPercent(100) // what the runtime set from the environment, here its default
		gcTarget(func(k string) string {
			if k == "GOGC" {
				return c.gogc
			}
			return ""
		}, log)
		if got := debug.SetGCPercent(100); got != c.want {
			t.Errorf("GOGC=%q: the collector's target is %d, want %d", c.gogc, got, c.want)
		}
	}
}
