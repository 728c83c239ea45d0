package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

// A Scenario is one benchmark: its name and usage, the flags of its own, how it runs and how a
// run is judged. Each lives in its own file (scenario_*.go); a new one is that file plus a line
// in scenarios. The instance whose flags were parsed is the one that runs, so a scenario may
// keep flags in itself (a pointer type) rather than in Options, at the price of their not
// appearing in the report's "options".
type Scenario interface {
	// Name is the sub-command ("rush").
	Name() string
	// Usage describes the scenario under "scenarios:" in the usage text, one line per line.
	Usage() []string
	// Flags registers the scenario's own flags (into o, or into itself); Validate checks them
	// after parsing.
	Flags(fs *flag.FlagSet, o *Options)
	Validate(o *Options) []error
	// Run measures the scenario once against the Runner's server (and the references), adding
	// its phases, ladders and figures to res.
	Run(ctx context.Context, r *Runner, res *RunResult) error
	// Check derives the scenario's own metrics from a finished run and judges its targets
	// (res.put, res.ratio, res.check); the phases, ladders and invariants are already in.
	Check(o Options, res *RunResult)
	// Print prints one run: the heading, the ladders and phases (printBody) and any figures of
	// its own.
	Print(w io.Writer, o Options, res *RunResult, title string)
}

// scenarios are the registered scenarios, in the order the usage lists them.
func scenarios() []Scenario {
	return []Scenario{rush{}, soldout{}, reserve{}, ladderScenario{}}
}

// scenarioNamed returns the registered scenario called name, or nil.
func scenarioNamed(name string) Scenario {
	for _, s := range scenarios() {
		if s.Name() == name {
			return s
		}
	}
	return nil
}

// usageText is the tool's usage, its scenarios from the registry.
func usageText() string {
	var b strings.Builder
	b.WriteString("usage: bench SCENARIO [flags]     (go run ./bench … or make bench ARGS=\"…\")\n\nscenarios:\n")
	for _, s := range scenarios() {
		for i, line := range s.Usage() {
			name := ""
			if i == 0 {
				name = s.Name()
			}
			fmt.Fprintf(&b, "  %-10s%s\n", name, line)
		}
	}
	b.WriteString(`
other commands:
  compare [-all] old.json new.json   metric by metric: old, new, delta
  pairs DIR                          the budget of make bench-compare's runs in DIR: base and head,
                                     medians of the pairs and their spread
  ref-gin -addr A                    the bare-Gin reference server (started by the scenarios)
  ref-redis -addr A -redis-url U     the Gin + EVALSHA reference server (started by the scenarios)

"bench SCENARIO -h" lists the flags. Only loopback targets are accepted.`)
	return b.String()
}

// stepScenario is what the ladder-based scenarios (soldout, reserve, ladder) share: no flags of
// their own (the ladder's are common, options.go) and the plain printout.
type stepScenario struct{}

func (stepScenario) Flags(*flag.FlagSet, *Options) {}
func (stepScenario) Validate(*Options) []error     { return nil }

func (stepScenario) Print(w io.Writer, o Options, res *RunResult, title string) {
	fmt.Fprintf(w, "\n== %s%s: %d workers, %s client, steps of %v ==\n", o.Scenario, title, o.Workers, o.Client, o.Duration)
	printBody(w, res)
	printTail(w, res)
}
