package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/flashsale/flashsale/testenv"
)

// The browser tests of the shopper's honest page (issue 9, items 5 and 6), on a desktop and on
// a 390-pixel phone: a QUEUED order shows the shopper's place in line and the estimated wait on
// the sale page and on the order page, and the page never polls the order sooner than the
// server's Retry-After; a purchase whose answer is lost on the way back is asked again with the
// same purchase token only, then the page says the answer was lost and leads to "My orders",
// where the order is; offline, the page says so and its buttons wait. Screenshots of both go to
// docs/screenshots/.

var e2eViewports = []e2eViewport{{"desktop", 1280, 900, false}, {"phone", 390, 844, true}}

// e2eRetryAfter is the Retry-After the queue test puts on every QUEUED status answer, longer
// than the page's own interval (1 s), so that a page that ignored it would be seen polling sooner.
const e2eRetryAfter = 3 * time.Second

func TestE2EQueuePosition(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	browserCtx := startE2EBrowser(t, ctx)
	openE2ETab(t, browserCtx, "warm-up")
	dir := e2eShotDir(t)
	for _, v := range e2eViewports {
		t.Run(v.name, func(t *testing.T) {
			queueFlow(t, browserCtx, v, dir)
		})
	}
}

// statusPolls records when the page asked for an order's status, and makes every QUEUED answer
// say Retry-After: e2eRetryAfter.
type statusPolls struct {
	mu    sync.Mutex
	times map[string][]time.Time // order id -> when its status was asked
}

func (p *statusPolls) of(id string) []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.times[id]...)
}

// interceptStatus pauses every GET /api/flash-sales/orders/{id} of the tab: records when it is
// sent, and lets its answer through with its Retry-After (sent only while QUEUED) raised to
// e2eRetryAfter.
func interceptStatus(t *testing.T, b *e2eTab) *statusPolls {
	t.Helper()
	polls := &statusPolls{times: map[string][]time.Time{}}
	paused := chromedp.Events(b.ctx, fetch.RequestPaused)
	if _, err := chromedp.Call(b.ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
		{URLPattern: "*/api/flash-sales/orders/*", RequestStage: fetch.RequestStageRequest},
	}}); err != nil {
		t.Fatalf("%s: intercept the order status: %v", b.name, err)
	}
	intercept := true
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			if ev.ResponseStatusCode == 0 && ev.ResponseErrorReason == "" { // the request stage
				id := ev.Request.URL[strings.LastIndex(ev.Request.URL, "/")+1:]
				polls.mu.Lock()
				polls.times[id] = append(polls.times[id], time.Now())
				polls.mu.Unlock()
				_, _ = chromedp.Call(b.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID, InterceptResponse: &intercept})
				continue
			}
			headers := make([]*fetch.HeaderEntry, 0, len(ev.ResponseHeaders))
			for _, hd := range ev.ResponseHeaders {
				if strings.EqualFold(hd.Name, "Retry-After") {
					hd = &fetch.HeaderEntry{Name: hd.Name, Value: strconv.Itoa(int(e2eRetryAfter / time.Second))}
				}
				headers = append(headers, hd)
			}
			_, _ = chromedp.Call(b.ctx, fetch.ContinueResponse, fetch.ContinueResponseParams{
				RequestID: ev.RequestID, ResponseCode: ev.ResponseStatusCode, ResponseHeaders: headers})
		}
	}()
	return polls
}

// checkPollGaps fails when two successive status polls of the order came sooner than the
// Retry-After apart (a small slack for timer jitter).
func checkPollGaps(t *testing.T, what string, times []time.Time) {
	t.Helper()
	for i := 1; i < len(times); i++ {
		if gap := times[i].Sub(times[i-1]); gap < e2eRetryAfter-150*time.Millisecond {
			t.Errorf("%s: status polls %d and %d only %v apart, want at least the Retry-After %v (polls at %v)",
				what, i-1, i, gap.Round(time.Millisecond), e2eRetryAfter, times)
		}
	}
}

func queueFlow(t *testing.T, browserCtx context.Context, v e2eViewport, dir string) {
	// No writer: every order stays QUEUED, in line behind the two bought before the shopper's.
	h := newHarness(t, harnessOpts{noWriter: true})
	s := h.createSaleWith(map[string]any{"purchaseLimit": "per-sale"}, time.Now().Add(-time.Second), 10)
	item := s.items[0]
	for _, uid := range []int64{7001, 7002} {
		h.buyOne(uid, s, item)
	}

	b := openShopperTab(t, browserCtx, v, "queued shopper")
	polls := interceptStatus(t, b)
	b.openSalePage(fmt.Sprintf("%s/sales/%d", h.srv.URL, s.sale))
	uid := b.register("queue_"+v.name[:1]+"_"+strconv.FormatInt(time.Now().UnixNano()%1e9, 36), "a queued shopper's password")
	b.solveCaptcha()
	b.do("click Buy", chromedp.Click(e2eBuyButton(item)))

	orderID := checkThirdInLine(t, h, b, item)
	if v.name == "desktop" {
		// Over three Retry-Afters the page asks about the order no sooner than it is told to.
		b.do("let the page poll the queued order", chromedp.Sleep(3*e2eRetryAfter+500*time.Millisecond))
		times := polls.of(orderID)
		if len(times) < 3 {
			b.fatalf("the sale page asked for the queued order's status %d times in %v, want it to keep polling", len(times), 3*e2eRetryAfter)
		}
		checkPollGaps(t, "sale page", times)
	}
	b.do("scroll to the top", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	b.screenshot(dir, "queue-sale-"+v.name+".png", "")

	// The order page says the same.
	salePolls := len(polls.of(orderID))
	b.do("open the order page", chromedp.Navigate(h.srv.URL+"/orders/"+orderID))
	b.waitFor("the order page shows the place in line", 10*time.Second,
		`e.q('order-status').getAttribute('data-status') === 'QUEUED' && e.shown(e.q('order-queue')) && /^You are number 3 in line, about \d+ seconds?\.$/.test(e.text(e.q('order-queue')))`)
	b.screenshot(dir, "queue-order-"+v.name+".png", "")

	// The writer starts: the order is recorded, the place in line goes, and it can be paid.
	h.app.Start(context.Background(), true, false)
	b.waitFor("the order is recorded and the queue line is gone", 15*time.Second,
		`e.q('order-status').getAttribute('data-status') === 'PENDING' && !e.shown(e.q('order-queue')) && e.shown(e.q('pay-button'))`)
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE id = ? AND user_id = ? AND status = 'PENDING'`, orderID, uid); got != 1 {
		t.Errorf("order %s of user %d PENDING in postgres: %d rows, want 1", orderID, uid, got)
	}
	if v.name == "desktop" {
		checkPollGaps(t, "order page", polls.of(orderID)[salePolls:]) // a new document: its own polls
	}

	// The shopper pays: the order is PAID on the page and in Postgres.
	b.payOnProvider("pay", e2eTestID("pay-button"), orderID)
	b.waitFor("the order is paid", 10*time.Second,
		`e.q('order-status').getAttribute('data-status') === 'PAID' && !e.shown(e.q('pay-button'))`)
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE id = ? AND status = 'PAID' AND paid_at IS NOT NULL`, orderID); got != 1 {
		t.Errorf("order %s PAID in postgres: %d rows, want 1", orderID, got)
	}
	b.checkConsole()
	h.checkInvariants(s)
}

// checkThirdInLine: the order box shows the order third in line (two orders of the sale were
// reserved before it and none is recorded), Confirming, and the item Ordered. It returns the
// order's id.
func checkThirdInLine(t *testing.T, h *harness, b *e2eTab, item int64) string {
	t.Helper()
	queueRe := regexp.MustCompile(`^You are number 3 in line, about \d+ seconds?\.$`)
	raw := b.waitFor("the order box shows the place in line", 15*time.Second,
		`(() => { const o = document.querySelector('[data-testid="sale-order-list"] > [data-testid="order"]');
		  const q = o && o.querySelector('[data-testid="order-queue"]');
		  return q && e.shown(q) && o.querySelector('[data-testid="order-status"]').getAttribute('data-status') === 'QUEUED'
		    ? {id: o.getAttribute('data-order-id'), text: e.text(q), words: e.text(o.querySelector('[data-testid="order-status"]'))} : null; })()`)
	var boxed struct{ ID, Text, Words string }
	decodeJSON(t, raw, &boxed)
	h.mu.Lock()
	h.acked = append(h.acked, boxed.ID)
	h.mu.Unlock()
	if !queueRe.MatchString(boxed.Text) || boxed.Words != "Confirming" {
		b.fatalf("order box: queue line %q, status %q; want %q and Confirming", boxed.Text, boxed.Words, queueRe)
	}
	if it := b.itemView(item); it.Button != "Ordered" || !it.Disabled {
		b.fatalf("the item after buying it: %+v, want a disabled \"Ordered\"", it)
	}
	return boxed.ID
}

func TestE2ELostAnswer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	h := newHarness(t, harnessOpts{})
	browserCtx := startE2EBrowser(t, ctx)
	openE2ETab(t, browserCtx, "warm-up")
	dir := e2eShotDir(t)
	for _, v := range e2eViewports {
		t.Run(v.name, func(t *testing.T) {
			lostAnswerFlow(t, h, browserCtx, v, dir)
		})
	}
}

// purchaseTraffic is what the tab sent to the purchase routes.
type purchaseTraffic struct {
	mu             sync.Mutex
	tokenRequests  int      // POST …/purchase-token
	purchaseTokens []string // the X-Purchase-Token of each POST …/purchase, in order
}

func (p *purchaseTraffic) snapshot() (int, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tokenRequests, append([]string(nil), p.purchaseTokens...)
}

// losePurchaseAnswers counts the tab's purchase-token requests and lets them through, and lets
// every purchase reach the server but fails its answer on the way back (a connection reset), as
// a network that drops after sending would. With boxToo, the sale page's own look at the
// shopper's orders (GET /api/flash-sales/orders?saleId=) fails too, as if the network stayed bad.
func losePurchaseAnswers(t *testing.T, b *e2eTab, boxToo bool) *purchaseTraffic {
	t.Helper()
	traffic := &purchaseTraffic{}
	paused := chromedp.Events(b.ctx, fetch.RequestPaused)
	patterns := []*fetch.RequestPattern{
		{URLPattern: "*/api/flash-sales/*/purchase-token", RequestStage: fetch.RequestStageRequest},
		{URLPattern: "*/api/flash-sales/items/*/purchase", RequestStage: fetch.RequestStageResponse},
	}
	if boxToo {
		patterns = append(patterns, &fetch.RequestPattern{URLPattern: "*/api/flash-sales/orders?saleId=*", RequestStage: fetch.RequestStageRequest})
	}
	if _, err := chromedp.Call(b.ctx, fetch.Enable, fetch.EnableParams{Patterns: patterns}); err != nil {
		t.Fatalf("%s: intercept the purchase: %v", b.name, err)
	}
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			switch {
			case strings.HasSuffix(ev.Request.URL, "/purchase-token"):
				traffic.mu.Lock()
				traffic.tokenRequests++
				traffic.mu.Unlock()
				_, _ = chromedp.Call(b.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
			case strings.Contains(ev.Request.URL, "/orders?saleId="):
				_, _ = chromedp.Call(b.ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonInternetDisconnected})
			default:
				tok := ""
				for k, v := range ev.Request.Headers {
					if strings.EqualFold(k, "X-Purchase-Token") {
						tok, _ = v.(string)
					}
				}
				traffic.mu.Lock()
				traffic.purchaseTokens = append(traffic.purchaseTokens, tok)
				traffic.mu.Unlock()
				_, _ = chromedp.Call(b.ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonConnectionReset})
			}
		}
	}()
	return traffic
}

// lostAnswerFlow: one click whose answer never comes back. On the desktop the network then
// recovers and the sale page finds the order by itself; on the phone it stays bad for the sale
// page, and the shopper follows the message's link to "My orders".
func lostAnswerFlow(t *testing.T, h *harness, browserCtx context.Context, v e2eViewport, dir string) {
	recovers := v.name == "desktop"
	s := h.createSaleWith(map[string]any{"purchaseLimit": "per-sale"}, time.Now().Add(-time.Second), 5)
	item := s.items[0]
	itemJS := strconv.FormatInt(item, 10)
	b := openShopperTab(t, browserCtx, v, "shopper losing the answer")
	traffic := losePurchaseAnswers(t, b, !recovers)
	b.openSalePage(fmt.Sprintf("%s/sales/%d", h.srv.URL, s.sale))
	uid := b.register("lost_"+v.name[:1]+"_"+strconv.FormatInt(time.Now().UnixNano()%1e9, 36), "a shopper with a bad network")
	b.solveCaptcha()
	b.waitFor("the stock is shown and Buy is live", 10*time.Second, `window.__shop.item('`+itemJS+`').stock === '5 left' && !e.buy(`+itemJS+`).disabled`)

	checkOfflineBuyWaits(t, b, itemJS)
	b.do("click Buy", chromedp.Click(e2eBuyButton(item)))

	// While the page is still waiting for an answer, the button stays disabled: a click then
	// sends nothing more.
	b.waitFor("the page waits for the answer", 10*time.Second, `e.text(e.buy(`+itemJS+`)) === 'Buying…' && e.buy(`+itemJS+`).disabled`)
	b.do("click the disabled button again", chromedp.Evaluate[chromedp.Void](`window.__e2e.buy(`+itemJS+`).click()`))

	// No answer ever comes back: the page says so and leads to "My orders" (the recorder keeps
	// the message: where the network recovers, the page learns the outcome a moment later).
	const lost = "The shop’s answer was lost (the network dropped), so this page cannot tell whether you bought item 0. Before buying again, check My orders to see whether it went through."
	b.waitFor("the page says the answer was lost", 40*time.Second, `e.messages.includes(`+strconv.Quote(lost)+`)`)
	tokenRequests, sent := traffic.snapshot()
	if tokenRequests != 1 || len(sent) < 1 || len(sent) > 3 {
		b.fatalf("the click sent %d purchase-token requests and %d purchases, want 1 token and 1 to 3 sends of one purchase", tokenRequests, len(sent))
	}
	for i, tok := range sent {
		if tok == "" || tok != sent[0] {
			b.fatalf("purchase %d carried token %q, the first %q: a retry must be the same attempt", i, tok, sent[0])
		}
	}
	t.Logf("%s: one click, %d sends of the same purchase token", v.name, len(sent))

	// The server made exactly one order of it.
	h.drain(s)
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE user_id = ?`, uid); got != 1 {
		t.Fatalf("user %d has %d orders after one click, want 1", uid, got)
	}
	var orderID string
	if err := h.sql().Raw(`SELECT id::text FROM orders WHERE user_id = ?`, uid).Scan(&orderID).Error; err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.acked = append(h.acked, orderID)
	h.mu.Unlock()

	if recovers {
		recoverAndFindTheOrder(t, h, b, s, v, dir, itemJS, orderID)
		return
	}

	followTheLinkToMyOrders(t, h, b, s, v, dir, orderID, lost)
}

// checkOfflineBuyWaits: offline, Buy waits, the stock shows faded with when it was known, and the
// page says why; online again, all is live again.
func checkOfflineBuyWaits(t *testing.T, b *e2eTab, itemJS string) {
	t.Helper()
	// Offline, Buy waits, the stock shows faded with when it was known, and the page says why;
	// online again, all is live again.
	setOffline(t, b, true)
	b.waitFor("offline: the notice shows, Buy waits, the stock is marked stale", 5*time.Second,
		`e.shown(e.q('offline-notice')) && e.buy(`+itemJS+`).disabled && e.stock(`+itemJS+`).classList.contains('stock-stale')
		&& /^Last known at \d\d:\d\d:\d\d; /.test(e.stock(`+itemJS+`).title)`)
	setOffline(t, b, false)
	b.waitFor("online: the notice goes, Buy is live, the stock fresh", 5*time.Second,
		`!e.shown(e.q('offline-notice')) && !e.buy(`+itemJS+`).disabled && !e.stock(`+itemJS+`).classList.contains('stock-stale')`)
}

// recoverAndFindTheOrder: the network recovers; the page finds the order by itself and says it
// went through; offline again, Pay waits and the order's status says how old it is.
func recoverAndFindTheOrder(t *testing.T, h *harness, b *e2eTab, s saleIDs, v e2eViewport, dir, itemJS, orderID string) {
	t.Helper()
	// The page finds the order by itself and says it went through.
	if _, err := chromedp.Call(b.ctx, fetch.Disable, struct{}{}); err != nil {
		t.Fatalf("stop intercepting: %v", err)
	}
	b.waitFor("the order box shows the order that went through, and the message says so", 15*time.Second,
		`window.__shop.orders().length === 1 && window.__shop.orders()[0].id === '`+orderID+`' && window.__shop.orders()[0].status === 'PENDING'
		&& window.__shop.item('`+itemJS+`').button === 'Ordered'
		&& e.messages.includes('Your purchase of item 0 went through after all: the order is below.') && e.q('message').getAttribute('data-kind') === 'ok'`)

	// Offline: the notice shows, Pay waits, the order's status says how old it is.
	const boxPart = `document.querySelector('[data-testid="sale-order-list"] [data-testid="%s"]')`
	pay, note := fmt.Sprintf(boxPart, "pay-button"), fmt.Sprintf(boxPart, "order-note")
	setOffline(t, b, true)
	b.waitFor("the offline notice, a waiting Pay button and a dated status", 5*time.Second,
		`e.shown(e.q('offline-notice')) && e.shown(`+pay+`) && `+pay+`.disabled
		&& /^You are offline; the status shown is from \d\d:\d\d:\d\d\.$/.test(e.text(`+note+`))`)
	b.do("scroll to the top and let the buttons' colours settle", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`), chromedp.Sleep(300*time.Millisecond))
	b.screenshot(dir, "offline-"+v.name+".png", "")
	setOffline(t, b, false)
	b.waitFor("back online: the notice goes, the order can be paid", 10*time.Second,
		`!e.shown(e.q('offline-notice')) && !`+pay+`.disabled
		&& e.text(`+note+`) === 'Reserved for you. Pay before the deadline or the unit goes back on sale.'`)
	b.checkConsole()
	h.checkInvariants(s)
}

// followTheLinkToMyOrders: the sale page still cannot look: the message stays, and its link leads
// to "My orders", which lists the order.
func followTheLinkToMyOrders(t *testing.T, h *harness, b *e2eTab, s saleIDs, v e2eViewport, dir, orderID, lost string) {
	t.Helper()
	// The sale page still cannot look: the message stays, and its link leads to "My orders",
	// which lists the order.
	b.do("let the sale page look for the order", chromedp.Sleep(time.Second))
	var msg struct{ Text, Kind, Href string }
	decodeJSON(t, e2eEval[json.RawMessage](b, "the message", `({text: e.text(e.q('message')), kind: e.q('message').getAttribute('data-kind'),
		href: e.q('lost-order-link') && e.q('lost-order-link').getAttribute('href')})`), &msg)
	if msg.Text != lost || msg.Kind != "error" || msg.Href != "/orders" {
		b.fatalf("message %+v while the order cannot be seen, want the lost answer's %q (error) with its link to /orders", msg, lost)
	}
	b.do("scroll to the top", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	b.screenshot(dir, "lost-answer-"+v.name+".png", "")
	b.do("follow the link to My orders", chromedp.Click(e2eTestID("lost-order-link")))
	b.waitNavigated("/orders")
	b.waitFor("My orders lists the order", 10*time.Second,
		`e.qa('order-row').length === 1 && e.qa('order-row')[0].getAttribute('data-order-id') === '`+orderID+`'
		&& e.qa('order-row')[0].getAttribute('data-status') === 'PENDING'`)
	b.screenshot(dir, "lost-answer-orders-"+v.name+".png", "")
	b.checkConsole()
	h.checkInvariants(s)
}

// decodeJSON decodes what a waitFor returned.
func decodeJSON(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
}

func setOffline(t *testing.T, b *e2eTab, offline bool) {
	t.Helper()
	if _, err := chromedp.Call(b.ctx, network.OverrideNetworkState, network.OverrideNetworkStateParams{
		Offline: offline, DownloadThroughput: -1, UploadThroughput: -1}); err != nil {
		t.Fatalf("%s: set offline=%v: %v", b.name, offline, err)
	}
}

// waitNavigated waits until the tab has loaded a document at path (after a click on a link: a
// poll that runs while the page changes fails, so it asks again).
func (b *e2eTab) waitNavigated(path string) {
	b.t.Helper()
	err := testenv.Poll(10*time.Second, testenv.PollInterval, func() error {
		ctx, cancel := context.WithTimeout(b.ctx, time.Second)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.readyState === 'complete' && window.__e2e ? location.pathname : ''`))
		cancel()
		if err == nil && got == path {
			return nil
		}
		return fmt.Errorf("last: %q, %v", got, err)
	})
	if err != nil {
		b.fatalf("no document at %s: %v", path, err)
	}
}
