package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/flashsale/flashsale/bench/internal/report"
)

// compareMain is "bench compare [-all] old.json new.json".
func compareMain(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	all := fs.Bool("all", false, "every metric, not only the headline ones")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bench compare [-all] old.json new.json")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		fs.Usage()
		return fmt.Errorf("compare needs two JSON files")
	}
	a, err := loadReport(fs.Arg(0))
	if err != nil {
		return err
	}
	b, err := loadReport(fs.Arg(1))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "old: %s %s, %d runs, %s, commit %s, load %s\n", a.Scenario, fs.Arg(0), len(a.Runs), a.Started.Format("2006-01-02 15:04"), orDash(a.Commit), a.Machine.LoadStart)
	fmt.Fprintf(stdout, "new: %s %s, %d runs, %s, commit %s, load %s\n", b.Scenario, fs.Arg(1), len(b.Runs), b.Started.Format("2006-01-02 15:04"), orDash(b.Commit), b.Machine.LoadStart)
	if a.Scenario != b.Scenario {
		fmt.Fprintln(stdout, "warning: different scenarios")
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\told\tnew\tdelta\t")
	better, worse := 0, 0
	for _, d := range report.Compare(a.Median, b.Median) {
		if !*all && !report.Headline(d.Metric) {
			continue
		}
		pct := "-"
		if !math.IsNaN(d.Pct) {
			pct = fmt.Sprintf("%+.1f%%", d.Pct)
		}
		switch d.Verdict {
		case "better":
			better++
		case "worse":
			worse++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.Metric, report.FmtNum(d.Old), report.FmtNum(d.New), pct, d.Verdict)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "%d better, %d worse (changes under 2%% not judged; medians of each file's runs)\n", better, worse)
	return nil
}
