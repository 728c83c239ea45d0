package tests

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// The merchant's fire drill (services/drill): a copy of the sale nobody else sees, driven through
// the real purchase path over loopback HTTP, measured, then removed; the live sale untouched.

func (h *harness) drillStatus(bearer string, saleID int64) response {
	h.t.Helper()
	return h.do("GET", fmt.Sprintf("/api/admin/sales/%d/drill", saleID), bearer, nil)
}

// waitDrill polls the drill of a sale until it has ended and returns its last answer; onRun sees
// every answer while it runs.
func (h *harness) waitDrill(bearer string, saleID int64, onRun func(d map[string]any)) map[string]any {
	h.t.Helper()
	var last map[string]any
	testenv.Eventually(h.t, 120*time.Second, "drill ended", func() error {
		r := h.drillStatus(bearer, saleID)
		if r.Status != http.StatusOK {
			return fmt.Errorf("drill status %d %s", r.Status, r.Raw)
		}
		d, _ := r.Body["drill"].(map[string]any)
		if d == nil {
			return fmt.Errorf("no drill yet: %s", r.Raw)
		}
		last = d
		switch d["phase"] {
		case "done", "failed":
			return nil
		}
		if onRun != nil {
			onRun(d)
		}
		return fmt.Errorf("phase %v", d["phase"])
	})
	return last
}

// saleRedis reads every Redis key of a sale with its DUMP (value and type, byte for byte) and TTL.
func (h *harness) saleRedis(saleID int64) map[string]string {
	h.t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, pat := range store.SaleKeyPatterns(saleID) {
		keys, err := h.app.Redis.Keys(ctx, pat).Result()
		if err != nil {
			h.t.Fatal(err)
		}
		for _, k := range keys {
			dump, err := h.app.Redis.Dump(ctx, k).Result()
			if err == redis.Nil {
				continue // deleted since KEYS listed it (a sweep running meanwhile): gone
			}
			if err != nil {
				h.t.Fatalf("dump %s: %v", k, err)
			}
			ttl, _ := h.app.Redis.PTTL(ctx, k).Result()
			out[k] = fmt.Sprintf("%x ttl>0:%v", dump, ttl > 0)
		}
	}
	return out
}

// salePostgres reads a sale's rows (the sale, its items, its orders and their returns) as JSON text.
func (h *harness) salePostgres(saleID int64) []string {
	h.t.Helper()
	var rows []string
	for _, q := range []string{
		`SELECT row_to_json(s)::text FROM sales s WHERE id = ?`,
		`SELECT row_to_json(i)::text FROM items i WHERE sale_id = ? ORDER BY id`,
		`SELECT row_to_json(o)::text FROM orders o WHERE sale_id = ? ORDER BY id`,
		`SELECT row_to_json(r)::text FROM stock_returns r WHERE sale_id = ? ORDER BY order_id`,
	} {
		var part []string
		if err := h.sql().Raw(q, saleID).Scan(&part).Error; err != nil {
			h.t.Fatal(err)
		}
		rows = append(rows, part...)
	}
	return rows
}

// otherSaleKeys lists the Redis keys of any sale but the given ones.
func (h *harness) otherSaleKeys(keep ...int64) []string {
	h.t.Helper()
	keys, err := h.app.Redis.Keys(context.Background(), "*").Result()
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		if !strings.Contains(k, "{sale:") && !strings.HasPrefix(k, "rl:u:") && !strings.HasPrefix(k, "rl:ip:") {
			continue
		}
		mine := false
		for _, id := range keep {
			tag := strconv.FormatInt(id, 10)
			mine = mine || strings.Contains(k, "{sale:"+tag+"}") || strings.Contains(k, "{sale:"+tag+":")
		}
		if !mine {
			out = append(out, k)
		}
	}
	return out
}

func num(d map[string]any, k string) float64 { f, _ := d[k].(float64); return f }

func TestFireDrillRunsOnACopyAndLeavesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.app.SetDrillTarget(h.srv.URL)
	merchant := h.token(9000, auth.RoleMerchant)
	s := h.createSale(time.Now().Add(2*time.Hour), 300, 200)
	if r := h.saleAction(merchant, s.sale, "warm"); r.Status != http.StatusOK {
		t.Fatalf("warm: %d %s", r.Status, r.Raw)
	}
	time.Sleep(500 * time.Millisecond) // a keeper pass or two over the loaded sale
	redisBefore, pgBefore := h.saleRedis(s.sale), h.salePostgres(s.sale)
	if len(redisBefore) == 0 {
		t.Fatal("the warmed sale has no Redis keys to compare")
	}
	users, sales, items := h.sqlInt(`SELECT count(*) FROM users`), h.sqlInt(`SELECT count(*) FROM sales`), h.sqlInt(`SELECT count(*) FROM items`)

	if r := h.drillStatus(merchant, s.sale); r.Status != http.StatusOK || r.Body["drill"] != nil || r.Body["blocked"] != nil {
		t.Fatalf("status before any drill: %d %s, want 200 with no drill and nothing blocking", r.Status, r.Raw)
	}
	start := h.do("POST", fmt.Sprintf("/api/admin/sales/%d/drill", s.sale), merchant, map[string]any{"shoppers": 2000, "seconds": 2})
	if start.Status != http.StatusAccepted || start.str("phase") != "preparing" || num(start.Body, "shoppers") != 2000 ||
		num(start.Body, "expectedCrowd") != 500*20 || start.str("crowdSource") != "quantity" {
		t.Fatalf("start: %d %s, want 202 preparing, 2000 shoppers, crowd 10000 from the quantity", start.Status, start.Raw)
	}
	if r := h.do("POST", fmt.Sprintf("/api/admin/sales/%d/drill", s.sale), merchant, nil); r.Status != http.StatusConflict || r.str("error") != string(shop.CodeDrillRunning) {
		t.Fatalf("a second drill: %d %s, want 409 DRILL_RUNNING", r.Status, r.Raw)
	}
	// while it runs: the copy exists, hidden; progress moves
	var copyID int64
	sawProgress, probed := false, false
	shopper := h.token(77, auth.RoleShopper)
	d := h.waitDrill(merchant, s.sale, func(d map[string]any) {
		if copyID == 0 {
			copyID = h.sqlInt(`SELECT coalesce(max(id), 0) FROM sales WHERE drill_of = ?`, s.sale)
		}
		if copyID != 0 && !probed { // nobody else sees the copy, nor buys from it
			probed = true
			for _, p := range []string{"/api/flash-sales/%d", "/api/flash-sales/%d/stock", "/sales/%d"} {
				if r := h.do("GET", fmt.Sprintf(p, copyID), "", nil); r.Status != http.StatusNotFound {
					t.Errorf("GET %s of the drill's copy: %d, want 404", fmt.Sprintf(p, copyID), r.Status)
				}
			}
			// nor its own merchant: the copy is the drill's alone
			for _, p := range []string{"/api/admin/sales/%d/stock", "/api/admin/sales/%d/live", "/api/admin/sales/%d/orders", "/api/admin/sales/%d/drill", "/api/admin/sales/%d/draw"} {
				if r := h.do("GET", fmt.Sprintf(p, copyID), merchant, nil); r.Status != http.StatusNotFound {
					t.Errorf("the merchant's GET %s of the drill's copy: %d, want 404", fmt.Sprintf(p, copyID), r.Status)
				}
			}
			if r := h.do("GET", "/api/flash-sales", "", nil); strings.Contains(r.Raw, "Fire drill") {
				t.Errorf("the sales list shows the drill's copy: %s", r.Raw)
			}
			tok := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", copyID), shopper, map[string]string{"captchaId": "x", "answer": "test"})
			if tok.Status == http.StatusOK {
				t.Errorf("a real shopper got a purchase token for the drill's copy: %s", tok.Raw)
			}
		}
		if d["phase"] == "running" && num(d, "sent") > 0 && num(d, "elapsedSeconds") > 0 {
			sawProgress = true
		}
	})
	if d["phase"] != "done" {
		t.Fatalf("drill: %v (failure %v), want done", d["phase"], d["failure"])
	}
	if !sawProgress {
		t.Log("no running poll with shoppers sent seen (the drill was quick); progress is checked by its final counts")
	}
	res, _ := d["result"].(map[string]any)
	if res == nil {
		t.Fatalf("no result: %v", d)
	}
	t.Logf("result: %v", res)
	accepted, refused, errs := num(res, "accepted"), num(res, "refused"), num(res, "errors")
	// what happened: 2,000 distinct shoppers, one unit each, for 500 units: the copy sells out
	if accepted != 500 || errs != 0 || accepted+refused != 2000 || res["soldOut"] != true || res["sellOutSeconds"] == nil {
		t.Errorf("accepted %v refused %v errors %v soldOut %v: want 500 accepted, 1500 refused, no error, sold out", accepted, refused, errs, res["soldOut"])
	}
	if got := num(res, "refusalRate"); got != 0.75 {
		t.Errorf("refusal rate %v, want 0.75", got)
	}
	if res["writerDrained"] != true || num(res, "writerLagMillis") < 0 || num(res, "p99Millis") < num(res, "p50Millis") || num(res, "p50Millis") <= 0 {
		t.Errorf("writer lag %v drained %v, p50 %v p99 %v", res["writerLagMillis"], res["writerDrained"], res["p50Millis"], res["p99Millis"])
	}
	sell := res["sellOutSeconds"].(float64)
	if sell <= 0 || sell > 2+5 || math.Abs(num(res, "acceptedPerSecond")-500/sell) > 0.01*500/sell+1 {
		t.Errorf("sold out after %v s at %v accepted/s, want within the drill and 500/sellOut", sell, res["acceptedPerSecond"])
	}
	n, k, m := num(res, "capacityPerSecond"), num(res, "expectedCrowd"), num(res, "instancesNeeded")
	v, _ := res["verdict"].(string)
	switch {
	case n == 0 && num(res, "p50Millis") > 1000:
		// a machine so loaded (two suites on two cores) that no shopper was answered within a
		// second: the drill says it cannot size the crowd from that, and names no figure
		if m != 0 || !strings.Contains(v, "answered no shopper within a second") {
			t.Errorf("no shopper answered within a second (p50 %v ms): M %v, verdict %q; want no M and the verdict saying so", res["p50Millis"], m, v)
		}
	case n <= 0 || n > 1000 || k != 10000 || m != math.Ceil(k/n):
		t.Errorf("N %v K %v M %v: want 0 < N <= 1000 shoppers/s (2000 over 2 s), K 10000, M = ceil(K/N)", n, k, m)
	case res["capacityIsFloor"] == true:
		// every shopper answered within a second: N is only what the drill sent, M a bound
		if !strings.Contains(v, fmt.Sprintf("%d per second, as many as the drill sent: it did not reach its limit", int(n))) ||
			!strings.Contains(v, fmt.Sprintf("expected crowd of %d needs at most %d instance", int(k), int(m))) {
			t.Errorf("verdict %q does not say N as the drill's own rate, K and at most M", v)
		}
	case !strings.Contains(v, fmt.Sprintf("about %d shoppers per second", int(n))) ||
		!strings.Contains(v, fmt.Sprintf("expected crowd of %d needs %d instance", int(k), int(m))):
		t.Errorf("verdict %q does not say N, K and M", v)
	}
	if copyID == 0 || !probed {
		t.Errorf("never saw the drill's copy of the sale (copy %d, probed %v)", copyID, probed)
	}

	// nothing left: no copy, its items, orders or keys; no user made
	if got := h.sqlInt(`SELECT count(*) FROM sales WHERE drill_of IS NOT NULL`); got != 0 {
		t.Errorf("%d drill copies left in Postgres", got)
	}
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE sale_id <> ?`, s.sale); got != 0 {
		t.Errorf("%d orders of the drill left", got)
	}
	if a, b, c := h.sqlInt(`SELECT count(*) FROM users`), h.sqlInt(`SELECT count(*) FROM sales`), h.sqlInt(`SELECT count(*) FROM items`); a != users || b != sales || c != items {
		t.Errorf("users %d sales %d items %d after the drill, want %d %d %d", a, b, c, users, sales, items)
	}
	if left := h.otherSaleKeys(s.sale); len(left) > 0 {
		t.Errorf("Redis keys of the drill left: %v", left)
	}
	if copyID != 0 && h.app.Redis.Exists(context.Background(), store.MetaKey(copyID)).Val() != 0 {
		t.Errorf("the copy's meta key is still there")
	}
	// the live sale, byte for byte
	if after := h.saleRedis(s.sale); !mapsEqual(after, redisBefore) {
		t.Errorf("the sale's Redis keys changed:\nbefore %v\nafter  %v", redisBefore, after)
	}
	if after := h.salePostgres(s.sale); !slices.Equal(after, pgBefore) {
		t.Errorf("the sale's Postgres rows changed:\nbefore %v\nafter  %v", pgBefore, after)
	}
	// the result stays for the page after a reload; the sale's lists never showed the copy
	if r := h.drillStatus(merchant, s.sale); r.Status != http.StatusOK || r.Body["drill"].(map[string]any)["result"] == nil {
		t.Errorf("status after the drill: %d %s, want the last result", r.Status, r.Raw)
	}
	if r := h.do("GET", "/api/admin/sales", merchant, nil); strings.Contains(r.Raw, "Fire drill") {
		t.Errorf("the merchant's list shows the drill copy: %s", r.Raw)
	}
	h.checkCooldown(merchant, s.sale)
	h.checkInvariants(s)
}

// checkCooldown: right after a merchant's drill has ended, their next drill is refused for
// drill.DefaultCooldown (10 minutes): 409 DRILL_NOT_NOW saying when the next may start, with a
// Retry-After to then, and the status says so too; another merchant is not held back by it.
func (h *harness) checkCooldown(merchant string, saleID int64) {
	t := h.t
	t.Helper()
	r := h.do("POST", fmt.Sprintf("/api/admin/sales/%d/drill", saleID), merchant, map[string]any{"shoppers": 100, "seconds": 1})
	retry, _ := strconv.Atoi(r.Header.Get("Retry-After"))
	if r.Status != http.StatusConflict || r.str("error") != string(shop.CodeDrillNotNow) || !strings.Contains(r.str("message"), "the next may start at") ||
		retry < 9*60 || retry > 10*60 {
		t.Errorf("a drill right after the last one: %d (Retry-After %q) %s, want 409 DRILL_NOT_NOW saying when the next may start, Retry-After about 600 s",
			r.Status, r.Header.Get("Retry-After"), r.Raw)
	}
	st := h.drillStatus(merchant, saleID)
	b, _ := st.Body["blocked"].(map[string]any)
	next, err := time.Parse(time.RFC3339, fmt.Sprint(b["nextAt"]))
	if b == nil || b["error"] != string(shop.CodeDrillNotNow) || err != nil || time.Until(next) < 9*time.Minute || time.Until(next) > 10*time.Minute+time.Second {
		t.Errorf("status right after a drill: %s, want blocked DRILL_NOT_NOW with nextAt about 10 minutes from now", st.Raw)
	}
	other := h.token(9001, auth.RoleMerchant)
	created := h.do("POST", "/api/admin/sales", other, map[string]any{"name": "another merchant's sale",
		"startsAt": time.Now().Add(3 * time.Hour).UTC().Format(time.RFC3339), "endsAt": time.Now().Add(4 * time.Hour).UTC().Format(time.RFC3339),
		"items": []map[string]any{{"name": "x", "priceCents": 100, "quantity": 1}}})
	if created.Status != http.StatusCreated {
		t.Fatalf("create another merchant's sale: %d %s", created.Status, created.Raw)
	}
	if st := h.do("GET", "/api/admin/sales/"+created.str("saleId")+"/drill", other, nil); st.Status != http.StatusOK || st.Body["blocked"] != nil {
		t.Errorf("another merchant's drill status: %d %s, want nothing blocking it", st.Status, st.Raw)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestFireDrillRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.app.SetDrillTarget(h.srv.URL)
	merchant := h.token(9000, auth.RoleMerchant)
	later := h.createSale(time.Now().Add(3*time.Hour), 10)
	path := fmt.Sprintf("/api/admin/sales/%d/drill", later.sale)

	for _, body := range []any{
		map[string]any{"shoppers": 50001}, map[string]any{"shoppers": 0}, map[string]any{"seconds": 31},
		map[string]any{"seconds": -1}, map[string]any{"expectedCrowd": 0}, map[string]any{"shoppers": "many"}, `{"shoppers":1.5}`,
	} {
		if r := h.do("POST", path, merchant, body); r.Status != http.StatusBadRequest || r.str("error") != string(shop.CodeInvalidInput) {
			t.Errorf("drill %v: %d %s, want 400 INVALID_INPUT", body, r.Status, r.Raw)
		}
	}
	if r := h.do("POST", path, h.token(9001, auth.RoleMerchant), nil); r.Status != http.StatusNotFound {
		t.Errorf("another merchant's drill: %d %s, want 404", r.Status, r.Raw)
	}
	if r := h.do("POST", path, h.token(1, auth.RoleShopper), nil); r.Status != http.StatusForbidden {
		t.Errorf("a shopper's drill: %d %s, want 403", r.Status, r.Raw)
	}

	// a sale starting within 30 minutes: not now, and the message names it
	soon := h.createSale(time.Now().Add(20*time.Minute), 5)
	r := h.do("POST", path, merchant, map[string]any{"shoppers": 100, "seconds": 1})
	if r.Status != http.StatusConflict || r.str("error") != string(shop.CodeDrillNotNow) || !strings.Contains(r.str("message"), strconv.FormatInt(soon.sale, 10)) ||
		!strings.Contains(r.str("message"), "starts in") {
		t.Errorf("drill with a sale starting in 20 min: %d %s, want 409 DRILL_NOT_NOW naming sale %d", r.Status, r.Raw, soon.sale)
	}
	st := h.drillStatus(merchant, later.sale)
	if b, _ := st.Body["blocked"].(map[string]any); b == nil || b["error"] != string(shop.CodeDrillNotNow) {
		t.Errorf("status: %s, want blocked DRILL_NOT_NOW", st.Raw)
	}
	// a live sale: not now either
	if e := h.saleAction(merchant, soon.sale, "end"); e.Status != http.StatusOK {
		t.Fatalf("end: %d %s", e.Status, e.Raw)
	}
	live := h.liveSale(5)
	r = h.do("POST", path, merchant, nil)
	if r.Status != http.StatusConflict || r.str("error") != string(shop.CodeDrillNotNow) || !strings.Contains(r.str("message"), strconv.FormatInt(live.sale, 10)) ||
		!strings.Contains(r.str("message"), "live") {
		t.Errorf("drill with a live sale: %d %s, want 409 DRILL_NOT_NOW naming sale %d", r.Status, r.Raw, live.sale)
	}
	// Another merchant learns only when the drill can run: not the live sale's name nor its id.
	other := h.token(9001, auth.RoleMerchant)
	cr := h.do("POST", "/api/admin/sales", other, map[string]any{"name": "Other merchant's sale", "startsAt": time.Now().Add(3 * time.Hour).UTC().Format(time.RFC3339),
		"endsAt": time.Now().Add(4 * time.Hour).UTC().Format(time.RFC3339), "items": []map[string]any{{"name": "x", "priceCents": 100, "quantity": 1}}})
	if cr.Status != http.StatusCreated {
		t.Fatalf("the other merchant's sale: %d %s", cr.Status, cr.Raw)
	}
	otherPath := "/api/admin/sales/" + cr.str("saleId") + "/drill"
	r = h.do("POST", otherPath, other, nil)
	if r.Status != http.StatusConflict || r.str("error") != string(shop.CodeDrillNotNow) || strings.Contains(r.str("message"), fmt.Sprintf("(sale %d)", live.sale)) ||
		strings.Contains(r.str("message"), "test sale") || !strings.Contains(r.str("message"), "cannot run until it has ended") {
		t.Errorf("another merchant's drill beside a live sale: %d %s, want 409 DRILL_NOT_NOW naming no sale, saying when it can run", r.Status, r.Raw)
	}
	st = h.drillStatus(other, mustID(t, cr.str("saleId")))
	if b, _ := st.Body["blocked"].(map[string]any); b == nil || b["saleId"] != nil || b["saleName"] != nil || b["endsAt"] == nil {
		t.Errorf("another merchant's drill status: %s, want blocked with the end and no sale id or name", st.Raw)
	}
	if got := h.sqlInt(`SELECT count(*) FROM drills`) + h.sqlInt(`SELECT count(*) FROM sales WHERE drill_of IS NOT NULL`); got != 0 {
		t.Errorf("a refused drill left %d rows", got)
	}
	h.checkInvariants(live)
}

// An instance that stopped in the middle of a drill leaves a copy behind; the next instance's
// start removes it and marks the drill interrupted.
func TestFireDrillInterruptedIsCleanedAtStart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noKeeper: true})
	ctx := context.Background()
	s := h.createSale(time.Now().Add(2*time.Hour), 10)
	if r := h.saleAction(h.token(9000, auth.RoleMerchant), s.sale, "warm"); r.Status != http.StatusOK {
		t.Fatalf("warm: %d %s", r.Status, r.Raw)
	}
	sale, err := h.app.DB.SaleByID(ctx, s.sale)
	if err != nil {
		t.Fatal(err)
	}
	cp := sale
	cp.ID, cp.DrillOf, cp.StartsAt, cp.Name = 0, s.sale, time.Now().Add(-time.Second), "Fire drill: left behind"
	cp.Items = nil
	for _, it := range sale.Items {
		cp.Items = append(cp.Items, shop.Item{Name: it.Name, PriceCents: it.PriceCents, Quantity: it.Quantity})
	}
	cp, err = h.app.DB.CreateDrillCopy(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.app.Loader.LoadFirst(ctx, cp.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.sql().Exec(`INSERT INTO drills (sale_id, merchant_id, copy_sale_id, phase, shoppers, seconds, expected_crowd, crowd_source, instance, heartbeat_at)
		VALUES (?, 9000, ?, 'running', 100, 1, 200, 'quantity', 'gone', now() - interval '1 minute')`, s.sale, cp.ID).Error; err != nil {
		t.Fatal(err)
	}
	if len(h.saleRedis(cp.ID)) == 0 {
		t.Fatal("the left-behind copy has no Redis keys")
	}
	second := newHarness(t, harnessOpts{shared: h}) // its start sweeps
	testenv.Eventually(t, 30*time.Second, "copy removed", func() error {
		if n := h.sqlInt(`SELECT count(*) FROM sales WHERE drill_of IS NOT NULL`); n != 0 {
			return fmt.Errorf("%d copies", n)
		}
		if k := second.saleRedis(cp.ID); len(k) != 0 {
			return fmt.Errorf("keys %v", k)
		}
		return nil
	})
	var phase, failure string
	h.sql().Raw(`SELECT phase FROM drills`).Scan(&phase)
	h.sql().Raw(`SELECT failure FROM drills`).Scan(&failure)
	if phase != "failed" || !strings.Contains(failure, "interrupted") {
		t.Errorf("the interrupted drill: %s %q, want failed, interrupted", phase, failure)
	}
	h.checkInvariants(s)
}

// A drill is stopped when a real sale comes within 30 minutes of its start while it runs (here a
// sale created in the middle, starting in 20 minutes): it ends failed, saying why, well before its
// seconds are up, and leaves nothing behind, as any drill; the sale is untouched.
func TestFireDrillStopsWhenASaleComesNear(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.app.SetDrillTarget(h.srv.URL)
	merchant := h.token(9000, auth.RoleMerchant)
	s := h.createSale(time.Now().Add(2*time.Hour), 100000)
	if r := h.saleAction(merchant, s.sale, "warm"); r.Status != http.StatusOK {
		t.Fatalf("warm: %d %s", r.Status, r.Raw)
	}
	const seconds = 20
	start := h.do("POST", fmt.Sprintf("/api/admin/sales/%d/drill", s.sale), merchant, map[string]any{"shoppers": 4000, "seconds": seconds})
	if start.Status != http.StatusAccepted {
		t.Fatalf("start: %d %s", start.Status, start.Raw)
	}
	var soon saleIDs
	var nearAt time.Time
	d := h.waitDrill(merchant, s.sale, func(d map[string]any) {
		if soon.sale == 0 && d["phase"] == "running" && num(d, "sent") > 0 {
			soon = h.createSale(time.Now().Add(20*time.Minute), 5)
			nearAt = time.Now()
		}
	})
	if soon.sale == 0 {
		t.Fatalf("the drill ended before it ran: %v", d)
	}
	failure, _ := d["failure"].(string)
	t.Logf("the drill: %v after %v shoppers sent, %v after the sale came near: %s", d["phase"], d["sent"], time.Since(nearAt).Round(time.Millisecond), failure)
	if d["phase"] != "failed" || !strings.HasPrefix(failure, "stopped: ") || !strings.Contains(failure, fmt.Sprintf("(sale %d) starts in", soon.sale)) {
		t.Errorf("drill: %v, failure %q; want failed, stopped, naming sale %d", d["phase"], failure, soon.sale)
	}
	if took := time.Since(nearAt); took > seconds*time.Second {
		t.Errorf("the drill ended %v after the sale came near: want it stopped within seconds, not run out its %d s", took, seconds)
	}
	if sent := num(d, "sent"); sent >= 4000 {
		t.Errorf("the drill sent all its %v shoppers: want it stopped before", sent)
	}
	// cleaned up as any drill: no copy, no order, no key left
	testenv.Eventually(t, 30*time.Second, "the stopped drill's copy removed", func() error {
		if n := h.sqlInt(`SELECT count(*) FROM sales WHERE drill_of IS NOT NULL`); n != 0 {
			return fmt.Errorf("%d copies left", n)
		}
		if n := h.sqlInt(`SELECT count(*) FROM orders WHERE sale_id NOT IN (?, ?)`, s.sale, soon.sale); n != 0 {
			return fmt.Errorf("%d orders of the copy left", n)
		}
		if left := h.otherSaleKeys(s.sale, soon.sale); len(left) > 0 {
			return fmt.Errorf("Redis keys of the drill left: %v", left)
		}
		return nil
	})
	h.checkInvariants(s)
}
