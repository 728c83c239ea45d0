package tests

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/store"
)

// The merchant's dashboard in a real browser (issue 13, points 9 to 11): a price typed as a
// decimal in the sale's currency is stored in minor units and shown back in that currency; a
// refusal is said in the merchant's words next to its field and goes when the field changes;
// the live stock panel opens inside the sale the merchant picked, in view; and on a 390-pixel
// phone the stock table stacks per item, every value on screen without a sideways scroll. It
// writes the dashboard's screenshots to docs/screenshots/.

// e2eAdminShots is where the screenshots of the dashboard go (created if missing).
const e2eAdminShots = "../docs/screenshots"

// adminDashboard is the state of TestE2EAdminDashboard: the merchant's tab, the merchant, its
// older USD sale (whose first item drifts) and where the screenshots go.
type adminDashboard struct {
	t          *testing.T
	h          *harness
	b          *e2eTab
	merchantID int64
	older      saleIDs
	dir        string
}

func TestE2EAdminDashboard(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// No reconciliation job: a planted drift stays on screen for the screenshots.
	h := newHarness(t, harnessOpts{env: map[string]string{"FLASHSALE_RECONCILE_INTERVAL": "1h"}})
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	username, password := "e2e_merchant_"+suffix, "merchant test pass"
	m, err := h.app.Auth.AddUser(ctx, username, password, auth.RoleMerchant)
	if err != nil {
		t.Fatalf("add the merchant: %v", err)
	}
	merchantID := m.ID

	// Two earlier sales of this merchant, so the list is long enough to scroll: an older one
	// in USD whose first item drifts (a unit too many in Redis), and one in EUR.
	older := e2eMerchantSale(h, merchantID, "Older USD sale", "USD", map[string]int64{"Mug": 1250})
	h.app.Redis.IncrBy(ctx, store.StockKey(older.sale, older.items[0]), 1)
	e2eMerchantSale(h, merchantID, "Euro sale", "EUR", map[string]int64{"Scarf": 4500})

	browserCtx := startE2EBrowser(t, ctx)
	b := openE2ETab(t, browserCtx, "merchant")
	b.do("open the admin page", chromedp.Navigate(h.srv.URL+"/admin"))
	// Signed in through the API from the page (the cookie is the browser's); the login form is
	// the session tests' business.
	status, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`fetch('/api/auth/login', {method: 'POST', headers: {'Content-Type': 'application/json'},
		body: JSON.stringify({username: `+strconv.Quote(username)+`, password: `+strconv.Quote(password)+`})}).then((r) => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusOK {
		b.fatalf("login answered %d (%v)", status, err)
	}
	b.do("reload signed in", chromedp.Reload())
	b.waitFor("the dashboard with the merchant's two sales", 10*time.Second,
		`e.shown(e.q('admin-panel')) && e.qa('admin-sale').length === 2 && e.q('create-name').value === '' && e.q('create-starts-at').value !== ''`)
	if got := e2eEval[string](b, "the sale terms", `e.text(e.q('admin-sale-terms'))`); !strings.HasPrefix(got, "Prices in EUR · pay within 10 min · one unit per shopper in the sale") {
		b.errorf("terms of the newest sale = %q", got)
	}

	c := &adminDashboard{t: t, h: h, b: b, merchantID: merchantID, older: older}

	c.refusedInTheMerchantsWords()
	c.createWithDecimalPrices()
	c.stockOnTheDesktop()
	c.stockOnAPhone()
	b.checkConsole()
}

// refusedInTheMerchantsWords: a refusal in the merchant's words, next to its field: an end in the
// past (checked here), then an item name too long for the server (checked there, on the second
// item); nothing is created.
func (c *adminDashboard) refusedInTheMerchantsWords() {
	t, h, b, merchantID := c.t, c.h, c.b, c.merchantID
	t.Helper()
	// 10. A refusal in the merchant's words, next to its field: an end in the past (checked
	// here), then an item name too long for the server (checked there, on the second item).
	past := time.Now().Add(-2 * time.Hour)
	b.do("fill in a sale that ended an hour ago",
		chromedp.SetValue(e2eTestID("create-name"), "Launch day"),
		chromedp.SetValue(e2eTestID("create-starts-at"), past.Format("2006-01-02T15:04")),
		chromedp.SetValue(e2eTestID("create-ends-at"), past.Add(time.Hour).Format("2006-01-02T15:04")),
		chromedp.SendKeys(`[data-testid="item-rows"] [data-testid="item-name-input"]`, "Phone case"),
		chromedp.SendKeys(`[data-testid="item-rows"] [data-testid="item-price-input"]`, "19.99"),
		chromedp.SendKeys(`[data-testid="item-rows"] [data-testid="item-quantity-input"]`, "100"),
		chromedp.Click(e2eTestID("create-sale-button")),
	)
	b.waitFor("the end's error beside the end field", 5*time.Second,
		`e.text(e.q('error-ends-at')) === 'The end must be in the future.' && e.shown(e.q('error-ends-at'))
		&& e.q('create-ends-at').getAttribute('aria-invalid') === 'true' && document.activeElement === e.q('create-ends-at')
		&& e.q('error-ends-at').closest('[data-field]') === e.q('create-ends-at').closest('[data-field]')`)
	start := time.Now().Add(10 * time.Minute)
	b.do("move the sale to the future", chromedp.SetValue(e2eTestID("create-starts-at"), start.Format("2006-01-02T15:04")))
	b.do("the change event", chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid="create-starts-at"]').dispatchEvent(new Event('change', {bubbles: true}))`))
	b.waitFor("the stale error and banner are gone", 5*time.Second,
		`!e.shown(e.q('error-ends-at')) && !e.q('create-ends-at').hasAttribute('aria-invalid') && e.text(e.q('form-status')) === ''`)
	b.do("set the end and add a second item whose name is too long",
		chromedp.SetValue(e2eTestID("create-ends-at"), start.Add(time.Hour).Format("2006-01-02T15:04")),
		chromedp.Click(e2eTestID("add-item")),
		chromedp.Evaluate[chromedp.Void](`(() => { const r = document.querySelectorAll('[data-testid="item-rows"] [data-testid="item-row"]')[1];
			r.querySelector('[name="itemName"]').value = 'x'.repeat(201); r.querySelector('[name="price"]').value = '5';
			r.querySelector('[name="quantity"]').value = '3'; })()`),
		chromedp.Click(e2eTestID("create-sale-button")),
	)
	b.waitFor("the server's refusal said beside the second item's name", 10*time.Second,
		`(() => { const r = e.qa('item-row').filter((x) => x.closest('[data-testid="item-rows"]'))[1];
		  const err = r.querySelector('[data-testid="item-name-error"]');
		  return e.shown(err) && e.text(err) === 'The item name is too long: at most 200 characters.'
		    && r.querySelector('[name="itemName"]').getAttribute('aria-invalid') === 'true'
		    && e.text(r.querySelector('[data-testid="item-number"]')) === '2' && e.text(e.q('form-status')) === 'Check the fields marked in red.'; })()`)
	if n := h.sqlInt(`SELECT count(*) FROM sales WHERE merchant_id = ?`, merchantID); n != 2 {
		t.Fatalf("sales of the merchant after two refusals = %d, want 2", n)
	}

}

// createWithDecimalPrices: the decimal price round trip: 19.99 in CNY is stored as 1999 fen and
// shown ¥19.99.
func (c *adminDashboard) createWithDecimalPrices() {
	t, h, b := c.t, c.h, c.b
	t.Helper()
	// 9. The decimal price round trip: 19.99 in CNY is stored as 1999 fen and shown ¥19.99.
	b.do("shorten the second item's name and create the sale",
		chromedp.Evaluate[chromedp.Void](`(() => { const i = document.querySelectorAll('[data-testid="item-rows"] [name="itemName"]')[1];
			i.value = 'Cable'; i.dispatchEvent(new Event('input', {bubbles: true})); })()`),
		chromedp.Click(e2eTestID("create-sale-button")),
	)
	raw := b.waitFor("the new sale's live stock, open inside its entry", 10*time.Second,
		`(() => { const p = e.q('stock-panel'); const li = p.closest('[data-testid="admin-sale"]');
		  return e.shown(p) && li && e.qa('admin-sale').length === 3 && e.qa('stock-row').length === 2
		    && e.text(e.q('stock-sale-name')) === 'Launch day' ? li.getAttribute('data-sale-id') : ''; })()`)
	saleID, _ := strconv.ParseInt(strings.Trim(string(raw), `"`), 10, 64)
	if got := h.sqlInt(`SELECT count(*) FROM items WHERE sale_id = ? AND ((name = 'Phone case' AND price_cents = 1999) OR (name = 'Cable' AND price_cents = 500))`, saleID); got != 2 {
		t.Errorf("sale %d in postgres: %d items priced 1999 and 500, want 2", saleID, got)
	}
	if got := h.sqlInt(`SELECT count(*) FROM sales WHERE id = ? AND currency = 'CNY' AND payment_window_seconds = 600 AND purchase_limit = 'per-sale'`, saleID); got != 1 {
		t.Errorf("sale %d is not CNY, 10 minutes, per-sale in postgres", saleID)
	}
	b.waitFor("the prices shown in yuan", 5*time.Second,
		`e.qa('stock-price').map((x) => e.text(x)).join(' ') === '¥19.99 ¥5.00'`)
	if msg := e2eEval[string](b, "the message", `e.text(e.q('message'))`); msg != "Created “Launch day” (sale "+strconv.FormatInt(saleID, 10)+") with 2 items." {
		b.errorf("message after creating = %q", msg)
	}

}

// stockOnTheDesktop: at desktop width the panel opens where the merchant looks: the older sale, at
// the bottom of the list, its entry's top in view and the panel inside it, a plain table.
func (c *adminDashboard) stockOnTheDesktop() {
	t, b, older := c.t, c.b, c.older
	t.Helper()
	// 11 at desktop width: the panel opens where the merchant looks. Pick the older sale, at
	// the bottom of the list: its entry's top is in view and the panel is inside it.
	b.do("open the older sale's live stock", chromedp.Click(fmt.Sprintf(`[data-testid="show-stock"][data-sale-id="%d"]`, older.sale)))
	b.waitFor("the older sale's stock, in view, with its drift row", 10*time.Second, e2eStockInView(older.sale)+`
		&& e.qa('stock-drift-row').length === 1 && e.text(e.q('stock-price')) === '$12.50'`)
	desktop := e2eEval[struct {
		Table    string `json:"table"`
		Head     string `json:"head"`
		Overflow bool   `json:"overflow"`
	}](b, "the desktop table", `({table: getComputedStyle(e.q('stock-table')).display, head: getComputedStyle(e.q('stock-table').tHead).display,
		overflow: document.documentElement.scrollWidth > innerWidth})`)
	if desktop.Table != "table" || desktop.Head != "table-header-group" || desktop.Overflow {
		b.errorf("desktop stock table: display %q, head %q, page wider than the window %v; want a plain table", desktop.Table, desktop.Head, desktop.Overflow)
	}
	c.dir = e2eShotDir(t)
	dir := c.dir
	b.screenshot(dir, "admin-desktop.png", "")

}

// stockOnAPhone: on a 390-pixel phone the stock table stacks, every value on screen, the drift
// in view; the form's items are boxes holding their own Remove button.
func (c *adminDashboard) stockOnAPhone() {
	b, older, dir := c.b, c.older, c.dir
	// 11 on a 390-pixel phone: the stock table stacks, every value on screen; the form's items
	// are boxes holding their own Remove button.
	b.do("a 390-pixel phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	b.do("open the older sale again", chromedp.Click(fmt.Sprintf(`[data-testid="show-stock"][data-sale-id="%d"]`, older.sale)))
	b.waitFor("the older sale's stock panel closed", 5*time.Second, `!e.shown(e.q('stock-panel'))`)
	b.do("reopen it", chromedp.Click(fmt.Sprintf(`[data-testid="show-stock"][data-sale-id="%d"]`, older.sale)))
	b.waitFor("the older sale's stock, in view on the phone", 10*time.Second, e2eStockInView(older.sale)+` && innerWidth === 390`)
	phone := e2eEval[struct {
		ScrollWidth float64  `json:"scrollWidth"`
		Width       float64  `json:"width"`
		Head        string   `json:"head"`
		Cells       []string `json:"cells"`
		Off         []string `json:"off"`
		Reconciled  string   `json:"reconciled"`
		Drift       bool     `json:"drift"`
		Label       string   `json:"label"`
		Groups      []bool   `json:"groups"`
	}](b, "the phone layout", `(() => {
		const vw = document.documentElement.clientWidth;
		const inView = (x) => { const r = x.getBoundingClientRect(); return r.width > 0 && r.left >= 0 && r.right <= vw; };
		const cells = Array.from(document.querySelectorAll('[data-testid="stock-row"] > *'));
		const rec = document.querySelector('[data-testid="stock-row"] > [data-col="reconciled"]');
		const drift = e.q('stock-mismatch');
		return {scrollWidth: document.documentElement.scrollWidth, width: vw,
		  head: e.q('stock-table').tHead.getBoundingClientRect().width <= 1 ? 'hidden' : 'shown',
		  cells: cells.map((c) => (c.getAttribute('data-col') || '') + '=' + e.text(c)),
		  off: cells.filter((c) => !inView(c)).map((c) => c.getAttribute('data-col')),
		  reconciled: inView(rec) ? e.text(rec) : 'off screen',
		  drift: !!drift && inView(drift.closest('tr')),
		  label: getComputedStyle(rec, '::before').content,
		  groups: e.qa('item-row').filter((x) => x.closest('[data-testid="item-rows"]')).map((row) => {
		    const g = row.getBoundingClientRect(); const r = row.querySelector('[data-testid="remove-item"]').getBoundingClientRect();
		    return r.width > 0 && r.top >= g.top && r.bottom <= g.bottom && r.left >= g.left && r.right <= g.right; }),
		};
	})()`)
	if phone.ScrollWidth != phone.Width || phone.Width != 390 {
		b.errorf("phone: the page is %v px wide in a %v px viewport, want no sideways scroll", phone.ScrollWidth, phone.Width)
	}
	if phone.Head != "hidden" || len(phone.Cells) != 8 || len(phone.Off) != 0 {
		b.errorf("phone stock table: head %s, cells %q, off screen %q; want it stacked with all 8 values on screen", phone.Head, phone.Cells, phone.Off)
	}
	if phone.Reconciled != "drift" || !phone.Drift || phone.Label != `"Reconciled"` {
		b.errorf("phone: Reconciled = %q (label %s), drift note on screen %v; want the drift and its numbers in view", phone.Reconciled, phone.Label, phone.Drift)
	}
	if len(phone.Groups) != 1 || !phone.Groups[0] {
		b.errorf("phone form: Remove inside its item's box = %v, want [true]", phone.Groups)
	}
	b.do("add an item on the phone", chromedp.Click(e2eTestID("add-item")))
	b.screenshot(dir, "admin-phone.png", "")
}

// e2eStockInView is a JavaScript condition: the stock panel is open inside the given sale's
// entry, holds its rows, and the entry's top, the panel's heading and the start of its first
// item are within the window.
func e2eStockInView(saleID int64) string {
	return fmt.Sprintf(`(() => { const p = e.q('stock-panel'); const li = p.closest('[data-testid="admin-sale"]');
		if (!e.shown(p) || !li || li.getAttribute('data-sale-id') !== '%d' || e.qa('stock-row').length === 0) { return false; }
		const top = li.getBoundingClientRect().top; const head = p.querySelector('h3').getBoundingClientRect();
		const row = e.q('stock-row').getBoundingClientRect();
		return top >= 0 && head.top >= top && head.bottom <= innerHeight && row.top < innerHeight && li.classList.contains('selected'); })()`, saleID)
}

// e2eMerchantSale creates a sale of merchantID through the API, starting in a minute.
func e2eMerchantSale(h *harness, merchantID int64, name, currency string, prices map[string]int64) saleIDs {
	h.t.Helper()
	var items []map[string]any
	for n, p := range prices {
		items = append(items, map[string]any{"name": n, "priceCents": p, "quantity": 10})
	}
	start := time.Now().Add(time.Minute)
	r := h.do("POST", "/api/admin/sales", h.token(merchantID, auth.RoleMerchant), map[string]any{
		"name": name, "currency": currency, "startsAt": start.UTC().Format(time.RFC3339),
		"endsAt": start.Add(time.Hour).UTC().Format(time.RFC3339), "items": items,
	})
	if r.Status != http.StatusCreated {
		h.t.Fatalf("create %s: %d %s", name, r.Status, r.Raw)
	}
	return saleIDsOf(r)
}

// e2eShotDir creates docs/screenshots when it is missing and returns it.
func e2eShotDir(t *testing.T) string {
	t.Helper()
	dir := filepath.FromSlash(e2eAdminShots)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("create %s: %v", dir, err)
	}
	return dir
}

// TestE2EAdminSalesPaged: a merchant with many sales sees the newest ten, "10 of 12 sales", and
// "Show more sales" brings the rest, the focus on the first it brought; on a phone, where the
// form above is long, "Your sales ↓" leads to the list (issue 33: every sale sat on one list
// under the form, 14,055 px on a phone).
func TestE2EAdminSalesPaged(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	h := newHarness(t, harnessOpts{})
	username, password := "paged_merchant_"+strconv.FormatInt(time.Now().UnixNano()%1e9, 36), "merchant test pass"
	m, err := h.app.Auth.AddUser(ctx, username, password, auth.RoleMerchant)
	if err != nil {
		t.Fatalf("add the merchant: %v", err)
	}
	for i := 1; i <= 12; i++ {
		e2eMerchantSale(h, m.ID, fmt.Sprintf("Sale number %d", i), "CNY", map[string]int64{"Cup": 500})
	}
	b := openShopperTab(t, startE2EBrowser(t, ctx), e2eViewport{"phone", 390, 844, true}, "merchant")
	login := h.do("POST", "/api/auth/login", "", map[string]string{"username": username, "password": password})
	if login.Status != http.StatusOK {
		t.Fatalf("login: %d %s", login.Status, login.Raw)
	}
	b.takeCookies(h, login.Header)
	b.do("open the admin page", chromedp.Navigate(h.srv.URL+"/admin"))
	b.waitFor("the newest ten of twelve sales, the rest offered", 15*time.Second,
		`e.qa('admin-sale').length === 12 && e.qa('admin-sale').filter((li) => e.shown(li)).length === 10
		&& e.text(e.qa('admin-sale')[0].querySelector('h3, .admin-sale-name') || e.qa('admin-sale')[0]).includes('Sale number 12')
		&& e.text(e.q('admin-sales-count')) === '10 of 12 sales' && e.shown(e.q('admin-sales-more'))`)
	b.do("tap Your sales ↓", chromedp.Click(e2eTestID("jump-to-sales")))
	b.waitFor("the list in view", 5*time.Second,
		`location.hash === '#sales-heading' && document.getElementById('sales-heading').getBoundingClientRect().top < innerHeight / 2`)
	b.screenshot(e2eShotDir(t), "admin-sales-paged-phone.png", "")
	b.do("press Show more sales", chromedp.Click(e2eTestID("admin-sales-more")))
	b.waitFor("all twelve shown, the focus on the eleventh", 5*time.Second,
		`e.qa('admin-sale').every((li) => e.shown(li)) && !e.shown(e.q('admin-sales-more')) && e.text(e.q('admin-sales-count')) === '12 of 12 sales'
		&& e.qa('admin-sale')[10].contains(document.activeElement) && e.text(e.qa('admin-sale')[10]).includes('Sale number 2')`)
	b.checkConsole()
}
