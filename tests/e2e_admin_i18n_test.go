package tests

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/testenv"
)

// The merchant's pages in Chinese (the shops are Chinese): a merchant whose browser asks for
// Chinese walks /admin (the sales, the live stock, the form and its validation), a sale's live
// view (tiles, explanations, funnel, controls, and the end of the sale: the units unsold) and its
// orders (shoppers by username, the filter and its error), and no English word is left on any
// of them but the data (names), the currency codes and "CSV". Screenshots: the live view and the
// orders in Chinese at 1280 and 390 px, docs/screenshots/{live,admin-orders}-zh-{desktop,phone}.png.

// e2eAdminLatin are the Latin words a Chinese merchant page may show besides its data.
var e2eAdminLatin = []string{"CNY", "USD", "EUR", "CSV", "flashsale", "English"}

// e2eEnglishLeft lists the English words of the page's visible text (and its titles and
// aria-labels), once the data (the names in strip, order ids, the time zone's name) is taken out.
func (b *e2eTab) e2eEnglishLeft(strip ...string) []string {
	b.t.Helper()
	text := e2eEval[string](b, "the page's words", `(() => {
		const parts = [document.body.innerText, document.title];
		for (const x of document.querySelectorAll('[aria-label], [title]')) {
			if (x.offsetParent !== null || x.tagName === 'NAV' || x.tagName === 'DIV') { parts.push(x.getAttribute('aria-label') || '', x.getAttribute('title') || ''); }
		}
		let zone = ''; try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ''; } catch (e) {}
		return parts.join('\n').split(zone || '\u0000').join(' '); })()`)
	text = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`).ReplaceAllString(text, " ")
	for _, s := range strip {
		text = strings.ReplaceAll(text, s, " ")
	}
	text = regexp.MustCompile(`UTC[+-]\d\d:\d\d`).ReplaceAllString(text, " ")
	var left []string
	for _, w := range regexp.MustCompile(`[A-Za-z]{2,}`).FindAllString(text, -1) {
		if !slices.Contains(e2eAdminLatin, w) {
			left = append(left, w)
		}
	}
	return left
}

func TestE2EAdminChinese(t *testing.T) {
	t.Parallel()
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	h := newHarness(t, harnessOpts{})
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	mName, mPass := "zh_merchant_"+suffix, "merchant test pass"
	sName := "zh_shopper_" + suffix
	m, err := h.app.Auth.AddUser(ctx, mName, mPass, auth.RoleMerchant)
	if err != nil {
		t.Fatalf("add the merchant: %v", err)
	}
	shopper, err := h.app.Auth.AddUser(ctx, sName, "shopper test pass", auth.RoleShopper)
	if err != nil {
		t.Fatalf("add the shopper: %v", err)
	}
	r := h.do("POST", "/api/admin/sales", h.token(m.ID, auth.RoleMerchant), map[string]any{
		"name": "春季台灯", "startsAt": time.Now().Add(-time.Second).UTC().Format(time.RFC3339), "endsAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		"items": []map[string]any{{"name": "台灯", "priceCents": 4900, "quantity": 5}, {"name": "书桌", "priceCents": 25000, "quantity": 3}},
	})
	if r.Status != http.StatusCreated {
		t.Fatalf("create the sale: %d %s", r.Status, r.Raw)
	}
	s := saleIDs{}
	s.sale, _ = strconv.ParseInt(r.str("saleId"), 10, 64)
	for _, it := range r.Body["items"].([]any) {
		id, _ := strconv.ParseInt(it.(map[string]any)["itemId"].(string), 10, 64)
		s.items = append(s.items, id)
	}
	// One order of the shopper with an account, one of an identity this shop has no account of.
	// The shopper's is paid through the provider, the other's awaits the provider's confirmation,
	// and a third, paid only after it had expired, is refunded.
	paidID, awaitingID, lateID := h.buyOne(shopper.ID, s, s.items[0]), h.buyOne(880088, s, s.items[1]), h.buyOne(880089, s, s.items[0])
	h.drain(s)
	for _, o := range []struct {
		id   string
		user int64
	}{{paidID, shopper.ID}, {awaitingID, 880088}, {lateID, 880089}} {
		if c := h.do("POST", "/api/flash-sales/orders/"+o.id+"/checkout", h.token(o.user, auth.RoleShopper), nil); c.Status != http.StatusOK {
			t.Fatalf("checkout of %s: %d %s", o.id, c.Status, c.Raw)
		}
	}
	if err := h.app.Payments.Apply(ctx, h.ownPayment("evt_"+paidID, paidID, "pi_"+paidID, 4900)); err != nil {
		t.Fatal(err)
	}
	h.exec(`UPDATE orders SET pay_by = now() - interval '1 second' WHERE id = ?`, lateID)
	testenv.Eventually(t, 15*time.Second, "the third order expired", func() error {
		if _, err := h.app.DB.ExpireDue(ctx, 10); err != nil {
			return err
		}
		if st := h.sqlStr(`SELECT status FROM orders WHERE id = ?`, lateID); st != "EXPIRED" {
			return fmt.Errorf("status %s", st)
		}
		return nil
	})
	if err := h.app.Payments.Apply(ctx, h.ownPayment("evt_"+lateID, lateID, "pi_"+lateID, 4900)); err != nil {
		t.Fatal(err)
	}
	h.app.Payments.Pass(ctx)
	if h.sqlStr(`SELECT refund_id FROM orders WHERE id = ?`, lateID) == "" {
		t.Fatalf("the late payment was not refunded")
	}
	saleID := strconv.FormatInt(s.sale, 10)
	dir := e2eShotDir(t)

	browserCtx := startE2EBrowser(t, ctx)
	b := openE2ETab(t, browserCtx, "chinese merchant")
	e2eChinese(b)
	b.do("the desktop", chromedp.EmulateViewport(1280, 900))
	b.do("open the admin page", chromedp.Navigate(h.srv.URL+"/admin"))
	b.e2eLogin(mName, mPass)
	b.do("reload signed in", chromedp.Reload())
	strip := []string{mName, sName, "sim_re_", "pi_"} // the provider's ids in the Payment column's titles

	// /admin: the sale listed, its live stock open, the form's own validation: all Chinese.
	b.waitFor("the sales and the live stock, in Chinese", 10*time.Second, `document.documentElement.lang === 'zh-CN'
		&& e.text(document.querySelector('h1')) === '商家后台' && e.qa('admin-sale').length === 1
		&& e.text(e.q('admin-sale-status')) === '进行中' && e.text(e.q('sale-loaded-text')).startsWith('已于 ')
		&& e.text(e.q('admin-sale-terms')) === '以 CNY 计价 · 须在 10 分钟 内支付 · 整场活动每位顾客限购一件'`)
	b.do("open the live stock", chromedp.Click(e2eTestID("show-stock")))
	b.waitFor("the live stock", 10*time.Second, `e.shown(e.q('stock-panel')) && e.qa('stock-row').length === 2
		&& e.text(e.q('show-stock')) === '收起实时库存'
		&& /^更新于 /.test(e.text(e.q('stock-updated')))`)
	b.do("create a sale with nothing filled in", chromedp.Click(e2eTestID("create-sale-button")))
	b.waitFor("the form's validation, in Chinese", 5*time.Second, `e.text(e.q('error-name')) === '请填写活动名称。'
		&& e.text(e.q('form-status')) === '请检查标红的字段。'`)
	if left := b.e2eEnglishLeft(strip...); len(left) > 0 {
		t.Errorf("/admin in Chinese: English words %q", left)
	}

	// The live view: tiles, explanations, funnel and controls.
	b.do("open the live view", chromedp.Navigate(fmt.Sprintf("%s/admin/sales/%s", h.srv.URL, saleID)))
	b.waitFor("the live view, in Chinese", 10*time.Second, `e.shown(e.q('live-panel')) && e.text(e.q('live-status')) === '进行中'
		&& e.text(e.q('live-accepted')) === '3' && e.text(e.q('live-frozen')) === '1' && e.text(e.q('live-paid-note')) === '件已支付，共 8 件'
		&& e.text(e.q('money-paid-amount')) === '¥49.00' && e.text(e.q('money-paid-note')) === '来自 1 笔已支付订单'
		&& e.text(e.q('money-awaiting-amount')) === '¥250.00' && e.text(e.q('money-awaiting-note')) === '1 笔订单'
		&& e.text(e.q('money-refunded-amount')) === '¥49.00' && e.text(e.q('money-refunded-note')) === '已退款 1 笔'
		&& e.shown(e.q('money-refund-note')) && e.text(e.q('money-refund-note')).startsWith('退款是订单过期或取消之后才到账的付款')
		&& e.text(e.q('recon-state')) === '账目一致' && /^更新于 /.test(e.text(e.q('live-updated'))) && !!e.q('chart-svg')
		&& e.text(e.q('live-books-note')) === '售出件数与已记录订单的核对' && /^距结束还有 /.test(e.text(e.q('live-window')).split(' · ').pop())`)
	if left := b.e2eEnglishLeft(strip...); len(left) > 0 {
		t.Errorf("the live view in Chinese: English words %q", left)
	}
	b.shootBoth(dir, "live-zh")

	// The orders: the shopper by username, the other by #id, the filter's error in Chinese.
	b.do("open the orders", chromedp.Click(e2eTestID("nav-orders-page")))
	b.waitAcross("the orders, in Chinese", 10*time.Second, fmt.Sprintf(`location.pathname === '/admin/sales/%s/orders' && e.qa('order-row').length === 3
		&& e.qa('order-user').map((u) => e.text(u)).sort().join(' ') === '#880088 #880089 %s' && e.text(document.querySelector('h1')) === '订单：春季台灯'
		&& ((l) => ['已支付', '已过期', '待支付'].every((x) => l.includes(x)))(e.qa('order-row').map((r) => e.text(r.querySelector('[data-col="status"]'))))
		&& ((l) => ['已支付 ¥49.00', '已退款 ¥49.00', '等待确认'].every((x) => l.includes(x)))(e.qa('order-row').map((r) => e.text(r.querySelector('[data-col="payment"]'))))
		&& /^第 1–3 笔订单，最新的在前，第 1 页（最后一页）。$/.test(e.text(e.q('orders-summary')))`, saleID, sName))
	if left := b.e2eEnglishLeft(strip...); len(left) > 0 {
		t.Errorf("the orders in Chinese: English words %q", left)
	}
	b.screenshot(dir, "admin-orders-zh-desktop.png", "")
	b.do("a 390-pixel phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	b.waitFor("the phone", 5*time.Second, `innerWidth === 390`)
	if over := e2eEval[int](b, "the orders page's width", `document.documentElement.scrollWidth`); over > 390 {
		b.errorf("the Chinese orders page is %d px wide on a 390-pixel phone", over)
	}
	b.screenshot(dir, "admin-orders-zh-phone.png", "")
	b.do("back to the desktop", chromedp.EmulateViewport(1280, 900))
	b.do("a shopper that is not one", chromedp.SetValue(e2eTestID("filter-user"), "b o b"), chromedp.Click(e2eTestID("filter-apply")))
	b.waitFor("said beside the field, in Chinese", 5*time.Second, `e.shown(e.q('filter-user-error')) && e.text(e.q('filter-user-error')).startsWith('请输入用户名')`)
	b.do("the shopper's orders", chromedp.SetValue(e2eTestID("filter-user"), sName), chromedp.Click(e2eTestID("filter-apply")))
	b.waitFor("one order, the filter said in Chinese", 10*time.Second, fmt.Sprintf(`e.qa('order-row').length === 1
		&& e.text(e.q('orders-summary')) === '第 1–1 笔订单（顾客 %s），最新的在前，第 1 页（最后一页）。'`, sName))

	// The end of the sale, from the live view: the units unsold, in Chinese.
	b.do("back to the live view", chromedp.Click(e2eTestID("nav-live")))
	b.waitAcross("the live view again", 10*time.Second, `e.shown(e.q('live-panel')) && !e.q('end-button').disabled`)
	b.do("End early", chromedp.Click(e2eTestID("end-button")))
	b.waitFor("the confirm step", 5*time.Second, `e.shown(e.q('end-confirm'))`)
	b.do("yes, end it", chromedp.Click(e2eTestID("end-confirm-button")))
	b.waitFor("ended: the units unsold", 10*time.Second, `e.text(e.q('live-status')) === '已结束' && e.text(e.q('live-displayed-label')) === '未售出'
		&& e.text(e.q('live-displayed')) === '6' && e.text(e.q('live-displayed-note')) === '6 件未售出；另有 1 件仍在等待支付'
		&& e.text(e.q('control-status')) === '活动已结束：不再售出任何商品，已有订单保留。' && e.text(e.q('sale-loaded-text')) === '活动已结束'`)
	if left := b.e2eEnglishLeft(strip...); len(left) > 0 {
		t.Errorf("the ended live view in Chinese: English words %q", left)
	}
	b.checkConsole()
	h.checkInvariants(s)
	t.Logf("the merchant's pages in Chinese in %v", time.Since(began).Round(time.Millisecond))
}
