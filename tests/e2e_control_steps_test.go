package tests

// The control room's steps (TestE2EControlRoom), one merchant's day around a sale.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/store"
)

// warmUp: the warm-up made visible, and forced.
func (c *controlRoom) warmUp() {
	t, h, b, ctx, saleID := c.t, c.h, c.b, c.ctx, c.saleID
	t.Helper()
	// 2. Warm-up made visible, and forced.
	b.waitFor("the sale, not loaded, Warm up now on offer", 10*time.Second, fmt.Sprintf(`(() => {
		const li = document.querySelector('[data-testid="admin-sale"][data-sale-id="%d"]'); if (!li) { return false; }
		const q = (id) => li.querySelector('[data-testid="' + id + '"]');
		return e.text(q('sale-loaded-text')) === 'not loaded' && !q('warm-button').disabled && !q('pause-button').disabled
			&& q('resume-button').disabled && !q('end-button').disabled && !q('edit-sale').disabled; })()`, saleID))
	b.do("Warm up now", chromedp.Click(e2eEntry(saleID, "warm-button")))
	loaded := b.waitFor("loaded at HH:MM:SS", 10*time.Second, fmt.Sprintf(`(() => {
		const li = document.querySelector('[data-testid="admin-sale"][data-sale-id="%d"]');
		const q = (id) => li.querySelector('[data-testid="' + id + '"]');
		const t = e.text(q('sale-loaded-text'));
		return /^loaded at \d\d:\d\d:\d\d$/.test(t) && q('warm-button').disabled
			&& e.text(q('control-status')).startsWith('Warmed up') ? t : ''; })()`, saleID))
	if meta, err := h.app.Redis.HGet(ctx, store.MetaKey(saleID), "loadedAt").Result(); err != nil || meta == "" {
		t.Errorf("after Warm up now, Redis holds no loadedAt for the sale (%q, %v); the page says %s", meta, err, loaded)
	}

}

// openTheEditForm: Edit opens the form prefilled from the sale, its times in the browser's zone.
func (c *controlRoom) openTheEditForm() {
	b, saleID, items, start := c.b, c.saleID, c.items, c.start
	// 1. Edit: the form prefilled from the sale, its times in the browser's zone.
	b.do("record the PATCH bodies", chromedp.Evaluate[chromedp.Void](`(() => { window.__patches = []; const f = window.fetch;
		window.fetch = (u, i) => { if (i && i.method === 'PATCH') { window.__patches.push(i.body); } return f(u, i); }; })()`))
	b.do("Edit", chromedp.Click(e2eEntry(saleID, "edit-sale")))
	b.waitFor("the edit form", 5*time.Second, `e.q('create-sale-form').getAttribute('data-mode') === 'edit'`)
	form := e2eEval[struct {
		Mode    string   `json:"mode"`
		Heading string   `json:"heading"`
		Name    string   `json:"name"`
		Starts  string   `json:"starts"`
		Ends    string   `json:"ends"`
		Rows    []string `json:"rows"`
		Submit  string   `json:"submit"`
		Locked  bool     `json:"locked"`
	}](b, "the edit form", `(() => { const f = e.q('create-sale-form');
		return { mode: f.getAttribute('data-mode'), heading: e.text(e.q('form-heading')), name: e.q('create-name').value,
			starts: e.q('create-starts-at').value, ends: e.q('create-ends-at').value, submit: e.text(e.q('create-sale-button')),
			locked: e.q('create-starts-at').disabled,
			rows: e.qa('item-row').filter((x) => x.closest('[data-testid="item-rows"]')).map((row) =>
				row.getAttribute('data-item-id') + ':' + row.querySelector('[name="itemName"]').value + ':' + row.querySelector('[name="price"]').value + ':' + row.querySelector('[name="quantity"]').value) }; })()`)
	wantRows := fmt.Sprintf("%d:Lamp:49.00:5 %d:Desk:250.00:3", items["Lamp"], items["Desk"])
	if form.Mode != "edit" || form.Heading != "Edit “Desk lamps”" || form.Name != "Desk lamps" || form.Submit != "Save changes" || form.Locked ||
		form.Starts != start.Local().Format("2006-01-02T15:04") || form.Ends != start.Add(time.Hour).Local().Format("2006-01-02T15:04") ||
		strings.Join(form.Rows, " ") != wantRows {
		b.errorf("edit form = %+v; want it filled from the sale, times %s in the local zone, rows %s", form, start.Local().Format("2006-01-02T15:04"), wantRows)
	}
	c.editEnds = form.Ends

}

// editAndSave: an end before the start is said beside the end, nothing saved; then the name,
// one quantity and a new item go in the PATCH, only those, and all are saved.
func (c *controlRoom) editAndSave() {
	t, h, b, saleID, items, start := c.t, c.h, c.b, c.saleID, c.items, c.start
	t.Helper()
	// An end before the start: said beside the end, nothing saved.
	b.do("an end before the start, a new name, save",
		chromedp.SetValue(e2eTestID("create-ends-at"), start.Add(-time.Hour).Local().Format("2006-01-02T15:04")),
		chromedp.SetValue(e2eTestID("create-name"), "Desk lamps, edited"),
		chromedp.Click(e2eTestID("create-sale-button")))
	b.waitFor("the end's error beside it", 5*time.Second, `e.shown(e.q('error-ends-at')) && e.text(e.q('error-ends-at')) === 'The end must be after the start.'
		&& document.activeElement === e.q('create-ends-at') && e.text(e.q('form-status')) === 'Check the fields marked in red.'`)
	if n := e2eEval[int](b, "PATCHes sent", `window.__patches.length`); n != 0 {
		b.errorf("%d PATCH sent for a form with an error, want none", n)
	}
	// The name, one quantity and a new item: only those go in the PATCH, and all are saved.
	b.do("the end back, the Lamp at 6, a new item, save",
		chromedp.SetValue(e2eTestID("create-ends-at"), c.editEnds),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const row = document.querySelector('[data-testid="item-rows"] [data-item-id="%d"]');
			row.querySelector('[name="quantity"]').value = '6'; })()`, items["Lamp"])),
		chromedp.Click(e2eTestID("add-item")),
		chromedp.Evaluate[chromedp.Void](`(() => { const rows = document.querySelectorAll('[data-testid="item-rows"] [data-testid="item-row"]'); const r = rows[rows.length - 1];
			r.querySelector('[name="itemName"]').value = 'Lamp shade'; r.querySelector('[name="price"]').value = '9.90'; r.querySelector('[name="quantity"]').value = '2';
			r.querySelector('[name="imageUrl"]').value = 'https://img.example/shade.png'; })()`),
		chromedp.Click(e2eTestID("create-sale-button")))
	b.waitFor("saved, the form back to creating", 10*time.Second,
		`e.text(e.q('message')) === 'Saved “Desk lamps, edited”: name, “Lamp”, new item “Lamp shade” changed.' && e.q('create-sale-form').getAttribute('data-mode') === 'create'`)
	var patch map[string]any
	if err := json.Unmarshal([]byte(e2eEval[string](b, "the PATCH", `window.__patches[0]`)), &patch); err != nil {
		t.Fatalf("the PATCH body: %v", err)
	}
	wantPatch := fmt.Sprintf(`{"items":[{"itemId":"%d","quantity":6},{"imageUrl":"https://img.example/shade.png","name":"Lamp shade","priceCents":990,"quantity":2}],"name":"Desk lamps, edited"}`, items["Lamp"])
	if got, _ := json.Marshal(patch); string(got) != wantPatch {
		t.Errorf("PATCH body = %s, want only what changed: %s", got, wantPatch)
	}
	if n := h.sqlInt(`SELECT count(*) FROM sales s WHERE s.id = ? AND s.name = 'Desk lamps, edited'
		AND (SELECT quantity FROM items WHERE id = ?) = 6 AND (SELECT quantity FROM items WHERE id = ?) = 3
		AND (SELECT count(*) FROM items WHERE sale_id = s.id AND name = 'Lamp shade' AND price_cents = 990 AND quantity = 2) = 1`, saleID, items["Lamp"], items["Desk"]); n != 1 {
		t.Errorf("the sale in postgres does not hold the edit")
	}
	items["Lamp shade"] = h.sqlInt(`SELECT id FROM items WHERE sale_id = ? AND name = 'Lamp shade'`, saleID)
	c.sale.items = append(c.sale.items, items["Lamp shade"])

}

// moveTheStartSoon moves the start to a few seconds from now (seconds typed in the field), so the
// sale runs.
func (c *controlRoom) moveTheStartSoon() {
	t, b, saleID := c.t, c.b, c.saleID
	t.Helper()
	// Move the start to a few seconds from now (seconds typed in the field), so the sale runs.
	// 30 s: the live view's checks and screenshots come before it, at both widths, and a loaded
	// machine takes its time over them (15 s was overrun)
	c.soon = time.Now().Add(30 * time.Second).Truncate(time.Second)
	soon := c.soon
	b.do("Edit again", chromedp.Click(e2eEntry(saleID, "edit-sale")))
	b.waitFor("the edit form", 5*time.Second, `e.q('create-sale-form').getAttribute('data-mode') === 'edit' && e.q('create-name').value === 'Desk lamps, edited'`)
	b.do("start in a few seconds, save",
		chromedp.SetValue(e2eTestID("create-starts-at"), soon.Local().Format("2006-01-02T15:04:05")),
		chromedp.Click(e2eTestID("create-sale-button")))
	b.waitFor("saved", 10*time.Second, `e.text(e.q('message')) === 'Saved “Desk lamps, edited”: start changed.'`)
	if got := e2eEval[string](b, "the second PATCH", `window.__patches[1]`); got != `{"startsAt":"`+soon.UTC().Format(time.RFC3339)+`"}` {
		t.Errorf("second PATCH = %s, want only the start, in UTC", got)
	}

}

// openLiveViewBefore: the live view, before the sale.
func (c *controlRoom) openLiveViewBefore() {
	t, h, b, saleID := c.t, c.h, c.b, c.saleID
	t.Helper()
	// 3. The live view, before the sale.
	// The links are followed by address: a poll cannot span the navigation a click starts.
	if href := e2eEval[string](b, "the live view link", fmt.Sprintf(`document.querySelector('[data-testid="admin-sale"][data-sale-id="%d"] [data-testid="open-live"]').getAttribute('href')`, saleID)); href != fmt.Sprintf("/admin/sales/%d", saleID) {
		t.Errorf("live view link = %q", href)
	}
	b.do("open the live view", chromedp.Navigate(fmt.Sprintf("%s/admin/sales/%d", h.srv.URL, saleID)))
	b.waitFor("the live view before the start", 10*time.Second,
		`e.shown(e.q('live-panel')) && e.q('live-status').getAttribute('data-status') === 'scheduled' && e.qa('live-item-row').length === 3
		&& /^loaded at \d\d:\d\d:\d\d$/.test(e.text(e.q('sale-loaded-text'))) && e.text(e.q('live-sale-name')) === 'Desk lamps, edited'
		&& / · starts in 0:\d\d$/.test(e.text(e.q('live-window')))`)
	// In the merchant's words: before the start no raw counter is shown, the stock is "loaded for
	// the sale", and the books tile says nothing is sold yet.
	before := e2eEval[map[string]any](b, "the live view's words before the start", `({
		details: !e.q('recon-details').hidden, loaded: e.text(e.q('recon-loaded')), label: e.text(document.querySelector('[data-testid="recon-loaded"]').previousElementSibling),
		books: e.text(e.q('live-books-note')), displayed: e.text(e.q('live-displayed-label')), text: e.q('live-panel').innerText,
		money: e.shown(e.q('money-before')) && !e.shown(e.q('money-figures')) ? e.text(e.q('money-before')) : 'figures shown' })`)
	if before["details"] != false || before["loaded"] != "loaded" || before["label"] != "Stock loaded for the sale" || before["books"] != "nothing sold yet" || before["displayed"] != "Displayed" ||
		before["money"] != "Nothing sold yet: from the start, the money paid, awaiting confirmation and refunded shows here." {
		t.Errorf("the live view before the start: %v; want the counters hidden, the stock \"loaded\" for the sale, nothing sold yet (no money figures)", before)
	}
	for _, word := range []string{"Redis", "Postgres", "counter", "writer"} {
		if strings.Contains(before["text"].(string), word) {
			t.Errorf("the live view before the start says %q: %s", word, before["text"])
		}
	}
	c.dir = e2eShotDir(t)
	dir := c.dir
	b.shootBoth(dir, "dashboard-before")

}

// editAsTheSaleStarts: the sale starts while its edit form is open: moving the start is refused
// beside it, the start goes back as it was and is fixed from then on, nothing is saved.
func (c *controlRoom) editAsTheSaleStarts() {
	t, h, b, saleID, soon := c.t, c.h, c.b, c.saleID, c.soon
	t.Helper()
	// The sale starts while its edit form is open: moving the start is refused beside it, the
	// start goes back as it was and is fixed from then on, nothing is saved.
	b.do("the edit form, from the live view's Edit link", chromedp.Navigate(fmt.Sprintf("%s/admin?edit=%d", h.srv.URL, saleID)))
	b.waitFor("the edit form of the upcoming sale", 10*time.Second, `e.q('create-sale-form').getAttribute('data-mode') === 'edit' && !e.q('create-starts-at').disabled`)
	b.waitFor("the start passed", time.Until(soon)+10*time.Second, fmt.Sprintf(`Date.now() > %d`, soon.Add(500*time.Millisecond).UnixMilli()))
	b.do("move the start an hour later, save",
		chromedp.SetValue(e2eTestID("create-starts-at"), soon.Add(time.Hour).Local().Format("2006-01-02T15:04")),
		chromedp.Click(e2eTestID("create-sale-button")))
	b.waitFor("SALE_STARTED beside the start, the start back and fixed", 10*time.Second, fmt.Sprintf(`e.shown(e.q('error-starts-at'))
		&& e.text(e.q('error-starts-at')) === 'The sale has started meanwhile: its start can no longer move, and is back as it was. Save again to keep your other changes.'
		&& e.q('create-starts-at').disabled && e.shown(e.q('starts-at-locked')) && e.q('create-starts-at').value === %q
		&& e.text(e.q('form-status')) === 'Nothing was saved. Check the fields marked in red.'`, e2eLocalInput(soon)))
	if n := h.sqlInt(`SELECT count(*) FROM sales WHERE id = ? AND starts_at = ?`, saleID, soon.UTC()); n != 1 {
		t.Errorf("the start moved in postgres after SALE_STARTED")
	}
	b.do("stop editing", chromedp.Click(e2eTestID("edit-cancel")))
	b.waitFor("the form back to creating, focus on the sale's Edit", 5*time.Second, fmt.Sprintf(`e.q('create-sale-form').getAttribute('data-mode') === 'create'
		&& !e.q('create-starts-at').disabled && document.activeElement === document.querySelector('[data-testid="admin-sale"][data-sale-id="%d"] [data-testid="edit-sale"]')`, saleID))
	b.do("back to the live view", chromedp.Navigate(fmt.Sprintf("%s/admin/sales/%d", h.srv.URL, saleID)))
	b.waitFor("the sale running", 30*time.Second, `e.shown(e.q('live-panel')) && e.q('live-status').getAttribute('data-status') === 'running'`)

}

// pauseAndResume: the shopper opens the sale in a browser context of its own and watches while
// the merchant acts: a pause reaches the open page within two seconds (Buy dark, the countdown
// "Paused", one sentence), stays so while paused (Buy never lights up again meanwhile), and a
// resume brings Buy back with the sentence gone. A purchase sent while paused is refused, and
// nothing is sold.
func (c *controlRoom) pauseAndResume() {
	t, h, b, browserCtx, saleID, items, shopperID, sName, sPass := c.t, c.h, c.b, c.browserCtx, c.saleID, c.items, c.shopperID, c.sName, c.sPass
	t.Helper()
	// The merchant on the sale page: the sale without Buy, no captcha, a link to its live view.
	b.do("the merchant opens the sale page", chromedp.Navigate(fmt.Sprintf("%s/sales/%d", h.srv.URL, saleID)))
	b.waitFor("no Buy for a merchant, the live view offered", 10*time.Second, fmt.Sprintf(`e.q('countdown').getAttribute('data-phase') === 'live'
		&& e.qa('buy-button').every((x) => !e.shown(x)) && !e.shown(e.q('captcha')) && e.shown(e.q('merchant-note'))
		&& e.q('merchant-live-link').getAttribute('href') === '/admin/sales/%d' && e.shown(e.q('admin-link'))`, saleID))
	b.do("back to the live view", chromedp.Navigate(fmt.Sprintf("%s/admin/sales/%d", h.srv.URL, saleID)))
	b.waitFor("the live view, running", 10*time.Second, `e.shown(e.q('live-panel')) && e.q('live-status').getAttribute('data-status') === 'running'`)

	// The shopper, in a browser context of its own.
	c.s = openShopperTab(t, browserCtx, e2eViewport{"desktop", 1280, 900, false}, "shopper")
	s := c.s
	saleURL := fmt.Sprintf("%s/sales/%d", h.srv.URL, saleID)
	s.do("open the sale page", chromedp.Navigate(saleURL))
	s.e2eLogin(sName, sPass)
	s.openSalePage(saleURL)
	if e2eEval[bool](s, "Merchant admin in the shopper's header", `e.shown(e.q('admin-link'))`) {
		s.errorf("a shopper is offered Merchant admin")
	}
	s.solveCaptcha()
	lamp := strconv.FormatInt(items["Lamp"], 10)
	s.waitFor("Buy enabled", 10*time.Second, `!e.buy('`+lamp+`').disabled && e.text(e.q('countdown')) === 'Live now'`)

	// Pause: the open page follows within two seconds.
	const pausedSentence = "The merchant paused the sale for a moment: Buy comes back when it resumes."
	b.do("Pause", chromedp.Click(e2eTestID("pause-button")))
	b.waitFor("paused", 10*time.Second, `e.q('live-status').getAttribute('data-status') === 'paused' && e.q('pause-button').disabled && !e.q('resume-button').disabled
		&& e.text(e.q('control-status')).startsWith('Paused')`)
	pausedAt := time.Now()
	pausedPage := `e.buy('` + lamp + `').disabled && e.text(e.buy('` + lamp + `')) === 'Paused' && e.text(e.q('countdown')) === 'Paused'
		&& e.text(e.q('message')) === ` + strconv.Quote(pausedSentence)
	s.waitFor("the shopper's page paused: Buy dark, one sentence", 2500*time.Millisecond, pausedPage)
	t.Logf("the open page followed the pause in %v", time.Since(pausedAt).Round(time.Millisecond))
	// While paused, Buy stays dark (it used to light up again after the refusal's Retry-After).
	s.do("stay paused a few polls", chromedp.Sleep(3*time.Second))
	if !e2eEval[bool](s, "still paused", pausedPage) {
		s.errorf("the shopper's page stopped showing the pause while the sale is still paused")
	}
	// A purchase sent while paused (as a page that has not heard yet would): refused, nothing sold.
	tok := h.token(shopperID, auth.RoleShopper)
	captcha := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/captcha", saleID), tok, nil)
	if r := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", saleID), tok, map[string]string{"captchaId": captcha.str("captchaId"), "answer": "test"}); r.Status != http.StatusServiceUnavailable || r.str("error") != "PAUSED" {
		t.Errorf("a purchase token while paused: %d %s, want 503 PAUSED", r.Status, r.Raw)
	}
	if n := h.sqlInt(`SELECT count(*) FROM orders WHERE user_id = ?`, shopperID); n != 0 {
		t.Errorf("%d orders while paused, want 0", n)
	}

	// Resume: Buy back, the sentence gone, within two seconds.
	b.do("Resume", chromedp.Click(e2eTestID("resume-button")))
	b.waitFor("running again", 10*time.Second, `e.q('live-status').getAttribute('data-status') === 'running' && !e.q('pause-button').disabled
		&& e.text(e.q('control-status')).startsWith('Resumed')`)
	resumedAt := time.Now()
	s.waitFor("the shopper's page live again: Buy back, the notice gone", 2500*time.Millisecond,
		`!e.buy('`+lamp+`').disabled && e.text(e.buy('`+lamp+`')) === 'Buy' && e.text(e.q('countdown')) === 'Live now' && e.text(e.q('message')) === ''`)
	t.Logf("the open page followed the resume in %v", time.Since(resumedAt).Round(time.Millisecond))
}

// buyAndPay: the shopper buys (frozen 1 on the live view), then pays (paid 1, real one lower);
// the funnel, the chart and the books say so.
func (c *controlRoom) buyAndPay() {
	b, s, items, dir := c.b, c.s, c.items, c.dir
	// Buy, before paying: frozen 1 (the captcha solved before the pause is still good).
	s.waitFor("Buy enabled again", 15*time.Second, fmt.Sprintf(`!e.buy('%d').disabled && e.q('captcha-answer').value !== ''`, items["Lamp"]))
	s.do("Buy", chromedp.Click(e2eBuyButton(items["Lamp"])))
	raw := s.waitFor("the order awaiting payment", 15*time.Second, `(() => { const o = window.__shop.orders(); return o.length === 1 && o[0].status === 'PENDING' ? o[0].id : ''; })()`)
	c.orderID = strings.Trim(string(raw), `"`)
	orderID := c.orderID
	b.waitFor("frozen 1", 10*time.Second, `e.text(e.q('live-frozen')) === '1' && e.text(e.q('live-paid')) === '0' && e.text(e.q('live-accepted')) === '1'
		&& e.text(document.querySelector('[data-testid="live-item-row"] [data-col="frozen"]')) === '1'`)
	during := b.liveView()
	if l := during.Items["Lamp"]; l.Quantity != "6" || l.Frozen != "1" || l.Real != "6" || l.Paid != "0" || l.Displayed != "5" {
		b.errorf("the Lamp before payment = %+v, want quantity 6, displayed 5, frozen 1, real 6, paid 0", l)
	}
	b.shootBoth(dir, "dashboard-during")

	// Pay: paid 1, real one lower.
	s.payOnProvider("pay for the Lamp", e2eOrderButton(orderID, "pay-button"), orderID)
	s.openSalePage(fmt.Sprintf("%s/sales/%d", c.h.srv.URL, c.saleID)) // back on the sale page, where it watches the end
	b.waitFor("paid 1, real one lower", 10*time.Second, `e.text(e.q('live-paid')) === '1' && e.text(e.q('live-frozen')) === '0'`)
	// The money: what the provider took, in the sale's currency; nothing awaiting, nothing refunded.
	b.waitFor("the money paid", 5*time.Second, `e.shown(e.q('money-figures')) && !e.shown(e.q('money-before'))
		&& e.text(e.q('money-paid-amount')) === '¥49.00' && e.text(e.q('money-paid-note')) === 'from 1 paid order'
		&& e.text(e.q('money-awaiting-amount')) === '¥0.00' && e.text(e.q('money-awaiting-note')) === 'no payment waiting for the provider'
		&& e.text(e.q('money-refunded-amount')) === '¥0.00' && e.text(e.q('money-refunded-note')) === 'none' && !e.shown(e.q('money-refund-note'))`)
	after := b.liveView()
	if l := after.Items["Lamp"]; l.Frozen != "0" || l.Real != "5" || l.Paid != "1" || l.Displayed != "5" || l.PaidCents != "¥49.00" {
		b.errorf("the Lamp after payment = %+v, want displayed 5, frozen 0, real 5, paid 1 (¥49.00)", l)
	}
	if d := after.Items["Desk"]; d.PaidCents != "¥0.00" {
		b.errorf("the Desk's paid amount = %q, want ¥0.00", d.PaidCents)
	}
	if after.Funnel["accepted"] != "1" || after.Funnel["paid"] != "1" || after.Funnel["written"] != "1" || after.Funnel["refused-paused"] != "1" {
		b.errorf("funnel = %v, want 1 accepted, written and paid, 1 refused for the pause", after.Funnel)
	}
	if after.Chart.Accepted != "1" || after.Chart.Bars < 2 {
		b.errorf("chart = %+v, want the accepted purchase and the refusal drawn", after.Chart)
	}
	if after.Books != "ok" && after.Books != "settling" {
		b.errorf("reconciliation state = %q after a clean purchase", after.Books)
	}

}

// sellOutTheShadeAndRefuseACut: two more shoppers (through the API) take both units of the Lamp
// shade; editing the running sale from the live view's Edit link, its start is fixed and a
// quantity below what is sold is refused beside it, nothing saved.
func (c *controlRoom) sellOutTheShadeAndRefuseACut() {
	t, h, b, saleID, items, sale := c.t, c.h, c.b, c.saleID, c.items, c.sale
	t.Helper()
	// Two more shoppers (through the API) take both units of the Lamp shade.
	for u := int64(990001); u <= 990002; u++ {
		tok := h.token(u, auth.RoleShopper)
		if r := h.buy(tok, items["Lamp shade"], h.purchaseToken(tok, saleID)); r.Status != http.StatusAccepted {
			t.Fatalf("shopper %d buys a lamp shade: %d %s", u, r.Status, r.Raw)
		}
	}
	h.drain(sale)

	// Editing the running sale, from the live view's Edit link: its start is fixed (disabled,
	// with the reason), and a quantity below what is sold is refused beside it, nothing saved.
	if href := e2eEval[string](b, "the edit link", `e.q('nav-edit').getAttribute('href')`); href != fmt.Sprintf("/admin?edit=%d", saleID) {
		t.Errorf("edit link = %q", href)
	}
	b.do("open the edit link", chromedp.Navigate(fmt.Sprintf("%s/admin?edit=%d", h.srv.URL, saleID)))
	b.waitFor("the running sale's edit form, its start fixed", 10*time.Second, `e.q('create-sale-form').getAttribute('data-mode') === 'edit'
		&& e.q('create-starts-at').disabled && e.shown(e.q('starts-at-locked')) && e.q('add-item').disabled && e.shown(e.q('add-item-locked'))
		&& e.q('create-starts-at').getAttribute('aria-describedby').includes('hint-starts-at-locked')`)
	b.do("the Lamp shade down to 1, save",
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const row = document.querySelector('[data-testid="item-rows"] [data-item-id="%d"]');
			row.querySelector('[name="quantity"]').value = '1'; })()`, items["Lamp shade"])),
		chromedp.Click(e2eTestID("create-sale-button")))
	b.waitFor("the refusal beside the Lamp shade's quantity", 10*time.Second, fmt.Sprintf(`(() => {
		const row = document.querySelector('[data-testid="item-rows"] [data-item-id="%d"]');
		const err = row.querySelector('[data-testid="item-quantity-error"]');
		return e.shown(err) && e.text(err) === 'Quantity cannot go below the 2 units already sold.'
			&& document.activeElement === row.querySelector('[name="quantity"]')
			&& e.text(e.q('form-status')) === 'Nothing was saved. Check the fields marked in red.'; })()`, items["Lamp shade"]))
	if n := h.sqlInt(`SELECT quantity FROM items WHERE id = ?`, items["Lamp shade"]); n != 2 {
		t.Errorf("lamp shade quantity = %d after a refused edit, want 2", n)
	}
	b.do("back to the live view", chromedp.Navigate(fmt.Sprintf("%s/admin/sales/%d", h.srv.URL, saleID)))
	b.waitFor("the lamp shade sold out", 10*time.Second, `e.shown(e.q('live-panel')) && (() => {
		const tr = Array.from(document.querySelectorAll('[data-testid="live-item-row"]')).find((r) => e.text(r.querySelector('th')) === 'Lamp shade');
		return tr && e.text(tr.querySelector('[data-col="soldOut"]')) === 'sold out' && e.text(tr.querySelector('[data-col="frozen"]')) === '2'; })()`)

}

// endEarly: End early, after the confirm step; every control off.
func (c *controlRoom) endEarly() {
	t, h, b, saleID, dir := c.t, c.h, c.b, c.saleID, c.dir
	t.Helper()
	// End early, after the confirm step.
	b.do("End early", chromedp.Click(e2eTestID("end-button")))
	b.waitFor("the confirm step", 5*time.Second, `e.shown(e.q('end-confirm')) && document.activeElement === e.q('end-keep-button')`)
	if n := h.sqlInt(`SELECT count(*) FROM sales WHERE id = ? AND ends_at > now()`, saleID); n != 1 {
		t.Errorf("the sale ended before the merchant confirmed")
	}
	// The shopper's page, still open, says the sale is live until then (its end half an hour ahead).
	desk := strconv.FormatInt(c.items["Desk"], 10)
	c.s.waitFor("the shopper's page live", 5*time.Second,
		`e.text(e.q('countdown')) === 'Live now' && /^Ends in /.test(e.text(e.q('countdown-detail'))) && e.text(e.buy('`+desk+`')) === 'Buy'`)
	b.do("Yes, end it now", chromedp.Click(e2eTestID("end-confirm-button")))
	b.waitFor("ended, every control off", 10*time.Second, `e.q('live-status').getAttribute('data-status') === 'ended'
		&& ['warm-button', 'pause-button', 'resume-button', 'end-button'].every((id) => e.q(id).disabled) && e.text(e.q('control-status')).startsWith('Ended')`)
	// The open page follows within two seconds: ended, every Buy dark, no count left.
	endedAt := time.Now()
	c.s.waitFor("the shopper's page ended: Buy dark, 'Ended' once per item", 2500*time.Millisecond,
		`e.text(e.q('countdown')) === 'Ended' && e.text(e.q('countdown-detail')) === 'This sale is over.'
		&& e.buy('`+desk+`').disabled && e.text(e.buy('`+desk+`')) === 'Ended' && e.text(e.stock('`+desk+`')) === ''
		&& !e.shown(e.q('captcha'))`)
	t.Logf("the open page followed the early end in %v", time.Since(endedAt).Round(time.Millisecond))
	// An ended sale says how many units went unsold, not what is "left for shoppers"; the raw
	// counters are under Technical details, closed.
	unsold := h.sqlInt(`SELECT sum(quantity) FROM items WHERE sale_id = ?`, saleID) - h.sqlInt(`SELECT count(*) FROM orders WHERE sale_id = ? AND status IN ('PAID', 'PENDING')`, saleID)
	b.waitFor("the unsold units", 10*time.Second, fmt.Sprintf(`e.text(e.q('live-displayed-label')) === 'Unsold' && e.text(e.q('live-displayed')) === %q
		&& /^%d units? went unsold/.test(e.text(e.q('live-displayed-note'))) && !e.text(e.q('tile-displayed')).includes('left for shoppers')
		&& !e.q('recon-details').hidden && !e.q('recon-details').open`, strconv.FormatInt(unsold, 10), unsold))
	b.shootBoth(dir, "dashboard-after")

}

// checkOrdersPage: the orders of the sale, filtered (by shopper, by status, a shopper id that
// is not one), on a phone, and the CSV.
func (c *controlRoom) checkOrdersPage() {
	t, h, b, saleID, items, dir, shopperID, orderID := c.t, c.h, c.b, c.saleID, c.items, c.dir, c.shopperID, c.orderID
	t.Helper()
	// 4. The orders of the sale, filtered, and the CSV.
	if href := e2eEval[string](b, "the orders link", `e.q('nav-orders-page').getAttribute('href')`); href != fmt.Sprintf("/admin/sales/%d/orders", saleID) {
		t.Errorf("orders link = %q", href)
	}
	b.do("open the orders", chromedp.Navigate(fmt.Sprintf("%s/admin/sales/%d/orders", h.srv.URL, saleID)))
	// Who bought: the shopper with an account by username, the others (tokens of ids this shop
	// has no account of) by #id.
	b.waitFor("the three orders, newest first", 10*time.Second, fmt.Sprintf(`e.qa('order-row').length === 3 && e.text(e.q('orders-sale-name')) === 'Desk lamps, edited'
		&& e.qa('order-row').map((r) => r.getAttribute('data-status')).join(' ') === 'PENDING PENDING PAID'
		&& e.qa('order-user').map((u) => e.text(u)).filter((x) => x === %q).length === 1
		&& e.qa('order-user').filter((u) => u.getAttribute('data-user-id') !== '%d').every((u) => e.text(u) === '#' + u.getAttribute('data-user-id'))`, c.sName, shopperID))
	// The Payment column: the paid order with what the provider took (its payment id in the
	// title), the two awaiting payment without a checkout opened: nothing (–).
	if got := e2eEval[string](b, "the payment column", `e.qa('order-row').map((r) => e.text(r.querySelector('[data-col="payment"]'))).join(' | ')
		+ ' / ' + e.q('order-row').parentNode.querySelector('[data-payment="paid"]').title`); got != "– | – | Paid ¥49.00 / payment sim_pi_"+orderID {
		t.Errorf("the Payment column: %q, want – | – | Paid ¥49.00 / payment sim_pi_%s", got, orderID)
	}
	b.do("the shopper's orders, by username in capitals", chromedp.SetValue(e2eTestID("filter-user"), strings.ToUpper(c.sName)), chromedp.Click(e2eTestID("filter-apply")))
	b.waitFor("the one order, paid, of the shopper", 10*time.Second, fmt.Sprintf(`e.qa('order-row').length === 1 && e.q('order-row').getAttribute('data-order-id') === %q
		&& e.q('order-row').getAttribute('data-status') === 'PAID' && e.text(e.q('order-user')) === %q && location.search === %q
		&& e.text(e.q('orders-summary')).includes(%q)`, orderID, c.sName, "?username="+strings.ToUpper(c.sName), strings.ToUpper(c.sName)))
	b.do("clear the filter", chromedp.Click(e2eTestID("filter-clear")))
	b.waitFor("all three again", 10*time.Second, `e.qa('order-row').length === 3 && location.search === ''`)
	other := e2eEval[string](b, "a shopper without an account", fmt.Sprintf(`e.qa('order-user').find((u) => u.getAttribute('data-user-id') !== '%d').getAttribute('data-user-id')`, shopperID))
	b.do("that shopper's orders, from the row's link", chromedp.Click(fmt.Sprintf(`[data-testid="order-user"][data-user-id=%q] a`, other)))
	b.waitFor("the orders of #id", 10*time.Second, fmt.Sprintf(`e.qa('order-row').length === 1 && e.text(e.q('order-user')) === '#%s'
		&& location.search === '?userId=%s' && e.q('filter-user').value === '#%s'`, other, other, other))
	b.do("clear the filter", chromedp.Click(e2eTestID("filter-clear")))
	b.waitFor("all three again", 10*time.Second, `e.qa('order-row').length === 3 && location.search === ''`)
	b.screenshot(dir, "admin-orders-desktop.png", "")
	b.do("the orders on a 390-pixel phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	b.waitFor("the phone", 5*time.Second, `innerWidth === 390`)
	if over := e2eEval[int](b, "the orders page's width", `document.documentElement.scrollWidth`); over > 390 {
		b.errorf("the orders page is %d px wide on a 390-pixel phone", over)
	}
	b.screenshot(dir, "admin-orders-phone.png", "")
	b.do("back to the desktop", chromedp.EmulateViewport(1280, 900))
	b.do("only the orders awaiting payment", chromedp.SetValue(e2eTestID("filter-status"), "PENDING"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid="filter-status"]').dispatchEvent(new Event('change'))`))
	b.waitFor("the two lamp shades", 10*time.Second, `e.qa('order-row').length === 2 && location.search === '?status=PENDING'`)
	b.do("only the expired ones", chromedp.SetValue(e2eTestID("filter-status"), "EXPIRED"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-testid="filter-status"]').dispatchEvent(new Event('change'))`))
	b.waitFor("none", 10*time.Second, `e.shown(e.q('orders-empty')) && e.qa('order-row').length === 0 && location.search === '?status=EXPIRED'`)
	b.do("a shopper that is not one", chromedp.SetValue(e2eTestID("filter-user"), "b o b"), chromedp.Click(e2eTestID("filter-apply")))
	b.waitFor("said beside the field", 5*time.Second, `e.shown(e.q('filter-user-error')) && e.q('filter-user').getAttribute('aria-invalid') === 'true'`)
	csv := e2eEval[string](b, "the CSV", `(() => { const a = e.q('orders-csv'); return a.getAttribute('href'); })()`)
	if csv != fmt.Sprintf("/api/admin/sales/%d/orders.csv", saleID) {
		t.Errorf("CSV link = %q", csv)
	}
	body, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`fetch(document.querySelector('[data-testid="orders-csv"]').href).then((r) => r.text())`, chromedp.EvalAwaitPromise))
	if err != nil || !strings.Contains(body, orderID+","+strconv.FormatInt(items["Lamp"], 10)+",Lamp,"+strconv.FormatInt(shopperID, 10)+",PAID,4900,CNY,") || !strings.Contains(body, ","+c.sName+",paid,4900,sim_pi_"+orderID+",\n") {
		t.Errorf("the CSV (%v):\n%s\nwant the paid order", err, body)
	}
}
