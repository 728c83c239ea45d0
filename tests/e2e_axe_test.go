package tests

import (
	"context"
	_ "embed"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale/services/auth"
)

// axe-core, vendored with its licence (testdata/axe: axe.min.js, LICENSE, README).
//
//go:embed testdata/axe/axe.min.js
var axeJS string

// e2eAxeViolation is one rule axe found broken, with the elements that break it.
type e2eAxeViolation struct {
	ID    string `json:"id"`
	Help  string `json:"help"`
	Nodes []struct {
		Target  []any  `json:"target"`
		Summary string `json:"failureSummary"`
	} `json:"nodes"`
}

// TestE2EAccessibilityDesktop: every page passes axe-core with no violation (its default rules: WCAG 2.x A and AA, and its
// best practices), signed out and signed in (a shopper on the shopper's pages, the merchant on
// the merchant's), in English and in Chinese: the home page, a sale before its start and a live
// one, My orders, an order, the merchant's list, a sale's live view and orders list, the 404
// page. Each is checked once its script has drawn it (the session box settled), at desktop width
// and on a phone. Then the pages the script fills in from the API are opened again as the shopper
// who holds orders, with the API's answers held back (My orders, the order page, two live sale
// pages): none may move more than 0.05 when the answers come in. The desktop and the phone are
// two tests, each with its own server, so that they run side by side.
func TestE2EAccessibilityDesktop(t *testing.T) { e2eAccessibility(t, e2eViewports[0]) }

// TestE2EAccessibilityPhone is TestE2EAccessibilityDesktop on a phone.
func TestE2EAccessibilityPhone(t *testing.T) { e2eAccessibility(t, e2eViewports[1]) }

func e2eAccessibility(t *testing.T, v e2eViewport) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	h := newHarness(t, harnessOpts{})
	suffix := fmt.Sprint(time.Now().UnixNano() % 1e9)

	// The merchant and a sale of its own (its live view and its orders).
	merchantName, merchantPass := "axe_merchant_"+suffix, "axe merchant password"
	m, err := h.app.Auth.AddUser(ctx, merchantName, merchantPass, auth.RoleMerchant)
	if err != nil {
		t.Fatalf("add the merchant: %v", err)
	}
	own := e2eMerchantSale(h, m.ID, "Merchant's sale", "CNY", map[string]int64{"Lamp": 8800})
	// with a fair start: its live view shows the draw's panel (no entries yet)
	if r := h.do("PATCH", fmt.Sprintf("/api/admin/sales/%d", own.sale), h.token(m.ID, auth.RoleMerchant), map[string]any{"fairStartMillis": 3000}); r.Status != http.StatusOK {
		t.Fatalf("give the merchant's sale a fair start: %d %s", r.Status, r.Raw)
	}

	// A sale before its start, a live one, and a shopper's order in the live one.
	upcoming := h.createSaleWith(map[string]any{"name": "Autumn sale", "fairStartMillis": 2500}, time.Now().Add(time.Hour), 5, 3)
	live := h.createSaleWith(map[string]any{"name": "Spring sale"}, time.Now().Add(-time.Second), 5, 3)
	reg := h.do("POST", "/api/auth/register", "", map[string]string{"username": "axe_shopper_" + suffix, "password": "axe shopper password", "captchaId": "c", "answer": "test"})
	if reg.Status != http.StatusCreated {
		t.Fatalf("register: %d %s", reg.Status, reg.Raw)
	}
	tok := reg.str("token")
	bought := h.buy(tok, live.items[0], h.purchaseToken(tok, live.sale))
	if bought.Status != http.StatusAccepted {
		t.Fatalf("buy: %d %s", bought.Status, bought.Raw)
	}
	orderID := bought.str("orderId")
	h.drain(live)
	// A sale as make audit's (its items, their names and prices), where the shopper holds an order
	// too: the items' notes say so, and the longer names wrap them as on that page.
	summer := h.createSaleWith(map[string]any{"name": "Summer sale", "items": []map[string]any{
		{"name": "Limited sneakers", "priceCents": 49900, "quantity": 100},
		{"name": "Wireless earbuds", "priceCents": 9900, "quantity": 1000},
		{"name": "Coffee beans 250 g", "priceCents": 1999, "quantity": 10000},
	}}, time.Now().Add(-time.Second), 0)
	if got := h.buy(tok, summer.items[0], h.purchaseToken(tok, summer.sale)); got.Status != http.StatusAccepted {
		t.Fatalf("buy in the summer sale: %d %s", got.Status, got.Raw)
	}
	h.drain(summer)
	login := h.do("POST", "/api/auth/login", "", map[string]string{"username": merchantName, "password": merchantPass})
	if login.Status != http.StatusOK {
		t.Fatalf("merchant login: %d %s", login.Status, login.Raw)
	}

	// The simulated payment provider's page of the order.
	checkout := h.do("POST", "/api/flash-sales/orders/"+orderID+"/checkout", tok, nil)
	if checkout.Status != http.StatusOK {
		t.Fatalf("checkout: %d %s", checkout.Status, checkout.Raw)
	}
	// The states the easy paths never reach (issue 33, item 3): the shopper's orders paid,
	// cancelled, and expired with a late payment refunded, each on its order page and together on
	// My orders; a sale paused, one ended, one sold out; the merchant's live view during a sale
	// with orders in every state and after it, its orders list, a paused sale's live view.
	states := shopperOrdersInEveryState(h, tok)
	during, ended := merchantSalesWithOrders(h, m.ID)
	paused := h.liveSale(5)
	if r := h.do("POST", fmt.Sprintf("/api/admin/sales/%d/pause", paused.sale), h.token(9000, auth.RoleMerchant), map[string]any{}); r.Status != http.StatusOK {
		t.Fatalf("pause: %d %s", r.Status, r.Raw)
	}
	pausedOwn := e2eMerchantSale(h, m.ID, "Paused sale", "CNY", map[string]int64{"Vase": 2500})
	if r := h.do("POST", fmt.Sprintf("/api/admin/sales/%d/pause", pausedOwn.sale), h.token(m.ID, auth.RoleMerchant), map[string]any{}); r.Status != http.StatusOK {
		t.Fatalf("pause the merchant's sale: %d %s", r.Status, r.Raw)
	}
	soldOut := h.liveSale(1)
	if r := h.buy(h.token(7200, auth.RoleShopper), soldOut.items[0], h.purchaseToken(h.token(7200, auth.RoleShopper), soldOut.sale)); r.Status != http.StatusAccepted {
		t.Fatalf("buy the last unit: %d %s", r.Status, r.Raw)
	}
	h.drain(soldOut)

	shopperPages := []string{"/", fmt.Sprintf("/sales/%d", upcoming.sale), fmt.Sprintf("/sales/%d", live.sale), "/orders", "/orders/" + orderID,
		checkout.str("checkoutUrl"), "/no-such-page",
		"/orders/" + states["paid"], "/orders/" + states["cancelled"], "/orders/" + states["refunded"],
		fmt.Sprintf("/sales/%d", paused.sale), fmt.Sprintf("/sales/%d", ended.sale), fmt.Sprintf("/sales/%d", soldOut.sale)}
	merchantPages := []string{"/admin", fmt.Sprintf("/admin/sales/%d", own.sale), fmt.Sprintf("/admin/sales/%d/orders", own.sale),
		fmt.Sprintf("/admin/sales/%d", during.sale), fmt.Sprintf("/admin/sales/%d/orders", during.sale), fmt.Sprintf("/admin/sales/%d", ended.sale),
		fmt.Sprintf("/admin/sales/%d", pausedOwn.sale)}
	sessions := []struct {
		name   string
		header http.Header
		pages  []string
	}{
		{"signed out", nil, append(append([]string{}, shopperPages...), merchantPages...)},
		{"shopper", reg.Header, shopperPages},
		{"merchant", login.Header, merchantPages},
	}

	browserCtx := startE2EBrowser(t, ctx)
	var failures []string
	b := openShopperTab(t, browserCtx, v, "axe")
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: e2eLayoutShiftJS}); err != nil {
		b.fatalf("install the layout-shift recorder: %v", err)
	}
	for _, s := range sessions {
		if _, err := chromedp.Call(b.ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
			b.fatalf("clear cookies: %v", err)
		}
		if s.header != nil {
			b.takeCookies(h, s.header)
		}
		for _, lang := range []string{"en", "zh"} {
			for _, p := range s.pages {
				url := h.srv.URL + p + "?lang=" + lang
				for _, f := range b.axe(url) {
					failures = append(failures, fmt.Sprintf("%s, %s, %s %s: %s", v.name, s.name, lang, p, f))
				}
			}
		}
	}
	if len(failures) > 0 {
		t.Errorf("axe-core found %d violations:\n%s", len(failures), strings.Join(failures, "\n"))
	}

	// The pages the script fills in from the API, as the shopper who holds an order, with the
	// API's answers late (as on a phone network, or in Lighthouse): the page is drawn first, then
	// the list, the order or the items' notes come in, and nothing may move more than 0.05 when
	// they do. Each waits until the answer is drawn before the shift is read.
	slow := []struct{ path, drawn string }{
		{"/orders", `e.qa('order-row').length > 0 && e.text(e.q('order-row-status')) !== ''`},
		{"/orders/" + orderID, `e.q('order-status').getAttribute('data-status') === 'PENDING' && e.shown(e.q('order-actions'))`},
		{fmt.Sprintf("/sales/%d", live.sale), `e.qa('item-note').some((n) => e.text(n) !== '') && e.shown(e.q('sale-orders'))`},
		{fmt.Sprintf("/sales/%d", summer.sale), `e.qa('item-note').every((n) => e.text(n) !== '') && e.shown(e.q('sale-orders'))`},
	}
	var shifts []string
	late := openShopperTab(t, browserCtx, v, "late answers")
	if _, err := chromedp.Call(late.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: e2eLayoutShiftJS}); err != nil {
		late.fatalf("install the layout-shift recorder: %v", err)
	}
	late.lateAPI(h, 600*time.Millisecond)
	late.takeCookies(h, reg.Header)
	for _, lang := range []string{"en", "zh"} {
		for _, p := range slow {
			url := h.srv.URL + p.path + "?lang=" + lang
			sum, nodes := late.layoutShift(url, p.drawn)
			t.Logf("%s, shopper with an order, late answers, %s %s: layout shift %.3f %v", v.name, lang, p.path, sum, nodes)
			if sum > e2eMaxLayoutShift {
				shifts = append(shifts, fmt.Sprintf("%s, %s %s: layout shift %.3f (over %.2f) while the answers came in: %v", v.name, lang, p.path, sum, e2eMaxLayoutShift, nodes))
			}
		}
	}
	// The merchant's pages with real data behind them, answers late too: the list (a sale to come,
	// one live with orders in every state, one ended), the edit form, the live view during the sale
	// and after it, and the orders list.
	mlate := openShopperTab(t, browserCtx, v, "merchant, late answers")
	if _, err := chromedp.Call(mlate.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: e2eLayoutShiftJS}); err != nil {
		mlate.fatalf("install the layout-shift recorder: %v", err)
	}
	mlate.lateAPI(h, 600*time.Millisecond)
	mlate.takeCookies(h, login.Header)
	signedIn := `e.shown(e.q('session-user')) && `
	merchantSlow := []struct{ path, drawn string }{
		{"/admin", signedIn + `e.qa('admin-sale').length === 4`},
		{fmt.Sprintf("/admin?edit=%d", own.sale), signedIn + `e.q('create-sale-form').getAttribute('data-mode') === 'edit'`},
		// started, two items: the rows, and the hints of what can no longer change
		{fmt.Sprintf("/admin?edit=%d", during.sale), signedIn + `e.q('create-sale-form').getAttribute('data-mode') === 'edit' && e.shown(e.q('starts-at-locked')) && e.qa('item-row').length === 2`},
		{fmt.Sprintf("/admin/sales/%d", during.sale), signedIn + `/^Updated /.test(e.text(e.q('live-updated')))`},
		{fmt.Sprintf("/admin/sales/%d", ended.sale), signedIn + `/^Updated /.test(e.text(e.q('live-updated')))`},
		{fmt.Sprintf("/admin/sales/%d/orders", during.sale), signedIn + `e.q('orders-rows').children.length === 4`},
	}
	for _, p := range merchantSlow {
		sum, nodes := mlate.layoutShift(h.srv.URL+p.path, p.drawn)
		t.Logf("%s, merchant, late answers, %s: layout shift %.3f %v", v.name, p.path, sum, nodes)
		if sum > e2eMaxLayoutShift {
			shifts = append(shifts, fmt.Sprintf("%s, merchant %s: layout shift %.3f (over %.2f) while the answers came in: %v", v.name, p.path, sum, e2eMaxLayoutShift, nodes))
		}
	}
	if len(shifts) > 0 {
		t.Errorf("pages moved as the API's answers came in:\n%s", strings.Join(shifts, "\n"))
	}
}

// lateAPI holds back every answer of the API by delay (the page, its stylesheet and scripts come
// at once): the page is drawn before what its script asks for arrives.
func (b *e2eTab) lateAPI(h *harness, delay time.Duration) {
	b.t.Helper()
	if _, err := chromedp.Call(b.ctx, network.Enable, network.EnableParams{}); err != nil {
		b.fatalf("enable the network domain: %v", err)
	}
	if _, err := chromedp.Call(b.ctx, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{
		MatchedNetworkConditions: []*network.Conditions{{URLPattern: h.srv.URL + "/api/*", Latency: float64(delay.Milliseconds()), DownloadThroughput: -1, UploadThroughput: -1}},
	}); err != nil {
		b.fatalf("delay the API's answers: %v", err)
	}
}

// layoutShift opens url, waits until drawn (a JavaScript expression over window.__e2e as e) is
// true, and returns the layout shifts added up since the page began (e2eLayoutShiftJS) and what
// moved.
func (b *e2eTab) layoutShift(url, drawn string) (float64, []string) {
	b.t.Helper()
	b.do("open "+url, chromedp.Navigate(url))
	b.waitFor("the answers drawn: "+url, 15*time.Second, `document.readyState === 'complete' && (`+drawn+`)`)
	time.Sleep(300 * time.Millisecond) // the frame after the last answer
	type shift struct {
		Sum   float64  `json:"sum"`
		Nodes []string `json:"nodes"`
	}
	cls := e2eEval[shift](b, "the layout shifts", `window.__cls`)
	return cls.Sum, cls.Nodes
}

// e2eLayoutShiftJS adds up the page's layout shifts not caused by input, as Lighthouse's CLS
// does for a page that settles within a second or two (it keeps the worst window of shifts; a
// sum is never below it).
const e2eLayoutShiftJS = `window.__cls = { sum: 0, nodes: [] };
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    if (e.hadRecentInput) { continue; }
    window.__cls.sum += e.value;
    for (const s of e.sources || []) {
      const n = s.node;
      const r = (b) => Math.round(b.y) + '+' + Math.round(b.height);
      window.__cls.nodes.push(e.value.toFixed(3) + ' ' + (n && n.nodeType === 1 ? n.tagName.toLowerCase() + (n.id ? '#' + n.id : '') + (n.className ? '.' + String(n.className).split(' ').join('.') : '') : String(n && n.nodeName)) +
        ' (' + r(s.previousRect) + ' → ' + r(s.currentRect) + ' at ' + Math.round(performance.now()) + ' ms)');
    }
  }
}).observe({ type: 'layout-shift', buffered: true });`

// e2eMaxLayoutShift is the most a page may move while its script draws it (Lighthouse's "good"
// CLS is 0.1; make audit holds the pages under 0.05).
const e2eMaxLayoutShift = 0.05

// axe opens url, waits until its script has drawn it (the document loaded, the session box
// settled, nothing left marked busy), runs axe-core on it and returns each violation in a line:
// the rule, what it asks, and each element that breaks it with axe's summary.
func (b *e2eTab) axe(url string) []string {
	b.t.Helper()
	b.do("open "+url, chromedp.Navigate(url))
	// Settled: nothing changed for 300 ms and no transition runs (a button just enabled fades
	// from grey to red in 150 ms: axe would read its colours half-way).
	b.waitFor("the page drawn: "+url, 15*time.Second, `document.readyState === 'complete'
		&& (!e.q('session') || e.shown(e.q('session-user')) || e.shown(e.q('login-form')))
		&& !document.querySelector('[aria-busy="true"]')
		&& performance.now() - e.changedAt > 300
		&& document.getAnimations().every((a) => a.playState !== 'running' || a.effect.getComputedTiming().iterations === Infinity)`)
	type shift struct {
		Sum   float64  `json:"sum"`
		Nodes []string `json:"nodes"`
	}
	var lines []string
	if cls := e2eEval[shift](b, "the layout shifts", `window.__cls || { sum: 0, nodes: [] }`); cls.Sum > e2eMaxLayoutShift {
		lines = append(lines, fmt.Sprintf("layout shift %.3f (over %.2f) while the script drew the page: %v", cls.Sum, e2eMaxLayoutShift, cls.Nodes))
	}
	b.do("inject axe-core", chromedp.Evaluate[chromedp.Void](axeJS))
	out, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]e2eAxeViolation](`axe.run(document, {resultTypes: ['violations']}).then((r) => r.violations)`, chromedp.EvalAwaitPromise))
	if err != nil {
		b.fatalf("run axe-core on %s: %v", url, err)
	}
	for _, v := range out {
		for _, n := range v.Nodes {
			lines = append(lines, fmt.Sprintf("%s (%s) at %v: %s", v.ID, v.Help, n.Target, strings.ReplaceAll(n.Summary, "\n", " ")))
		}
	}
	return lines
}

// merchantSalesWithOrders gives the merchant a live sale with an order in each state a shopper
// can leave one (awaiting payment, paid, cancelled, expired) and a sale that has ended.
func merchantSalesWithOrders(h *harness, merchantID int64) (during, ended saleIDs) {
	h.t.Helper()
	ctx := context.Background()
	mtok := h.token(merchantID, auth.RoleMerchant)
	create := func(name string, starts, ends time.Time) saleIDs {
		r := h.do("POST", "/api/admin/sales", mtok, map[string]any{"name": name, "startsAt": starts.UTC().Format(time.RFC3339),
			"endsAt": ends.UTC().Format(time.RFC3339), "items": []map[string]any{{"name": "Kettle", "priceCents": 3900, "quantity": 20}, {"name": "Teapot", "priceCents": 5900, "quantity": 20}}})
		if r.Status != http.StatusCreated {
			h.t.Fatalf("create %s: %d %s", name, r.Status, r.Raw)
		}
		return saleIDsOf(r)
	}
	during = create("Tea week", time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	ended = create("Last week's tea", time.Now().Add(-time.Second), time.Now().Add(time.Hour))
	var ids []string
	for i, s := range []saleIDs{during, during, during, during, ended, ended} {
		id, _ := h.pendingOrder(int64(7100+i), s, s.items[i%2])
		ids = append(ids, id)
	}
	bearer := func(i int) string { return h.token(int64(7100+i), auth.RoleShopper) }
	h.payOnProvider(ids[1], bearer(1))
	h.payOnProvider(ids[4], bearer(4))
	if r := h.do("POST", "/api/flash-sales/orders/"+ids[2]+"/cancel", bearer(2), nil); r.Status != http.StatusOK {
		h.t.Fatalf("cancel: %d %s", r.Status, r.Raw)
	}
	h.exec(`UPDATE orders SET pay_by = now() - interval '1 second' WHERE id IN (?, ?)`, ids[3], ids[5])
	if err := h.app.KeeperPass(ctx); err != nil {
		h.t.Fatalf("keeper pass: %v", err)
	}
	// Ended: its end moved into the past (a sale cannot be created so).
	h.exec(`UPDATE sales SET starts_at = now() - interval '2 hours', ends_at = now() - interval '1 minute' WHERE id = ?`, ended.sale)
	h.mu.Lock()
	h.acked = append(h.acked, ids...)
	h.mu.Unlock()
	return during, ended
}

// shopperOrdersInEveryState gives the shopper (bearer tok) an order paid, one cancelled, and one
// that expired and whose payment came too late and was refunded, each in a sale of its own.
func shopperOrdersInEveryState(h *harness, tok string) map[string]string {
	h.t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	for _, name := range []string{"paid", "cancelled", "refunded"} {
		s := h.liveSale(5)
		r := h.buy(tok, s.items[0], h.purchaseToken(tok, s.sale))
		if r.Status != http.StatusAccepted {
			h.t.Fatalf("buy (%s): %d %s", name, r.Status, r.Raw)
		}
		out[name] = r.str("orderId")
		h.drain(s)
	}
	h.payOnProvider(out["paid"], tok)
	if r := h.do("POST", "/api/flash-sales/orders/"+out["cancelled"]+"/cancel", tok, nil); r.Status != http.StatusOK {
		h.t.Fatalf("cancel: %d %s", r.Status, r.Raw)
	}
	late := out["refunded"]
	h.latePayment(late, tok)
	h.app.Payments.Pass(ctx)
	h.mu.Lock()
	h.acked = append(h.acked, out["paid"], out["cancelled"], late)
	h.mu.Unlock()
	return out
}
