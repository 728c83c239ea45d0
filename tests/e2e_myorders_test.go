package tests

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/flashsale/flashsale/services/pipeline"
)

// The browser test of "My orders" with a QUEUED order (issue 18, item 11), on a desktop and on a
// 390-pixel phone: a shopper with a recorded order in one sale and one acknowledged but not yet
// recorded in another opens /orders; the queued one is listed at once, first, in words
// ("Confirming", the note and the place in line; in Chinese too on the phone), with its item,
// price and sale, beside the recorded one; once the writer runs it turns "Awaiting payment" with
// its deadline by itself, without a reload. Before, the list showed only the recorded order.
// Screenshots go to docs/screenshots/ (queue-orders-*.png).
func TestE2EMyOrdersQueued(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	browserCtx := startE2EBrowser(t, ctx)
	openE2ETab(t, browserCtx, "warm-up")
	dir := e2eShotDir(t)
	for _, v := range e2eViewports {
		t.Run(v.name, func(t *testing.T) {
			myOrdersQueuedFlow(t, browserCtx, v, dir)
		})
	}
}

// e2eOrderRow is one row of "My orders" as the page shows it.
type e2eOrderRow struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Words    string `json:"words"`
	Item     string `json:"item"`
	Price    string `json:"price"`
	Sale     string `json:"sale"`
	Deadline string `json:"deadline"` // "" when hidden
	Note     string `json:"note"`
	Created  string `json:"created"`
	Link     string `json:"link"`
	Href     string `json:"href"`
}

const e2eOrderRowsJS = `e.qa('order-row').map((li) => {
  const p = (id) => li.querySelector('[data-testid="' + id + '"]');
  return { id: li.getAttribute('data-order-id'), status: li.getAttribute('data-status'), words: e.text(p('order-row-status')),
    item: e.text(p('order-row-item')), price: e.text(p('order-row-price')), sale: e.text(p('order-row-sale')),
    deadline: e.shown(p('order-row-deadline')) ? e.text(p('order-row-deadline')) : '', note: e.text(p('order-row-note')),
    created: e.text(p('order-row-created')), link: e.text(p('order-row-link')), href: p('order-row-link').getAttribute('href') };
})`

func myOrdersQueuedFlow(t *testing.T, browserCtx context.Context, v e2eViewport, dir string) {
	ctx := context.Background()
	h := newHarness(t, harnessOpts{noWriter: true})
	earlier := h.createSaleWith(map[string]any{"name": "Spring sale"}, time.Now().Add(-time.Second), 10)
	s := h.createSaleWith(map[string]any{"name": "Midnight sale"}, time.Now().Add(-time.Second), 10)

	// A shopper registered through the API, signed in in the browser by its session cookies.
	username := "queued_" + v.name[:1] + "_" + fmt.Sprint(time.Now().UnixNano()%1e9)
	reg := h.do("POST", "/api/auth/register", "", map[string]string{"username": username, "password": "a queued shopper's password", "captchaId": "c", "answer": "test"})
	if reg.Status != http.StatusCreated {
		t.Fatalf("register: %d %s", reg.Status, reg.Raw)
	}
	tok := reg.str("token")
	b := openShopperTab(t, browserCtx, v, "my orders")
	b.takeCookies(h, reg.Header)

	// One order recorded (a writer runs for it, then stops), then one acknowledged while no
	// writer runs: QUEUED.
	buy := func(s saleIDs) string {
		t.Helper()
		r := h.buy(tok, s.items[0], h.purchaseToken(tok, s.sale))
		if r.Status != http.StatusAccepted {
			t.Fatalf("buy in sale %d: %d %s", s.sale, r.Status, r.Raw)
		}
		return r.str("orderId")
	}
	recorded := buy(earlier)
	runWriterUntilDrained(h, earlier)
	queued := buy(s)

	rows := func() []e2eOrderRow { return e2eEval[[]e2eOrderRow](b, "the order rows", e2eOrderRowsJS) }
	b.do("open My orders", chromedp.Navigate(h.srv.URL+"/orders"))
	b.waitFor("the queued order is listed with its place in line", 15*time.Second,
		`e.qa('order-row').length === 2 && e.qa('order-row')[0].getAttribute('data-status') === 'QUEUED'
		&& /in line/.test(e.text(e.qa('order-row')[0].querySelector('[data-testid="order-row-note"]')))`)
	checkQueuedAndRecordedRows(b, rows(), queued, recorded)
	if e2eEval[bool](b, "sideways scrolling", `document.documentElement.scrollWidth > window.innerWidth`) {
		b.fatalf("the page scrolls sideways at %d px", v.width)
	}
	b.screenshot(dir, "queue-orders-"+v.name+".png", "")

	if v.mobile {
		checkQueuedInChinese(b, h, v, dir)
	}

	// The writer runs: the queued row turns PENDING by itself, with its deadline.
	h.app.Start(ctx, true, false)
	b.waitFor("the queued order turns PENDING without a reload", 20*time.Second,
		`(() => { const li = e.qa('order-row')[0]; const p = (id) => li.querySelector('[data-testid="' + id + '"]');
		  return li.getAttribute('data-order-id') === '`+queued+`' && li.getAttribute('data-status') === 'PENDING'
		    && e.text(p('order-row-status')) === 'Awaiting payment' && e.shown(p('order-row-deadline'))
		    && e.text(p('order-row-link')) === 'Pay or cancel'; })()`)
	if n := e2eEval[int](b, "the rows", `e.qa('order-row').length`); n != 2 {
		b.fatalf("%d rows once recorded, want the same 2", n)
	}
	b.screenshot(dir, "queue-orders-recorded-"+v.name+".png", "")
	b.checkConsole()
	h.checkInvariants(s)
	h.checkInvariants(earlier)
}

// takeCookies sets the cookies of an answer's header (a session's) in the tab, for the harness's
// site.
func (b *e2eTab) takeCookies(h *harness, header http.Header) {
	t := b.t
	t.Helper()
	for _, c := range (&http.Response{Header: header}).Cookies() {
		if _, err := chromedp.Call(b.ctx, network.SetCookie, network.SetCookieParams{
			Name: c.Name, Value: c.Value, URL: h.srv.URL, Path: "/", HTTPOnly: &c.HttpOnly}); err != nil {
			t.Fatalf("set cookie %s: %v", c.Name, err)
		}
	}
}

// runWriterUntilDrained runs a writer of its own until the sale's queue is drained, then stops it.
func runWriterUntilDrained(h *harness, s saleIDs) {
	ctx := context.Background()
	wctx, stop := context.WithCancel(ctx)
	w := pipeline.NewWriter(pipeline.WriterConfig{Workers: 1, MaxWait: 200 * time.Millisecond}, h.app.Queue, h.app.DB, h.app.Stock, h.app.SoldOut, h.app.Metrics, h.app.Log)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_ = w.Run(wctx)
	}()
	h.drain(s)
	stop()
	<-stopped
}

// checkQueuedAndRecordedRows checks "My orders": the queued order first, Confirming, with its
// place in line and no deadline; then the recorded one, awaiting payment with its deadline.
func checkQueuedAndRecordedRows(b *e2eTab, got []e2eOrderRow, queued, recorded string) {
	b.t.Helper()
	q, p := got[0], got[1]
	noteRe := regexp.MustCompile(`^Your unit is reserved; the order is being recorded\. You are number 1 in line, about \d+ seconds?\.$`)
	if q.ID != queued || q.Words != "Confirming" || q.Item != "item 0" || !strings.Contains(q.Price, "10.00") || q.Sale != "Midnight sale" ||
		q.Deadline != "" || !noteRe.MatchString(q.Note) || !strings.HasPrefix(q.Created, "Ordered ") || q.Link != "View order" || q.Href != "/orders/"+queued {
		b.fatalf("the queued row: %+v; want %s, Confirming, item 0 at 10.00 of Midnight sale, no deadline, the note %q, Ordered …, View order", q, queued, noteRe)
	}
	if p.ID != recorded || p.Status != "PENDING" || p.Words != "Awaiting payment" || p.Deadline == "" || p.Price != q.Price || p.Sale != "Spring sale" {
		b.fatalf("the recorded row: %+v; want %s, Awaiting payment with its deadline, in Spring sale", p, recorded)
	}
}

// checkQueuedInChinese checks the same words in Chinese, then goes back to English.
func checkQueuedInChinese(b *e2eTab, h *harness, v e2eViewport, dir string) {
	b.t.Helper()
	b.do("open My orders in Chinese", chromedp.Navigate(h.srv.URL+"/orders?lang=zh"))
	b.waitFor("the queued order in Chinese", 15*time.Second,
		`document.documentElement.lang === 'zh-CN' && e.qa('order-row').length === 2
		&& e.text(e.qa('order-row')[0].querySelector('[data-testid="order-row-status"]')) === '确认中'
		&& /^已为你锁定商品，正在生成订单。你排在第 1 位，预计还需约 \d+ 秒。$/.test(e.text(e.qa('order-row')[0].querySelector('[data-testid="order-row-note"]')))
		&& e.text(e.qa('order-row')[1].querySelector('[data-testid="order-row-status"]')) === '待支付'`)
	if e2eEval[bool](b, "sideways scrolling", `document.documentElement.scrollWidth > window.innerWidth`) {
		b.fatalf("the Chinese page scrolls sideways at %d px", v.width)
	}
	b.screenshot(dir, "queue-orders-zh-"+v.name+".png", "")
	b.do("back to English", chromedp.Navigate(h.srv.URL+"/orders?lang=en"))
	b.waitFor("the queued order in English again", 15*time.Second,
		`document.documentElement.lang === 'en' && e.qa('order-row').length === 2 && e.qa('order-row')[0].getAttribute('data-status') === 'QUEUED'`)
}
