package tests

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/catalog"
	"github.com/flashsale/flashsale/services/pipeline"
)

// insertFailedOrders adds n FAILED orders of the sale's first item straight into Postgres, one
// millisecond of reservation time apart (newest last). FAILED orders hold no unit, so the
// invariants are untouched; they make a sale with thousands of orders cheaply.
func (h *harness) insertFailedOrders(s saleIDs, n int, firstUser int64) {
	h.t.Helper()
	err := h.sql().Exec(`INSERT INTO orders (id, item_id, sale_id, user_id, status, reserved_at, pay_by, seq, failure)
		SELECT gen_random_uuid(), ?, ?, ? + g, 'FAILED', now() - interval '1 hour' + g * interval '1 millisecond', now(), 0, 'test'
		FROM generate_series(1, ?) g`, s.items[0], s.sale, firstUser, n).Error
	if err != nil {
		h.t.Fatalf("insert failed orders: %v", err)
	}
}

func (h *harness) buyOne(userID int64, s saleIDs, item int64) string {
	h.t.Helper()
	tok := h.token(userID, auth.RoleShopper)
	r := h.buy(tok, item, h.purchaseToken(tok, s.sale))
	if r.Status != http.StatusAccepted {
		h.t.Fatalf("purchase by %d: %d %s", userID, r.Status, r.Raw)
	}
	return r.str("orderId")
}

func TestAdminSaleOrders(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.liveSale(10)
	merchant := h.token(9000, auth.RoleMerchant)
	base := fmt.Sprintf("/api/admin/sales/%d/orders", s.sale)

	paid, cancelled, pending := h.buyOne(1, s, s.items[0]), h.buyOne(2, s, s.items[0]), h.buyOne(3, s, s.items[0])
	h.drain(s)
	if r := h.do("POST", "/api/flash-sales/orders/"+paid+"/pay", h.token(1, auth.RoleShopper), nil); r.Status != http.StatusOK {
		t.Fatalf("pay: %d %s", r.Status, r.Raw)
	}
	if r := h.do("POST", "/api/flash-sales/orders/"+cancelled+"/cancel", h.token(2, auth.RoleShopper), nil); r.Status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.Status, r.Raw)
	}
	h.insertFailedOrders(s, 120, 1000)

	list := func(query string) ([]map[string]any, string) { return h.adminOrders(merchant, base, query) }
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"?status=PAID", []string{paid}},
		{"?status=CANCELLED", []string{cancelled}},
		{"?status=PENDING", []string{pending}},
		{"?userId=2", []string{cancelled}},
		{"?userId=3&status=PENDING", []string{pending}},
		{"?userId=3&status=PAID", nil},
	} {
		got, next := list(c.query)
		var ids []string
		for _, o := range got {
			ids = append(ids, o["orderId"].(string))
		}
		if fmt.Sprint(ids) != fmt.Sprint(c.want) || next != "" {
			t.Errorf("%s: got %v next %q, want %v next \"\"", c.query, ids, next, c.want)
		}
	}
	checkPaidAndFailedEntries(t, list, s)

	// Paging through all 123: 50 + 50 + 23, newest first, none twice.
	seen, pages := pageAllOrders(t, list)
	if got, want := len(seen), 123; got != want {
		t.Errorf("orders paged: got %d, want %d", got, want)
	}
	if got, want := pages, 3; got != want {
		t.Errorf("pages: got %d, want %d", got, want)
	}
	first, _ := list("")
	if first[0]["orderId"] != pending {
		t.Errorf("newest first: got %v first, want the last purchase %s", first[0]["orderId"], pending)
	}

	checkSaleOrdersRefused(t, h, merchant, base)
	h.checkInvariants(s)
}

// checkPaidAndFailedEntries checks the fields of a paid order's entry, and that a failed order has
// no payBy nor paidAt.
func checkPaidAndFailedEntries(t *testing.T, list func(query string) ([]map[string]any, string), s saleIDs) {
	t.Helper()
	o, _ := list("?status=PAID")
	if got := o[0]; got["userId"] != "1" || got["itemId"] != strconv.FormatInt(s.items[0], 10) || got["payBy"] == nil || got["paidAt"] == nil {
		t.Errorf("paid order: got %v, want userId 1, the item, payBy and paidAt", got)
	}
	if _, err := time.Parse(time.RFC3339, o[0]["createdAt"].(string)); err != nil {
		t.Errorf("createdAt: %v", err)
	}
	f, _ := list("?status=FAILED&userId=1001")
	if len(f) != 1 || f[0]["payBy"] != nil || f[0]["paidAt"] != nil {
		t.Errorf("failed order: got %v, want one with payBy and paidAt null", f)
	}
}

// adminOrders is one page of the merchant's orders of a sale (base: its orders path) with the
// query, and the next page's cursor.
func (h *harness) adminOrders(merchant, base, query string) ([]map[string]any, string) {
	t := h.t
	t.Helper()
	r := h.do("GET", base+query, merchant, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", query, r.Status, r.Raw)
	}
	var out []map[string]any
	for _, o := range r.Body["orders"].([]any) {
		out = append(out, o.(map[string]any))
	}
	return out, r.str("next")
}

// pageAllOrders follows the pages of a sale's orders from the first, checking each full page
// and that no order is listed twice; it returns the orders seen and the number of pages.
func pageAllOrders(t *testing.T, list func(query string) ([]map[string]any, string)) (map[string]bool, int) {
	t.Helper()
	seen, cursor, pages := map[string]bool{}, "", 0
	var last string
	for {
		q := ""
		if cursor != "" {
			q = "?cursor=" + cursor
		}
		page, next := list(q)
		pages++
		if next != "" && len(page) != catalog.SaleOrdersPage {
			t.Fatalf("page %d: got %d orders, want %d", pages, len(page), catalog.SaleOrdersPage)
		}
		for _, o := range page {
			id := o["orderId"].(string)
			if seen[id] {
				t.Fatalf("order %s listed twice", id)
			}
			seen[id] = true
			if c := o["createdAt"].(string); last != "" && c > last {
				// created_at follows the reservation for the FAILED rows; the real ones are newest.
				t.Logf("createdAt %s after %s", c, last)
			}
			last = o["createdAt"].(string)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	return seen, pages
}

// checkSaleOrdersRefused: bad filters and cursors are 400 INVALID_INPUT; another merchant's
// orders and the CSV are 404 to it and 403 to a shopper; an unknown sale is 404.
func checkSaleOrdersRefused(t *testing.T, h *harness, merchant, base string) {
	t.Helper()
	for _, q := range []string{"?status=QUEUED", "?status=paid", "?userId=abc", "?userId=0", "?userId=-1", "?cursor=nonsense", "?username=x"} {
		if r := h.do("GET", base+q, merchant, nil); r.Status != http.StatusBadRequest || r.str("error") != "INVALID_INPUT" {
			t.Errorf("%s: got %d %s, want 400 INVALID_INPUT", q, r.Status, r.Raw)
		}
	}
	other := h.token(9001, auth.RoleMerchant)
	for _, p := range []string{base, base + ".csv"} {
		if r := h.do("GET", p, other, nil); r.Status != http.StatusNotFound {
			t.Errorf("another merchant's %s: got %d, want 404", p, r.Status)
		}
		if r := h.do("GET", p, h.token(1, auth.RoleShopper), nil); r.Status != http.StatusForbidden {
			t.Errorf("a shopper's %s: got %d, want 403", p, r.Status)
		}
	}
	if r := h.do("GET", "/api/admin/sales/999999999/orders", merchant, nil); r.Status != http.StatusNotFound {
		t.Errorf("unknown sale: got %d, want 404", r.Status)
	}
}

func TestAdminSaleOrdersCSV(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	merchant := h.token(9000, auth.RoleMerchant)
	r := h.do("POST", "/api/admin/sales", merchant, map[string]any{
		"name": "csv sale", "startsAt": time.Now().Add(-time.Second).UTC().Format(time.RFC3339),
		"endsAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"items": []map[string]any{
			{"name": `Phone, "Pro" edition`, "priceCents": 99900, "quantity": 5},
			{"name": "=HYPERLINK(\"http://evil\")", "priceCents": 100, "quantity": 5},
		},
	})
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Raw)
	}
	s := saleIDs{}
	s.sale, _ = strconv.ParseInt(r.str("saleId"), 10, 64)
	for _, it := range r.Body["items"].([]any) {
		id, _ := strconv.ParseInt(it.(map[string]any)["itemId"].(string), 10, 64)
		s.items = append(s.items, id)
	}
	comma := h.buyOne(1, s, s.items[0])
	formula := h.buyOne(2, s, s.items[1])
	h.drain(s)
	const failed = 2100
	h.insertFailedOrders(s, failed, 10000)

	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/admin/sales/%d/orders.csv", h.srv.URL, s.sale), nil)
	req.Header.Set("Authorization", "Bearer "+merchant)
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status: got %d, want 200", resp.StatusCode)
	}
	checkCSVHeaders(t, resp, s.sale)
	rd := csv.NewReader(bufio.NewReader(resp.Body))
	header, err := rd.Read()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(header, ","), "orderId,itemId,itemName,userId,status,priceCents,currency,createdAt,payBy,paidAt,username,paymentStatus,paidCents,paymentId,refundId"; got != want {
		t.Errorf("header: got %q, want %q", got, want)
	}
	rows, byID := readCSVRows(t, rd)
	if got, want := rows, failed+2; got != want {
		t.Errorf("rows: got %d, want %d", got, want)
	}
	if got, want := byID[comma], []string{comma, strconv.FormatInt(s.items[0], 10), `Phone, "Pro" edition`, "1", "PENDING", "99900", "CNY"}; got == nil || fmt.Sprint(got[:7]) != fmt.Sprint(want) {
		t.Errorf("name with a comma: got %q, want %q", got, want)
	}
	if got := byID[formula]; got == nil || got[2] != `'=HYPERLINK("http://evil")` || got[8] == "" || got[9] != "" {
		t.Errorf("formula-looking name: got %q, want it prefixed with ' (and payBy set, paidAt empty)", got)
	}
	h.checkInvariants(s)
}

// checkCSVHeaders checks the CSV answer's headers: its type, its file name, and streamed (no
// Content-Length, chunked).
func checkCSVHeaders(t *testing.T, resp *http.Response, sale int64) {
	t.Helper()
	if got, want := resp.Header.Get("Content-Type"), "text/csv; charset=utf-8"; got != want {
		t.Errorf("Content-Type: got %q, want %q", got, want)
	}
	if got, want := resp.Header.Get("Content-Disposition"), fmt.Sprintf(`attachment; filename="sale-%d-orders.csv"`, sale); got != want {
		t.Errorf("Content-Disposition: got %q, want %q", got, want)
	}
	// Streamed: no Content-Length, sent in chunks as the rows are read.
	if got := resp.ContentLength; got != -1 {
		t.Errorf("Content-Length: got %d, want none (streamed)", got)
	}
	if got := resp.TransferEncoding; len(got) == 0 || got[0] != "chunked" {
		t.Errorf("Transfer-Encoding: got %v, want chunked", got)
	}
}

// readCSVRows reads the CSV's rows to the end: their count and each by its order id; an order
// exported twice is a failure.
func readCSVRows(t *testing.T, rd *csv.Reader) (int, map[string][]string) {
	t.Helper()
	rows, byID := 0, map[string][]string{}
	for {
		rec, err := rd.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("row %d: %v", rows+1, err)
		}
		rows++
		if byID[rec[0]] != nil {
			t.Fatalf("order %s exported twice", rec[0])
		}
		byID[rec[0]] = rec
	}
	return rows, byID
}

func TestQueuedOrderPosition(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noWriter: true})
	s := h.liveSale(10)
	const n = 5
	ids := make([]string, n)
	for i := range n {
		ids[i] = h.buyOne(int64(100+i), s, s.items[0])
	}
	for i, id := range ids {
		r := h.do("GET", "/api/flash-sales/orders/"+id, h.token(int64(100+i), auth.RoleShopper), nil)
		if r.Status != http.StatusOK || r.str("status") != "QUEUED" {
			t.Fatalf("order %d: %d %s, want 200 QUEUED", i, r.Status, r.Raw)
		}
		pos, ok := r.Body["queuePosition"].(float64)
		if !ok || int(pos) != i {
			t.Errorf("order %d: queuePosition got %v, want %d", i, r.Body["queuePosition"], i)
		}
		wait, ok := r.Body["estimatedWaitSeconds"].(float64)
		if !ok || wait < 0 {
			t.Errorf("order %d: estimatedWaitSeconds got %v, want a number >= 0", i, r.Body["estimatedWaitSeconds"])
		}
		ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if err != nil || ra < 1 || ra > 5 {
			t.Errorf("order %d: Retry-After got %q, want 1-5", i, r.Header.Get("Retry-After"))
		}
	}

	h.app.Start(context.Background(), true, false)
	h.drain(s)
	for i, id := range ids {
		r := h.do("GET", "/api/flash-sales/orders/"+id, h.token(int64(100+i), auth.RoleShopper), nil)
		if r.Status != http.StatusOK || r.str("status") != "PENDING" {
			t.Fatalf("order %d after the writer: %d %s, want 200 PENDING", i, r.Status, r.Raw)
		}
		for _, k := range []string{"queuePosition", "estimatedWaitSeconds"} {
			if _, has := r.Body[k]; has {
				t.Errorf("order %d PENDING: has %s, want none", i, k)
			}
		}
		if got := r.Header.Get("Retry-After"); got != "" {
			t.Errorf("order %d PENDING: Retry-After %q, want none", i, got)
		}
	}
	h.checkInvariants(s)
}

// The writer's throughput meter: no data means no rate (the default applies); a batch gives
// orders per busy second times the workers.
func TestWriterThroughput(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	tp := pipeline.NewThroughput(2, func() time.Time { return now })
	if _, ok := tp.Rate(); ok {
		t.Fatal("rate with no batch: got one, want none")
	}
	tp.Observe(100, 100*time.Millisecond)
	if r, ok := tp.Rate(); !ok || r < 1999 || r > 2001 {
		t.Errorf("rate: got %v %v, want 2000 (1000/s busy × 2 workers)", r, ok)
	}
	now = now.Add(11 * time.Second)
	if _, ok := tp.Rate(); ok {
		t.Error("rate after the window: got one, want none")
	}
}

// TestAdminSaleOrdersByUsername: the merchant's list and CSV name the shopper by username (null,
// or empty in the CSV, for a user id this shop has no account of: the identity may be external);
// ?username= filters by it case-insensitively, pages with its cursor under the same filter, and a
// name no username could be is 400 INVALID_INPUT.
func TestAdminSaleOrdersByUsername(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	g := h.sql()
	if err := g.Exec(`INSERT INTO users (id, username, password_hash, role) VALUES
		(701, 'Alice.W', 'x', 'shopper'), (702, 'bob', 'x', 'shopper'), (703, 'alice', 'x', 'shopper')`).Error; err != nil {
		t.Fatalf("insert users: %v", err)
	}
	s := h.liveSale(10)
	merchant := h.token(9000, auth.RoleMerchant)
	base := fmt.Sprintf("/api/admin/sales/%d/orders", s.sale)
	alice, bob, external := h.buyOne(701, s, s.items[0]), h.buyOne(702, s, s.items[0]), h.buyOne(704, s, s.items[0])
	h.drain(s)
	// 120 more orders of Alice's (FAILED: they hold no unit), so that her orders take three pages.
	if err := g.Exec(`INSERT INTO orders (id, item_id, sale_id, user_id, status, reserved_at, pay_by, seq, failure)
		SELECT gen_random_uuid(), ?, ?, 701, 'FAILED', now() - interval '1 hour' + g * interval '1 millisecond', now(), 0, 'test'
		FROM generate_series(1, 120) g`, s.items[0], s.sale).Error; err != nil {
		t.Fatalf("insert orders: %v", err)
	}
	list := func(query string) ([]map[string]any, string) { return h.adminOrders(merchant, base, query) }

	// Each order names its shopper; the one without an account has a null username.
	all, _ := list("?status=PENDING")
	names := map[string]any{}
	for _, o := range all {
		names[o["orderId"].(string)] = o["username"]
	}
	if names[alice] != "Alice.W" || names[bob] != "bob" || names[external] != nil {
		t.Errorf("usernames: got alice %v, bob %v, external %v; want Alice.W, bob, null", names[alice], names[bob], names[external])
	}

	for _, c := range []struct {
		query string
		want  []string
	}{
		{"?username=bob", []string{bob}},
		{"?username=BOB", []string{bob}},
		{"?username=bob&status=PAID", nil},
		{"?username=bob&userId=702", []string{bob}},
		{"?username=bob&userId=701", nil},
		{"?username=nobody", nil},
		{"?username=alic", nil}, // exact, not a prefix: "alice" (703) has no order and Alice.W is another name
		{"?username=alice", nil},
	} {
		got, next := list(c.query)
		var ids []string
		for _, o := range got {
			ids = append(ids, o["orderId"].(string))
		}
		if fmt.Sprint(ids) != fmt.Sprint(c.want) || next != "" {
			t.Errorf("%s: got %v next %q, want %v next \"\"", c.query, ids, next, c.want)
		}
	}

	// Alice's 121 orders, paged under the filter: 50 + 50 + 21, all hers, none twice.
	seen, pages, cursor := map[string]bool{}, 0, ""
	for {
		q := "?username=aLiCe.w"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		page, next := list(q)
		pages++
		for _, o := range page {
			if o["userId"] != "701" || o["username"] != "Alice.W" || seen[o["orderId"].(string)] {
				t.Fatalf("page %d: %v is not a new order of Alice's", pages, o)
			}
			seen[o["orderId"].(string)] = true
		}
		if next == "" {
			break
		}
		if len(page) != catalog.SaleOrdersPage {
			t.Fatalf("page %d: got %d orders, want %d", pages, len(page), catalog.SaleOrdersPage)
		}
		cursor = next
	}
	if len(seen) != 121 || pages != 3 || !seen[alice] {
		t.Errorf("Alice's orders: got %d in %d pages (hers from the sale: %v), want 121 in 3", len(seen), pages, seen[alice])
	}

	for _, q := range []string{"?username=ab", "?username=" + strings.Repeat("a", 33), "?username=al%20ice", "?username=al%27ice",
		"?username=%E5%BC%A0%E4%B8%89", "?username=bob%00"} {
		if r := h.do("GET", base+q, merchant, nil); r.Status != http.StatusBadRequest || r.str("error") != "INVALID_INPUT" {
			t.Errorf("%s: got %d %s, want 400 INVALID_INPUT", q, r.Status, r.Raw)
		}
	}

	// The CSV carries the username as its 11th column (the payment's follow it); empty for the
	// shopper without an account.
	req, _ := http.NewRequest("GET", h.srv.URL+base+".csv", nil)
	req.Header.Set("Authorization", "Bearer "+merchant)
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := csv.NewReader(bufio.NewReader(resp.Body))
	header, err := rd.Read()
	if err != nil {
		t.Fatal(err)
	}
	if got := header[10]; got != "username" || header[3] != "userId" {
		t.Errorf("header: got %q, want userId 4th and username 11th", header)
	}
	rows, byID := readCSVRows(t, rd)
	last := 10
	if rows != 123 || byID[alice][last] != "Alice.W" || byID[bob][last] != "bob" || byID[external][last] != "" || byID[external][3] != "704" {
		t.Errorf("CSV: %d rows; alice %q, bob %q, external %q", rows, byID[alice], byID[bob], byID[external])
	}
	h.checkInvariants(s)
}
