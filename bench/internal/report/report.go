// Package report turns measured phases into the tool's figures: per-phase reports, ladder
// summaries, the flat metrics medians and bench compare work on, and their terminal tables.
package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flashsale/flashsale/bench/internal/proc"
	"github.com/flashsale/flashsale/loadgen"
	"github.com/flashsale/flashsale/loadgen/hist"
)

// Outcome is one (kind, class) cell of a phase.
type Outcome struct {
	Kind  string       `json:"kind"`
	Class string       `json:"class"`
	Count int64        `json:"count"`
	Rate  float64      `json:"rate"` // per second, over the phase's time zero → last answer
	Lat   hist.Summary `json:"latency"`
	First float64      `json:"first_s"` // first answer, seconds after time zero
	Last  float64      `json:"last_s"`
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
	Dispatch     hist.Summary                `json:"dispatch_delay"` // scheduled → a worker starts it
	FirstSoldOut float64                     `json:"first_sold_out_s"`
	Last202      float64                     `json:"last_202_s"`
	Procs        map[string]proc.Report      `json:"procs,omitempty"`
	Machine      proc.Machine                `json:"machine"`
	GenCPUPerReq float64                     `json:"generator_cpu_us_per_request"`
	Server       map[string]float64          `json:"server_metrics,omitempty"`
	FirstError   string                      `json:"first_error,omitempty"` // first network error or timeout
	Start        time.Time                   `json:"start"`                 // time zero, wall clock
	RedisForks   int64                       `json:"redis_forks"`           // AOF rewrites or saves Redis forked for during the phase
}

func secs(ns int64) float64 { return float64(ns) / 1e9 }

// Build turns a finished phase's statistics into its report: arrivals were scheduled at rate
// over window; the phase is stable when errors plus dropped arrivals stay at or under errLimit
// and every arrival is over.
func Build(name, target string, st *loadgen.Stats, arrivals int, rate float64, window time.Duration, errLimit float64) PhaseReport {
	p := PhaseReport{Name: name, Target: target, Rate: rate, Arrivals: arrivals, Window: window.Seconds(),
		Elapsed: secs(st.LastAnswer()), Late: st.Late(), Dropped: st.Dropped(), Requests: st.Requests(),
		Dispatch: st.Dispatch().Summary(), FirstSoldOut: -1, Last202: -1, Codes: map[string]map[string]int64{}}
	p.FirstError = st.FirstError()
	if v := st.FirstSoldOut(); v >= 0 {
		p.FirstSoldOut = secs(v)
	}
	for k := loadgen.Kind(0); k < loadgen.NumKinds; k++ {
		for c := loadgen.Class(0); c < loadgen.NumClasses; c++ {
			snap := st.Latency(k, c)
			if snap.N == 0 {
				continue
			}
			o := Outcome{Kind: loadgen.KindNames[k], Class: loadgen.ClassNames[c], Count: int64(snap.N), Lat: snap.Summary(),
				First: secs(st.FirstAt(k, c)), Last: secs(st.LastAt(k, c))}
			if p.Elapsed > 0 {
				o.Rate = float64(o.Count) / p.Elapsed
			}
			p.Outcomes = append(p.Outcomes, o)
			if c == loadgen.Class202 && k != loadgen.KindArrival {
				p.Last202 = max(p.Last202, o.Last)
			}
		}
		for i, name := range loadgen.CodeNames {
			if n := st.Code(k, i); n > 0 {
				if p.Codes[loadgen.KindNames[k]] == nil {
					p.Codes[loadgen.KindNames[k]] = map[string]int64{}
				}
				p.Codes[loadgen.KindNames[k]][name] = n
			}
		}
	}
	p.Errors = st.Errors(loadgen.KindArrival) + p.Dropped
	if arrivals > 0 {
		p.ErrorRate = float64(p.Errors) / float64(arrivals)
	}
	p.Stable = p.ErrorRate <= errLimit && int64(arrivals) == st.Done()
	return p
}

// Outcome returns the cell of kind k (a loadgen.KindNames) and outcome c, empty if none.
func (p PhaseReport) Outcome(k, c string) Outcome {
	for _, o := range p.Outcomes {
		if o.Kind == k && o.Class == c {
			return o
		}
	}
	return Outcome{Kind: k, Class: c}
}

// ArrivalLat merges the latencies of every arrival that got a contract answer (scheduled time →
// last answer): the shopper's view, generator queueing included.
func (p PhaseReport) ArrivalLat() hist.Summary {
	var best Outcome
	for _, o := range p.Outcomes {
		if o.Kind == "shopper" && o.Count > best.Count && (o.Class == "202" || o.Class == "410" || o.Class == "409") {
			best = o
		}
	}
	return best.Lat
}

// Count returns how many requests (not shoppers) had outcome c.
func (p PhaseReport) Count(c string) int64 {
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

// Summarize is a ladder step in brief.
func Summarize(p PhaseReport) StepSummary {
	l := p.ArrivalLat()
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

// Check is one of the targets, judged on this run.
type Check struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	OK   bool   `json:"ok"`
}

// FmtSecs prints seconds after the start, or "never" for a negative time.
func FmtSecs(s float64) string {
	if s < 0 {
		return "never"
	}
	return fmt.Sprintf("%.2f s", s)
}

// Slug makes a name a metric key part: lower case, [a-z0-9_].
func Slug(s string) string {
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

// Flatten adds a phase's figures to the flat metrics m, under prefix.
func Flatten(m map[string]float64, prefix string, p PhaseReport) {
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

// Medians takes, per metric, the median over the runs (one metric set each) that have it.
func Medians(runs []map[string]float64) map[string]float64 {
	vals := map[string][]float64{}
	for _, m := range runs {
		for k, v := range m {
			vals[k] = append(vals[k], v)
		}
	}
	out := map[string]float64{}
	for k, vs := range vals {
		out[k] = Median(vs)
	}
	return out
}

// Median is the middle value of vs (the mean of the two middle ones for an even count), NaN for none.
func Median(vs []float64) float64 {
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

// PrintLadder prints a capacity search step by step.
func PrintLadder(w io.Writer, l *LadderReport) {
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

// PrintPhase prints one phase: its outcomes, error codes, processes and the server's own view.
func PrintPhase(w io.Writer, p PhaseReport) {
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

// PrintRatios prints flashsale's figures as ratios of the references' (what we track).
func PrintRatios(w io.Writer, m map[string]float64) {
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

// PrintChecks prints the targets judged on a run.
func PrintChecks(w io.Writer, cs []Check) {
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

// Headline tells the metrics worth a line in the Medians table.
func Headline(k string) bool {
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

// FmtNum prints a metric: integers whole, large values with one decimal, small with three.
func FmtNum(v float64) string {
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

// Compare lines up two metric sets; a change under 2% gets no verdict.
func Compare(old, cur map[string]float64) []Delta {
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
