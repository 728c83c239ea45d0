package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/catalog"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/testenv"
)

// The home page and GET /api/flash-sales share one read of the listing a second: a crowd on
// them costs Postgres about one query a second, not one per request.
func TestListingDoesNotQueryPostgresPerRequest(t *testing.T) {
	h := newHarness(t, harnessOpts{env: map[string]string{"FLASHSALE_KEEPER_INTERVAL": "1h"}})
	first := h.liveSale(1)

	queries := countListingQueries(t, h)

	get := func(path string) (int, string) {
		resp, err := h.client.Get(h.srv.URL + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const workers, each = 20, 20
	start := time.Now()
	var wg sync.WaitGroup
	var bad atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				path := "/api/flash-sales"
				if (w+i)%2 == 0 {
					path = "/"
				}
				if code, body := get(path); code != http.StatusOK || !strings.Contains(body, "test sale") {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if bad.Load() != 0 {
		t.Errorf("%d of %d listing requests did not answer 200 with the sale", bad.Load(), workers*each)
	}
	t.Logf("%d listing requests in %v: %d queries", workers*each, elapsed.Round(time.Millisecond), queries.Load())
	if n, most := queries.Load(), int64(elapsed/time.Second)+2; n == 0 || n > most {
		t.Errorf("%d requests in %v cost %d listing queries, want at most %d (one a second)", workers*each, elapsed.Round(time.Millisecond), n, most)
	}

	// The cache is short: a new sale shows within about a second.
	second := h.liveSale(1)
	testenv.Eventually(t, 5*time.Second, fmt.Sprintf("sale %d listed after its creation", second.sale), func() error {
		_, body := get("/api/flash-sales")
		if strings.Contains(body, fmt.Sprintf(`"%d"`, second.sale)) && strings.Contains(body, fmt.Sprintf(`"%d"`, first.sale)) {
			return nil
		}
		return fmt.Errorf("listing %s", body)
	})
}

// countListingQueries counts the listing's queries from now on: those of the sales table with the
// listing's page size (the keeper pages through the sales too, by 500).
func countListingQueries(t *testing.T, h *harness) *atomic.Int64 {
	t.Helper()
	// Count the listing's queries: those of the sales table with the listing's page size (the
	// keeper pages through the sales too, by 500).
	var queries atomic.Int64
	err := h.app.DB.Gorm().Callback().Query().After("gorm:query").Register("test:count_listing", func(db *gorm.DB) {
		if db.Statement.Table != "sales" || !strings.Contains(db.Statement.SQL.String(), "ends_at >") {
			return
		}
		for _, v := range db.Statement.Vars {
			if v == any(catalog.SalesPage+1) {
				queries.Add(1)
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return &queries
}

// The writer has its own Postgres pool: with every connection of the public pool taken (a
// crowd on uncached routes, a slow query), acknowledged orders are still written.
func TestWriterKeepsItsOwnPoolWhenThePublicOneIsExhausted(t *testing.T) {
	h := newHarness(t, harnessOpts{noWriter: true, env: map[string]string{"FLASHSALE_DB_MAX_CONNS": "2"}})
	s := h.liveSale(5)
	shopper := h.token(42, auth.RoleShopper)
	r := h.buy(shopper, s.items[0], h.purchaseToken(shopper, s.sale))
	if r.Status != http.StatusAccepted {
		t.Fatalf("buy: %d %s", r.Status, r.Raw)
	}
	orderID := r.str("orderId")

	// Take every connection of the public pool and hold them.
	ctx := context.Background()
	public, err := h.app.DB.Gorm().DB()
	if err != nil {
		t.Fatal(err)
	}
	for range h.cfg.DBMaxConns {
		conn, err := public.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	if conn, err := public.Conn(short); err == nil {
		conn.Close()
		t.Fatal("the public pool is not exhausted: got another connection")
	}
	cancel()

	// Now the app's writer runs, and must write the queued order through its own pool.
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = h.app.Writer.Run(wctx)
	}()
	defer func() { stop(); <-done }()

	check := testenv.SQL(t, h.cfg.DatabaseURL) // a look from outside both pools
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("order %s written after the writer started, with the public pool exhausted", orderID), func() error {
		var status string
		if err := check.Raw(`SELECT status FROM orders WHERE id = ?`, orderID).Scan(&status).Error; err != nil {
			t.Fatal(err)
		}
		if status != shop.StatusPending {
			return fmt.Errorf("status %q", status)
		}
		return nil
	})
}
