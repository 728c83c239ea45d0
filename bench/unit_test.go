package main

import (
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestBucketsCoverEveryValue(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := []int64{0, 1, 63, 64, 127, 128, 129, 255, 256, 1000, 1 << 20, maxValue - 1, maxValue}
	for range 10000 {
		vals = append(vals, r.Int64N(maxValue))
	}
	for _, v := range vals {
		b := bucketOf(v)
		lo, hi := bucketRange(b)
		if b < 0 || b >= numBuckets || v < lo || v > hi {
			t.Fatalf("value %d: bucket %d covers [%d, %d]", v, b, lo, hi)
		}
		if width := hi - lo + 1; v >= 2*subBuckets && float64(width)/float64(lo) > 1.0/subBuckets+1e-9 {
			t.Fatalf("value %d: bucket [%d, %d] wider than 1/%d", v, lo, hi, subBuckets)
		}
	}
	if got := bucketOf(-5); got != 0 {
		t.Errorf("bucketOf(-5) = %d, want 0", got)
	}
}

func TestHistQuantiles(t *testing.T) {
	var h Hist
	// 1 µs … 10,000 µs, once each
	for i := 1; i <= 10000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	s := h.Snapshot()
	tests := []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 5000 * time.Microsecond},
		{0.9, 9000 * time.Microsecond},
		{0.99, 9900 * time.Microsecond},
		{0.999, 9990 * time.Microsecond},
		{1, 10000 * time.Microsecond},
		{0, 1 * time.Microsecond},
	}
	for _, tt := range tests {
		got := s.Quantile(tt.q)
		if rel := math.Abs(float64(got-tt.want)) / float64(tt.want); rel > 1.0/subBuckets {
			t.Errorf("Quantile(%v) = %v, want %v within 1.6%%", tt.q, got, tt.want)
		}
	}
	if s.Min != int64(time.Microsecond) || s.Max != int64(10*time.Millisecond) {
		t.Errorf("min, max = %d, %d, want 1000, 10000000", s.Min, s.Max)
	}
	if got, want := s.Mean(), 5000500*time.Nanosecond; got != want {
		t.Errorf("Mean() = %v, want %v", got, want)
	}
	sum := s.Summary()
	if sum.Count != 10000 || sum.Max != 10 {
		t.Errorf("Summary() = %+v, want count 10000, max 10 ms", sum)
	}
}

func TestHistMergeAndEmpty(t *testing.T) {
	var empty Hist
	if got := empty.Snapshot().Quantile(0.99); got != 0 {
		t.Errorf("empty Quantile = %v, want 0", got)
	}
	var a, b Hist
	for range 99 {
		a.Record(time.Millisecond)
	}
	b.Record(time.Second)
	s := a.Snapshot()
	s.Merge(b.Snapshot())
	if s.N != 100 {
		t.Fatalf("merged N = %d, want 100", s.N)
	}
	if got := s.Quantile(0.99); got < time.Millisecond || float64(got) > float64(time.Millisecond)*(1+1.0/subBuckets) {
		t.Errorf("p99 = %v, want 1ms within 1.6%% (the 99th of 100)", got)
	}
	if got := s.Quantile(0.999); got != time.Second {
		t.Errorf("p99.9 = %v, want 1s", got)
	}
}

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
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
	runs := []*RunResult{{Metrics: map[string]float64{"a": 1, "b": 5}}, {Metrics: map[string]float64{"a": 3}}, {Metrics: map[string]float64{"a": 2}}}
	m := medians(runs)
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
	for _, d := range compareMetrics(old, cur) {
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

func TestMinterTokensVerifyWithGolangJWT(t *testing.T) {
	secret := []byte("a-secret-of-at-least-16-bytes")
	m := minter{secret: secret, ttl: time.Hour}
	a := m.shoppers(12345, 5000) // enough to take the parallel path
	if a.len() != 5000 {
		t.Fatalf("len = %d, want 5000", a.len())
	}
	for _, i := range []int{0, 1, 2499, 2500, 4999} {
		var c jwt.MapClaims
		tok, err := jwt.ParseWithClaims(string(a.get(i)), &c, func(*jwt.Token) (any, error) { return secret, nil },
			jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired())
		if err != nil || !tok.Valid {
			t.Fatalf("token %d: %v", i, err)
		}
		if got, want := c["sub"], "12345"; i == 0 && got != want {
			t.Errorf("token 0 sub = %v, want %q", got, want)
		}
		if got := c["sub"]; got != itoa(12345+int64(i)) || c["role"] != "shopper" {
			t.Errorf("token %d: sub %v role %v", i, got, c["role"])
		}
	}
	mt, err := m.merchant(900000001)
	if err != nil {
		t.Fatal(err)
	}
	var c jwt.MapClaims
	if _, err := jwt.ParseWithClaims(mt, &c, func(*jwt.Token) (any, error) { return secret, nil }); err != nil || c["role"] != "merchant" {
		t.Errorf("merchant token: %v, claims %v", err, c)
	}
}

func TestSchedule(t *testing.T) {
	for _, kind := range []string{"uniform", "poisson"} {
		off := schedule(1000, 2*time.Second, kind, 1)
		if len(off) != 1000 {
			t.Fatalf("%s: %d offsets, want 1000", kind, len(off))
		}
		for i, o := range off {
			if o < 0 || o >= 2*time.Second || (i > 0 && o < off[i-1]) {
				t.Fatalf("%s: offset %d = %v: out of [0, 2s) or out of order", kind, i, o)
			}
		}
		again := schedule(1000, 2*time.Second, kind, 1)
		for i := range off {
			if off[i] != again[i] {
				t.Fatalf("%s: not reproducible at %d", kind, i)
			}
		}
	}
	if u := schedule(4, time.Second, "uniform", 1); u[1] != 250*time.Millisecond {
		t.Errorf("uniform[1] = %v, want 250ms", u[1])
	}
}

func TestJSONString(t *testing.T) {
	tests := []struct {
		body, key, want string
	}{
		{`{"purchaseToken":"abc.def","expiresAt":"x"}`, "purchaseToken", "abc.def"},
		{`{"orderId": "0190-1", "status":"QUEUED"}`, "orderId", "0190-1"},
		{`{"error":"SOLD_OUT","message":"sold out"}`, "error", "SOLD_OUT"},
		{`{"xerror":"no","error":"YES"}`, "error", "YES"},
		{`{"message":"error"}`, "error", ""},
		{`{"error":1}`, "error", ""},
	}
	for _, tt := range tests {
		if got := string(jsonString([]byte(tt.body), tt.key)); got != tt.want {
			t.Errorf("jsonString(%s, %q) = %q, want %q", tt.body, tt.key, got, tt.want)
		}
	}
}

func TestLoopbackOnly(t *testing.T) {
	tests := []struct {
		url, want string
		ok        bool
	}{
		{"http://127.0.0.1:8080", "127.0.0.1:8080", true},
		{"http://localhost:9000/", "127.0.0.1:9000", true},
		{"http://[::1]:8080", "[::1]:8080", true},
		{"http://127.0.0.2:80", "127.0.0.2:80", true},
		{"http://10.0.0.1:8080", "", false},
		{"http://example.com:8080", "", false},
		{"https://127.0.0.1:8080", "", false},
		{"127.0.0.1:8080", "", false},
	}
	for _, tt := range tests {
		got, err := loopbackAddr(tt.url)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("loopbackAddr(%q) = %q, %v; want %q, ok %v", tt.url, got, err, tt.want, tt.ok)
		}
	}
}

// TestRawConn checks the lean client against net/http's server: Content-Length, chunked
// bodies, an empty 204, keep-alive across requests and Connection: close.
func TestRawConn(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("X-Purchase-Token"); r.URL.Path == "/echo" && got != "tok" {
			http.Error(w, "missing token "+got, 400)
			return
		}
		switch r.URL.Path {
		case "/echo":
			b := make([]byte, r.ContentLength)
			r.Body.Read(b)
			w.WriteHeader(202)
			w.Write([]byte(`{"orderId":"` + r.Header.Get("Authorization") + `","body":` + string(b) + `}`))
		case "/chunked":
			w.Write([]byte(strings.Repeat("a", 5000)))
			w.(http.Flusher).Flush()
			w.Write([]byte(strings.Repeat("b", 5000)))
		case "/empty":
			w.WriteHeader(204)
		case "/close":
			w.Header().Set("Connection", "close")
			w.WriteHeader(410)
			w.Write([]byte(`{"error":"SOLD_OUT"}`))
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	c := &rawConn{addr: addr}
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	send := func(r request) (int, string) {
		t.Helper()
		if err := c.Send(&r, deadline); err != nil {
			t.Fatalf("send %s: %v", r.path, err)
		}
		st, body, err := c.Recv()
		if err != nil {
			t.Fatalf("recv %s: %v", r.path, err)
		}
		return st, string(body)
	}
	st, body := send(request{method: "POST", path: []byte("/echo"), bearer: []byte("jwt"), ptoken: []byte("tok"), body: []byte(`{"a":1}`)})
	if st != 202 || body != `{"orderId":"Bearer jwt","body":{"a":1}}` {
		t.Errorf("echo: %d %s", st, body)
	}
	first := c.c
	st, body = send(request{method: "GET", path: []byte("/chunked")})
	if st != 200 || len(body) != 10000 || body[4999] != 'a' || body[5000] != 'b' {
		t.Errorf("chunked: %d, %d bytes", st, len(body))
	}
	if st, body := send(request{method: "POST", path: []byte("/empty")}); st != 204 || body != "" {
		t.Errorf("empty: %d %q", st, body)
	}
	if c.c != first {
		t.Errorf("the connection was not kept alive")
	}
	if st, body := send(request{method: "POST", path: []byte("/close")}); st != 410 || body != `{"error":"SOLD_OUT"}` || c.c != nil {
		t.Errorf("close: %d %q, conn closed %v", st, body, c.c == nil)
	}
	if st, _ := send(request{method: "POST", path: []byte("/empty")}); st != 204 {
		t.Errorf("after close: %d, want a new connection and 204", st)
	}
}

func TestClassOf(t *testing.T) {
	tests := []struct {
		status int
		want   class
	}{
		{200, c200}, {202, c202}, {409, c409}, {410, c410}, {425, c425}, {429, c429},
		{403, c4xx}, {401, c4xx}, {500, c5xx}, {503, c5xx}, {302, c4xx},
	}
	for _, tt := range tests {
		if got := classOf(tt.status, nil); got != tt.want {
			t.Errorf("classOf(%d) = %s, want %s", tt.status, classNames[got], classNames[tt.want])
		}
	}
	for _, c := range []class{c200, c202, c409, c410} {
		if isError(c) {
			t.Errorf("isError(%s) = true", classNames[c])
		}
	}
	for _, c := range []class{c425, c429, c4xx, c5xx, cTimeout, cNetErr} {
		if !isError(c) {
			t.Errorf("isError(%s) = false", classNames[c])
		}
	}
}
