package report

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/loadgen"
	"github.com/flashsale/flashsale/loadgen/tokens"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		if got := Median(tt.in); got != tt.want {
			t.Errorf("Median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
	m := Medians([]map[string]float64{{"a": 1, "b": 5}, {"a": 3}, {"a": 2}})
	if m["a"] != 2 || m["b"] != 5 {
		t.Errorf("medians = %v, want a=2 b=5", m)
	}
}

func TestCompareMetrics(t *testing.T) {
	old := map[string]float64{
		"soldout.soldout_load.shopper.410.p99_ms": 20,
		"flashsale.soldout.stable_rate":           1000,
		"ratio.rush_answered_vs_ref_gin":          3,
		"rush.accepted":                           10000,
		"gone":                                    1,
		"zero":                                    0,
		"ref_gin.soldout.stable_rate":             100,
	}
	cur := map[string]float64{
		"soldout.soldout_load.shopper.410.p99_ms": 10,
		"flashsale.soldout.stable_rate":           900,
		"ratio.rush_answered_vs_ref_gin":          3.01,
		"rush.accepted":                           10000,
		"new":                                     2,
		"zero":                                    0,
		"ref_gin.soldout.stable_rate":             50,
	}
	got := map[string]Delta{}
	for _, d := range Compare(old, cur) {
		got[d.Metric] = d
	}
	tests := []struct {
		metric  string
		pct     float64
		verdict string
	}{
		{"soldout.soldout_load.shopper.410.p99_ms", -50, "better"},
		{"flashsale.soldout.stable_rate", -10, "worse"},
		{"ratio.rush_answered_vs_ref_gin", 1.0 / 3, ""}, // under 2%: not judged
		{"rush.accepted", 0, ""},
		{"zero", 0, ""},
		{"ref_gin.soldout.stable_rate", -50, ""}, // the reference's drift is not judged
	}
	for _, tt := range tests {
		d, ok := got[tt.metric]
		if !ok {
			t.Fatalf("%s missing", tt.metric)
		}
		if math.Abs(d.Pct-tt.pct) > 1e-9 || d.Verdict != tt.verdict {
			t.Errorf("%s: pct %v verdict %q, want %v %q", tt.metric, d.Pct, d.Verdict, tt.pct, tt.verdict)
		}
	}
	if d := got["gone"]; !math.IsNaN(d.New) || !math.IsNaN(d.Pct) {
		t.Errorf("gone: %+v, want New and Pct NaN", d)
	}
	if d := got["new"]; !math.IsNaN(d.Old) || d.New != 2 {
		t.Errorf("new: %+v, want Old NaN, New 2", d)
	}
}

// standInPhase measures a phase of purchases against a stand-in server that answers the
// first one 500, then alternately 202 and SOLD_OUT, and builds its report.
func standInPhase(t *testing.T, arrivals int) PhaseReport {
	t.Helper()
	var n int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		switch {
		case n == 1:
			w.WriteHeader(500)
			w.Write([]byte(`{"error":"INTERNAL"}`))
		case n%2 == 0:
			w.WriteHeader(202)
			w.Write([]byte(`{"orderId":"o"}`))
		default:
			w.WriteHeader(410)
			w.Write([]byte(`{"error":"SOLD_OUT"}`))
		}
	}))
	defer srv.Close()
	pool, err := loadgen.NewPool("raw", srv.URL, 1, 5*time.Second) // one worker: the answers come in order
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	users := tokens.Of(make([]string, arrivals)...)
	ph := &loadgen.Phase{Name: "buy", Base: time.Now(), Offsets: loadgen.Schedule(arrivals, 100*time.Millisecond, "uniform", 1), Deadline: 10 * time.Second,
		Do: loadgen.PurchaseOnly(users, tokens.Of("tok"), loadgen.PurchasePath(8))}
	st := pool.Run(context.Background(), ph, nil)
	return Build("buy", "flashsale", st, arrivals, 200, 100*time.Millisecond, 0.01)
}

// TestBuild measures a small phase of purchases against a stand-in server (every other one
// accepted, the rest SOLD_OUT, one 500) and checks the report adds up.
func TestBuild(t *testing.T) {
	const arrivals = 20
	p := standInPhase(t, arrivals)
	if got := p.Outcome("purchase", "202").Count; got != 10 {
		t.Errorf("purchase 202: %d, want 10", got)
	}
	if got := p.Outcome("shopper", "410").Count; got != 9 {
		t.Errorf("shopper 410: %d, want 9", got)
	}
	if p.Count("5xx") != 1 || p.Errors != 1 || p.ErrorRate != 0.05 || p.Stable {
		t.Errorf("5xx %d, errors %d, rate %v, stable %v: want one error, 5%%, unstable at a 1%% limit", p.Count("5xx"), p.Errors, p.ErrorRate, p.Stable)
	}
	if p.Codes["purchase"]["SOLD_OUT"] != 9 || p.Codes["purchase"]["INTERNAL"] != 1 || p.FirstSoldOut < 0 || p.Last202 <= 0 {
		t.Errorf("codes %v, first sold out %v, last 202 %v", p.Codes, p.FirstSoldOut, p.Last202)
	}
	if p.Requests != arrivals || p.Dispatch.Count != arrivals || p.Elapsed <= 0 {
		t.Errorf("requests %d, dispatch count %d, elapsed %v", p.Requests, p.Dispatch.Count, p.Elapsed)
	}
	if l := p.ArrivalLat(); l.Count != 10 {
		t.Errorf("ArrivalLat counts %d, want the larger contract outcome (202: 10)", l.Count)
	}
	if s := Summarize(p); s.Arrivals != arrivals || s.Errors != 1 || s.Stable {
		t.Errorf("Summarize = %+v", s)
	}
	m := map[string]float64{}
	Flatten(m, "flashsale.buy", p)
	if m["flashsale.buy.purchase.202.count"] != 10 || m["flashsale.buy.errors"] != 1 {
		t.Errorf("Flatten: %v", m)
	}
	var out bytes.Buffer
	PrintPhase(&out, p)
	for _, want := range []string{"buy @ flashsale", "20 arrivals at 200/s", "error codes: purchase INTERNAL:1, purchase SOLD_OUT:9"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("PrintPhase output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestSlugAndFormats(t *testing.T) {
	tests := []struct{ in, want string }{
		{"ref-gin", "ref_gin"}, {"soldout 1500/s", "soldout_1500_s"}, {"Rush", "rush"}, {"a (b)", "a_b"},
	}
	for _, tt := range tests {
		if got := Slug(tt.in); got != tt.want {
			t.Errorf("Slug(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for v, want := range map[float64]string{3: "3", 1234.56: "1234.6", 0.12345: "0.123", math.NaN(): "-"} {
		if got := FmtNum(v); got != want {
			t.Errorf("FmtNum(%v) = %q, want %q", v, got, want)
		}
	}
	if FmtSecs(-1) != "never" || FmtSecs(1.234) != "1.23 s" {
		t.Errorf("FmtSecs: %q %q", FmtSecs(-1), FmtSecs(1.234))
	}
	for k, want := range map[string]bool{"ratio.x": true, "rush.accepted": true, "ref_gin.rush.x.p99_ms": false,
		"flashsale.rush.shopper.202.p99_ms": true, "flashsale.rush.purchase.202.p99_ms": false} {
		if Headline(k) != want {
			t.Errorf("Headline(%q) = %v, want %v", k, !want, want)
		}
	}
}
