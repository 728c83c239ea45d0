package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/flashsale/flashsale/bench/internal/report"
)

// The budget: the figures `make bench-compare` puts side by side, base against head, each the
// median of its pairs with the spread (lowest–highest) beside it. Every figure is lower-is-better.
// A ratio "÷ bare Gin" divides by bare Gin's CPU per request measured in the same run; the
// purchase path's, by bare Gin's in the refusal run of the same pair and side (the reserve run's
// own reference is Gin+EVALSHA).
var budgetRows = []budgetRow{
	{"rush", "server CPU per request, µs", "flashsale.rush.server.cpu_us_per_request"},
	{"rush", "server CPU per request ÷ bare Gin's", "ratio.rush_server_cpu_per_request_vs_ref_gin"},
	{"rush", "CPU per shopper (server, Redis, Postgres) ÷ bare Gin's per request", "ratio.rush_cpu_per_shopper_vs_ref_gin"},
	{"rush", "Redis CPU per request, µs", "flashsale.rush.redis.cpu_us_per_request"},
	{"rush", "Postgres CPU per request, µs", "flashsale.rush.postgres.cpu_us_per_request"},
	{"rush", "purchase tokens handed out per unit", "rush.tokens_per_unit"},
	{"rush", "purchases refused SOLD_OUT (holding a token)", "flashsale.rush.purchase.410.count"},
	{"rush", "sold out after the start, s", "rush.sold_out_s"},
	{"rush", "generator CPU per request, µs (the same code both sides: the noise)", "flashsale.rush.generator.cpu_us_per_request"},
	{"soldout", "refusal: server CPU per request, µs", "flashsale.soldout_load.server.cpu_us_per_request"},
	{"soldout", "refusal: server CPU per request ÷ bare Gin's", "ratio.soldout_load_server_cpu_vs_ref_gin"},
	{"reserve", "purchase: server CPU per purchase, µs", "flashsale.reserve_load.server.cpu_us_per_request"},
	{"reserve", "purchase: server CPU per purchase ÷ bare Gin's per request", budgetPurchaseVsGin},
	{"reserve", "purchase: server CPU per purchase ÷ Gin+EVALSHA's", "ratio.reserve_load_server_cpu_vs_ref_redis"},
	{"reserve", "purchase: Redis CPU per purchase, µs", "flashsale.reserve_load.redis.cpu_us_per_request"},
	{"reserve", "purchase: Postgres CPU per purchase, µs", "flashsale.reserve_load.postgres.cpu_us_per_request"},
}

// budgetPurchaseVsGin is the one row computed across two files of a pair (see budgetRows).
const budgetPurchaseVsGin = "purchase_server_cpu_vs_ref_gin"

type budgetRow struct{ scenario, label, metric string }

// pairsMain is "bench pairs DIR": the table of a `make bench-compare` run, from the JSON files
// it left in DIR/base and DIR/head (SCENARIO-PAIR.json, one run each).
func pairsMain(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pairs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: bench pairs DIR   (DIR/base/SCENARIO-N.json and DIR/head/SCENARIO-N.json, as make bench-compare writes them)")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("pairs needs one directory")
	}
	base, err := loadSide(filepath.Join(fs.Arg(0), "base"))
	if err != nil {
		return err
	}
	head, err := loadSide(filepath.Join(fs.Arg(0), "head"))
	if err != nil {
		return err
	}
	printBudget(stdout, base, head)
	return nil
}

// side is one binary's runs: per scenario, per pair, the run's flat metrics.
type side map[string]map[int]map[string]float64

// loadSide reads DIR's SCENARIO-N.json files.
func loadSide(dir string) (side, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("%s: no SCENARIO-N.json files (%v)", dir, err)
	}
	s := side{}
	for _, f := range files {
		var sc string
		var n int
		if _, err := fmt.Sscanf(strings.ReplaceAll(strings.TrimSuffix(filepath.Base(f), ".json"), "-", " "), "%s %d", &sc, &n); err != nil {
			return nil, fmt.Errorf("%s: not SCENARIO-N.json", f)
		}
		r, err := loadReport(f)
		if err != nil {
			return nil, err
		}
		if !r.OK {
			return nil, fmt.Errorf("%s: the invariants failed in this run: its figures are not a measurement", f)
		}
		if s[sc] == nil {
			s[sc] = map[int]map[string]float64{}
		}
		s[sc][n] = r.Median
	}
	return s, nil
}

// values are the metric's figure in each pair of the side.
func (s side) values(row budgetRow) []float64 {
	var out []float64
	for n, m := range s[row.scenario] {
		v, ok := m[row.metric], true
		if row.metric == budgetPurchaseVsGin {
			gin := s["soldout"][n]["ref_gin.soldout_load.server.cpu_us_per_request"]
			v, ok = m["flashsale.reserve_load.server.cpu_us_per_request"]/gin, gin > 0
		} else {
			_, ok = m[row.metric]
		}
		if ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// printBudget prints one line per figure: base and head, median (lowest–highest), the change of
// the medians, and a verdict: "within noise" while the two spreads overlap.
func printBudget(w io.Writer, base, head side) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure (lower is better)\tbase\thead\tchange\tverdict\t")
	for _, row := range budgetRows {
		b, h := base.values(row), head.values(row)
		if len(b) == 0 && len(h) == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s: %s\t%s\t%s\t%s\t%s\t\n", row.scenario, row.label, spread(b), spread(h), change(b, h), verdict(b, h))
	}
	tw.Flush()
	fmt.Fprintln(w, "each figure: the median of the pairs (lowest–highest); within noise: the two spreads overlap")
}

func spread(vs []float64) string {
	switch len(vs) {
	case 0:
		return "-"
	case 1:
		return report.FmtNum(vs[0])
	}
	return fmt.Sprintf("%s (%s–%s)", report.FmtNum(report.Median(vs)), report.FmtNum(vs[0]), report.FmtNum(vs[len(vs)-1]))
}

func change(b, h []float64) string {
	if len(b) == 0 || len(h) == 0 {
		return "-"
	}
	mb, mh := report.Median(b), report.Median(h)
	if mb == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*(mh-mb)/mb)
}

func verdict(b, h []float64) string {
	switch {
	case len(b) == 0 || len(h) == 0:
		return "-"
	case len(b) < 2 || len(h) < 2:
		return "no spread: no verdict"
	case h[len(h)-1] < b[0]:
		return "better"
	case h[0] > b[len(b)-1]:
		return "worse"
	}
	return "within noise"
}
