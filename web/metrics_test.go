package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics address serves the Prometheus metrics and Go's profiles; nothing else.
func TestMetricsHandlerServesMetricsAndProfiles(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "flashsale_test_total", Help: "a test counter"})
	reg.MustRegister(c)
	c.Add(3)
	h := MetricsHandler(reg)
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	if rec := get("/metrics"); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "flashsale_test_total 3") {
		t.Errorf("/metrics: %d %q", rec.Code, rec.Body.String())
	}
	if rec := get("/debug/pprof/"); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "goroutine") {
		t.Errorf("/debug/pprof/: %d", rec.Code)
	}
	if rec := get("/debug/pprof/goroutine?debug=1"); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "goroutine profile") {
		t.Errorf("/debug/pprof/goroutine: %d", rec.Code)
	}
	if rec := get("/other"); rec.Code != http.StatusNotFound {
		t.Errorf("/other: %d, want 404", rec.Code)
	}
}
