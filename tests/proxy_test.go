package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/testenv"
)

// countedInstance is one flashsale instance behind a counting front: how many requests of each
// kind reached it, i.e. what nginx did not answer from its cache.
type countedInstance struct {
	next http.Handler
	srv  *httptest.Server
	mu   sync.Mutex
	seen map[string]int
}

func (c *countedInstance) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.seen[routeKind(r.URL.Path)]++
	c.mu.Unlock()
	c.next.ServeHTTP(w, r)
}

func (c *countedInstance) count(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if kind == "" {
		n := 0
		for _, v := range c.seen {
			n += v
		}
		return n
	}
	return c.seen[kind]
}

func routeKind(path string) string {
	switch {
	case strings.HasPrefix(path, "/sales/"):
		return "page"
	case strings.HasSuffix(path, "/stock"):
		return "stock"
	case strings.HasSuffix(path, "/captcha"):
		return "captcha"
	case strings.HasSuffix(path, "/purchase-token"):
		return "token"
	case strings.HasSuffix(path, "/purchase"):
		return "purchase"
	}
	return "other"
}

// clientFrom is an HTTP client whose connections come from the loopback address ip
// (127.0.0.N), so that nginx and flashsale see distinct client addresses.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}}
}

type proxied struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func send(t *testing.T, c *http.Client, method, url, bearer string, body any, headers ...string) proxied {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Error(err)
		return proxied{}
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, url, err)
		return proxied{}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	p := proxied{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &p.body)
	return p
}

// TestProxyCachesPagesNotPurchases runs three flashsale instances (one Redis, one Postgres, one
// JetStream) behind nginx with deploy/nginx/flashsale.conf: under a crowd of GETs the sale page
// and the stock JSON come from nginx's cache, purchases all reach an instance, the real client
// address reaches flashsale through X-Forwarded-For, and a burst from one address beyond
// limit_req's burst gets 429 in the contract's shape.
// proxyScenario is the state of TestProxyCachesPagesNotPurchases: three counted instances
// behind nginx (base), the sale and the crowd's client.
type proxyScenario struct {
	t                   *testing.T
	h1                  *harness
	insts               []*countedInstance
	base                string
	s                   saleIDs
	item                int64
	pagePath, stockPath string
	crowd               *http.Client
	total               func(kind string) int // requests of a kind that reached an instance
}

func TestProxyCachesPagesNotPurchases(t *testing.T) {
	env := map[string]string{"FLASHSALE_RATE_LIMITS": "on", "FLASHSALE_TRUSTED_PROXIES": "127.0.0.1"}
	h1 := newHarness(t, harnessOpts{env: env})
	hs := []*harness{h1, newHarness(t, harnessOpts{env: env, shared: h1}), newHarness(t, harnessOpts{env: env, shared: h1})}
	var insts []*countedInstance
	var addrs []string
	for _, h := range hs {
		c := &countedInstance{next: h.app.Handler, seen: map[string]int{}}
		c.srv = httptest.NewServer(c)
		t.Cleanup(c.srv.Close)
		insts = append(insts, c)
		addrs = append(addrs, strings.TrimPrefix(c.srv.URL, "http://"))
	}
	ngx := testenv.Nginx(t, addrs...)
	base := ngx.URL()
	total := func(kind string) int {
		n := 0
		for _, c := range insts {
			n += c.count(kind)
		}
		return n
	}

	// Three requests per shopper per address at most 3 a second (burst 6): only if flashsale
	// sees each shopper's own address (X-Forwarded-For from nginx, a trusted proxy) do 30
	// shoppers get through; seen as nginx's one address they would share one bucket.
	s := h1.createSaleWith(map[string]any{"rateLimits": map[string]int{"userPerSecond": 5, "ipPerSecond": 3}}, time.Now().Add(-time.Second), 100)
	item := s.items[0]
	pagePath, stockPath := fmt.Sprintf("/sales/%d", s.sale), fmt.Sprintf("/api/flash-sales/%d/stock", s.sale)
	c := &proxyScenario{t: t, h1: h1, insts: insts, base: base, s: s, item: item, pagePath: pagePath, stockPath: stockPath,
		crowd: clientFrom("127.0.0.1"), total: total}

	c.crowdReadsFromTheCache()

	c.conditionalGetOfThePage()

	c.shoppersBuyThroughNginx()

	c.stockCopyExpires()

	c.burstFromOneAddress()

	// Every instance served: round robin, no favourite.
	for i, c := range insts {
		if c.count("captcha")+c.count("token")+c.count("purchase") == 0 || c.count("") == 0 {
			t.Errorf("instance %d got no purchase-path traffic: %v", i+1, c.seen)
		}
	}
	if t.Failed() {
		t.Logf("nginx error log:\n%s", tail(ngx.ErrorLog))
	}
	h1.checkInvariants(s)
	if n := h1.sqlInt("SELECT count(*) FROM orders WHERE item_id = ? AND status = 'PENDING'", item); n != proxyShoppers {
		t.Errorf("%d PENDING orders in Postgres, want %d", n, proxyShoppers)
	}
}

// crowdReadsFromTheCache: 2,000 GETs from 50 shoppers, each from its own address (nginx limits
// the public reads per address, hits included), half the sale page, half the stock JSON: mostly
// cache hits, a few upstream requests per second of load.
func (c *proxyScenario) crowdReadsFromTheCache() {
	t, base, pagePath, stockPath, total := c.t, c.base, c.pagePath, c.stockPath, c.total
	t.Helper()
	// 1. The crowd: 2,000 GETs from 50 shoppers, each from its own address (nginx limits the
	// public reads per address, hits included), half the sale page, half the stock JSON.
	const workers, perWorker = 50, 40
	var mu sync.Mutex
	cacheStatus := map[string]map[string]int{pagePath: {}, stockPath: {}}
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			crowd := clientFrom(fmt.Sprintf("127.0.0.%d", 100+w))
			for i := range perWorker {
				path := pagePath
				if (w+i)%2 == 1 {
					path = stockPath
				}
				r := send(t, crowd, "GET", base+path, "", nil)
				if r.status != http.StatusOK {
					t.Errorf("GET %s through nginx: %d %s", path, r.status, r.raw)
					return
				}
				mu.Lock()
				cacheStatus[path][r.header.Get("X-Cache-Status")]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	upstreamGets := total("page") + total("stock")
	t.Logf("%d GETs in %v: page %v, stock %v; reached an instance: page %d, stock %d",
		workers*perWorker, elapsed.Round(time.Millisecond), cacheStatus[pagePath], cacheStatus[stockPath], total("page"), total("stock"))
	for path, st := range cacheStatus {
		if hit := st["HIT"]; hit < workers*perWorker/2*8/10 {
			t.Errorf("%s: %d of %d answers were cache HITs, want at least 80%%: %v", path, hit, workers*perWorker/2, st)
		}
	}
	// The stock is cached for its max-age of 1 s, the page for 5 s: a few upstream requests per
	// second of load, not one per request.
	if limit := 5 + 3*int(elapsed/time.Second+1); upstreamGets > limit || upstreamGets < 2 {
		t.Errorf("%d GETs of the page and the stock reached an instance in %v, want 2 to %d", upstreamGets, elapsed, limit)
	}
}

// conditionalGetOfThePage: the page's ETag: a browser's conditional GET is answered 304 (from
// the cache, or by flashsale on revalidation).
func (c *proxyScenario) conditionalGetOfThePage() {
	t, base, pagePath, crowd := c.t, c.base, c.pagePath, c.crowd
	t.Helper()
	// The page's ETag: a browser's conditional GET is answered 304 (from the cache, or by
	// flashsale on revalidation).
	page := send(t, crowd, "GET", base+pagePath, "", nil, "Accept-Encoding", "identity")
	if cc := page.header.Get("Cache-Control"); !strings.Contains(cc, "public") {
		t.Errorf("sale page through nginx: Cache-Control %q, want flashsale's public one", cc)
	}
	if etag := page.header.Get("ETag"); etag == "" {
		t.Error("sale page through nginx has no ETag")
	} else if r := send(t, crowd, "GET", base+pagePath, "", nil, "Accept-Encoding", "identity", "If-None-Match", etag); r.status != http.StatusNotModified {
		t.Errorf("conditional GET of the sale page: %d, want 304", r.status)
	}
}

// shoppersBuyThroughNginx: 30 shoppers, each from its own address, buy at once through nginx:
// every purchase reaches an instance (never a cache), each gets its own order.
func (c *proxyScenario) shoppersBuyThroughNginx() {
	t, h1, base, s, item, total := c.t, c.h1, c.base, c.s, c.item, c.total
	t.Helper()
	// 2. 30 shoppers, each from its own address, buy at once through nginx: every purchase
	// reaches an instance (never a cache), each gets its own order.
	const shoppers = proxyShoppers
	var wg sync.WaitGroup
	orders := make([]string, shoppers)
	before := map[string]int{"captcha": total("captcha"), "token": total("token"), "purchase": total("purchase")}
	for i := range shoppers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			orders[i] = buyThroughNginx(t, h1, base, s, item, i)
		}()
	}
	wg.Wait()
	distinct := map[string]bool{}
	for i, id := range orders {
		if id == "" {
			continue
		}
		if distinct[id] {
			t.Errorf("shopper %d got order %s, already another shopper's", i, id)
		}
		distinct[id] = true
		h1.mu.Lock()
		h1.acked = append(h1.acked, id)
		h1.mu.Unlock()
	}
	if len(distinct) != shoppers {
		t.Errorf("%d distinct orders for %d shoppers", len(distinct), shoppers)
	}
	for kind, was := range before {
		if got := total(kind) - was; got != shoppers {
			t.Errorf("%d %s requests reached an instance, want exactly %d (one per shopper)", got, kind, shoppers)
		}
	}
}

// stockCopyExpires: the stock JSON's copy lives its max-age (1 s), not longer: the crowd soon sees
// the 30 units gone.
func (c *proxyScenario) stockCopyExpires() {
	t, base, stockPath, crowd := c.t, c.base, c.stockPath, c.crowd
	t.Helper()
	// The stock JSON's copy lives its max-age (1 s), not longer: the crowd soon sees the 30 units
	// gone.
	const shoppers = proxyShoppers
	err := testenv.Poll(10*time.Second, 100*time.Millisecond, func() error {
		r := send(t, crowd, "GET", base+stockPath, "", nil)
		items, _ := r.body["items"].([]any)
		if len(items) == 1 {
			if st, _ := items[0].(map[string]any)["stock"].(float64); st == 100-shoppers {
				return nil
			}
		}
		return fmt.Errorf("it still says %s", r.raw)
	})
	if err != nil {
		t.Errorf("the stock through nginx %d purchases later: %v", shoppers, err)
	}
}

// burstFromOneAddress: a burst from one address beyond limit_req's burst (10, then 2 a second):
// nginx answers 429 RATE_LIMITED itself; what it lets through reaches an instance (401: no login).
func (c *proxyScenario) burstFromOneAddress() {
	t, base, item, total := c.t, c.base, c.item, c.total
	t.Helper()
	// 3. A burst from one address beyond limit_req's burst (10, then 2 a second): nginx answers
	// 429 RATE_LIMITED itself; what it lets through reaches an instance (401: no login).
	const burst = 40
	var wg sync.WaitGroup
	loud := clientFrom("127.0.0.250")
	purchaseURL := fmt.Sprintf("%s/api/flash-sales/items/%d/purchase", base, item)
	beforeBurst := total("purchase")
	var limited, passed atomic.Int64
	start := time.Now()
	for range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := send(t, loud, "POST", purchaseURL, "", nil)
			switch r.status {
			case http.StatusTooManyRequests:
				limited.Add(1)
				if r.body["error"] != string(shop.CodeRateLimited) || r.header.Get("Retry-After") != "1" ||
					!strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
					t.Errorf("nginx's 429: %v %q, want the contract's RATE_LIMITED JSON with Retry-After: 1", r.header, r.raw)
				}
			case http.StatusUnauthorized:
				passed.Add(1)
			default:
				t.Errorf("burst purchase: %d %s, want 429 or 401", r.status, r.raw)
			}
		}()
	}
	wg.Wait()
	allowed := 10 + 1 + 2*int(time.Since(start)/time.Second+1)
	t.Logf("burst of %d from one address: %d limited by nginx, %d passed", burst, limited.Load(), passed.Load())
	if p := int(passed.Load()); p < 1 || p > allowed {
		t.Errorf("%d of %d requests passed nginx's limit, want 1 to %d", p, burst, allowed)
	}
	if got := total("purchase") - beforeBurst; got != int(passed.Load()) {
		t.Errorf("%d purchase requests of the burst reached an instance, want the %d nginx let through", got, passed.Load())
	}
}

// buyThroughNginx is shopper i's purchase through nginx, from an address of its own: captcha,
// purchase token, purchase; it returns the order id ("" on a failure, which it reports). The
// purchase answer must never come from the cache.
func buyThroughNginx(t *testing.T, h1 *harness, base string, s saleIDs, item int64, i int) string {
	c := clientFrom(fmt.Sprintf("127.0.0.%d", 10+i))
	bearer := h1.token(int64(5000+i), auth.RoleShopper)
	chal := send(t, c, "POST", fmt.Sprintf("%s/api/flash-sales/%d/captcha", base, s.sale), bearer, nil)
	if chal.status != http.StatusOK {
		t.Errorf("shopper %d: captcha: %d %s", i, chal.status, chal.raw)
		return ""
	}
	tok := send(t, c, "POST", fmt.Sprintf("%s/api/flash-sales/%d/purchase-token", base, s.sale), bearer,
		map[string]any{"captchaId": chal.body["captchaId"], "answer": "test"})
	if tok.status != http.StatusOK {
		t.Errorf("shopper %d: purchase token: %d %s", i, tok.status, tok.raw)
		return ""
	}
	ptoken, _ := tok.body["purchaseToken"].(string)
	r := send(t, c, "POST", fmt.Sprintf("%s/api/flash-sales/items/%d/purchase", base, item), bearer, nil, "X-Purchase-Token", ptoken)
	if r.status != http.StatusAccepted {
		t.Errorf("shopper %d: purchase: %d %s", i, r.status, r.raw)
		return ""
	}
	if cs := r.header.Get("X-Cache-Status"); cs != "" {
		t.Errorf("shopper %d: purchase answer has X-Cache-Status %q: it must never touch the cache", i, cs)
	}
	id, _ := r.body["orderId"].(string)
	return id
}

// proxyShoppers is how many shoppers buy through nginx in TestProxyCachesPagesNotPurchases.
const proxyShoppers = 30

// tail is the end of a log file, for a failure message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return string(b[max(0, len(b)-4000):])
}
