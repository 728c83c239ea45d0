package handlers

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
)

// The merchant's pages of one sale are shells like /admin: the same for everyone, never stored,
// holding only the sale's id (canonical); an id that is not one is the not-found page, not a 500.
func TestAdminSalePages(t *testing.T) {
	p := &Pages{Log: slog.New(slog.DiscardHandler), Now: time.Now}
	r := gin.New()
	r.GET("/admin/sales/:saleId", p.AdminSale)
	r.GET("/admin/sales/:saleId/orders", p.AdminSaleOrders)
	for _, tt := range []struct {
		path   string
		status int
		want   string
	}{
		{"/admin/sales/42", http.StatusOK, `data-testid="admin-live" data-sale-id="42"`},
		{"/admin/sales/42/orders", http.StatusOK, `data-testid="admin-orders" data-sale-id="42"`},
		{"/admin/sales/abc", http.StatusNotFound, "There is nothing at this address."},
		{"/admin/sales/0", http.StatusNotFound, "There is nothing at this address."},
		{"/admin/sales/-3/orders", http.StatusNotFound, "There is nothing at this address."},
		{"/admin/sales/99999999999999999999", http.StatusNotFound, "There is nothing at this address."},
	} {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, tt.path, nil))
		if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.want) {
			t.Errorf("GET %s = %d, want %d with %q", tt.path, w.Code, tt.status, tt.want)
		}
		if got := w.Header().Get("Cache-Control"); got != "no-store" {
			t.Errorf("GET %s: Cache-Control %q, want no-store", tt.path, got)
		}
	}
}
