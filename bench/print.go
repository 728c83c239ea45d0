package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/flashsale/flashsale/bench/internal/report"
	"github.com/flashsale/flashsale/bench/internal/target"
)

// printReport prints the report: the run, or the medians of several.
func printReport(w io.Writer, rep *Report) {
	o := rep.Options
	if len(rep.Runs) == 1 {
		printRun(w, o, rep.Runs[0], "")
	} else if len(rep.Runs) > 1 {
		fmt.Fprintf(w, "\n== %s: medians of %d runs ==\n", rep.Scenario, len(rep.Runs))
		printMedians(w, rep)
	}
	fmt.Fprintf(w, "machine: %d CPUs, load average %s → %s, %s, commit %s\n", rep.Machine.CPUs, rep.Machine.LoadStart, rep.Machine.LoadEnd, rep.Machine.Go, orDash(rep.Commit))
}

// orDash is s, or "-" when empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printRun prints one run the scenario's way.
func printRun(w io.Writer, o Options, res *RunResult, title string) {
	if title != "" {
		title = " (" + title + ")"
	}
	if sc := o.scenario(); sc != nil {
		sc.Print(w, o, res, title)
		return
	}
	stepScenario{}.Print(w, o, res, title) // a scenario this build does not know: the plain way
}

// printBody prints a run's ladders and phases.
func printBody(w io.Writer, res *RunResult) {
	for _, l := range res.Ladders {
		report.PrintLadder(w, l)
	}
	for _, p := range res.Phases {
		report.PrintPhase(w, p)
	}
}

// printTail prints a run's ratios, invariants, targets and notes.
func printTail(w io.Writer, res *RunResult) {
	report.PrintRatios(w, res.Metrics)
	printInvariants(w, res.Invariants)
	report.PrintChecks(w, res.Checks)
	for _, n := range res.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

// printInvariants prints the invariant check's verdict.
func printInvariants(w io.Writer, inv target.InvariantReport) {
	if !inv.Checked {
		fmt.Fprintln(w, "invariants: not checked")
		return
	}
	if inv.OK {
		fmt.Fprintf(w, "invariants: OK (%d sales, %d accepted orders: the invariant check (pipeline.Invariants) on Postgres+Redis, every 202 in Postgres, merchant view reconciled; drained after %.2f s)\n",
			inv.Sales, inv.Accepted, inv.DrainWait)
		return
	}
	fmt.Fprintf(w, "invariants: VIOLATED (%d):\n", len(inv.Violations))
	for _, v := range inv.Violations {
		fmt.Fprintln(w, "  -", v)
	}
}

// printMedians prints the headline metrics' medians (the full set is in the JSON file).
func printMedians(w io.Writer, rep *Report) {
	keys := make([]string, 0, len(rep.Median))
	for k := range rep.Median {
		if report.Headline(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tmedian\truns")
	for _, k := range keys {
		var vs []string
		for _, r := range rep.Runs {
			if v, ok := r.Metrics[k]; ok {
				vs = append(vs, report.FmtNum(v))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", k, report.FmtNum(rep.Median[k]), strings.Join(vs, " "))
	}
	tw.Flush()
	fmt.Fprintln(w, "targets per run:")
	for _, r := range rep.Runs {
		var pass, fail []string
		for _, c := range r.Checks {
			if c.OK {
				pass = append(pass, c.Name)
			} else {
				fail = append(fail, c.Name+" ("+c.Got+")")
			}
		}
		fmt.Fprintf(w, "  run %d: %d pass, %d fail%s\n", r.Run, len(pass), len(fail), map[bool]string{true: ": " + strings.Join(fail, "; ")}[len(fail) > 0])
	}
}
