package web

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/flashsale/handlers"
)

// The router serves GET /sales/{id}/calendar.ics behind Pages.PublicOrigin: with the public
// address configured, the calendar's URL is that address whatever Host the client forged.
func TestCalendarRouteNamesThePublicAddress(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := NewRouter(Config{Log: log, API: &handlers.API{Log: log, Now: time.Now}, Registry: prometheus.NewRegistry(),
		Pages: &handlers.Pages{Catalog: fakeCatalog{}, Log: log, Now: time.Now, PublicURL: "https://shop.example.com"}})
	req := httptest.NewRequest(http.MethodGet, "/sales/1/calendar.ics", nil)
	req.Host = "evil.example"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body := strings.ReplaceAll(rec.Body.String(), "\r\n ", "")
	if rec.Code != http.StatusOK || !strings.Contains(body, "\r\nURL:https://shop.example.com/sales/1\r\n") || strings.Contains(body, "evil.example") {
		t.Errorf("GET /sales/1/calendar.ics with Host evil.example: %d\n%s\nwant the URL https://shop.example.com/sales/1", rec.Code, body)
	}
}
