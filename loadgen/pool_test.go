package loadgen

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/loadgen/tokens"
)

// newTestPool is a pool whose workers never dial unless the phase's Do uses them.
func newTestPool(t *testing.T, workers int) *Pool {
	t.Helper()
	p, err := NewPool("raw", "http://127.0.0.1:1", workers, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestRunIsOpenLoop: no arrival starts before its time, and a slow arrival does not hold back
// the ones after it (they go to other workers, on time).
func TestRunIsOpenLoop(t *testing.T) {
	p := newTestPool(t, 8)
	const n = 100
	offsets := Schedule(n, 300*time.Millisecond, "uniform", 1)
	starts := make([]time.Time, n)
	ph := &Phase{Name: "pacing", Base: time.Now().Add(20 * time.Millisecond), Offsets: offsets, Deadline: 5 * time.Second,
		Do: func(w *Worker, s *Stats, i int, sched, deadline time.Time) {
			starts[i] = time.Now()
			if i == 0 {
				time.Sleep(time.Second)
			}
			s.record(KindArrival, Class200, time.Since(sched), int64(time.Since(s.base)))
		}}
	st := p.Run(context.Background(), ph, nil)
	if st.Done() != n || st.Count(KindArrival, Class200) != n {
		t.Fatalf("done %d, answered %d, want %d", st.Done(), st.Count(KindArrival, Class200), n)
	}
	for i, at := range starts {
		if sched := ph.Base.Add(offsets[i]); at.Before(sched) {
			t.Fatalf("arrival %d started %v before its time", i, sched.Sub(at))
		}
	}
	// arrival 10 is due 30 ms in, while arrival 0 still holds its worker for a second
	if late := starts[10].Sub(ph.Base.Add(offsets[10])); late > 600*time.Millisecond {
		t.Errorf("arrival 10 started %v late: it waited for the slow arrival 0", late)
	}
	if d := st.Dispatch(); d.N != n {
		t.Errorf("dispatch delays recorded: %d, want %d", d.N, n)
	}
}

// TestRunDropsLateArrivals: with DropLate, an arrival finding every worker busy is not sent.
func TestRunDropsLateArrivals(t *testing.T) {
	p := newTestPool(t, 1)
	const n = 40
	var served atomic.Int64
	ph := &Phase{Name: "drop", Base: time.Now(), Offsets: Schedule(n, 40*time.Millisecond, "uniform", 1), DropLate: true, Deadline: 5 * time.Second,
		Do: func(w *Worker, s *Stats, i int, sched, deadline time.Time) {
			served.Add(1)
			time.Sleep(25 * time.Millisecond)
		}}
	st := p.Run(context.Background(), ph, nil)
	if st.Done() != n {
		t.Errorf("done %d, want %d (dropped ones count as done)", st.Done(), n)
	}
	if st.Dropped() == 0 || served.Load()+st.Dropped() != n || st.Late() < st.Dropped() {
		t.Errorf("served %d, dropped %d, late %d: want some dropped, served + dropped = %d", served.Load(), st.Dropped(), st.Late(), n)
	}
}

// TestRunQueuesLateArrivalsInOrder: without DropLate, late arrivals wait in a FIFO queue.
func TestRunQueuesLateArrivalsInOrder(t *testing.T) {
	p := newTestPool(t, 1)
	const n = 30
	var mu sync.Mutex
	var order []int
	ph := &Phase{Name: "queue", Base: time.Now(), Offsets: make([]time.Duration, n), Deadline: 5 * time.Second,
		Do: func(w *Worker, s *Stats, i int, sched, deadline time.Time) {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}}
	st := p.Run(context.Background(), ph, nil)
	if len(order) != n || !slices.IsSorted(order) {
		t.Errorf("served %v, want 0…%d in order", order, n-1)
	}
	if st.Late() < 1 || st.Dropped() != 0 {
		t.Errorf("late %d, dropped %d: want late arrivals queued, none dropped", st.Late(), st.Dropped())
	}
}

// TestRunDeadline: arrivals not started by the phase's deadline are abandoned as timeouts, and
// a cancelled context stops the schedule.
func TestRunDeadline(t *testing.T) {
	p := newTestPool(t, 1)
	ph := &Phase{Name: "deadline", Base: time.Now(), Offsets: make([]time.Duration, 3), Deadline: 300 * time.Millisecond,
		Do: func(w *Worker, s *Stats, i int, sched, deadline time.Time) {
			if !deadline.After(sched) || deadline.After(sched.Add(300*time.Millisecond)) {
				t.Errorf("arrival %d: deadline %v after its time, want within the phase's 300 ms", i, deadline.Sub(sched))
			}
			time.Sleep(600 * time.Millisecond)
		}}
	st := p.Run(context.Background(), ph, nil)
	if got := st.Count(KindArrival, ClassTimeout); got != 2 || st.Done() != 3 {
		t.Errorf("timeouts %d, done %d: want the 2 arrivals left past the deadline abandoned", got, st.Done())
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ph = &Phase{Name: "cancelled", Base: time.Now(), Offsets: []time.Duration{0, time.Hour}, Deadline: 2 * time.Hour,
		Do: func(w *Worker, s *Stats, i int, sched, deadline time.Time) {}}
	start := time.Now()
	if st := p.Run(ctx, ph, nil); st.Done() != 0 || time.Since(start) > 5*time.Second {
		t.Errorf("cancelled: done %d after %v, want nothing scheduled and an immediate return", st.Done(), time.Since(start))
	}
}

// fakeShop serves flashsale's two purchase-path routes: a token per request, and the first
// units purchases (by any token) accepted, the rest SOLD_OUT.
func fakeShop(t *testing.T, units int64) (*httptest.Server, *atomic.Int64) {
	var sold, requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := requests.Add(1) // this request's number (a Load here could read a later one's)
		switch {
		case r.URL.Path == "/api/flash-sales/7/purchase-token":
			fmt.Fprintf(w, `{"purchaseToken":"tok-%d","expiresAt":"2099-01-01T00:00:00Z"}`, req)
		case r.URL.Path == "/api/flash-sales/items/8/purchase" && r.Header.Get("X-Purchase-Token") != "":
			if n := sold.Add(1); n <= units {
				w.WriteHeader(http.StatusAccepted)
				fmt.Fprintf(w, `{"orderId":"order-%d","status":"QUEUED"}`, n)
				return
			}
			w.WriteHeader(http.StatusGone)
			fmt.Fprint(w, `{"error":"SOLD_OUT","message":"sold out"}`)
		default:
			http.Error(w, `{"error":"NOT_FOUND"}`, http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &requests
}

// TestShopperFlowRecordAndReplay runs whole shopper visits, double-clicks included, and replays
// them: the replay sends exactly the requests the first run sent.
func TestShopperFlowRecordAndReplay(t *testing.T) {
	const n, units = 60, 10
	srv, requests := fakeShop(t, units)
	p, err := NewPool("raw", srv.URL, 8, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	users := tokens.Of(make([]string, n)...)
	pattern := make([]uint8, n)
	run := func(record, replay []uint8) *Stats {
		ph := &Phase{Name: "shoppers", Base: time.Now(), Offsets: Schedule(n, 100*time.Millisecond, "uniform", 1), Deadline: 10 * time.Second,
			Do: ShopperFlow(users, TokenPath(7), [][]byte{PurchasePath(8)}, 0.3, record, replay)}
		return p.Run(context.Background(), ph, nil)
	}
	st := run(pattern, nil)
	if got := st.Count(KindArrival, Class202) + st.Count(KindArrival, Class410); got != n {
		t.Errorf("shoppers answered 202 or 410: %d, want %d", got, n)
	}
	acked := p.CollectAcked()
	if st.Accepted() != units || len(acked) != units {
		t.Errorf("accepted %d, order ids collected %d, want %d", st.Accepted(), len(acked), units)
	}
	dups := st.Count(KindDup, Class202) + st.Count(KindDup, Class410)
	if dups == 0 || st.Count(KindToken, Class200) != n+dups {
		t.Errorf("double-clicks %d, tokens %d: want some double-clicks, one token per click", dups, st.Count(KindToken, Class200))
	}
	if st.Code(KindPurchase, codeSoldOut)+st.Code(KindDup, codeSoldOut) == 0 || st.FirstSoldOut() < 0 {
		t.Errorf("no SOLD_OUT counted (first at %d)", st.FirstSoldOut())
	}
	if st.Requests() != requests.Load() {
		t.Errorf("requests answered %d, the server saw %d", st.Requests(), requests.Load())
	}

	srv2, requests2 := fakeShop(t, 0) // every purchase refused: the replay must not change course
	p2, err := NewPool("raw", srv2.URL, 8, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	p = p2
	st2 := run(nil, pattern)
	if requests2.Load() != requests.Load() || st2.Requests() != st.Requests() {
		t.Errorf("replay sent %d requests, the first run %d", requests2.Load(), requests.Load())
	}
}

// TestPrefetch fetches one purchase token per user.
func TestPrefetch(t *testing.T) {
	srv, _ := fakeShop(t, 0)
	p, err := NewPool("raw", srv.URL, 4, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	toks, exp, err := Prefetch(context.Background(), p, tokens.Of(make([]string, 100)...), 7, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := range toks.Len() {
		seen[string(toks.Get(i))] = true
	}
	if toks.Len() != 100 || len(seen) != 100 || seen[""] {
		t.Errorf("%d tokens, %d distinct, want 100 distinct", toks.Len(), len(seen))
	}
	if exp.Year() != 2099 {
		t.Errorf("earliest expiry %v, want 2099", exp)
	}
	if _, _, err := Prefetch(context.Background(), p, tokens.Of("x"), 99, time.Second, nil); err == nil {
		t.Error("prefetch from a missing sale: no error")
	}
}
