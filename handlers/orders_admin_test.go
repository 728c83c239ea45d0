package handlers

import (
	"context"
	"encoding/csv"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/catalog"
	"github.com/flashsale/flashsale/shop"
)

// fakeExport makes orders on demand, chunk by chunk, and remembers how many it had produced at
// each of the response's flushes.
type fakeExport struct {
	total, chunk int
	produced     int
	ownErr       error
}

func (f *fakeExport) SaleOrders(context.Context, int64, int64, catalog.SaleOrderFilter, string) ([]catalog.AdminOrder, string, error) {
	return nil, "", nil
}

func (f *fakeExport) CheckSaleOwner(context.Context, int64, int64) error { return f.ownErr }

func (f *fakeExport) ExportOrders(_ context.Context, _ int64, fn func([]catalog.AdminOrder) error) error {
	buf := make([]catalog.AdminOrder, 0, f.chunk)
	now := time.Now()
	for f.produced < f.total {
		buf = buf[:0]
		for range min(f.chunk, f.total-f.produced) {
			f.produced++
			buf = append(buf, catalog.AdminOrder{OrderID: fmt.Sprintf("00000000-0000-0000-0000-%012d", f.produced), ItemID: 1,
				ItemName: "=HYPERLINK(\"x\"), \"quoted\"", UserID: int64(f.produced), Status: "PENDING", PriceCents: 100, Currency: "USD", CreatedAt: now,
				PaymentStatus: shop.PaymentNone})
			if f.produced == 2 { // a payment that came too late, refunded
				paid, pi, re := int64(100), "pi_2", "re_2"
				o := &buf[len(buf)-1]
				o.Status, o.PaymentStatus, o.PaidCents, o.PaymentID, o.RefundID = shop.StatusExpired, shop.PaymentRefunded, &paid, &pi, &re
			}
		}
		if err := fn(buf); err != nil {
			return err
		}
	}
	return nil
}

// flushRecorder records, at each flush, how many bytes had been written and how many orders the
// source had produced by then.
type flushRecorder struct {
	*httptest.ResponseRecorder
	src      *fakeExport
	produced []int
}

func (r *flushRecorder) Flush() {
	r.produced = append(r.produced, r.src.produced)
	r.ResponseRecorder.Flush()
}

// The export writes each chunk out (and flushes it) before it asks for the next one: however
// many orders a sale has, at most one chunk of them is in memory.
func TestAdminOrdersCSVStreams(t *testing.T) {
	t.Parallel()
	src := &fakeExport{total: 100_000, chunk: 1000}
	rec := &flushRecorder{ResponseRecorder: httptest.NewRecorder(), src: src}
	c, _ := gin.CreateTestContext(rec)
	c.Request = httptest.NewRequest(http.MethodGet, "/api/admin/sales/7/orders.csv", nil)
	c.Params = gin.Params{{Key: "saleId", Value: "7"}}
	SetIdentity(c, auth.Identity{UserID: 1, Role: auth.RoleMerchant})
	api := &API{Orders: src, Log: slog.New(slog.DiscardHandler)}
	api.AdminOrdersCSV(c)

	if got, want := rec.Code, http.StatusOK; got != want {
		t.Fatalf("status: got %d, want %d", got, want)
	}
	if got, want := rec.Header().Get("Content-Type"), "text/csv; charset=utf-8"; got != want {
		t.Errorf("Content-Type: got %q, want %q", got, want)
	}
	if got, want := rec.Header().Get("Content-Disposition"), `attachment; filename="sale-7-orders.csv"`; got != want {
		t.Errorf("Content-Disposition: got %q, want %q", got, want)
	}
	if got, want := len(rec.produced) >= src.total/src.chunk, true; got != want {
		t.Fatalf("flushes: got %d, want at least %d (one per chunk)", len(rec.produced), src.total/src.chunk)
	}
	for i, p := range rec.produced[:src.total/src.chunk] {
		if got, want := p, (i+1)*src.chunk; got != want {
			t.Fatalf("flush %d: got %d orders produced, want %d (each chunk sent before the next is read)", i, got, want)
		}
	}
	rows, err := csv.NewReader(strings.NewReader(rec.Body.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(rows), src.total+1; got != want {
		t.Fatalf("rows: got %d, want %d", got, want)
	}
	if got, want := strings.Join(rows[0], ","), "orderId,itemId,itemName,userId,status,priceCents,currency,createdAt,payBy,paidAt,username,paymentStatus,paidCents,paymentId,refundId"; got != want {
		t.Errorf("header: got %q, want %q", got, want)
	}
	if got := rows[1][11:]; strings.Join(got, ",") != "none,,," {
		t.Errorf("an unpaid order's payment columns: got %q, want none and three empty", got)
	}
	if got := rows[2][11:]; strings.Join(got, ",") != "refunded,100,pi_2,re_2" {
		t.Errorf("a refunded order's payment columns: got %q, want refunded,100,pi_2,re_2", got)
	}
	if got, want := rows[1][2], "'=HYPERLINK(\"x\"), \"quoted\""; got != want {
		t.Errorf("formula-looking name: got %q, want %q", got, want)
	}
}

func TestAdminOrdersCSVNotOwner(t *testing.T) {
	t.Parallel()
	src := &fakeExport{total: 10, chunk: 5, ownErr: shop.Errorf(shop.CodeNotFound, "no sale 7")}
	rec := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(rec)
	c.Request = httptest.NewRequest(http.MethodGet, "/api/admin/sales/7/orders.csv", nil)
	c.Params = gin.Params{{Key: "saleId", Value: "7"}}
	SetIdentity(c, auth.Identity{UserID: 2, Role: auth.RoleMerchant})
	api := &API{Orders: src, Log: slog.New(slog.DiscardHandler)}
	api.AdminOrdersCSV(c)
	if got, want := rec.Code, http.StatusNotFound; got != want {
		t.Errorf("status: got %d, want %d", got, want)
	}
	if got, want := src.produced, 0; got != want {
		t.Errorf("orders read for another merchant: got %d, want %d", got, want)
	}
}

func TestCSVSafe(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"": "", "plain": "plain", "=1+1": "'=1+1", "+1": "'+1", "-1": "'-1", "@SUM(A1)": "'@SUM(A1)",
		"\t=1": "'\t=1", "a=b": "a=b",
	} {
		if got := csvSafe(in); got != want {
			t.Errorf("csvSafe(%q): got %q, want %q", in, got, want)
		}
	}
}
