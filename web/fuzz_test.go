package web

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/flashsale/handlers"
	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/catalog"
	"github.com/flashsale/flashsale/services/payments"
	"github.com/flashsale/flashsale/services/purchase"
	"github.com/flashsale/flashsale/shop"
)

// fakeShop and fakeCatalog stand in for the services so the fuzzer exercises every parser of
// client input in the HTTP layer (paths, bodies, headers, tokens) without a database; the
// integration tests cover the real services.
type fakeShop struct{}

func (fakeShop) NewCaptcha(context.Context, int64, int64, string) (string, string, error) {
	return "c", "data:,", nil
}
func (fakeShop) TokenGate(context.Context, int64) error            { return nil }
func (fakeShop) PurchaseGate(context.Context, int64, string) error { return nil }
func (fakeShop) IssueToken(context.Context, int64, int64, string, string, string) (string, time.Time, error) {
	return "t", time.Now(), nil
}
func (fakeShop) Purchase(_ context.Context, _, item int64, tok, _ string) (string, bool, error) {
	if tok == "" {
		return "", false, shop.Errorf(shop.CodeInvalidPurchaseToken, "no token")
	}
	return purchase.NewOrderID(item, time.Now()), false, nil
}
func (fakeShop) Order(_ context.Context, _ int64, id string) (shop.OrderView, error) {
	item, canonical, ok := purchase.ItemOfOrderID(id)
	if !ok {
		return shop.OrderView{}, shop.Errorf(shop.CodeNotFound, "no order")
	}
	return shop.OrderView{OrderID: canonical, ItemID: item, Status: shop.StatusQueued}, nil
}
func (s fakeShop) Pay(ctx context.Context, u int64, id string) (shop.OrderView, error) {
	return s.Order(ctx, u, id)
}
func (s fakeShop) Cancel(ctx context.Context, u int64, id string) (shop.OrderView, error) {
	return s.Order(ctx, u, id)
}
func (fakeShop) MyOrders(_ context.Context, _, _ int64, cursor string) ([]shop.OrderView, string, error) {
	if cursor != "" && len(cursor) < 8 {
		return nil, "", shop.Errorf(shop.CodeInvalidInput, "bad cursor")
	}
	return nil, "", nil
}

type fakeCatalog struct{}

var fakeSale = shop.Sale{ID: 1, Name: "s", StartsAt: time.Unix(0, 0), EndsAt: time.Unix(4e9, 0), Items: []shop.Item{{ID: 1, Name: "i", Quantity: 1}}}

func (fakeCatalog) Create(context.Context, int64, catalog.NewSale) (shop.Sale, error) {
	return fakeSale, nil
}
func (fakeCatalog) Get(_ context.Context, id int64) (shop.Sale, error) {
	if id != 1 {
		return shop.Sale{}, shop.Errorf(shop.CodeNotFound, "no sale")
	}
	return fakeSale, nil
}
func (c fakeCatalog) Cached(ctx context.Context, id int64) (shop.Sale, error) {
	return c.Get(ctx, id)
}
func (fakeCatalog) Upcoming(_ context.Context, cursor string) ([]shop.Sale, string, error) {
	if cursor != "" { // it gives out no cursor: any one sent is not its own
		return nil, "", shop.Errorf(shop.CodeInvalidInput, "bad cursor")
	}
	return []shop.Sale{fakeSale}, "", nil
}
func (fakeCatalog) OfMerchant(context.Context, int64) ([]shop.Sale, error) { return nil, nil }
func (fakeCatalog) Displayed(_ context.Context, id int64) (catalog.DisplayedStock, error) {
	return catalog.DisplayedStock{SaleID: id}, nil
}
func (fakeCatalog) AdminStock(context.Context, int64, int64) ([]catalog.AdminItemStock, error) {
	return nil, nil
}

// fakeAdmin answers the sale administration routes with the fake sale (404 for any other id).
type fakeAdmin struct{}

func (fakeAdmin) Edit(ctx context.Context, _, id int64, _ catalog.SaleEdit) (shop.Sale, error) {
	return fakeCatalog{}.Get(ctx, id)
}
func (fakeAdmin) Pause(ctx context.Context, _, id int64) (shop.Sale, error) {
	return fakeCatalog{}.Get(ctx, id)
}
func (fakeAdmin) Resume(ctx context.Context, _, id int64) (shop.Sale, error) {
	return fakeCatalog{}.Get(ctx, id)
}
func (fakeAdmin) End(ctx context.Context, _, id int64) (shop.Sale, error) {
	return fakeCatalog{}.Get(ctx, id)
}
func (fakeAdmin) Warm(ctx context.Context, _, id int64) (shop.Sale, error) {
	return fakeCatalog{}.Get(ctx, id)
}

type fakeAccounts struct{}

func (fakeAccounts) NewCaptcha(context.Context, string) (string, string, error) {
	return "c", "data:,", nil
}
func (fakeAccounts) Register(_ context.Context, u, p, id, answer, ip string) (string, auth.Identity, error) {
	return "t", auth.Identity{UserID: 1, Role: auth.RoleShopper}, nil
}
func (fakeAccounts) Login(_ context.Context, u, p, ip string) (string, auth.Identity, error) {
	return "", auth.Identity{}, shop.Errorf(shop.CodeInvalidCredentials, "no")
}
func (fakeAccounts) Logout(context.Context, string) error            { return nil }
func (fakeAccounts) Username(context.Context, int64) (string, error) { return "", nil }

// fakePayments is a payment side with no orders: every checkout is NOT_FOUND, every webhook unsigned.
type fakePayments struct{}

func (fakePayments) DirectPay() error { return nil }
func (fakePayments) Checkout(context.Context, int64, string, string) (string, error) {
	return "", shop.Errorf(shop.CodeNotFound, "no order")
}
func (fakePayments) Webhook(context.Context, []byte, string) error {
	return shop.Errorf(shop.CodeBadSignature, "unsigned")
}
func (fakePayments) Simulated(context.Context, string) (payments.SimulatedCheckout, error) {
	return payments.SimulatedCheckout{}, shop.Errorf(shop.CodeNotFound, "no checkout")
}
func (fakePayments) SimulatedPay(context.Context, string) (payments.SimulatedCheckout, error) {
	return payments.SimulatedCheckout{}, shop.Errorf(shop.CodeNotFound, "no checkout")
}

func fuzzRouter(auth *auth.Auth) http.Handler {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	now := time.Now
	return NewRouter(Config{
		Log:      log,
		Verifier: auth,
		API:      &handlers.API{Accounts: fakeAccounts{}, Catalog: fakeCatalog{}, Purchases: fakeShop{}, Admin: fakeAdmin{}, Payments: fakePayments{}, Log: log, Now: now, SessionTTL: time.Hour},
		Pages:    &handlers.Pages{Catalog: fakeCatalog{}, Payments: fakePayments{}, Log: log, Now: now},
		Registry: prometheus.NewRegistry(),
	})
}

// FuzzRouter sends arbitrary methods, paths, bodies and headers through the real router and
// middleware: never a panic, never a 5xx, and every API error is the contract's JSON.
func FuzzRouter(f *testing.F) {
	accounts := auth.New(auth.Config{Secret: []byte("fuzz-secret-of-some-length"), TTL: time.Hour}, auth.Deps{Now: time.Now})
	shopper, _ := accounts.Issue(auth.Identity{UserID: 3, Role: auth.RoleShopper})
	merchant, _ := accounts.Issue(auth.Identity{UserID: 4, Role: auth.RoleMerchant})
	h := fuzzRouter(accounts)
	seeds := []struct{ method, path, body, bearer, header string }{
		{"POST", "/api/auth/register", `{"username":"abc","password":"12345678"}`, "", ""},
		{"POST", "/api/auth/login", `{"username":1}`, "", ""},
		{"POST", "/api/flash-sales/1/purchase-token", `{"captchaId":"x","answer":"test"}`, shopper, ""},
		{"POST", "/api/flash-sales/items/1/purchase", ``, shopper, "tok"},
		{"POST", "/api/flash-sales/items/-1/purchase", `{}`, shopper, ""},
		{"POST", "/api/flash-sales/items/99999999999999999999/purchase", `{}`, shopper, "t"},
		{"GET", "/api/flash-sales/orders/01a22958-8d6e-802a-8916-367400000001", "", shopper, ""},
		{"POST", "/api/flash-sales/orders/%00/pay", "", shopper, ""},
		{"POST", "/api/admin/sales", `{"name":"x","startsAt":"2026-01-01T00:00:00Z","endsAt":"bad","items":[]}`, merchant, ""},
		{"GET", "/api/admin/sales/1/stock", "", shopper, ""},
		{"PATCH", "/api/admin/sales/1", `{"name":"y","items":[{"itemId":"1","quantity":2},{"name":"n","priceCents":1,"quantity":1}]}`, merchant, ""},
		{"POST", "/api/admin/sales/1/pause", "", merchant, ""},
		{"GET", "/sales/1", "", "", ""},
		{"GET", "/orders/not-an-id", "", "", ""},
		{"GET", "/api/flash-sales/1/stock", "", "", ""},
		{"DELETE", "/api/time", "", "", ""},
		{"POST", "/api/flash-sales/1/captcha", "null", "Bearer x.y.z", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.body, s.bearer, s.header)
	}
	f.Fuzz(func(t *testing.T, method, path, body, bearer, header string) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequest(method, "http://example.test"+path, strings.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		req.Header.Set("X-Purchase-Token", header)
		req.Header.Set("X-Forwarded-For", header)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %q body %q: status %d: %s", method, path, body, rec.Code, rec.Body.String())
		}
		if strings.HasPrefix(req.URL.Path, "/api/") && rec.Code >= 400 {
			var e struct{ Error, Message string }
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" || e.Message == "" {
				t.Fatalf("%s %q: status %d without the contract's error body: %q", method, path, rec.Code, rec.Body.String())
			}
		}
	})
}
