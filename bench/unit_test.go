package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/bench/internal/proc"
	"github.com/flashsale/flashsale/bench/internal/refs"
	"github.com/flashsale/flashsale/bench/internal/report"
	"github.com/flashsale/flashsale/bench/internal/target"
	"github.com/flashsale/flashsale/loadgen/hist"
)

// The usage as it was before the scenarios came from a registry: scripts and docs quote it.
const wantUsage = `usage: bench SCENARIO [flags]     (go run ./bench … or make bench ARGS="…")

scenarios:
  rush      N shoppers (-n 100000) arrive within -window (2s) of the sale's start for -units (10000);
            each fetches a purchase token, then buys; -double-click (0.05) of them click twice;
            -items (1) spreads the units and the shoppers over that many items
  soldout   the refusal path alone: purchases of an already sold-out item, laddered to the highest
            stable rate, then a latency run at -load (0.8) of it; the same against bare Gin
  reserve   the winning path alone: purchases of an item that never runs out, same ladder and
            latency run; the same against Gin + one EVALSHA of the reserve script
  ladder    whole shopper visits (token, then purchase) at constant rates stepped up until errors
            or dropped arrivals pass 1%; the same against both references

other commands:
  compare [-all] old.json new.json   metric by metric: old, new, delta
  pairs DIR                          the budget of make bench-compare's runs in DIR: base and head,
                                     medians of the pairs and their spread
  ref-gin -addr A                    the bare-Gin reference server (started by the scenarios)
  ref-redis -addr A -redis-url U     the Gin + EVALSHA reference server (started by the scenarios)

"bench SCENARIO -h" lists the flags. Only loopback targets are accepted.`

func TestUsage(t *testing.T) {
	if got := usageText(); got != wantUsage {
		t.Errorf("usage changed:\n%s\nwant:\n%s", got, wantUsage)
	}
	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"nosuch"}, &out, &errOut); err == nil || !strings.Contains(errOut.String(), "scenarios:") {
		t.Errorf("an unknown command: %v, stderr %q: want an error and the usage", err, errOut.String())
	}
	if err := run(t.Context(), []string{"help"}, &out, &errOut); err != nil || !strings.HasPrefix(out.String(), "usage: bench") {
		t.Errorf("help: %v, %q", err, out.String())
	}
}

// TestRegistry: every scenario is found by its name, once.
func TestRegistry(t *testing.T) {
	var names []string
	for _, s := range scenarios() {
		names = append(names, s.Name())
		if scenarioNamed(s.Name()) == nil {
			t.Errorf("scenarioNamed(%q) = nil", s.Name())
		}
	}
	if want := []string{"rush", "soldout", "reserve", "ladder"}; !slices.Equal(names, want) {
		t.Errorf("scenarios %v, want %v", names, want)
	}
	if scenarioNamed("compare") != nil || scenarioNamed(refs.Gin) != nil {
		t.Error("a command that is not a scenario was found as one")
	}
}

// TestEveryCommandTakesEveryFlag: the scenarios' own flags stay accepted by every scenario, as
// when they were all declared in one place, and -h lists them all.
func TestEveryCommandTakesEveryFlag(t *testing.T) {
	args := []string{"-n", "5", "-units", "2", "-window", "1s", "-double-click", "0", "-lead", "2s",
		"-rate", "10", "-duration", "1s", "-load", "0.5", "-workers", "3", "-runs", "2", "-no-ref", "-quiet"}
	for _, s := range scenarios() {
		o, err := parseOptions(s.Name(), args, &bytes.Buffer{})
		if err != nil {
			t.Fatalf("%s: %v", s.Name(), err)
		}
		if o.Scenario != s.Name() || o.N != 5 || o.Units != 2 || o.Lead.Seconds() != 2 || o.Rate != 10 || o.LoadFactor != 0.5 || o.Workers != 3 || o.Runs != 2 || !o.NoRef {
			t.Errorf("%s: options %+v", s.Name(), o)
		}
		var help bytes.Buffer
		parseOptions(s.Name(), []string{"-h"}, &help)
		for _, f := range []string{"-n int", "-double-click", "-lead", "-rate", "-load", "-settle", "-json", "-url"} {
			if !strings.Contains(help.String(), "  "+f) {
				t.Errorf("%s -h does not list %s", s.Name(), f)
			}
		}
	}
	o, err := parseOptions("soldout", nil, &bytes.Buffer{})
	if err != nil || o.N != 100_000 || o.Units != 10_000 || o.Window.Seconds() != 2 || o.DoubleClick != 0.05 || o.Lead.Seconds() != 3 {
		t.Errorf("defaults: %v, %+v", err, o)
	}
}

func TestValidate(t *testing.T) {
	_, err := parseOptions("soldout", []string{"-n", "0", "-workers", "0", "-client", "x", "-url", "http://10.0.0.1:1"}, &bytes.Buffer{})
	want := `-url: "http://10.0.0.1:1": only loopback addresses may be load-test targets
-n, -units and -window must be positive
-workers must be between 1 and 20000
-client is raw or std`
	if err == nil || err.Error() != want {
		t.Errorf("errors:\n%v\nwant:\n%s", err, want)
	}
	for _, args := range [][]string{{"-double-click", "2"}, {"-lead", "0s"}, {"-runs", "0"}, {"-redis-url", "redis://10.0.0.1:6379/0"}, {"extra"},
		{"-items", "0"}, {"-items", "51"}, {"-items", "5", "-units", "4"}} {
		if _, err := parseOptions("rush", args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

func TestPortOfDSN(t *testing.T) {
	for dsn, want := range map[string]int{
		"postgres://postgres@127.0.0.1:5433/flashsale?sslmode=disable": 5433,
		"postgres://u:p@localhost/db":                                  5432,
		"host=/tmp dbname=x":                                           0,
	} {
		if got := portOfDSN(dsn); got != want {
			t.Errorf("portOfDSN(%q) = %d, want %d", dsn, got, want)
		}
	}
}

// phase is a measured phase with the figures the checks read.
func phase(name, tgt string, p99 float64, serverCPU float64) report.PhaseReport {
	return report.PhaseReport{Name: name, Target: tgt, Rate: 800, Stable: true,
		Outcomes: []report.Outcome{{Kind: "shopper", Class: "202", Count: 10, Lat: hist.Summary{Count: 10, P99: p99}}},
		Procs:    map[string]proc.Report{"server": {CPUPerRq: serverCPU}}}
}

// checksOf is a judged run's checks by name: passed or not.
func checksOf(res *RunResult) map[string]bool {
	m := map[string]bool{}
	for _, c := range res.Checks {
		m[c.Name] = c.OK
	}
	return m
}

// TestChecks judges hand-made runs of each scenario: the scenario's metrics and targets.
// Reserve and soldout here, rush in TestChecksRush.
func TestChecks(t *testing.T) {
	o := Options{Scenario: "reserve", LoadFactor: 0.8}
	res := &RunResult{Metrics: map[string]float64{},
		Ladders:    []*report.LadderReport{{Target: tFlashsale, Flow: "reserve", Stable: 1000}, {Target: refs.Redis, Flow: "reserve", Stable: 2000}},
		Phases:     []report.PhaseReport{phase("reserve load", tFlashsale, 30, 200), phase("reserve load", refs.Redis, 10, 100)},
		Invariants: target.InvariantReport{Checked: true, OK: true}}
	res.evaluate(reserve{}, o)
	if got := res.Metrics["ratio.reserve_rate_vs_ref_redis"]; got != 0.5 {
		t.Errorf("rate ratio %v, want 0.5", got)
	}
	if got := res.Metrics["ratio.reserve_load_p99_vs_ref_redis"]; got != 3 {
		t.Errorf("p99 ratio %v, want 3", got)
	}
	if got := res.Metrics["flashsale.reserve.stable_rate"]; got != 1000 {
		t.Errorf("stable rate metric %v", got)
	}
	if c := checksOf(res); len(c) != 3 || !c["invariants hold"] || !c["reserve stable rate ≥ 40% of Gin+EVALSHA"] || c["reserve p99 at 80% of the stable rate"] {
		t.Errorf("reserve checks %v: want invariants and rate passed, the 30 ms p99 failed", c)
	}

	o = Options{Scenario: "soldout"}
	res = &RunResult{Metrics: map[string]float64{},
		Ladders: []*report.LadderReport{{Target: tFlashsale, Flow: "soldout", Stable: 600}, {Target: refs.Gin, Flow: "soldout", Stable: 1000}}}
	res.evaluate(soldout{}, o)
	if c := checksOf(res); len(c) != 1 || c["soldout stable rate ≥ 70% of bare Gin"] {
		t.Errorf("soldout checks %v: want the 0.6 rate failed", c)
	}
}

// TestChecksRush judges a hand-made rush run, and prints it.
func TestChecksRush(t *testing.T) {
	o := Options{Scenario: "rush"}
	rr := &RushReport{Shoppers: 100, Units: 10, Accepted: 10, SoldOutAt: 1.5, AllAnsweredAt: 3, RefAllAnsweredAt: 2, AnsweredRatio: 1.5,
		PersistAfterSellout: 0.5, ServerRSSPeak: 400}
	fl, gin := phase("rush", tFlashsale, 5, 60), phase("rush", refs.Gin, 5, 40)
	// flashsale: 100 shoppers, 12 tokens, 0.012 s of CPU in all (120 µs a shopper); bare Gin: 112
	// requests (the same shoppers' requests), 0.0056 s (50 µs a request)
	fl.Outcomes = append(fl.Outcomes, report.Outcome{Kind: "token", Class: "200", Count: 12})
	fl.Procs = map[string]proc.Report{"server": {CPU: 0.008, CPUPerRq: 60}, "redis": {CPU: 0.003}, "postgres": {CPU: 0.001}}
	gin.Requests, gin.Procs = 112, map[string]proc.Report{"server": {CPU: 0.0051, CPUPerRq: 40}, "redis": {CPU: 0.0003}, "postgres": {CPU: 0.0002}}
	res := &RunResult{Metrics: map[string]float64{}, Rush: rr, Phases: []report.PhaseReport{fl, gin}}
	res.evaluate(rush{}, o)
	if res.Metrics["rush.accepted"] != 10 || res.Metrics["ratio.rush_answered_vs_ref_gin"] != 1.5 || res.Metrics["ratio.rush_server_cpu_per_request_vs_ref_gin"] != 1.5 {
		t.Errorf("rush metrics %v", res.Metrics)
	}
	if got := res.Metrics["ratio.rush_cpu_per_shopper_vs_ref_gin"]; math.Abs(got-2.4) > 1e-9 {
		t.Errorf("CPU per shopper ÷ bare Gin's per request = %v, want 120 µs / 50 µs = 2.4", got)
	}
	if res.Metrics["rush.tokens_issued"] != 12 || res.Metrics["rush.tokens_per_unit"] != 1.2 {
		t.Errorf("tokens %v, per unit %v: want 12 and 1.2", res.Metrics["rush.tokens_issued"], res.Metrics["rush.tokens_per_unit"])
	}
	c := checksOf(res)
	if !c["sold out within 2 s of the start"] || !c["every shopper answered within 2.5× bare Gin"] || !c["zero 5xx, zero timeouts"] ||
		!c["every accepted order in Postgres within 3 s of the sell-out"] || c["server RSS under rush"] {
		t.Errorf("rush checks %v: want all passed but the 400 MiB RSS", c)
	}
	if _, ok := c["orders persisted per second"]; ok {
		t.Error("the persist rate was judged on 10 orders")
	}

	var out bytes.Buffer
	printRun(&out, o, res, "run 1 of 3")
	for _, want := range []string{"== rush (run 1 of 3): 0 shoppers", "every shopper answered            3.00 s after the start", "FAIL  server RSS under rush"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printout lacks %q:\n%s", want, out.String())
		}
	}
}

// TestOptionsJSON: the parsed scenario travels with the options, and the report's "options"
// keep their fields, in their order, and nothing else.
func TestOptionsJSON(t *testing.T) {
	o, err := parseOptions("reserve", nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if o.sc == nil || o.scenario().Name() != "reserve" || (Options{Scenario: "rush"}).scenario().Name() != "rush" {
		t.Errorf("scenario: parsed %v, fresh %v", o.sc, (Options{Scenario: "rush"}).scenario())
	}
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var v json.RawMessage
		dec.Decode(&v)
	}
	want := "Scenario URL MetricsURL Secret DatabaseURL RedisURL ServerPIDs ProxyPID MerchantID N Window Units Items DoubleClick Lead Rate Duration StartRate Step MaxRate MaxSteps Refine ErrorLimit LoadFactor Workers Client Timeout MaxWait DrainTimeout Settle Arrivals Seed Runs JSON NoRef NoVerify Quiet"
	if got := strings.Join(keys, " "); got != want {
		t.Errorf("options keys:\n%s\nwant:\n%s", got, want)
	}
}

// TestRedisHostsAndPIDList reads the Redis URLs and pid lists the tool is given: a cluster URL
// names every seed (each one's redis-server is measured), and -server-pid takes several instances.
func TestRedisHostsAndPIDList(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://127.0.0.1:6380/0":                            "127.0.0.1:6380",
		"redis://:pw@localhost/1":                             "localhost:6379",
		"redis-cluster://127.0.0.1:7000,127.0.0.1:7001":       "127.0.0.1:7000 127.0.0.1:7001",
		"redis://127.0.0.1:7000?addr=127.0.0.1:7002&x=1":      "127.0.0.1:7000 127.0.0.1:7002",
		"rediss-cluster://u:p@127.0.0.1:7000,[::1]:7001/?a=b": "127.0.0.1:7000 [::1]:7001",
		"http://127.0.0.1:6380":                               "",
	} {
		if got := strings.Join(redisHosts(raw), " "); got != want {
			t.Errorf("redisHosts(%q) = %q, want %q", raw, got, want)
		}
	}
	var l pidList
	if err := l.Set("12, 34,56"); err != nil || l.String() != "12,34,56" {
		t.Errorf("pidList 12, 34,56 = %v (%v)", l, err)
	}
	for _, bad := range []string{"", "12,", "x", "-3", "0"} {
		if err := l.Set(bad); err == nil {
			t.Errorf("pidList %q accepted", bad)
		}
	}
	if _, err := parseOptions("rush", []string{"-redis-url", "redis-cluster://127.0.0.1:7000,10.0.0.1:7001"}, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "only a loopback Redis") {
		t.Errorf("a cluster seed off loopback: %v, want refused", err)
	}
}

// The rush's units spread over its items as evenly as they go; a sale of several items is sold
// out with its last unit, not at the first item's SOLD_OUT.
func TestRushItems(t *testing.T) {
	for _, tc := range []struct {
		units, items int
		want         []int
	}{{10, 1, []int{10}}, {50, 3, []int{17, 17, 16}}, {50_000, 4, []int{12_500, 12_500, 12_500, 12_500}}, {5, 5, []int{1, 1, 1, 1, 1}}} {
		got := splitUnits(tc.units, tc.items)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("splitUnits(%d, %d) = %v, want %v", tc.units, tc.items, got, tc.want)
		}
	}
	if got := soldOutAt(1.2, 1.5, 1, 10, 10); got != 1.2 {
		t.Errorf("one item: sold out at %v, want its first SOLD_OUT", got)
	}
	if got := soldOutAt(1.2, 1.5, 4, 10, 10); got != 1.5 {
		t.Errorf("four items, every unit gone: sold out at %v, want the last 202", got)
	}
	if got := soldOutAt(1.2, 1.5, 4, 9, 10); got != -1 {
		t.Errorf("four items, a unit left: sold out at %v, want -1", got)
	}
}

// TestPairsTable prints the budget of hand-made pairs: the medians, the spreads, the purchase
// path divided by bare Gin of the same pair's refusal run, and the verdicts.
func TestPairsTable(t *testing.T) {
	dir := t.TempDir()
	write := func(sd, name string, m map[string]float64) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, sd), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeJSON(filepath.Join(dir, sd, name), &Report{Scenario: strings.Split(name, "-")[0], Median: m, OK: true}); err != nil {
			t.Fatal(err)
		}
	}
	for i, v := range []float64{30, 32, 31} { // base
		write("base", fmt.Sprintf("rush-%d.json", i+1), map[string]float64{"ratio.rush_cpu_per_shopper_vs_ref_gin": v / 20, "rush.tokens_per_unit": 2})
		write("base", fmt.Sprintf("soldout-%d.json", i+1), map[string]float64{"ref_gin.soldout_load.server.cpu_us_per_request": 20})
		write("base", fmt.Sprintf("reserve-%d.json", i+1), map[string]float64{"flashsale.reserve_load.server.cpu_us_per_request": v * 4})
	}
	for i, v := range []float64{25, 26, 24} { // head
		write("head", fmt.Sprintf("rush-%d.json", i+1), map[string]float64{"ratio.rush_cpu_per_shopper_vs_ref_gin": v / 20, "rush.tokens_per_unit": 1.05})
		write("head", fmt.Sprintf("soldout-%d.json", i+1), map[string]float64{"ref_gin.soldout_load.server.cpu_us_per_request": 10 * float64(i+1)})
		write("head", fmt.Sprintf("reserve-%d.json", i+1), map[string]float64{"flashsale.reserve_load.server.cpu_us_per_request": 120})
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"pairs", dir}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if k, _, ok := strings.Cut(l, "  "); ok {
			lines[k] = strings.Join(strings.Fields(l), " ")
		}
	}
	for label, want := range map[string]string{
		"rush: CPU per shopper (server, Redis, Postgres) ÷ bare Gin's per request": "1.550 (1.500–1.600) 1.250 (1.200–1.300) -19.4% better",
		"rush: purchase tokens handed out per unit":                                "2 (2–2) 1.050 (1.050–1.050) -47.5% better",
		"reserve: purchase: server CPU per purchase, µs":                           "124 (120–128) 120 (120–120) -3.2% within noise",
		"reserve: purchase: server CPU per purchase ÷ bare Gin's per request":      "6.200 (6–6.400) 6 (4–12) -3.2% within noise",
	} {
		if got := lines[label]; !strings.HasSuffix(got, want) {
			t.Errorf("%s: got %q, want it to end in %q\n%s", label, got, want, out.String())
		}
	}
	if _, ok := lines["rush: server CPU per request, µs"]; ok {
		t.Errorf("a figure no run has is printed:\n%s", out.String())
	}
}
