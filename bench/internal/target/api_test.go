package target

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestServerDiag(t *testing.T) {
	before := map[string]float64{
		`flashsale_http_request_seconds_sum{route="/a"}`:   1,
		`flashsale_http_request_seconds_count{route="/a"}`: 10,
		`flashsale_orders_total`:                           5,
		`flashsale_same_total`:                             3,
		`go_goroutines`:                                    7,
	}
	after := map[string]float64{
		`flashsale_http_request_seconds_sum{route="/a"}`:   3,
		`flashsale_http_request_seconds_count{route="/a"}`: 30,
		`flashsale_publish_seconds_sum`:                    0.5,
		`flashsale_publish_seconds_count`:                  100,
		`flashsale_orders_total`:                           12,
		`flashsale_same_total`:                             3,
		`go_goroutines`:                                    9,
	}
	got := ServerDiag(before, after)
	want := map[string]float64{
		`flashsale_http_request_seconds{route="/a"} mean`:  0.1,
		`flashsale_http_request_seconds{route="/a"} count`: 20,
		`flashsale_publish_seconds mean`:                   0.005,
		`flashsale_publish_seconds count`:                  100,
		`flashsale_orders_total`:                           7,
	}
	if len(got) != len(want) {
		t.Errorf("ServerDiag = %v, want %v", got, want)
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || fmt.Sprintf("%.6f", g) != fmt.Sprintf("%.6f", w) {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, w)
		}
	}
}

// TestAPI checks the calls against a stand-in server: a sale's creation, /metrics, readiness
// and the error an unexpected answer becomes.
func TestAPI(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/readyz":
			w.Write([]byte(`{"status":"ready"}`))
		case r.URL.Path == "/api/admin/sales" && r.Header.Get("Authorization") == "Bearer merchant-jwt":
			var in struct {
				Items []struct {
					Quantity int `json:"quantity"`
				} `json:"items"`
			}
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil || len(in.Items) != 1 || in.Items[0].Quantity != 5 {
				http.Error(w, `{"error":"VALIDATION"}`, 400)
				return
			}
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"saleId":"41","items":[{"itemId":"42"}]}`))
		case r.URL.Path == "/m":
			w.Write([]byte("# HELP x\nflashsale_a_total 3\nflashsale_b{route=\"/x y\"} 0.25\nbad line\n"))
		default:
			http.Error(w, `{"error":"UNAUTHENTICATED"}`, 401)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	a := NewAPI(srv.URL+"/", srv.URL+"/m", "merchant-jwt")
	if err := a.Ready(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	s, err := a.CreateSale(ctx, "t", time.Now(), time.Minute, 5)
	if err != nil || s.SaleID != 41 || len(s.ItemIDs) != 1 || s.ItemIDs[0] != 42 || s.Quantity != 5 {
		t.Fatalf("CreateSale = %+v, %v", s, err)
	}
	m, err := a.Scrape(ctx)
	if err != nil || len(m) != 2 || m["flashsale_a_total"] != 3 || m[`flashsale_b{route="/x y"}`] != 0.25 {
		t.Errorf("Scrape = %v, %v", m, err)
	}
	_, err = NewAPI(srv.URL, "", "wrong").CreateSale(ctx, "t", time.Now(), time.Minute, 5)
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "UNAUTHENTICATED") {
		t.Errorf("CreateSale with a wrong token: %v, want an HTTP 401 error naming the code", err)
	}
	if _, err := a.AdminStock(ctx, 41); err == nil {
		t.Error("AdminStock of an unknown route: no error")
	}
}
