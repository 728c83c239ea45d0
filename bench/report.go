package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Outcome is one (kind, class) cell of a phase.
type Outcome struct {
	Kind  string     `json:"kind"`
	Class string     `json:"class"`
	Count int64      `json:"count"`
	Rate  float64    `json:"rate"` // per second, over the phase's time zero → last answer
	Lat   LatSummary `json:"latency"`
	First float64    `json:"first_s"` // first answer, seconds after time zero
	Last  float64    `json:"last_s"`
}

// PhaseReport is one measured phase.
type PhaseReport struct {
	Name         string                      `json:"name"`
	Target       string                      `json:"target"`
	Rate         float64                     `json:"rate"` // scheduled arrivals per second
	Arrivals     int                         `json:"arrivals"`
	Window       float64                     `json:"window_s"`
	Elapsed      float64                     `json:"elapsed_s"` // time zero → last answer
	Late         int64                       `json:"late"`      // found no free worker at their time
	Dropped      int64                       `json:"dropped"`   // late and not sent (ladders)
	Requests     int64                       `json:"requests"`
	Errors       int64                       `json:"errors"` // arrivals ending in an error, plus dropped
	ErrorRate    float64                     `json:"error_rate"`
	Stable       bool                        `json:"stable"`
	Outcomes     []Outcome                   `json:"outcomes"`
	Codes        map[string]map[string]int64 `json:"codes,omitempty"`
	Dispatch     LatSummary                  `json:"dispatch_delay"` // scheduled → a worker starts it
	FirstSoldOut float64                     `json:"first_sold_out_s"`
	Last202      float64                     `json:"last_202_s"`
	Procs        map[string]ProcReport       `json:"procs,omitempty"`
	Machine      MachineReport               `json:"machine"`
	GenCPUPerReq float64                     `json:"generator_cpu_us_per_request"`
	Server       map[string]float64          `json:"server_metrics,omitempty"`
	FirstError   string                      `json:"first_error,omitempty"` // first network error or timeout
	Start        time.Time                   `json:"start"`                 // time zero, wall clock
	RedisForks   int64                       `json:"redis_forks"`           // AOF rewrites or saves Redis forked for during the phase
}

func secs(ns int64) float64 { return float64(ns) / 1e9 }

func buildPhase(name, target string, st *Stats, arrivals int, rate float64, window time.Duration, errLimit float64) PhaseReport {
	p := PhaseReport{Name: name, Target: target, Rate: rate, Arrivals: arrivals, Window: window.Seconds(),
		Elapsed: secs(st.lastAnswer()), Late: st.late.Load(), Dropped: st.dropped.Load(), Requests: st.requests.Load(),
		Dispatch: st.dispatch.Snapshot().Summary(), FirstSoldOut: -1, Last202: -1, Codes: map[string]map[string]int64{}}
	if e := st.firstErr.Load(); e != nil {
		p.FirstError = *e
	}
	if v := st.firstSoldOut.Load(); v > 0 {
		p.FirstSoldOut = secs(v - 1)
	}
	for k := kind(0); k < nKinds; k++ {
		for c := class(0); c < nClasses; c++ {
			snap := st.lat[k][c].Snapshot()
			if snap.N == 0 {
				continue
			}
			o := Outcome{Kind: kindNames[k], Class: classNames[c], Count: int64(snap.N), Lat: snap.Summary(),
				First: secs(st.first[k][c].Load() - 1), Last: secs(st.last[k][c].Load())}
			if p.Elapsed > 0 {
				o.Rate = float64(o.Count) / p.Elapsed
			}
			p.Outcomes = append(p.Outcomes, o)
			if c == c202 && k != kArrival {
				p.Last202 = max(p.Last202, o.Last)
			}
		}
		for i, name := range codeNames {
			if n := st.codes[k][i].Load(); n > 0 {
				if p.Codes[kindNames[k]] == nil {
					p.Codes[kindNames[k]] = map[string]int64{}
				}
				p.Codes[kindNames[k]][name] = n
			}
		}
	}
	p.Errors = st.errors(kArrival) + p.Dropped
	if arrivals > 0 {
		p.ErrorRate = float64(p.Errors) / float64(arrivals)
	}
	p.Stable = p.ErrorRate <= errLimit && int64(arrivals) == st.done.Load()
	return p
}

func (p PhaseReport) outcome(k, c string) Outcome {
	for _, o := range p.Outcomes {
		if o.Kind == k && o.Class == c {
			return o
		}
	}
	return Outcome{Kind: k, Class: c}
}

// arrivalLat merges the latencies of every arrival that got a contract answer (scheduled time →
// last answer): the shopper's view, generator queueing included.
func (p PhaseReport) arrivalLat() LatSummary {
	var best Outcome
	for _, o := range p.Outcomes {
		if o.Kind == "shopper" && o.Count > best.Count && (o.Class == "202" || o.Class == "410" || o.Class == "409") {
			best = o
		}
	}
	return best.Lat
}

func (p PhaseReport) count(c string) int64 {
	var n int64
	for _, o := range p.Outcomes {
		if o.Kind != "shopper" && o.Class == c {
			n += o.Count
		}
	}
	return n
}

// StepSummary is one ladder step in brief.
type StepSummary struct {
	Rate        float64 `json:"rate"`
	Arrivals    int     `json:"arrivals"`
	Errors      int64   `json:"errors"`
	Dropped     int64   `json:"dropped"`
	ErrorRate   float64 `json:"error_rate"`
	Stable      bool    `json:"stable"`
	P50         float64 `json:"p50_ms"`
	P99         float64 `json:"p99_ms"`
	ServerCores float64 `json:"server_cores"`
	GenCPU      float64 `json:"generator_cpu_s"`
	RedisForks  int64   `json:"redis_forks"`
}

func stepSummary(p PhaseReport) StepSummary {
	l := p.arrivalLat()
	return StepSummary{Rate: p.Rate, Arrivals: p.Arrivals, Errors: p.Errors, Dropped: p.Dropped, ErrorRate: p.ErrorRate,
		Stable: p.Stable, P50: l.P50, P99: l.P99, ServerCores: p.Procs["server"].Cores, GenCPU: p.Machine.GenCPU, RedisForks: p.RedisForks}
}

// LadderReport is one capacity search.
type LadderReport struct {
	Target string        `json:"target"`
	Flow   string        `json:"flow"`
	Steps  []StepSummary `json:"steps"`
	Stable float64       `json:"stable_rate"`
	Capped bool          `json:"capped,omitempty"` // still stable at the last rate tried
}

// RushReport is the rush scenario's own figures (seconds are after the sale's start).
type RushReport struct {
	SaleID              int64   `json:"sale_id"`
	Shoppers            int     `json:"shoppers"`
	Units               int     `json:"units"`
	Window              float64 `json:"window_s"`
	DoubleClick         float64 `json:"double_click"`
	Accepted            int64   `json:"accepted"`
	SoldOutAt           float64 `json:"sold_out_s"` // first SOLD_OUT answer
	Last202At           float64 `json:"last_202_s"`
	AllAnsweredAt       float64 `json:"all_answered_s"`
	PersistedAllAt      float64 `json:"all_persisted_s"`
	PersistAfterSellout float64 `json:"persisted_after_sellout_s"`
	PersistRate         float64 `json:"persist_rate"` // orders/s from the first to the last written
	BacklogPeak         int64   `json:"backlog_peak_orders"`
	GaugePeak           float64 `json:"backlog_gauge_peak_messages"`
	Unaccounted         int64   `json:"persisted_unanswered"`
	ServerRSSPeak       float64 `json:"server_rss_peak_mib"`
	RefAllAnsweredAt    float64 `json:"ref_gin_all_answered_s"`
	AnsweredRatio       float64 `json:"answered_ratio_vs_gin"`
}

// Check is one of the targets, judged on this run.
type Check struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	OK   bool   `json:"ok"`
}

// RunResult is one run of a scenario.
type RunResult struct {
	Run        int                `json:"run"`
	Started    time.Time          `json:"started"`
	Finished   time.Time          `json:"finished"`
	Phases     []PhaseReport      `json:"phases"`
	Steps      []PhaseReport      `json:"ladder_steps,omitempty"`
	Ladders    []*LadderReport    `json:"ladders,omitempty"`
	Rush       *RushReport        `json:"rush,omitempty"`
	Sales      []*saleRecord      `json:"sales"`
	Invariants InvariantReport    `json:"invariants"`
	Checks     []Check            `json:"targets"`
	Notes      []string           `json:"notes,omitempty"`
	Metrics    map[string]float64 `json:"metrics"`
}

func (res *RunResult) phase(name, target string) *PhaseReport {
	for i := range res.Phases {
		if res.Phases[i].Name == name && res.Phases[i].Target == target {
			return &res.Phases[i]
		}
	}
	return nil
}

func (res *RunResult) ladder(target string) *LadderReport {
	for _, l := range res.Ladders {
		if l.Target == target {
			return l
		}
	}
	return nil
}

// evaluate flattens the run into named metrics (for medians and bench compare) and judges the
// issue's targets.
func (res *RunResult) evaluate(o Options) {
	m := res.Metrics
	put := func(k string, v float64) {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			m[k] = v
		}
	}
	ratio := func(k string, a, b float64) {
		if a > 0 && b > 0 {
			put(k, a/b)
		}
	}
	check := func(name, want, got string, ok bool) {
		res.Checks = append(res.Checks, Check{Name: name, Want: want, Got: got, OK: ok})
	}
	for _, p := range res.Phases {
		prefix := slug(p.Target) + "." + slug(p.Name)
		flattenPhase(m, prefix, p)
	}
	for _, l := range res.Ladders {
		put(slug(l.Target)+"."+slug(l.Flow)+".stable_rate", l.Stable)
	}
	if res.Invariants.Checked {
		put("invariants_ok", b2f(res.Invariants.OK))
		check("invariants hold", "no violation", fmt.Sprintf("%d violations", len(res.Invariants.Violations)), res.Invariants.OK)
	}
	switch o.Scenario {
	case "rush":
		rr := res.Rush
		if rr == nil {
			return
		}
		put("rush.accepted", float64(rr.Accepted))
		put("rush.sold_out_s", rr.SoldOutAt)
		put("rush.last_202_s", rr.Last202At)
		put("rush.all_answered_s", rr.AllAnsweredAt)
		put("rush.persisted_after_sellout_s", rr.PersistAfterSellout)
		put("rush.persist_rate", rr.PersistRate)
		put("rush.backlog_peak_orders", float64(rr.BacklogPeak))
		put("rush.server_rss_peak_mib", rr.ServerRSSPeak)
		put("ref_gin.rush.all_answered_s", rr.RefAllAnsweredAt)
		put("ratio.rush_answered_vs_ref_gin", rr.AnsweredRatio)
		p := res.phase("rush", tFlashsale)
		if p == nil {
			return
		}
		if q := res.phase("rush", tRefGin); q != nil {
			ratio("ratio.rush_server_cpu_per_request_vs_ref_gin", p.Procs["server"].CPUPerRq, q.Procs["server"].CPUPerRq)
		}
		if rr.Shoppers > rr.Units {
			check("sold out within 2 s of the start", "≤ 2.00 s", fmtSecs(rr.SoldOutAt), rr.SoldOutAt >= 0 && rr.SoldOutAt <= 2)
		}
		if rr.AnsweredRatio > 0 {
			check("every shopper answered within 2.5× bare Gin", "≤ 2.50×", fmt.Sprintf("%.2f× (%.2f s vs %.2f s)", rr.AnsweredRatio, rr.AllAnsweredAt, rr.RefAllAnsweredAt), rr.AnsweredRatio <= 2.5)
		}
		bad := p.count("5xx") + p.count("timeout") + p.count("neterr")
		check("zero 5xx, zero timeouts", "0", fmt.Sprintf("%d 5xx, %d timeouts, %d network errors", p.count("5xx"), p.count("timeout"), p.count("neterr")), bad == 0)
		check("every accepted order in Postgres within 3 s of the sell-out", "≤ 3.00 s", fmtSecs(rr.PersistAfterSellout), rr.PersistAfterSellout >= 0 && rr.PersistAfterSellout <= 3)
		if rr.Accepted >= 5000 { // below that, the arrivals, not the writer, set the pace
			check("orders persisted per second", "≥ 5,000/s", fmt.Sprintf("%.0f/s", rr.PersistRate), rr.PersistRate >= 5000)
		}
		if rr.ServerRSSPeak > 0 {
			check("server RSS under rush", "< 300 MiB", fmt.Sprintf("%.0f MiB", rr.ServerRSSPeak), rr.ServerRSSPeak < 300)
		}
	case "soldout", "reserve":
		ref, refName, want := tRefGin, "bare Gin", 0.70
		if o.Scenario == "reserve" {
			ref, refName, want = tRefRedis, "Gin+EVALSHA", 0.40
		}
		fl, rl := res.ladder(tFlashsale), res.ladder(ref)
		if fl != nil && rl != nil {
			ratio("ratio."+o.Scenario+"_rate_vs_"+slug(ref), fl.Stable, rl.Stable)
			r := 0.0
			if rl.Stable > 0 {
				r = fl.Stable / rl.Stable
			}
			check(fmt.Sprintf("%s stable rate ≥ %.0f%% of %s", o.Scenario, 100*want, refName), fmt.Sprintf("≥ %.2f", want),
				fmt.Sprintf("%.2f (%.0f/s vs %.0f/s)", r, fl.Stable, rl.Stable), r >= want)
		}
		load := o.Scenario + " load"
		if p, q := res.phase(load, tFlashsale), res.phase(load, ref); p != nil {
			l := p.arrivalLat()
			if q != nil {
				ratio("ratio."+o.Scenario+"_load_p99_vs_"+slug(ref), l.P99, q.arrivalLat().P99)
				ratio("ratio."+o.Scenario+"_load_server_cpu_vs_"+slug(ref), p.Procs["server"].CPUPerRq, q.Procs["server"].CPUPerRq)
			}
			if o.Scenario == "reserve" {
				check(fmt.Sprintf("reserve p99 at %.0f%% of the stable rate", 100*o.LoadFactor), "≤ 25 ms",
					fmt.Sprintf("%.1f ms at %.0f/s", l.P99, p.Rate), l.P99 <= 25 && p.Stable)
			}
		}
	case "ladder":
		fl := res.ladder(tFlashsale)
		if fl == nil {
			return
		}
		for _, ref := range []string{tRefGin, tRefRedis} {
			if rl := res.ladder(ref); rl != nil {
				ratio("ratio.ladder_rate_vs_"+slug(ref), fl.Stable, rl.Stable)
			}
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func fmtSecs(s float64) string {
	if s < 0 {
		return "never"
	}
	return fmt.Sprintf("%.2f s", s)
}

func slug(s string) string {
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '-' || r == ' ' || r == '_' || r == '/':
			b.WriteRune('_')
		}
	}
	return strings.Trim(b.String(), "_")
}

func flattenPhase(m map[string]float64, prefix string, p PhaseReport) {
	m[prefix+".elapsed_s"] = p.Elapsed
	m[prefix+".errors"] = float64(p.Errors)
	m[prefix+".late"] = float64(p.Late)
	for _, o := range p.Outcomes {
		k := prefix + "." + o.Kind + "." + o.Class
		m[k+".count"] = float64(o.Count)
		m[k+".rate"] = o.Rate
		m[k+".p50_ms"] = o.Lat.P50
		m[k+".p90_ms"] = o.Lat.P90
		m[k+".p99_ms"] = o.Lat.P99
		m[k+".p999_ms"] = o.Lat.P999
	}
	for name, pr := range p.Procs {
		m[prefix+"."+name+".cpu_s"] = pr.CPU
		m[prefix+"."+name+".rss_peak_mib"] = pr.RSSPeak
		if pr.CPUPerRq > 0 {
			m[prefix+"."+name+".cpu_us_per_request"] = pr.CPUPerRq
		}
	}
	m[prefix+".generator.cpu_s"] = p.Machine.GenCPU
	m[prefix+".generator.cpu_us_per_request"] = p.GenCPUPerReq
	m[prefix+".machine_busy"] = p.Machine.Busy
}

// MachineInfo describes where the run happened.
type MachineInfo struct {
	CPUs      int    `json:"cpus"`
	LoadStart string `json:"loadavg_start"`
	LoadEnd   string `json:"loadavg_end"`
	Go        string `json:"go"`
}

// Report is everything one invocation measured: the JSON file bench compare reads.
type Report struct {
	Tool     string             `json:"tool"`
	Scenario string             `json:"scenario"`
	Options  Options            `json:"options"`
	Commit   string             `json:"git_commit,omitempty"`
	Started  time.Time          `json:"started"`
	Finished time.Time          `json:"finished"`
	Machine  MachineInfo        `json:"machine"`
	Runs     []*RunResult       `json:"runs"`
	Median   map[string]float64 `json:"median"` // per metric, over the runs
	OK       bool               `json:"invariants_ok"`
}

func (rep *Report) finish() {
	rep.Median = medians(rep.Runs)
	rep.OK = len(rep.Runs) > 0
	for _, r := range rep.Runs {
		if r.Invariants.Checked && !r.Invariants.OK {
			rep.OK = false
		}
	}
}

// medians takes, per metric, the median over the runs that have it.
func medians(runs []*RunResult) map[string]float64 {
	vals := map[string][]float64{}
	for _, r := range runs {
		for k, v := range r.Metrics {
			vals[k] = append(vals[k], v)
		}
	}
	out := map[string]float64{}
	for k, vs := range vals {
		out[k] = median(vs)
	}
	return out
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func writeJSON(path string, rep *Report) error {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ---- the terminal table ----

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

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printRun(w io.Writer, o Options, res *RunResult, title string) {
	if title != "" {
		title = " (" + title + ")"
	}
	switch o.Scenario {
	case "rush":
		fmt.Fprintf(w, "\n== rush%s: %d shoppers within %v for %d units, %.0f%% double-click, %d workers, %s client ==\n",
			title, o.N, o.Window, o.Units, 100*o.DoubleClick, o.Workers, o.Client)
	default:
		fmt.Fprintf(w, "\n== %s%s: %d workers, %s client, steps of %v ==\n", o.Scenario, title, o.Workers, o.Client, o.Duration)
	}
	for _, l := range res.Ladders {
		printLadder(w, l)
	}
	for _, p := range res.Phases {
		printPhase(w, p, res)
	}
	if rr := res.Rush; rr != nil {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "sold out (first SOLD_OUT)\t%s after the start\t(last 202 at %s; %d accepted)\n", fmtSecs(rr.SoldOutAt), fmtSecs(rr.Last202At), rr.Accepted)
		line := fmt.Sprintf("every shopper answered\t%s after the start", fmtSecs(rr.AllAnsweredAt))
		if rr.RefAllAnsweredAt > 0 {
			line += fmt.Sprintf("\tbare Gin: %s → ratio %.2f×", fmtSecs(rr.RefAllAnsweredAt), rr.AnsweredRatio)
		}
		fmt.Fprintln(tw, line)
		fmt.Fprintf(tw, "every accepted order in Postgres\t%s after the sell-out\t(%.0f orders/s written; %d written that were never answered 202)\n", fmtSecs(rr.PersistAfterSellout), rr.PersistRate, rr.Unaccounted)
		fmt.Fprintf(tw, "queue backlog peak\t%d orders accepted, not yet written\t(/metrics gauge peak %.0f messages)\n", rr.BacklogPeak, rr.GaugePeak)
		tw.Flush()
	}
	printRatios(w, res.Metrics)
	printInvariants(w, res.Invariants)
	printChecks(w, res.Checks)
	for _, n := range res.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

func printLadder(w io.Writer, l *LadderReport) {
	fmt.Fprintf(w, "\nladder %s (%s): stable up to %.0f arrivals/s%s\n", l.Target, l.Flow, l.Stable, map[bool]string{true: " (never unstable: capped by -max-rate/-max-steps)"}[l.Capped])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rate/s\tarrivals\terrors\tdropped\terr%\tp50 ms\tp99 ms\tserver cores\tgen CPU s\t\t\t")
	for _, s := range l.Steps {
		fork := ""
		if s.RedisForks > 0 {
			fork = "redis forked"
		}
		fmt.Fprintf(tw, "%.0f\t%d\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\t\n", s.Rate, s.Arrivals, s.Errors, s.Dropped, 100*s.ErrorRate, s.P50, s.P99, s.ServerCores, s.GenCPU,
			map[bool]string{true: "ok", false: "UNSTABLE"}[s.Stable], fork)
	}
	tw.Flush()
}

func printPhase(w io.Writer, p PhaseReport, res *RunResult) {
	fmt.Fprintf(w, "\n%s @ %s (%s): %d arrivals at %.0f/s, last answer %.2f s after time zero; %d late (no free worker), %d dropped; dispatch delay p50 %.2f p99 %.2f ms\n",
		p.Name, p.Target, p.Start.Format("15:04:05"), p.Arrivals, p.Rate, p.Elapsed, p.Late, p.Dropped, p.Dispatch.P50, p.Dispatch.P99)
	if p.RedisForks > 0 {
		fmt.Fprintf(w, "note: Redis forked %d times during this phase (AOF rewrite or snapshot): a child process took CPU from everything else\n", p.RedisForks)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "what\toutcome\tcount\trate/s\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\tfirst s\tlast s\t")
	for _, o := range p.Outcomes {
		what := o.Kind
		if o.Kind == "shopper" {
			what = "shopper (sched→end)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.3f\t%.3f\t\n", what, o.Class, o.Count, o.Rate,
			o.Lat.P50, o.Lat.P90, o.Lat.P99, o.Lat.P999, o.Lat.Max, o.First, o.Last)
	}
	tw.Flush()
	var codes []string
	for k, cs := range p.Codes {
		for c, n := range cs {
			codes = append(codes, fmt.Sprintf("%s %s:%d", k, c, n))
		}
	}
	sort.Strings(codes)
	if len(codes) > 0 {
		fmt.Fprintln(w, "error codes:", strings.Join(codes, ", "))
	}
	if p.FirstError != "" {
		fmt.Fprintln(w, "first network error or timeout:", p.FirstError)
	}
	var procs []string
	for _, name := range []string{"server", "redis", "postgres"} {
		pr, ok := p.Procs[name]
		if !ok {
			continue
		}
		s := fmt.Sprintf("%s %.2f CPU s (%.2f cores, %.0f µs/request)", name, pr.CPU, pr.Cores, pr.CPUPerRq)
		if name != "postgres" {
			s += fmt.Sprintf(" RSS peak %.0f MiB", pr.RSSPeak)
		}
		procs = append(procs, s)
	}
	procs = append(procs, fmt.Sprintf("generator %.2f CPU s (%.0f µs/request)", p.Machine.GenCPU, p.GenCPUPerReq))
	fmt.Fprintf(w, "cpu: %s; machine %.0f%% busy, load %s\n", strings.Join(procs, "; "), 100*p.Machine.Busy, p.Machine.LoadAvg)
	if diag := topDiag(p.Server); diag != "" {
		fmt.Fprintln(w, "server /metrics over the phase:", diag)
	}
}

// topDiag picks what the server's /metrics say about where a phase's time went.
func topDiag(m map[string]float64) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := m[k]
		switch {
		case strings.HasPrefix(k, "flashsale_http_request_seconds") && strings.HasSuffix(k, " mean"):
			route := k[strings.Index(k, "route=\"")+7:]
			route = route[:strings.IndexByte(route, '"')]
			parts = append(parts, fmt.Sprintf("%s mean %.2f ms", route, v*1000))
		case k == "flashsale_publish_seconds mean":
			parts = append(parts, fmt.Sprintf("publish→PubAck mean %.2f ms", v*1000))
		case k == "flashsale_publish_batch_orders mean":
			parts = append(parts, fmt.Sprintf("orders per JetStream write %.1f", v))
		case k == "flashsale_writer_batch_orders mean":
			parts = append(parts, fmt.Sprintf("orders per Postgres tx %.1f", v))
		}
	}
	return strings.Join(parts, "; ")
}

// printRatios prints flashsale's figures as ratios of the references' (what we track).
func printRatios(w io.Writer, m map[string]float64) {
	var keys []string
	for k := range m {
		if strings.HasPrefix(k, "ratio.") {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return
	}
	sort.Strings(keys)
	fmt.Fprintln(w, "ratios (flashsale ÷ reference):")
	for _, k := range keys {
		fmt.Fprintf(w, "  %-45s %.3f\n", k, m[k])
	}
}

func printInvariants(w io.Writer, inv InvariantReport) {
	if !inv.Checked {
		fmt.Fprintln(w, "invariants: not checked")
		return
	}
	if inv.OK {
		fmt.Fprintf(w, "invariants: OK (%d sales, %d accepted orders: the invariant check (services.Invariants) on Postgres+Redis, every 202 in Postgres, merchant view reconciled; drained after %.2f s)\n",
			inv.Sales, inv.Accepted, inv.DrainWait)
		return
	}
	fmt.Fprintf(w, "invariants: VIOLATED (%d):\n", len(inv.Violations))
	for _, v := range inv.Violations {
		fmt.Fprintln(w, "  -", v)
	}
}

func printChecks(w io.Writer, cs []Check) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintln(w, "targets (issue 3):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range cs {
		fmt.Fprintf(tw, "  %s\t%s\twant %s\tgot %s\n", map[bool]string{true: "PASS", false: "FAIL"}[c.OK], c.Name, c.Want, c.Got)
	}
	tw.Flush()
}

// printMedians prints the headline metrics' medians (the full set is in the JSON file).
func printMedians(w io.Writer, rep *Report) {
	keys := make([]string, 0, len(rep.Median))
	for k := range rep.Median {
		if headline(k) {
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
				vs = append(vs, fmtNum(v))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", k, fmtNum(rep.Median[k]), strings.Join(vs, " "))
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

// headline tells the metrics worth a line in the medians table.
func headline(k string) bool {
	if strings.HasPrefix(k, "ratio.") || strings.HasPrefix(k, "rush.") || strings.HasSuffix(k, "stable_rate") || k == "invariants_ok" ||
		k == "ref_gin.rush.all_answered_s" {
		return true
	}
	if strings.HasPrefix(k, "ref_") {
		return false // the references' own details are in the JSON; their ratios are above
	}
	for _, s := range []string{".shopper.202.p99_ms", ".shopper.410.p99_ms", ".shopper.202.p50_ms", ".shopper.410.p50_ms",
		".server.rss_peak_mib", ".server.cpu_us_per_request", ".generator.cpu_us_per_request"} {
		if strings.HasSuffix(k, s) {
			return true
		}
	}
	return false
}

func fmtNum(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case v == math.Trunc(v) && math.Abs(v) < 1e12:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}
