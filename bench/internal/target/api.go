// Package target is the flashsale under test as the tool sees it: the few calls it makes besides
// the load (creating sales, the merchant's stock view, /metrics), the server's Postgres and Redis,
// and the end-of-run invariant check.
package target

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The development defaults of the server and the Makefile's services (config.go, Makefile).
const (
	DevJWTSecret       = "flashsale-dev-secret-do-not-use-in-production"
	DefaultURL         = "http://127.0.0.1:8080"
	DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5433/flashsale?sslmode=disable"
	DefaultRedisURL    = "redis://127.0.0.1:6380/0"
)

// API makes the tool's few non-load calls (creating sales, the merchant's stock view, /metrics)
// through net/http; only the load itself goes through the lean client.
type API struct {
	base     string
	metrics  string // the server's /metrics URL ("" : base + /metrics)
	hc       *http.Client
	merchant string // merchant JWT
}

// NewAPI calls the server at base as the merchant whose JWT is merchant; metrics is its /metrics
// URL ("": base + /metrics).
func NewAPI(base, metrics, merchant string) *API {
	return &API{base: strings.TrimRight(base, "/"), metrics: metrics, merchant: merchant, hc: &http.Client{Timeout: 30 * time.Second}}
}

// Do sends one JSON request and decodes a 2xx answer into out; it returns the status and the body.
func (a *API) Do(ctx context.Context, method, path, bearer string, body, out any, headers ...string) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, b, fmt.Errorf("%s %s: decode: %w", method, path, err)
		}
	}
	return resp.StatusCode, b, nil
}

// Ready waits up to d for GET /readyz to answer 200.
func (a *API) Ready(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		st, body, err := a.Do(ctx, "GET", "/readyz", "", nil, nil)
		if err == nil && st == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("%s/readyz: %w (is the server running? `make bench` starts one)", a.base, err)
			}
			return HTTPErrorf(st, body, "%s/readyz", a.base)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Sale is a sale the tool created, with what it saw accepted.
type Sale struct {
	SaleID   int64    `json:"sale_id"`
	ItemIDs  []int64  `json:"item_ids"`
	Quantity int      `json:"quantity"`
	Acked    []string `json:"-"` // order ids answered 202
	NAcked   int      `json:"accepted"`
}

// CreateSale creates a one-item sale as the merchant (POST /api/admin/sales), open from starts
// for lasts: short, since the server's background jobs look at every live sale.
func (a *API) CreateSale(ctx context.Context, name string, starts time.Time, lasts time.Duration, quantity int) (*Sale, error) {
	return a.CreateSaleItems(ctx, name, starts, lasts, []int{quantity})
}

// CreateSaleItems is CreateSale with one item per quantity, in order.
func (a *API) CreateSaleItems(ctx context.Context, name string, starts time.Time, lasts time.Duration, quantities []int) (*Sale, error) {
	items := make([]map[string]any, len(quantities))
	total := 0
	for i, q := range quantities {
		items[i] = map[string]any{"name": fmt.Sprintf("bench unit %d", i+1), "priceCents": 100, "quantity": q}
		total += q
	}
	in := map[string]any{
		"name": name, "startsAt": starts.UTC().Format(time.RFC3339Nano), "endsAt": starts.Add(lasts).UTC().Format(time.RFC3339Nano),
		"items": items,
	}
	var out struct {
		SaleID string `json:"saleId"`
		Items  []struct {
			ItemID string `json:"itemId"`
		} `json:"items"`
	}
	st, body, err := a.Do(ctx, "POST", "/api/admin/sales", a.merchant, in, &out)
	if err != nil {
		return nil, err
	}
	if st != http.StatusCreated {
		return nil, HTTPErrorf(st, body, "create sale")
	}
	id, err := strconv.ParseInt(out.SaleID, 10, 64)
	if err != nil || len(out.Items) != len(quantities) {
		return nil, fmt.Errorf("create sale: unexpected answer %s", body)
	}
	s := &Sale{SaleID: id, Quantity: total}
	for _, it := range out.Items {
		item, err := strconv.ParseInt(it.ItemID, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("create sale: unexpected answer %s", body)
		}
		s.ItemIDs = append(s.ItemIDs, item)
	}
	return s, nil
}

// AdminItem is one item of GET /api/admin/sales/{id}/stock.
type AdminItem struct {
	ItemID     string `json:"itemId"`
	Quantity   int64  `json:"quantity"`
	Displayed  int64  `json:"displayed"`
	Frozen     int64  `json:"frozen"`
	Real       int64  `json:"real"`
	Paid       int64  `json:"paid"`
	Pending    int64  `json:"pending"`
	InFlight   int64  `json:"inFlight"`
	Reconciled bool   `json:"reconciled"`
}

// AdminStock returns the merchant's view of a sale's stock.
func (a *API) AdminStock(ctx context.Context, saleID int64) ([]AdminItem, error) {
	var out struct {
		Items []AdminItem `json:"items"`
	}
	st, body, err := a.Do(ctx, "GET", "/api/admin/sales/"+strconv.FormatInt(saleID, 10)+"/stock", a.merchant, nil, &out)
	if err != nil {
		return nil, err
	}
	if st != http.StatusOK {
		return nil, HTTPErrorf(st, body, "merchant stock of sale %d", saleID)
	}
	return out.Items, nil
}

// Buy makes one shopper buy one unit the ordinary way (token, then purchase) and returns the
// order id.
func (a *API) Buy(ctx context.Context, shopperJWT string, saleID, itemID int64) (string, error) {
	var tok struct {
		PurchaseToken string `json:"purchaseToken"`
	}
	st, body, err := a.Do(ctx, "POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", saleID), shopperJWT,
		map[string]string{"captchaId": "bench", "answer": "test"}, &tok)
	if err != nil {
		return "", err
	}
	if st != http.StatusOK {
		return "", HTTPErrorf(st, body, "purchase token")
	}
	var ord struct {
		OrderID string `json:"orderId"`
	}
	st, body, err = a.Do(ctx, "POST", fmt.Sprintf("/api/flash-sales/items/%d/purchase", itemID), shopperJWT, nil, &ord,
		"X-Purchase-Token", tok.PurchaseToken)
	if err != nil {
		return "", err
	}
	if st != http.StatusAccepted {
		return "", HTTPErrorf(st, body, "purchase")
	}
	return ord.OrderID, nil
}

// Scrape reads the server's /metrics: every sample line as "name{labels}" → value.
func (a *API) Scrape(ctx context.Context) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	u := a.metrics
	if u == "" {
		u = a.base + "/metrics"
	}
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: HTTP %d", resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// ServerDiag turns two /metrics scrapes into what the server says about a phase: for every
// histogram or summary, the count and mean over the phase; for counters of interest, the delta.
func ServerDiag(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		name, labels, _ := strings.Cut(k, "{")
		if !strings.HasPrefix(name, "flashsale_") {
			continue
		}
		if labels != "" {
			labels = "{" + labels
		}
		switch {
		case strings.HasSuffix(name, "_sum"):
			base := strings.TrimSuffix(name, "_sum")
			cnt := after[base+"_count"+labels] - before[base+"_count"+labels]
			if cnt > 0 {
				out[base+labels+" mean"] = (v - before[k]) / cnt
				out[base+labels+" count"] = cnt
			}
		case strings.HasSuffix(name, "_total"):
			if d := v - before[k]; d > 0 {
				out[k] = d
			}
		}
	}
	return out
}

// HTTPErrorf is an unexpected answer as an error: the message, the status and the body's start.
func HTTPErrorf(status int, body []byte, format string, args ...any) error {
	b := body
	if len(b) > 300 {
		b = b[:300]
	}
	return fmt.Errorf("%s: HTTP %d: %s", fmt.Sprintf(format, args...), status, bytes.TrimSpace(b))
}
