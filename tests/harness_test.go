package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"gorm.io/gorm"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/pipeline"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// harness is one flashsale instance on real Redis, Postgres and an in-process JetStream, served
// by httptest, plus the helpers the integration tests share.
type harness struct {
	t       *testing.T
	cfg     app.Config
	env     map[string]string
	app     *app.App
	srv     *httptest.Server
	redis   *testenv.RedisServer
	client  *http.Client
	natsDir string
	db      *gorm.DB // the test's own connection to Postgres (sql)

	mu    sync.Mutex
	acked []string // every order id answered 202
	// ledger: flashsale reconcile checks the money ledger against the provider. With Stripe only
	// when the test's Stripe keeps the sessions it reports (FaultyStripe; stripe-mock keeps none);
	// the simulated provider's ledger is always checked (it says it keeps no books of its own).
	ledger bool
}

type harnessOpts struct {
	noWriter bool
	noKeeper bool // no background keeper (nor payments keeper): the test runs their passes
	env      map[string]string
	shared   *harness      // run as a second instance on the same Redis, Postgres and NATS
	skew     time.Duration // this instance's clock runs ahead (or behind) by this much
	// beforeRedisLoad runs in every load of a sale into Redis, between its snapshot and the load
	beforeRedisLoad func(saleID int64)
	redisURL        string // reach Redis here instead (a proxy in front of it)
}

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	var rs *testenv.RedisServer
	var dsn string
	if o.shared != nil {
		rs, dsn = o.shared.redis, o.shared.cfg.DatabaseURL
		o.env = mergeEnv(map[string]string{"FLASHSALE_NATS_URL": o.shared.app.NATSURL}, o.env)
	} else {
		rs, dsn = testenv.Redis(t), testenv.Postgres(t)
	}
	dir := t.TempDir()
	env := map[string]string{
		"FLASHSALE_DATABASE_URL":    dsn,
		"FLASHSALE_REDIS_URL":       rs.URL(),
		"FLASHSALE_DATA_DIR":        dir,
		"FLASHSALE_NATS_PORT":       strconv.Itoa(testenv.FreePort(t)),
		"FLASHSALE_RATE_LIMITS":     "off",
		"FLASHSALE_CAPTCHA":         "test",
		"FLASHSALE_PUBLISH_TIMEOUT": "2s",
		"FLASHSALE_KEEPER_INTERVAL": "200ms",
		"FLASHSALE_LOG_LEVEL":       "warn",
	}
	for k, v := range o.env {
		env[k] = v
	}
	if o.redisURL != "" {
		env["FLASHSALE_REDIS_URL"] = o.redisURL
	}
	cfg, err := app.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.ClockSkew = o.skew
	cfg.BeforeRedisLoad = o.beforeRedisLoad
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := app.New(context.Background(), cfg, log)
	if err != nil {
		t.Fatalf("newApp: %v", err)
	}
	a.Start(context.Background(), !o.noWriter, !o.noKeeper)
	srv := httptest.NewServer(a.Handler)
	h := &harness{t: t, cfg: cfg, env: env, app: a, srv: srv, redis: rs, natsDir: dir, db: testenv.SQL(t, cfg.DatabaseURL),
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	t.Cleanup(func() {
		srv.Close()
		a.Close()
	})
	return h
}

func mergeEnv(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// testWriter sends the app's log lines to the test log (shown only when a test fails).
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (h *harness) token(userID int64, role string) string {
	h.t.Helper()
	tok, err := h.app.Auth.Issue(auth.Identity{UserID: userID, Role: role})
	if err != nil {
		h.t.Fatal(err)
	}
	return tok
}

// response is a decoded API answer.
type response struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    string
}

func (r response) str(k string) string { s, _ := r.Body[k].(string); return s }

// do sends a request with an optional bearer token and JSON body, and decodes the answer.
func (h *harness) do(method, path, bearer string, body any, headers ...string) response {
	h.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		buf, _ := json.Marshal(b)
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := response{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

type saleIDs struct {
	sale  int64
	items []int64
}

// createSale creates a sale through the merchant API starting at startsAt with one item per
// quantity.
func (h *harness) createSale(startsAt time.Time, quantities ...int) saleIDs {
	h.t.Helper()
	return h.createSaleWith(nil, startsAt, quantities...)
}

// createSaleWith is createSale with more fields of the request (paymentWindowSeconds,
// purchaseLimit, …).
func (h *harness) createSaleWith(extra map[string]any, startsAt time.Time, quantities ...int) saleIDs {
	h.t.Helper()
	var items []map[string]any
	for i, q := range quantities {
		items = append(items, map[string]any{"name": fmt.Sprintf("item %d", i), "priceCents": 1000 + i, "quantity": q})
	}
	body := map[string]any{
		"name": "test sale", "startsAt": startsAt.UTC().Format(time.RFC3339), "endsAt": startsAt.Add(time.Hour).UTC().Format(time.RFC3339), "items": items,
	}
	for k, v := range extra {
		body[k] = v
	}
	r := h.do("POST", "/api/admin/sales", h.token(9000, auth.RoleMerchant), body)
	if r.Status != http.StatusCreated {
		h.t.Fatalf("create sale: %d %s", r.Status, r.Raw)
	}
	return saleIDsOf(r)
}

// saleIDsOf reads the sale's and its items' ids from the answer to a sale's creation.
func saleIDsOf(r response) saleIDs {
	out := saleIDs{}
	out.sale, _ = strconv.ParseInt(r.str("saleId"), 10, 64)
	for _, it := range r.Body["items"].([]any) {
		id, _ := strconv.ParseInt(it.(map[string]any)["itemId"].(string), 10, 64)
		out.items = append(out.items, id)
	}
	return out
}

// liveSale creates a sale that has already started.
func (h *harness) liveSale(quantities ...int) saleIDs {
	return h.createSale(time.Now().Add(-time.Second), quantities...)
}

// purchaseToken solves the test captcha and fetches a purchase token.
func (h *harness) purchaseToken(bearer string, saleID int64) string {
	h.t.Helper()
	c := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/captcha", saleID), bearer, nil)
	if c.Status != http.StatusOK {
		h.t.Fatalf("captcha: %d %s", c.Status, c.Raw)
	}
	r := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", saleID), bearer, map[string]string{"captchaId": c.str("captchaId"), "answer": "test"})
	if r.Status != http.StatusOK {
		h.t.Fatalf("purchase token: %d %s", r.Status, r.Raw)
	}
	return r.str("purchaseToken")
}

// buy attempts one purchase and records acknowledged order ids.
func (h *harness) buy(bearer string, itemID int64, ptoken string) response {
	h.t.Helper()
	r := h.do("POST", fmt.Sprintf("/api/flash-sales/items/%d/purchase", itemID), bearer, nil, "X-Purchase-Token", ptoken)
	if r.Status == http.StatusAccepted {
		h.mu.Lock()
		h.acked = append(h.acked, r.str("orderId"))
		h.mu.Unlock()
	}
	return r
}

// drain waits until the writer has acknowledged every queued message and no reservation is in
// flight for the sale's items.
func (h *harness) drain(s saleIDs) {
	h.t.Helper()
	ctx := context.Background()
	testenv.Eventually(h.t, 30*time.Second, "queue drained", func() error {
		backlog, err := h.app.Queue.Backlog(ctx)
		// every shard's register: right after a publish the queue's count may not show the
		// message yet, but its reservation is in flight in Redis before the shopper hears 202
		flight, ferr := h.app.Stock.InFlight(ctx, s.sale)
		if err == nil && ferr == nil && backlog == 0 && len(flight) == 0 {
			return nil
		}
		return fmt.Errorf("backlog %d (err %v), in flight %d (err %v)", backlog, err, len(flight), ferr)
	})
}

// checkInvariants drains and checks every invariant of ARCHITECTURE.md for the sale.
func (h *harness) checkInvariants(s saleIDs) {
	h.t.Helper()
	h.drain(s)
	h.mu.Lock()
	acked := append([]string(nil), h.acked...)
	h.mu.Unlock()
	for _, err := range pipeline.Invariants(context.Background(), h.app.DB, h.app.Stock, s.sale, acked) {
		h.t.Errorf("invariant: %v", err)
	}
	// The same report as an operator gets it: `flashsale reconcile SALE_ID` exits 0.
	if out, err := h.reconcile(s.sale); err != nil {
		h.t.Errorf("flashsale reconcile %d: %v\n%s", s.sale, err, out)
	}
}

// reconcile runs `flashsale reconcile SALE_ID` against this instance's Redis, Postgres and NATS
// and returns its output.
func (h *harness) reconcile(saleID int64) (string, error) {
	env := mergeEnv(h.env, nil)
	env["FLASHSALE_NATS_URL"] = h.app.NATSURL
	env["FLASHSALE_LOG_LEVEL"] = "error"
	var out strings.Builder
	args := []string{"reconcile", "-wait", "10s", strconv.FormatInt(saleID, 10)}
	if env["FLASHSALE_PAYMENTS"] == "stripe" && !h.ledger {
		args = append([]string{"reconcile", "-money=false"}, args[1:]...)
	}
	err := app.Run(context.Background(), args, func(k string) string { return env[k] }, &out)
	return out.String(), err
}

func (h *harness) sqlInt(query string, args ...any) int64 {
	h.t.Helper()
	var n int64
	if err := h.sql().Raw(query, args...).Scan(&n).Error; err != nil {
		h.t.Fatalf("%s: %v", query, err)
	}
	return n
}

func (h *harness) redisStock(s saleIDs, itemID int64) int64 {
	h.t.Helper()
	n, err := h.app.Redis.Get(context.Background(), store.StockKey(s.sale, itemID)).Int64()
	if err != nil {
		h.t.Fatalf("redis stock of item %d: %v", itemID, err)
	}
	return n
}

// sql is the test's own connection to the instance's Postgres: the source of truth, read and
// changed directly (the program's connection is its own).
func (h *harness) sql() *gorm.DB { return h.db }
