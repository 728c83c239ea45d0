package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// The browser test of the shopper's pages as a person sees them (issue 13): on a desktop and on
// a 390-pixel phone, a shopper buys two items of a per-item sale and the sale page's order box
// lists both orders with item, price, status in words, deadline and "Pay now · ¥…" (points 3
// and 5); the items held say "Ordered"/"Bought", known from the orders list without a captcha,
// and a per-sale sale says why its other items cannot be bought (4); paying too late says
// "expired" and the server holds it expired, after a reload too (1); the stock badge never shows
// the count from before one's own purchase, and the "queued" words go once the order is
// confirmed (2); Enter in the captcha field submits it (7); the order page logged out shows a
// login form, no endless "checking…", and the order once logged in (6). Screenshots of the sale
// page and the order page go to docs/screenshots/.

// e2eShopperJS runs in every document of a shopper's tab, beside e2eRecorderJS: the successive
// texts of every stock badge, and readers of the order box and the items.
const e2eShopperJS = `(() => {
  if (window.__shop) { return; }
  const t = (el) => el ? el.textContent.replace(/\s+/g, ' ').trim() : null;
  const vis = (el) => !!el && el.getClientRects().length > 0;
  const s = window.__shop = { stocks: {} };
  s.orders = () => Array.from(document.querySelectorAll('[data-testid="sale-order-list"] > [data-testid="order"]')).map((li) => {
    const p = (id) => li.querySelector('[data-testid="' + id + '"]');
    return { id: li.getAttribute('data-order-id'), item: t(p('order-item')), price: t(p('order-price')),
      status: p('order-status').getAttribute('data-status'), words: t(p('order-status')),
      payBy: vis(p('pay-by-row')) ? t(p('pay-by-row')) : '', pay: vis(p('pay-button')) ? t(p('pay-button')) : '',
      cancel: vis(p('cancel-button')), link: p('order-link').getAttribute('href'), shown: vis(li) };
  });
  s.item = (id) => {
    const li = document.querySelector('[data-testid="item"][data-item-id="' + id + '"]');
    const b = li.querySelector('[data-testid="buy-button"]');
    const note = li.querySelector('[data-testid="item-note"]');
    return { button: t(b), disabled: b.disabled, stock: t(li.querySelector('[data-testid="stock"]')), note: vis(note) ? t(note) : '' };
  };
  const scan = () => {
    for (const el of document.querySelectorAll('[data-testid="stock"]')) {
      const id = el.getAttribute('data-item-id');
      const l = s.stocks[id] || (s.stocks[id] = []);
      const v = t(el);
      if (l[l.length - 1] !== v) { l.push(v); }
    }
  };
  new MutationObserver(scan).observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
})()`

type e2eViewport struct {
	name          string
	width, height int64
	mobile        bool
}

// e2eBoxOrder is one order of the sale page's order box, as e2eShopperJS reads it.
type e2eBoxOrder struct {
	ID     string `json:"id"`
	Item   string `json:"item"`
	Price  string `json:"price"`
	Status string `json:"status"`
	Words  string `json:"words"`
	PayBy  string `json:"payBy"`
	Pay    string `json:"pay"`
	Cancel bool   `json:"cancel"`
	Link   string `json:"link"`
	Shown  bool   `json:"shown"`
}

type e2eItemView struct {
	Button   string `json:"button"`
	Disabled bool   `json:"disabled"`
	Stock    string `json:"stock"`
	Note     string `json:"note"`
}

// openShopperTab opens a tab in a fresh browser context (its own cookies and storage) at the
// viewport's size.
func openShopperTab(t *testing.T, browserCtx context.Context, v e2eViewport, name string) *e2eTab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	b := openE2ETab(t, ctx, name+" ("+v.name+")")
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: e2eShopperJS}); err != nil {
		t.Fatalf("%s: install the shopper recorder: %v", b.name, err)
	}
	var opts []chromedp.EmulateViewportOption
	if v.mobile {
		opts = append(opts, chromedp.EmulateScale(2), chromedp.EmulateMobile)
	}
	b.do("set the viewport", chromedp.EmulateViewport(v.width, v.height, opts...))
	return b
}

func (b *e2eTab) boxOrders() []e2eBoxOrder {
	b.t.Helper()
	return e2eEval[[]e2eBoxOrder](b, "the order box", `window.__shop.orders()`)
}

func (b *e2eTab) itemView(id int64) e2eItemView {
	b.t.Helper()
	return e2eEval[e2eItemView](b, "item "+strconv.FormatInt(id, 10), `window.__shop.item('`+strconv.FormatInt(id, 10)+`')`)
}

func e2eOrderButton(orderID, testid string) chromedp.CSS {
	return chromedp.CSS(fmt.Sprintf(`[data-testid="sale-order-list"] > [data-testid="order"][data-order-id=%q] [data-testid=%q]`, orderID, testid))
}

func TestE2EShopperPages(t *testing.T) {
	t.Parallel()
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	// The keeper is slowed down so that an order past its deadline stays PENDING until the
	// shopper presses Pay: the answer of the payment must then be what expires it.
	h := newHarness(t, harnessOpts{env: map[string]string{"FLASHSALE_KEEPER_INTERVAL": "1h"}})
	browserCtx := startE2EBrowser(t, ctx)
	warm := openE2ETab(t, browserCtx, "warm-up")
	warm.do("open the home page", chromedp.Navigate(h.srv.URL+"/"))

	dir := filepath.Join("..", "docs", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("create %s: %v", dir, err)
	}
	for _, v := range []e2eViewport{{"desktop", 1280, 900, false}, {"phone", 390, 844, true}} {
		t.Run(v.name, func(t *testing.T) {
			shopperFlow(t, h, browserCtx, v, dir)
		})
	}
	t.Logf("shopper pages in %v", time.Since(began).Round(time.Millisecond))
}

// shopperRun is the state of one shopperFlow: the shopper's tab (b) and account, the two sales
// (a per item, bSale per sale) and the orders placed in a (first: item 0, second: item 1).
type shopperRun struct {
	t                  *testing.T
	h                  *harness
	browserCtx         context.Context
	v                  e2eViewport
	dir                string
	a, bSale           saleIDs
	item0, item1       int64
	js0, js1           string
	saleURL            string
	b                  *e2eTab
	username, password string
	uid                int64
	first, second      e2eBoxOrder
}

func shopperFlow(t *testing.T, h *harness, browserCtx context.Context, v e2eViewport, dir string) {
	// Two live sales: A allows one unit per item, B one unit in the whole sale.
	a := h.createSaleWith(map[string]any{"purchaseLimit": "per-item"}, time.Now().Add(-time.Second), 5, 5)
	bSale := h.createSaleWith(map[string]any{"purchaseLimit": "per-sale"}, time.Now().Add(-time.Second), 3, 3)
	item0, item1 := a.items[0], a.items[1]
	js0, js1 := strconv.FormatInt(item0, 10), strconv.FormatInt(item1, 10)
	saleURL := fmt.Sprintf("%s/sales/%d", h.srv.URL, a.sale)

	b := openShopperTab(t, browserCtx, v, "shopper")
	b.openSalePage(saleURL)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	username, password := "shop_"+v.name[:1]+"_"+suffix, "a shopper's password"
	uid := b.register(username, password)

	// Enter in the captcha field with two items on sale: the answer is ready, Buy is next.
	b.solveCaptcha()
	b.waitFor("the stock of both items is shown", 10*time.Second,
		`window.__shop.item('`+js0+`').stock === '5 left' && window.__shop.item('`+js1+`').stock === '5 left'`)
	b.do("press Enter in the captcha field", chromedp.SendKeys(e2eTestID("captcha-answer"), "\r"))
	b.waitFor("Enter leads to the Buy buttons", 5*time.Second,
		`e.text(e.q('message')) === 'Answer ready: now press Buy on the item you want.' && document.activeElement === e.buy(`+js0+`)`)
	c := &shopperRun{t: t, h: h, browserCtx: browserCtx, v: v, dir: dir, a: a, bSale: bSale, item0: item0, item1: item1, js0: js0, js1: js1,
		saleURL: saleURL, b: b, username: username, password: password, uid: uid}

	c.firstPurchase()
	c.secondPurchase()
	c.payForItem1()
	c.orderPageAndPayingTooLate()
	c.perSaleSaleKnownWithoutCaptcha()
	c.saleEndsWhileOpen()
	c.orderPageLoggedOut()
}

// firstPurchase: item 0. The badge counts the unit at once and never goes back to 5.
func (c *shopperRun) firstPurchase() {
	h, item0, item1, js0, b := c.h, c.item0, c.item1, c.js0, c.b
	// 1st purchase: item 0. The badge counts the unit at once and never goes back to 5.
	b.do("click Buy on item 0", chromedp.Click(e2eBuyButton(item0)))
	b.waitFor("item 0's order is confirmed in the order box", 20*time.Second,
		`window.__shop.orders().length === 1 && window.__shop.orders()[0].status === 'PENDING'`)
	c.first = b.boxOrders()[0]
	first := c.first
	h.mu.Lock()
	h.acked = append(h.acked, first.ID)
	h.mu.Unlock()
	if first.Item != "item 0" || first.Price != "¥10.00" || first.Words != "Awaiting payment" || first.Pay != "Pay now · ¥10.00" ||
		!first.Cancel || !regexp.MustCompile(`^Pay by \d\d:\d\d:\d\d \((9|10):\d\d left\)$`).MatchString(first.PayBy) || first.Link != "/orders/"+first.ID || !first.Shown {
		b.fatalf("order box entry %+v: want item 0, ¥10.00, \"Awaiting payment\", a deadline, \"Pay now · ¥10.00\" and Cancel", first)
	}
	if msg := e2eEval[string](b, "the message", `e.text(e.q('message'))`); strings.Contains(msg, "queued") {
		b.fatalf("message %q: the order is confirmed, the page must not still say it is queued", msg)
	}
	b.do("let the stock poll run past the cached second", chromedp.Sleep(1500*time.Millisecond))
	if it := b.itemView(item0); it.Button != "Ordered" || !it.Disabled || it.Stock != "4 left" {
		b.fatalf("item 0 after buying it: %+v, want a disabled \"Ordered\" and 4 left", it)
	}
	stocks := e2eEval[[]string](b, "item 0's stock texts", `window.__shop.stocks['`+js0+`']`)
	if i := indexOf(stocks, "4 left"); i < 0 || indexOf(stocks[i:], "5 left") >= 0 {
		b.fatalf("item 0's stock badge went %q: after one's own purchase it must not show the old count", stocks)
	}
	if it := b.itemView(item1); it.Button != "Buy" || it.Disabled || it.Note != "" {
		b.fatalf("item 1 in a per-item sale after buying item 0: %+v, want a live Buy", it)
	}

}

// secondPurchase: item 1, by Enter in the captcha field (the only item left to buy).
func (c *shopperRun) secondPurchase() {
	h, item1, b, first := c.h, c.item1, c.b, c.first
	// 2nd purchase: item 1, by Enter in the captcha field (the only item left to buy).
	b.waitFor("a new captcha", 10*time.Second, `e.text(e.q('captcha-hint')) === 'Type the characters you see, then press Buy.'`)
	b.solveCaptcha()
	b.do("press Enter in the captcha field", chromedp.SendKeys(e2eTestID("captcha-answer"), "\r"))
	b.waitFor("both orders are in the order box, awaiting payment", 20*time.Second,
		`window.__shop.orders().length === 2 && window.__shop.orders().every((o) => o.status === 'PENDING' && o.pay.startsWith('Pay now'))`)
	orders := b.boxOrders()
	c.second = orders[0]
	second := c.second
	h.mu.Lock()
	h.acked = append(h.acked, second.ID)
	h.mu.Unlock()
	if second.Item != "item 1" || second.Price != "¥10.01" || second.Pay != "Pay now · ¥10.01" || orders[1].ID != first.ID {
		b.fatalf("order box %+v: want item 1 (¥10.01) first, then item 0", orders)
	}
	if it := b.itemView(item1); it.Button != "Ordered" || !it.Disabled {
		b.fatalf("item 1 after buying it: %+v, want a disabled \"Ordered\"", it)
	}
	if e2eEval[bool](b, "the captcha box", `e.shown(e.q('captcha'))`) {
		b.fatalf("the captcha is still offered although every item is held")
	}

}

// payForItem1: pay for item 1: Paid and "Bought"; item 0 stays payable.
func (c *shopperRun) payForItem1() {
	t, h, v, dir, item1, js1, b, uid, second := c.t, c.h, c.v, c.dir, c.item1, c.js1, c.b, c.uid, c.second
	t.Helper()
	// Pay for item 1: Paid and "Bought"; item 0 stays payable.
	b.payOnProvider("pay for item 1", e2eOrderButton(second.ID, "pay-button"), second.ID)
	b.openSalePage(c.saleURL)
	b.waitFor("item 1 is paid and bought; item 0 still payable", 10*time.Second,
		`window.__shop.orders().length === 2 && window.__shop.orders()[0].status === 'PAID' && window.__shop.orders()[0].words === 'Paid' && window.__shop.orders()[0].pay === ''
		&& window.__shop.item('`+js1+`').button === 'Bought' && window.__shop.orders()[1].pay === 'Pay now · ¥10.00'`)
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE user_id = ? AND status = 'PAID' AND item_id = ?`, uid, item1); got != 1 {
		t.Errorf("item 1's order is not PAID in postgres (%d rows)", got)
	}
	b.do("scroll to the top", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	b.screenshot(dir, "sale-"+v.name+".png", "")

}

// orderPageAndPayingTooLate: the order page of item 0 (what was bought, in the sale's currency,
// and what paying costs); then paying too late: the page's deadline is still ahead, the server's
// has passed; the answer says expired, and that is what the server holds, also after a reload.
func (c *shopperRun) orderPageAndPayingTooLate() {
	t, h, v, dir, js0, js1, saleURL, b, first := c.t, c.h, c.v, c.dir, c.js0, c.js1, c.saleURL, c.b, c.first
	t.Helper()
	// The order page of item 0: what was bought, in the sale's currency, and what paying costs.
	b.do("open item 0's order page", chromedp.Navigate(h.srv.URL+"/orders/"+first.ID))
	b.waitFor("the order page shows item 0, awaiting payment", 10*time.Second,
		`e.q('order-status').getAttribute('data-status') === 'PENDING' && e.text(e.q('order-item')) === 'item 0'
		&& e.text(e.q('order-price')) === '¥10.00' && e.text(e.q('order-sale')) === 'test sale' && e.text(e.q('pay-button')) === 'Pay now · ¥10.00'`)
	b.screenshot(dir, "order-"+v.name+".png", "")

	// Paying too late: the page's deadline is still ahead, the server's has passed. The answer
	// says expired, and that is what the server holds, also after a reload.
	b.do("back to the sale page", chromedp.Navigate(saleURL))
	b.waitFor("the order box is back with both orders", 10*time.Second,
		`window.__shop.orders().length === 2 && window.__shop.orders()[1].pay === 'Pay now · ¥10.00'`)
	h.sql().Exec(`UPDATE orders SET pay_by = now() - interval '1 second' WHERE id = ?`, first.ID)
	b.clickUntil("pay for item 0 too late", e2eOrderButton(first.ID, "pay-button"),
		`e.text(e.q('message')) !== '' || window.__shop.orders()[1].status === 'EXPIRED'`)
	b.waitFor("the page says the order expired", 10*time.Second,
		`e.text(e.q('message')) === 'Too late: the payment window closed and the order expired.'
		&& window.__shop.orders()[1].status === 'EXPIRED' && window.__shop.orders()[1].pay === '' && !window.__shop.orders()[1].cancel`)
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE id = ? AND status = 'EXPIRED'`, first.ID); got != 1 {
		t.Errorf("order %s is not EXPIRED in postgres after the page said so", first.ID)
	}
	b.do("reload the sale page", chromedp.Reload())
	b.waitFor("after a reload: item 0's order expired, item 1's paid", 10*time.Second,
		`window.__shop.orders().length === 2 && window.__shop.orders()[1].status === 'EXPIRED' && window.__shop.orders()[1].words === 'Expired'
		&& window.__shop.orders()[1].pay === '' && window.__shop.orders()[0].status === 'PAID'
		&& window.__shop.item('`+js0+`').button === 'Buy' && window.__shop.item('`+js1+`').button === 'Bought'`)
	b.checkConsole()

}

// perSaleSaleKnownWithoutCaptcha: a per-sale sale where the shopper holds item 0 (bought
// elsewhere): known without a captcha, item 0 says "Ordered" and item 1 says why it cannot be
// bought.
func (c *shopperRun) perSaleSaleKnownWithoutCaptcha() {
	t, h, bSale, b, uid := c.t, c.h, c.bSale, c.b, c.uid
	t.Helper()
	// A per-sale sale where the shopper holds item 0 (bought elsewhere): known without a
	// captcha, item 0 says "Ordered" and item 1 says why it cannot be bought.
	bearer := h.token(uid, "shopper")
	if r := h.buy(bearer, bSale.items[0], h.purchaseToken(bearer, bSale.sale)); r.Status != 202 {
		t.Fatalf("buy in sale B: %d %s", r.Status, r.Raw)
	}
	b.do("open sale B", chromedp.Navigate(fmt.Sprintf("%s/sales/%d", h.srv.URL, bSale.sale)))
	jsB0, jsB1 := strconv.FormatInt(bSale.items[0], 10), strconv.FormatInt(bSale.items[1], 10)
	b.waitFor("sale B: item 0 ordered, item 1 explained", 10*time.Second,
		`window.__shop.item('`+jsB0+`').button === 'Ordered' && window.__shop.item('`+jsB0+`').disabled
		&& window.__shop.item('`+jsB1+`').disabled && window.__shop.item('`+jsB1+`').note === 'One per shopper in this sale: you already have item 0.'
		&& window.__shop.orders().length === 1`)
	if e2eEval[bool](b, "the captcha box", `e.shown(e.q('captcha'))`) {
		b.fatalf("sale B offers a captcha although the shopper can buy nothing more in it")
	}
	b.checkConsole()

}

// saleEndsWhileOpen (desktop only): a sale that ends while the page is open: the stock badges
// stop saying "N left".
func (c *shopperRun) saleEndsWhileOpen() {
	h, v, b := c.h, c.v, c.b
	// A sale that ends while the page is open: the stock badges stop saying "N left".
	if v.name == "desktop" {
		ends := time.Now().Add(3 * time.Second).Truncate(time.Second).Add(time.Second)
		c := h.createSaleWith(map[string]any{"endsAt": ends.UTC().Format(time.RFC3339)}, time.Now().Add(-time.Second), 7)
		jsC := strconv.FormatInt(c.items[0], 10)
		b.do("open a sale about to end", chromedp.Navigate(fmt.Sprintf("%s/sales/%d", h.srv.URL, c.sale)))
		b.waitFor("its stock is shown while it is live", 5*time.Second, `window.__shop.item('`+jsC+`').stock === '7 left'`)
		// "Ended" once per item: on its Buy button, the stock badge empty.
		b.waitFor("the ended sale says so everywhere", time.Until(ends)+5*time.Second,
			`e.text(e.q('countdown')) === 'Ended' && window.__shop.item('`+jsC+`').stock === ''
			&& window.__shop.item('`+jsC+`').button === 'Ended' && window.__shop.item('`+jsC+`').disabled`)
		b.do("wait for a stock poll that would bring the count back", chromedp.Sleep(1200*time.Millisecond))
		if it := b.itemView(c.items[0]); it.Stock != "" || it.Button != "Ended" {
			b.fatalf("the ended sale's stock badge = %q and Buy %q, want \"\" and \"Ended\" (said once)", it.Stock, it.Button)
		}
	}

}

// orderPageLoggedOut: the order page logged out: a login form, no endless "checking…", then the
// order once logged in.
func (c *shopperRun) orderPageLoggedOut() {
	t, h, browserCtx, v, username, password, second := c.t, c.h, c.browserCtx, c.v, c.username, c.password, c.second
	t.Helper()
	// The order page logged out: a login form, no endless "checking…", then the order.
	guest := openShopperTab(t, browserCtx, v, "logged out")
	guest.do("open the paid order logged out", chromedp.Navigate(h.srv.URL+"/orders/"+second.ID))
	guest.waitFor("the login form", 10*time.Second, `e.shown(e.q('login-form')) && e.shown(e.q('logged-out'))`)
	guest.do("give the page time to go wrong", chromedp.Sleep(1500*time.Millisecond))
	lo := e2eEval[struct {
		Text  string `json:"text"`
		Order bool   `json:"order"`
	}](guest, "the logged-out page", `({text: document.body.innerText, order: e.shown(e.q('order'))})`)
	if strings.Contains(strings.ToLower(lo.Text), "checking") || lo.Order || strings.Count(strings.ToLower(lo.Text), "log in first") > 1 {
		guest.fatalf("logged-out order page: order shown %v, text %q; want the login form, no \"checking…\" and at most one \"log in\" sentence", lo.Order, lo.Text)
	}
	guest.do("log in",
		chromedp.SendKeys(e2eTestID("username"), username),
		chromedp.SendKeys(e2eTestID("password"), password),
		chromedp.Click(e2eTestID("login-button")),
	)
	guest.waitFor("the order once logged in", 10*time.Second,
		`e.q('order-status').getAttribute('data-status') === 'PAID' && e.text(e.q('order-item')) === 'item 1' && e.text(e.q('order-price')) === '¥10.01'
		&& !e.shown(e.q('login-form')) && !e.shown(e.q('logged-out'))`)
	guest.checkConsole()
}
