//go:build linux

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/testenv"
)

// ledger is every answer the shoppers got: what the suite holds the system to.
type ledger struct {
	mu        sync.Mutex
	acked     map[string]int64     // order id answered 202 → shopper
	ackedAt   map[string]time.Time // when the 202 arrived
	named     map[string]bool      // order ids a 409 ALREADY_PURCHASED named
	noAnswer  map[int64]bool       // shoppers with a purchase that got no answer (instance killed)
	status    map[int]int          // purchase answers by status
	transport int                  // purchases with no answer
	odd       []string             // answers the contract does not allow here (a 500, say)
}

func newLedger() *ledger {
	return &ledger{acked: map[string]int64{}, ackedAt: map[string]time.Time{}, named: map[string]bool{},
		noAnswer: map[int64]bool{}, status: map[int]int{}}
}

// ackedBefore returns the order ids answered 202 before t.
func (l *ledger) ackedBefore(t time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []string
	for id, at := range l.ackedAt {
		if at.Before(t) {
			ids = append(ids, id)
		}
	}
	return ids
}

func (l *ledger) ackedIDs() []string { return l.ackedBefore(time.Now().Add(time.Hour)) }

// answer is one HTTP answer, decoded.
type answer struct {
	status int
	body   map[string]any
	raw    string
}

func (a answer) str(k string) string { s, _ := a.body[k].(string); return s }

// do sends one request to instance i; a transport error (refused, reset, timeout) is returned
// as such.
func (c *cluster) do(i int, method, path, bearer string, body any, headers ...string) (answer, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.inst[i].url()+path, rd)
	if err != nil {
		return answer{}, err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k := 0; k+1 < len(headers); k += 2 {
		req.Header.Set(headers[k], headers[k+1])
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	a := answer{status: resp.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a, nil
}

type sale struct {
	id    int64
	items []int64
}

// createSale creates a sale through instance 0's merchant API.
func (c *cluster) createSale(startsAt time.Time, payWindow time.Duration, quantities ...int) sale {
	c.t.Helper()
	var extra map[string]any
	if payWindow > 0 {
		extra = map[string]any{"paymentWindowSeconds": int(payWindow / time.Second)}
	}
	return c.createSaleWith(startsAt, extra, quantities...)
}

// createSaleWith is createSale with more fields of the request.
func (c *cluster) createSaleWith(startsAt time.Time, extra map[string]any, quantities ...int) sale {
	c.t.Helper()
	var items []map[string]any
	for i, q := range quantities {
		items = append(items, map[string]any{"name": fmt.Sprintf("item %d", i), "priceCents": 1000 + i, "quantity": q})
	}
	body := map[string]any{"name": "chaos sale", "startsAt": startsAt.UTC().Format(time.RFC3339Nano),
		"endsAt": startsAt.Add(time.Hour).UTC().Format(time.RFC3339Nano), "items": items}
	for k, v := range extra {
		body[k] = v
	}
	a, err := c.do(0, "POST", "/api/admin/sales", c.merchantToken(), body)
	if err != nil || a.status != http.StatusCreated {
		c.t.Fatalf("create sale: %v %d %s", err, a.status, a.raw)
	}
	s := sale{}
	s.id, _ = strconv.ParseInt(a.str("saleId"), 10, 64)
	for _, it := range a.body["items"].([]any) {
		id, _ := strconv.ParseInt(it.(map[string]any)["itemId"].(string), 10, 64)
		s.items = append(s.items, id)
	}
	return s
}

var shopperAuth = auth.New(auth.Config{Secret: secret, TTL: 24 * time.Hour}, auth.Deps{Now: time.Now})

func bearerOf(user int64) string {
	tok, err := shopperAuth.Issue(auth.Identity{UserID: user, Role: auth.RoleShopper})
	if err != nil {
		panic(err)
	}
	return tok
}

// tokenError is a refused captcha or purchase-token request (the answer is in it).
type tokenError struct{ ans answer }

func (e *tokenError) Error() string { return fmt.Sprintf("token: %d %s", e.ans.status, e.ans.raw) }

// purchaseToken solves the test captcha on instance i and fetches a purchase token. A refusal is
// a *tokenError; anything else is a transport error.
func (c *cluster) purchaseToken(i int, bearer string, saleID int64, headers ...string) (string, error) {
	ca, err := c.do(i, "POST", fmt.Sprintf("/api/flash-sales/%d/captcha", saleID), bearer, nil, headers...)
	if err != nil {
		return "", err
	}
	if ca.status != http.StatusOK {
		return "", &tokenError{ca}
	}
	pt, err := c.do(i, "POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", saleID), bearer,
		map[string]string{"captchaId": ca.str("captchaId"), "answer": "test"}, headers...)
	if err != nil {
		return "", err
	}
	if pt.status != http.StatusOK {
		return "", &tokenError{pt}
	}
	return pt.str("purchaseToken"), nil
}

// shopper is one planned shopper of a load.
type shopper struct {
	user int64
	item int64
	// pick chooses the instance of an attempt; the default spreads shoppers and their retries.
	pick func(attempt int) int
	ip   string // sent as X-Forwarded-For (with FLASHSALE_TRUSTED_PROXIES=127.0.0.1)
}

type loadOpts struct {
	attempts    int           // tries per shopper after a 503, 425 or no answer (default 4)
	concurrency int           // shoppers at once (default 48)
	retryPause  time.Duration // between tries (default 150ms)
	perSecond   int           // shoppers arriving per second (default 400): a rush of a few seconds
	stop        <-chan struct{}
	// accepted, if set, runs in its own goroutine after each 202
	accepted func(orderID string, user int64)
}

// run drives the shoppers and records every answer in l; it returns when all are done.
func (c *cluster) run(l *ledger, s sale, shoppers []shopper, o loadOpts) {
	if o.attempts == 0 {
		o.attempts = 4
	}
	if o.concurrency == 0 {
		o.concurrency = 48
	}
	if o.retryPause == 0 {
		o.retryPause = 150 * time.Millisecond
	}
	if o.perSecond == 0 {
		o.perSecond = 400
	}
	sem := make(chan struct{}, o.concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	for k, sh := range shoppers {
		if due := start.Add(time.Duration(k) * time.Second / time.Duration(o.perSecond)); time.Until(due) > 0 {
			time.Sleep(time.Until(due))
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c.shop(l, s, sh, o)
		}()
	}
	wg.Wait()
}

// shop is one shopper buying: a purchase token, then the purchase, on the instance its pick
// names for each attempt, tried again (after o.retryPause) while the answer allows, up to
// o.attempts; every answer goes to the ledger.
func (c *cluster) shop(l *ledger, s sale, sh shopper, o loadOpts) {
	bearer := bearerOf(sh.user)
	pick := sh.pick
	if pick == nil {
		pick = func(a int) int { return (int(sh.user) + a) % len(c.inst) }
	}
	var hdr []string
	if sh.ip != "" {
		hdr = []string{"X-Forwarded-For", sh.ip}
	}
	for a := 0; a < o.attempts; a++ {
		if a > 0 {
			time.Sleep(o.retryPause)
		}
		if o.stop != nil {
			select {
			case <-o.stop:
				return
			default:
			}
		}
		i := pick(a)
		ptok, err := c.purchaseToken(i, bearer, s.id, hdr...)
		var te *tokenError
		if errors.As(err, &te) {
			switch te.ans.status {
			case http.StatusGone: // sold out or ended: the shopper is told at once
				l.mu.Lock()
				l.status[http.StatusGone]++
				l.mu.Unlock()
				return
			case http.StatusServiceUnavailable, http.StatusTooEarly, http.StatusTooManyRequests:
				continue
			}
			l.mu.Lock()
			l.odd = append(l.odd, fmt.Sprintf("token on instance %d: %d %s", i, te.ans.status, strings.TrimSpace(te.ans.raw)))
			l.mu.Unlock()
			return
		}
		if err != nil {
			continue // no answer, nothing tried: the next attempt asks again
		}
		ans, err := c.do(i, "POST", fmt.Sprintf("/api/flash-sales/items/%d/purchase", sh.item), bearer, nil, append([]string{"X-Purchase-Token", ptok}, hdr...)...)
		if l.recordPurchase(i, sh.user, ans, err, o.accepted) {
			return
		}
	}
}

// recordPurchase records the answer to shopper user's purchase on instance i in the ledger (a
// 202 also goes to accepted, if set) and reports whether the shopper is done: false when the
// purchase is to be tried again (no answer, 503, 425, 429).
func (l *ledger) recordPurchase(i int, user int64, ans answer, err error, accepted func(id string, user int64)) bool {
	l.mu.Lock()
	if err != nil {
		l.transport++
		l.noAnswer[user] = true
		l.mu.Unlock()
		return false
	}
	l.status[ans.status]++
	switch ans.status {
	case http.StatusAccepted:
		id := ans.str("orderId")
		if prev, dup := l.acked[id]; dup {
			l.odd = append(l.odd, fmt.Sprintf("order %s answered 202 twice (users %d, %d)", id, prev, user))
		}
		l.acked[id] = user
		l.ackedAt[id] = time.Now()
		l.mu.Unlock()
		if accepted != nil {
			go accepted(id, user)
		}
		return true
	case http.StatusConflict:
		if ans.str("error") == "ALREADY_PURCHASED" {
			l.named[ans.str("orderId")] = true
		}
		l.mu.Unlock()
		return true
	case http.StatusGone, http.StatusForbidden:
		l.mu.Unlock()
		return true
	case http.StatusServiceUnavailable, http.StatusTooEarly, http.StatusTooManyRequests:
		l.mu.Unlock()
		return false
	default:
		l.odd = append(l.odd, fmt.Sprintf("purchase on instance %d: %d %s", i, ans.status, strings.TrimSpace(ans.raw)))
		l.mu.Unlock()
		return true
	}
}

// shoppersFor plans n shoppers (ids from base) over the sale's items, round robin.
func shoppersFor(s sale, base int64, n int) []shopper {
	out := make([]shopper, n)
	for k := range out {
		out[k] = shopper{user: base + int64(k), item: s.items[k%len(s.items)]}
	}
	return out
}

// pgOrder is one row of Postgres's orders of a sale.
type pgOrder struct {
	id, status string
	user       int64
}

func (c *cluster) orders(ctx context.Context, saleID int64) ([]pgOrder, error) {
	rows, err := c.sql.WithContext(ctx).Raw(
		`SELECT o.id::text, o.status, o.user_id FROM orders o JOIN items i ON i.id = o.item_id WHERE i.sale_id = ?`, saleID).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []pgOrder
	for rows.Next() {
		var o pgOrder
		if err := rows.Scan(&o.id, &o.status, &o.user); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// waitDurable waits until every id is in Postgres, up to d; it returns how long it took.
func (c *cluster) waitDurable(ids []string, d time.Duration) (time.Duration, error) {
	ctx := context.Background()
	start := time.Now()
	err := testenv.Poll(d, 100*time.Millisecond, func() error {
		have, err := c.db.ExistingOrders(ctx, ids)
		if err == nil && len(have) == len(ids) {
			return nil
		}
		return fmt.Errorf("%d of %d acknowledged orders not in postgres (err %v)", len(ids)-len(have), len(ids), err)
	})
	return time.Since(start), err
}

// live reports whether an order status holds a unit.
func live(status string) bool { return status == shop.StatusPending || status == shop.StatusPaid }
