package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
)

// Delta is one metric of bench compare.
type Delta struct {
	Metric string
	Old    float64 // NaN: missing
	New    float64
	Pct    float64 // (new - old) / |old| × 100; NaN when undefined
	// Verdict is "better", "worse" or "" (no preferred direction, or no change worth a word).
	Verdict string
}

// direction tells whether a metric of flashsale is better higher (+1), lower (-1) or neither (0).
func direction(k string) int {
	switch {
	case strings.HasPrefix(k, "ref_"), strings.HasSuffix(k, ".cpu_s"):
		return 0 // the references' figures are the machine's drift; CPU seconds scale with the rate
	case strings.HasPrefix(k, "ratio.rush_answered"), strings.Contains(k, "_p99_vs"), strings.Contains(k, "_cpu_"):
		return -1
	case strings.HasPrefix(k, "ratio."), strings.HasSuffix(k, "stable_rate"), k == "rush.persist_rate", k == "invariants_ok":
		return 1
	case strings.HasSuffix(k, "_ms"), strings.HasSuffix(k, "_s"), strings.Contains(k, "cpu"), strings.Contains(k, "rss"),
		strings.HasSuffix(k, ".errors"), strings.HasSuffix(k, ".late"), strings.Contains(k, "backlog"),
		strings.Contains(k, ".5xx."), strings.Contains(k, ".timeout."), strings.Contains(k, ".neterr."):
		return -1
	}
	return 0
}

// compareMetrics lines up two metric sets; a change under 2% gets no verdict.
func compareMetrics(old, cur map[string]float64) []Delta {
	keys := map[string]bool{}
	for k := range old {
		keys[k] = true
	}
	for k := range cur {
		keys[k] = true
	}
	var out []Delta
	for k := range keys {
		d := Delta{Metric: k, Old: math.NaN(), New: math.NaN(), Pct: math.NaN()}
		if v, ok := old[k]; ok {
			d.Old = v
		}
		if v, ok := cur[k]; ok {
			d.New = v
		}
		if !math.IsNaN(d.Old) && !math.IsNaN(d.New) {
			switch {
			case d.Old != 0:
				d.Pct = (d.New - d.Old) / math.Abs(d.Old) * 100
			case d.New == 0:
				d.Pct = 0
			}
			if dir := direction(k); dir != 0 && d.New != d.Old && (math.IsNaN(d.Pct) || math.Abs(d.Pct) >= 2) {
				if (d.New > d.Old) == (dir > 0) {
					d.Verdict = "better"
				} else {
					d.Verdict = "worse"
				}
			}
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Metric < out[j].Metric })
	return out
}

func loadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Median == nil {
		r.Median = medians(r.Runs)
	}
	return &r, nil
}

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
	for _, d := range compareMetrics(a.Median, b.Median) {
		if !*all && !headline(d.Metric) {
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.Metric, fmtNum(d.Old), fmtNum(d.New), pct, d.Verdict)
	}
	tw.Flush()
	fmt.Fprintf(stdout, "%d better, %d worse (changes under 2%% not judged; medians of each file's runs)\n", better, worse)
	return nil
}
