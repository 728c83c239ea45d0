package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/flashsale/flashsale/bench/internal/report"
	"github.com/flashsale/flashsale/bench/internal/target"
)

// RunResult is one run of a scenario. Rush is the rush scenario's own figures (kept here, by
// that name, for the JSON files already written).
type RunResult struct {
	Run        int                    `json:"run"`
	Started    time.Time              `json:"started"`
	Finished   time.Time              `json:"finished"`
	Phases     []report.PhaseReport   `json:"phases"`
	Steps      []report.PhaseReport   `json:"ladder_steps,omitempty"`
	Ladders    []*report.LadderReport `json:"ladders,omitempty"`
	Rush       *RushReport            `json:"rush,omitempty"`
	Sales      []*target.Sale         `json:"sales"`
	Invariants target.InvariantReport `json:"invariants"`
	Checks     []report.Check         `json:"targets"`
	Notes      []string               `json:"notes,omitempty"`
	Metrics    map[string]float64     `json:"metrics"`
}

// phase returns the phase of that name against that target, or nil.
func (res *RunResult) phase(name, target string) *report.PhaseReport {
	for i := range res.Phases {
		if res.Phases[i].Name == name && res.Phases[i].Target == target {
			return &res.Phases[i]
		}
	}
	return nil
}

// ladder returns the capacity search against target, or nil.
func (res *RunResult) ladder(target string) *report.LadderReport {
	for _, l := range res.Ladders {
		if l.Target == target {
			return l
		}
	}
	return nil
}

// evaluate flattens the run into named metrics (for medians and bench compare) and judges the
// issue's targets: the phases', ladders' and invariants' here, the scenario's own in its Check.
func (res *RunResult) evaluate(sc Scenario, o Options) {
	for _, p := range res.Phases {
		prefix := report.Slug(p.Target) + "." + report.Slug(p.Name)
		report.Flatten(res.Metrics, prefix, p)
	}
	for _, l := range res.Ladders {
		res.put(report.Slug(l.Target)+"."+report.Slug(l.Flow)+".stable_rate", l.Stable)
	}
	if res.Invariants.Checked {
		res.put("invariants_ok", b2f(res.Invariants.OK))
		res.check("invariants hold", "no violation", fmt.Sprintf("%d violations", len(res.Invariants.Violations)), res.Invariants.OK)
	}
	sc.Check(o, res)
}

// put sets metric k, unless v is not a number.
func (res *RunResult) put(k string, v float64) {
	if !math.IsNaN(v) && !math.IsInf(v, 0) {
		res.Metrics[k] = v
	}
}

// ratio sets metric k to a/b when both are positive.
func (res *RunResult) ratio(k string, a, b float64) {
	if a > 0 && b > 0 {
		res.put(k, a/b)
	}
}

// check records one target judged on the run.
func (res *RunResult) check(name, want, got string, ok bool) {
	res.Checks = append(res.Checks, report.Check{Name: name, Want: want, Got: got, OK: ok})
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
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

// finish takes the medians and the overall verdict.
func (rep *Report) finish() {
	rep.Median = report.Medians(runMetrics(rep.Runs))
	rep.OK = len(rep.Runs) > 0
	for _, r := range rep.Runs {
		if r.Invariants.Checked && !r.Invariants.OK {
			rep.OK = false
		}
	}
}

// writeJSON writes the report to path, making its folder.
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

// loadReport reads a report bench wrote with -json.
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
		r.Median = report.Medians(runMetrics(r.Runs))
	}
	return &r, nil
}

// runMetrics are the runs' flat metrics, one set per run.
func runMetrics(runs []*RunResult) []map[string]float64 {
	out := make([]map[string]float64, len(runs))
	for i, r := range runs {
		out[i] = r.Metrics
	}
	return out
}
