package tests

import (
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/testenv"
)

// madeUp is where the flood's made-up sale and item ids are drawn from: above every real id,
// below 2^32 (an item id fits 32 bits).
const madeUp = 3_000_000_000

// stmtLog records every statement an instance sends through its pool of the HTTP routes and the
// jobs (a GORM callback after each query, row and raw statement).
type stmtLog struct {
	mu    sync.Mutex
	stmts []loggedStmt
}

type loggedStmt struct {
	sql  string
	vars []any
}

func logStatements(t *testing.T, h *harness) *stmtLog {
	t.Helper()
	l := &stmtLog{}
	record := func(db *gorm.DB) {
		s := loggedStmt{sql: db.Statement.SQL.String(), vars: append([]any(nil), db.Statement.Vars...)}
		l.mu.Lock()
		l.stmts = append(l.stmts, s)
		l.mu.Unlock()
	}
	cb := h.app.DB.Gorm().Callback()
	for _, err := range []error{
		cb.Query().After("gorm:query").Register("test:log_statements", record),
		cb.Row().After("gorm:row").Register("test:log_statements", record),
		cb.Raw().After("gorm:raw").Register("test:log_statements", record),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// count returns how many statements since mark (a length of the log) match.
func (l *stmtLog) count(mark int, match func(loggedStmt) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.stmts[mark:] {
		if match(s) {
			n++
		}
	}
	return n
}

func (l *stmtLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.stmts)
}

// hasVar reports whether a statement's arguments include an integer id matching ok.
func hasVar(s loggedStmt, ok func(int64) bool) bool {
	for _, v := range s.vars {
		var n int64
		switch x := v.(type) {
		case int64:
			n = x
		case int:
			n = int64(x)
		case uint32:
			n = int64(x)
		default:
			continue
		}
		if ok(n) {
			return true
		}
	}
	return false
}

// unsignedCursor is a well-formed listing cursor as this server spelled them before they were
// signed: base64url of "micros|id". Anyone can make one for any position.
func unsignedCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%d|%s", at.UnixMicro(), id)))
}

// A loop of requests built to miss every cache (made-up sale and item ids, an unknown id asked
// again and again, cursors this server never gave out) runs beside a shopper paying: the
// payment succeeds, no made-up id costs a query of its own, an unknown id asked again is
// answered from the negative cache, a forged cursor is refused (400) or shows the first page
// without a query, and every such answer is a client error, never a 5xx. The pool of the
// HTTP routes has two connections, as few as the configuration allows.
func TestCacheBypassCannotStarvePayments(t *testing.T) {
	h := newHarness(t, harnessOpts{env: map[string]string{"FLASHSALE_DB_MAX_CONNS": "2"}})
	// A gap below the sale's id: an id taken from the sequence that no sale holds (far from the
	// small numbers other statements carry, such as a LIMIT).
	h.sqlInt(`SELECT setval(pg_get_serial_sequence('sales', 'id'), 5000)`)
	gap := h.sqlInt(`SELECT nextval(pg_get_serial_sequence('sales', 'id'))`)
	s := h.liveSale(5)
	if gap >= s.sale {
		t.Fatalf("the gap %d is not below the sale %d", gap, s.sale)
	}
	shopper := h.token(42, auth.RoleShopper)
	r := h.buy(shopper, s.items[0], h.purchaseToken(shopper, s.sale))
	if r.Status != http.StatusAccepted {
		t.Fatalf("buy: %d %s", r.Status, r.Raw)
	}
	orderID := r.str("orderId")
	h.drain(s)
	if r := h.do("GET", "/api/flash-sales/orders/"+orderID, shopper, nil); r.str("status") != "PENDING" {
		t.Fatalf("order before the flood: %d %s, want PENDING", r.Status, r.Raw)
	}
	stmts := logStatements(t, h)
	mark := stmts.mark()

	// The flood: 16 clients, each request one that misses every cache.
	kinds := cacheMissingRequests(h, gap)
	start := time.Now()
	f := startFlood(h, kinds)

	// The shopper pays in the middle of it.
	time.Sleep(500 * time.Millisecond)
	paid := h.do("POST", "/api/flash-sales/orders/"+orderID+"/pay", shopper, nil)
	time.Sleep(1500 * time.Millisecond)
	close(f.stop)
	f.wg.Wait()
	elapsed := time.Since(start)

	if paid.Status != http.StatusOK || paid.str("status") != "PAID" {
		t.Errorf("pay during the flood: %d %s, want 200 PAID", paid.Status, paid.Raw)
	}
	if f.serverErrors.Load() > 0 || len(f.bad) > 0 {
		t.Errorf("%d server errors; unexpected answers: %v", f.serverErrors.Load(), f.bad)
	}
	checkFloodQueries(t, stmts, mark, gap, f.sent.Load(), elapsed)
	h.checkInvariants(s)
}

// cacheMissingRequests are the kinds of request that miss every cache: made-up sale and item ids,
// the unknown id gap, cursors this server never gave out.
func cacheMissingRequests(h *harness, gap int64) []func(rng *rand.Rand) (method, path, bearer string) {
	other := h.token(77, auth.RoleShopper)
	kinds := []func(rng *rand.Rand) (method, path, bearer string){
		func(rng *rand.Rand) (string, string, string) {
			return "GET", fmt.Sprintf("/api/flash-sales/%d", madeUp+rng.Int64N(1e9)), ""
		},
		func(rng *rand.Rand) (string, string, string) {
			return "GET", fmt.Sprintf("/api/flash-sales/%d/stock", madeUp+rng.Int64N(1e9)), ""
		},
		func(rng *rand.Rand) (string, string, string) {
			return "GET", fmt.Sprintf("/sales/%d", madeUp+rng.Int64N(1e9)), ""
		},
		func(rng *rand.Rand) (string, string, string) {
			return "POST", fmt.Sprintf("/api/flash-sales/items/%d/purchase", madeUp+rng.Int64N(1e9)), other
		},
		func(*rand.Rand) (string, string, string) { return "GET", fmt.Sprintf("/api/flash-sales/%d", gap), "" },
		func(*rand.Rand) (string, string, string) { return "GET", fmt.Sprintf("/sales/%d", gap), "" },
		func(rng *rand.Rand) (string, string, string) {
			c := unsignedCursor(time.Now().Add(-time.Duration(rng.Int64N(1e12))), fmt.Sprint(rng.Int64N(1e6)+1))
			return "GET", "/api/flash-sales?cursor=" + c, ""
		},
		func(rng *rand.Rand) (string, string, string) {
			c := unsignedCursor(time.Now().Add(-time.Duration(rng.Int64N(1e12))), fmt.Sprint(rng.Int64N(1e6)+1))
			return "GET", "/?cursor=" + c, ""
		},
		func(rng *rand.Rand) (string, string, string) {
			c := unsignedCursor(time.Now().Add(-time.Duration(rng.Int64N(1e12))), "0190a0b0-0000-8000-8000-00000000000"+fmt.Sprint(rng.IntN(10)))
			return "GET", "/api/flash-sales/orders?cursor=" + c, other
		},
	}
	return kinds
}

// startFlood starts 16 clients sending the requests kinds make, round robin, until f.stop is
// closed; it counts what they are answered.
// flood is what the clients of startFlood were answered.
type flood struct {
	sent, serverErrors atomic.Int64
	badMu              sync.Mutex
	bad                []string // answers other than the client errors expected, the first 10
	stop               chan struct{}
	wg                 sync.WaitGroup
}

func startFlood(h *harness, kinds []func(rng *rand.Rand) (method, path, bearer string)) *flood {
	f := &flood{stop: make(chan struct{})}
	for w := range 16 {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; ; i++ {
				select {
				case <-f.stop:
					return
				default:
				}
				method, path, bearer := kinds[(w+i)%len(kinds)](rng)
				req, _ := http.NewRequest(method, h.srv.URL+path, nil)
				if bearer != "" {
					req.Header.Set("Authorization", "Bearer "+bearer)
				}
				resp, err := h.client.Do(req)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				f.sent.Add(1)
				want := map[int]bool{http.StatusNotFound: true, http.StatusBadRequest: true}
				if strings.HasPrefix(path, "/?cursor=") {
					want = map[int]bool{http.StatusOK: true} // a cursor it did not give out shows the first page
				}
				if resp.StatusCode >= 500 {
					f.serverErrors.Add(1)
				}
				if !want[resp.StatusCode] {
					f.badMu.Lock()
					if len(f.bad) < 10 {
						f.bad = append(f.bad, fmt.Sprintf("%s %s: %d", method, path, resp.StatusCode))
					}
					f.badMu.Unlock()
				}
			}
		}()
	}
	return f
}

// checkFloodQueries checks what the flood cost Postgres, from the statements logged since mark:
// no lookup of a made-up id, the unknown id gap looked up at most once a second, no page from a
// forged cursor, and the highest ids read at most every 50 ms.
func checkFloodQueries(t *testing.T, stmts *stmtLog, mark int, gap, sent int64, elapsed time.Duration) {
	madeUpLookups := stmts.count(mark, func(s loggedStmt) bool { return hasVar(s, func(n int64) bool { return n >= madeUp }) })
	gapLookups := stmts.count(mark, func(s loggedStmt) bool {
		return hasVar(s, func(n int64) bool { return n == gap })
	})
	cursorQueries := stmts.count(mark, func(s loggedStmt) bool {
		return strings.Contains(s.sql, "(starts_at, id) >") || strings.Contains(s.sql, "(o.reserved_at, o.id) <")
	})
	bounds := stmts.count(mark, func(s loggedStmt) bool { return strings.Contains(s.sql, "max(id)") })
	elapsed = elapsed.Round(time.Millisecond)
	t.Logf("%d requests in %v beside the payment: %d lookups of made-up ids, %d of the unknown id %d, %d paged by forged cursors, %d reads of the highest ids",
		sent, elapsed, madeUpLookups, gapLookups, gap, cursorQueries, bounds)
	if sent < 200 {
		t.Errorf("only %d requests sent in %v: the flood did not run", sent, elapsed)
	}
	if madeUpLookups != 0 {
		t.Errorf("%d queries looked up a made-up id, want none (an id above every sale and item is not looked up)", madeUpLookups)
	}
	// The unknown id is remembered for a second: at most one lookup a second (and one more for
	// the second the flood started in).
	if most := int(elapsed/time.Second) + 2; gapLookups > most {
		t.Errorf("the unknown id %d was looked up %d times in %v, want at most %d (negative cache)", gap, gapLookups, elapsed, most)
	}
	if cursorQueries != 0 {
		t.Errorf("%d queries paged from a forged cursor, want none", cursorQueries)
	}
	// Made-up ids cost one shared read of the highest ids at most every 50 ms.
	if most := int(elapsed/(50*time.Millisecond)) + 2; bounds > most {
		t.Errorf("%d reads of the highest ids in %v, want at most %d", bounds, elapsed, most)
	}
}

// An id answered "not found" a moment before a sale takes it does not hide that sale: the
// instance that creates it answers it at once, another instance (the notice, else the short
// negative cache) within a second; and a tampered cursor is a 400 INVALID_INPUT.
func TestNegativeCacheDoesNotHideANewSale(t *testing.T) {
	a := newHarness(t, harnessOpts{})
	b := newHarness(t, harnessOpts{shared: a})
	first := a.liveSale(1)
	// The next sale's id and its item's: each sequence's next value (nothing else creates).
	next := first.sale + 1
	nextItem := first.items[0] + 1
	checkNotFoundYet(t, next, nextItem, a, b)
	s := a.liveSale(3)
	if s.sale != next || s.items[0] != nextItem {
		t.Fatalf("the new sale is %d (item %d), want %d (item %d): something else created a sale", s.sale, s.items[0], next, nextItem)
	}
	// The creating instance: at once.
	for _, path := range []string{fmt.Sprintf("/api/flash-sales/%d", next), fmt.Sprintf("/api/flash-sales/%d/stock", next), fmt.Sprintf("/sales/%d", next)} {
		if r := a.do("GET", path, "", nil); r.Status != http.StatusOK {
			t.Errorf("GET %s on the creating instance right after the creation: %d %s, want 200", path, r.Status, r.Raw)
		}
	}
	shopper := a.token(6, auth.RoleShopper)
	if r := a.buy(shopper, nextItem, a.purchaseToken(shopper, next)); r.Status != http.StatusAccepted {
		t.Errorf("purchase on the creating instance right after the creation: %d %s, want 202", r.Status, r.Raw)
	}
	// The other instance: within the negative cache's second (the notice usually makes it
	// at once).
	start := time.Now()
	testenv.EventuallyEvery(t, 1500*time.Millisecond, 20*time.Millisecond, "the other instance answers the new sale", func() error {
		if r := b.do("GET", fmt.Sprintf("/api/flash-sales/%d", next), "", nil); r.Status != http.StatusOK {
			return fmt.Errorf("it still answers %d %s", r.Status, r.Raw)
		}
		return nil
	})
	t.Logf("the other instance answered the new sale after %v", time.Since(start).Round(time.Millisecond))
	other := b.token(7, auth.RoleShopper)
	if r := b.buy(other, nextItem, b.purchaseToken(other, next)); r.Status != http.StatusAccepted {
		t.Errorf("purchase on the other instance: %d %s, want 202", r.Status, r.Raw)
	}

	checkCursorsAcrossInstances(t, a, b, shopper)
	a.checkInvariants(s)
}

// checkNotFoundYet asks every instance for the sale and the item that do not exist yet: 404.
func checkNotFoundYet(t *testing.T, next, nextItem int64, hs ...*harness) {
	for _, h := range hs {
		for _, path := range []string{fmt.Sprintf("/api/flash-sales/%d", next), fmt.Sprintf("/api/flash-sales/%d/stock", next)} {
			if r := h.do("GET", path, "", nil); r.Status != http.StatusNotFound {
				t.Fatalf("GET %s before the sale exists: %d %s", path, r.Status, r.Raw)
			}
		}
		if r := h.do("POST", fmt.Sprintf("/api/flash-sales/items/%d/purchase", nextItem), h.token(5, auth.RoleShopper), nil); r.Status != http.StatusNotFound {
			t.Fatalf("purchase of item %d before it exists: %d %s", nextItem, r.Status, r.Raw)
		}
	}
}

// checkCursorsAcrossInstances checks that a cursor one instance gave out pages on the other, and
// that the same position unsigned or with its MAC changed is a 400.
func checkCursorsAcrossInstances(t *testing.T, a, b *harness, shopper string) {
	// Cursors: one given out pages; the same position, unsigned or with its MAC changed, is a 400.
	for range 60 {
		a.liveSale(1)
	}
	first50 := a.do("GET", "/api/flash-sales", "", nil)
	cursor := first50.str("next")
	if cursor == "" {
		t.Fatalf("no next page after 62 sales: %s", first50.Raw)
	}
	if r := b.do("GET", "/api/flash-sales?cursor="+cursor, "", nil); r.Status != http.StatusOK {
		t.Errorf("a cursor one instance gave out, on the other: %d %s, want 200", r.Status, r.Raw)
	}
	payload, _, _ := strings.Cut(cursor, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(payload)
	pos, id, _ := strings.Cut(string(raw), "|")
	for name, bad := range map[string]string{
		"unsigned":      payload,
		"unsigned, old": base64.RawURLEncoding.EncodeToString([]byte(pos + "|" + id)),
		"another MAC":   payload + ".AAAAAAAAAAAAAAAAAAAAAA",
		"moved":         base64.RawURLEncoding.EncodeToString([]byte(pos+"|"+id+"0")) + cursor[len(payload):],
	} {
		r := a.do("GET", "/api/flash-sales?cursor="+bad, "", nil)
		if r.Status != http.StatusBadRequest || r.str("error") != string(shop.CodeInvalidInput) {
			t.Errorf("%s cursor %q: %d %s, want 400 INVALID_INPUT", name, bad, r.Status, r.Raw)
		}
		if r := a.do("GET", "/api/flash-sales/orders?cursor="+bad, shopper, nil); r.Status != http.StatusBadRequest {
			t.Errorf("my orders with the %s cursor: %d %s, want 400", name, r.Status, r.Raw)
		}
	}
}
