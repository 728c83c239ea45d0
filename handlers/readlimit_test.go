package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/catalog"
	"github.com/flashsale/flashsale/services/limits"
	"github.com/flashsale/flashsale/shop"
)

// countingCatalog counts every lookup the public reads make (a nil Catalog panics on any other).
type countingCatalog struct {
	Catalog
	calls atomic.Int64
}

func (c *countingCatalog) Cached(context.Context, int64) (shop.Sale, error) {
	c.calls.Add(1)
	return shop.Sale{}, shop.Errorf(shop.CodeNotFound, "no sale")
}

func (c *countingCatalog) Upcoming(context.Context, string) ([]shop.Sale, string, error) {
	c.calls.Add(1)
	return nil, "", nil
}

func (c *countingCatalog) Displayed(context.Context, int64) (catalog.DisplayedStock, error) {
	c.calls.Add(1)
	return catalog.DisplayedStock{}, shop.Errorf(shop.CodeNotFound, "no sale")
}

// countingShop counts the order lookups.
type countingShop struct {
	Purchases
	calls atomic.Int64
}

func (s *countingShop) Order(context.Context, int64, string) (shop.OrderView, error) {
	s.calls.Add(1)
	return shop.OrderView{}, shop.Errorf(shop.CodeNotFound, "no order")
}

func (s *countingShop) MyOrders(context.Context, int64, int64, string) ([]shop.OrderView, string, error) {
	s.calls.Add(1)
	return nil, "", nil
}

// Every public read that takes an id or a cursor asks the client's read bucket first: over the
// limit it answers 429 RATE_LIMITED with Retry-After, never cached, and looks nothing up. With
// the real limiter, one address gets its burst and then 429s.
func TestPublicReadsAskTheRateLimitFirst(t *testing.T) {
	t.Parallel()
	rig := newReadRig()
	rig.checkEveryReadLooksUp(t)
	rig.checkOverTheLimitLooksNothingUp(t, refuseAll{})
	rig.checkTheRealLimiter(t)
}

// readRig is a router of the public reads, as the shopper 7, over a counting catalog and shop.
type readRig struct {
	cat   *countingCatalog
	buyer *countingShop
	log   *slog.Logger
	api   *API
	pages *Pages
	r     *gin.Engine
	paths []string // a read of every route that takes an id or a cursor
}

func newReadRig() *readRig {
	cat, buyer := &countingCatalog{}, &countingShop{}
	log := slog.New(slog.DiscardHandler)
	api := &API{Catalog: cat, Purchases: buyer, Log: log, Now: time.Now}
	pages := &Pages{Catalog: cat, Log: log, Now: time.Now}
	r := gin.New()
	r.Use(func(c *gin.Context) { SetIdentity(c, auth.Identity{UserID: 7, Role: auth.RoleShopper}) })
	r.GET("/api/flash-sales", api.ListSales)
	r.GET("/api/flash-sales/:saleId", api.GetSale)
	r.GET("/api/flash-sales/:saleId/stock", api.Stock)
	r.GET("/api/flash-sales/orders", api.MyOrders)
	r.GET("/api/flash-sales/orders/:orderId", api.Order)
	r.GET("/", pages.Home)
	r.GET("/sales/:saleId", pages.Sale)
	paths := []string{"/api/flash-sales?cursor=x", "/api/flash-sales/123456789", "/api/flash-sales/123456789/stock",
		"/api/flash-sales/orders?cursor=x", "/api/flash-sales/orders/0190a0b0-0000-8000-8000-000000000001",
		"/?cursor=x", "/sales/123456789"}
	return &readRig{cat: cat, buyer: buyer, log: log, api: api, pages: pages, r: r, paths: paths}
}

func (g *readRig) get(path string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	g.r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w
}

func (g *readRig) lookups() int64 { return g.cat.calls.Load() + g.buyer.calls.Load() }

// checkEveryReadLooksUp: without a limiter every read is looked up (the counting works).
func (g *readRig) checkEveryReadLooksUp(t *testing.T) {
	t.Helper()
	for _, p := range g.paths {
		g.get(p)
	}
	if got := g.lookups(); got != int64(len(g.paths)) {
		t.Fatalf("without a limit: %d lookups for %d reads", got, len(g.paths))
	}
	g.cat.calls.Store(0)
	g.buyer.calls.Store(0)
}

// checkOverTheLimitLooksNothingUp: with a limiter that refuses, every read answers 429
// RATE_LIMITED, Retry-After, no-store, and nothing is looked up.
func (g *readRig) checkOverTheLimitLooksNothingUp(t *testing.T, limiter ReadLimiter) {
	t.Helper()
	g.api.Reads, g.pages.Reads = limiter, limiter
	for _, p := range g.paths {
		w := g.get(p)
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "3" ||
			w.Header().Get("Cache-Control") != "no-store" || !jsonError(w, shop.CodeRateLimited) {
			t.Errorf("GET %s over the limit: %d %v %s, want 429 RATE_LIMITED, Retry-After 3, no-store", p, w.Code, w.Header(), w.Body)
		}
	}
	if got := g.lookups(); got != 0 {
		t.Errorf("%d lookups made for reads over the limit, want none", got)
	}
}

// checkTheRealLimiter: a burst of ReadLimit.Burst from one address, then 429; another address
// has its own bucket; FLASHSALE_RATE_LIMITS=off lets everything through.
func (g *readRig) checkTheRealLimiter(t *testing.T) {
	t.Helper()
	now := time.Unix(1_800_000_000, 0)
	real := limits.NewLimiter(nil, limits.Config{On: true, Log: g.log, Now: func() time.Time { return now }})
	g.api.Reads, g.pages.Reads = real, real
	g.cat.calls.Store(0)
	passed := 0
	for range limits.ReadLimit.Burst + 20 {
		if w := g.get("/api/flash-sales/123456789"); w.Code != http.StatusTooManyRequests {
			passed++
		}
	}
	if passed != limits.ReadLimit.Burst || g.cat.calls.Load() != int64(passed) {
		t.Errorf("one address: %d passed, %d looked up; want the burst, %d, both", passed, g.cat.calls.Load(), limits.ReadLimit.Burst)
	}
	w := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/sales/123456789", nil)
	req.RemoteAddr = "192.0.2.9:5555"
	g.r.ServeHTTP(w, req)
	if w.Code == http.StatusTooManyRequests {
		t.Errorf("another address was limited with the first one's bucket")
	}
	off := limits.NewLimiter(nil, limits.Config{Log: g.log, Now: func() time.Time { return now }})
	g.api.Reads = off
	if w := g.get("/api/flash-sales/123456789"); w.Code == http.StatusTooManyRequests {
		t.Errorf("limits off: %d", w.Code)
	}
}

type refuseAll struct{}

func (refuseAll) AllowRead(string) error {
	return &shop.Error{Code: shop.CodeRateLimited, Message: "slow down", RetryAfter: 2500 * time.Millisecond}
}

func jsonError(w *httptest.ResponseRecorder, code shop.Code) bool {
	return w.Header().Get("Content-Type") == jsonType && strings.Contains(w.Body.String(), `"error":"`+string(code)+`"`)
}
