package tests

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/testenv"
)

// Behind nginx with deploy/nginx/flashsale.conf, the routes nginx caches cannot be driven past
// its cache: one address trying made-up sale ids gets nginx's 429 past the read zone's burst (in
// the contract's JSON), and only what nginx let through reaches the instance; arguments a route
// does not read are not part of the cache key, so a page with a made-up query string is the
// page's one copy; another address is not limited by the first one's bucket.
func TestProxyLimitsReadsThatMissTheCache(t *testing.T) {
	h := newHarness(t, harnessOpts{env: map[string]string{"FLASHSALE_RATE_LIMITS": "on", "FLASHSALE_TRUSTED_PROXIES": "127.0.0.1"}})
	inst := &countedInstance{next: h.app.Handler, seen: map[string]int{}}
	inst.srv = httptest.NewServer(inst)
	t.Cleanup(inst.srv.Close)
	ngx := testenv.Nginx(t, strings.TrimPrefix(inst.srv.URL, "http://"))
	base := ngx.URL()
	s := h.liveSale(5)

	madeUpIdsFromOneAddress(t, inst, base)

	// 2. Another address is not limited by that one's bucket.
	quiet := clientFrom("127.0.0.202")
	if r := send(t, quiet, "GET", fmt.Sprintf("%s/api/flash-sales/%d", base, s.sale), "", nil); r.status != http.StatusOK {
		t.Errorf("another address: %d %s, want 200", r.status, r.raw)
	}

	checkArgumentsNotInTheKey(t, inst, quiet, base, s)
	if t.Failed() {
		t.Logf("nginx error log:\n%s", tail(ngx.ErrorLog))
	}
}

// madeUpIdsFromOneAddress sends made-up ids from one address, as fast as 20 connections go: nginx
// limits them past the read zone's burst, and only what it let through reaches the instance.
func madeUpIdsFromOneAddress(t *testing.T, inst *countedInstance, base string) {
	// 1. Made-up ids from one address, as fast as 20 connections go.
	const burst, workers = 600, 20
	loud := clientFrom("127.0.0.201")
	before := inst.count("other")
	var limited, passed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range burst / workers {
				r := send(t, loud, "GET", fmt.Sprintf("%s/api/flash-sales/%d", base, madeUp+w*1000+i), "", nil)
				switch r.status {
				case http.StatusTooManyRequests:
					limited.Add(1)
					if r.body["error"] != string(shop.CodeRateLimited) || r.header.Get("Retry-After") == "" {
						t.Errorf("a limited read: %v %q, want RATE_LIMITED JSON with Retry-After", r.header, r.raw)
						return
					}
				case http.StatusNotFound:
					passed.Add(1)
				default:
					t.Errorf("a made-up id through nginx: %d %s, want 404 or 429", r.status, r.raw)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	// The zone's burst (200) and rate (100 a second); flashsale's own bucket per address (burst
	// 200, 100 a second) sits behind it and answers 429 too once nginx's lets more through.
	allowed := 200 + 1 + int(100*elapsed.Seconds()+100)
	t.Logf("%d made-up ids from one address in %v: %d limited, %d passed", burst, elapsed.Round(time.Millisecond), limited.Load(), passed.Load())
	if p := int(passed.Load()); p < 1 || p > allowed {
		t.Errorf("%d of %d made-up ids passed, want 1 to %d", p, burst, allowed)
	}
	if limited.Load() == 0 {
		t.Errorf("none of %d made-up ids from one address in %v was limited", burst, elapsed)
	}
	if got := inst.count("other") - before; got < int(passed.Load()) || got > allowed {
		t.Errorf("%d made-up ids reached the instance, want what nginx let through: at least the %d answered 404, at most %d", got, passed.Load(), allowed)
	}
}

// checkArgumentsNotInTheKey checks that made-up arguments are not part of nginx's cache key (a page
// and a sale's JSON are fetched once), while ?lang= is the page's one argument, with its own copy.
func checkArgumentsNotInTheKey(t *testing.T, inst *countedInstance, quiet *http.Client, base string, s saleIDs) {
	// 3. Made-up arguments are not part of the key: a page and a sale's JSON are fetched once.
	for _, path := range []string{fmt.Sprintf("/sales/%d", s.sale), fmt.Sprintf("/api/flash-sales/%d", s.sale)} {
		kind := routeKind(path)
		was := inst.count(kind)
		for i := range 30 {
			r := send(t, quiet, "GET", fmt.Sprintf("%s%s?x=%d&utm=%d", base, path, i, i*7), "", nil)
			if r.status != http.StatusOK {
				t.Errorf("GET %s?x=%d through nginx: %d %s", path, i, r.status, r.raw)
			}
		}
		if got := inst.count(kind) - was; got > 2 {
			t.Errorf("30 GETs of %s with made-up arguments reached the instance %d times, want at most 2 (one copy)", path, got)
		}
	}
	// ?lang= is the page's one argument: its own copy.
	was := inst.count("page")
	for range 3 {
		send(t, quiet, "GET", fmt.Sprintf("%s/sales/%d?lang=zh", base, s.sale), "", nil, "Cookie", "fs_lang=zh")
	}
	if got := inst.count("page") - was; got < 1 {
		t.Errorf("?lang=zh was answered from the default language's copy (%d trips to the instance)", got)
	}
}
