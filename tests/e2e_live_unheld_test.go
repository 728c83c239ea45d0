package tests

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/store"
)

// The merchant's live view of a sale that Redis does not hold never shows "-1" units (the API's
// "not held" value) but what the stock waits for: a sale not loaded yet says it loads 10 minutes
// before the start; a started sale whose stock Redis lost says it is being rebuilt. In English and
// in Chinese, on the live view and in the /admin live stock table.
func TestE2ELiveViewStockNotHeld(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	h := newHarness(t, harnessOpts{noKeeper: true}) // nothing loads or rebuilds behind the test's back
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	username, password := "e2e_unheld_"+suffix, "merchant test pass"
	m, err := h.app.Auth.AddUser(ctx, username, password, auth.RoleMerchant)
	if err != nil {
		t.Fatalf("add the merchant: %v", err)
	}
	merchant := h.token(m.ID, auth.RoleMerchant)
	create := func(name string, start time.Time) string {
		r := h.do("POST", "/api/admin/sales", merchant, map[string]any{
			"name": name, "startsAt": start.UTC().Format(time.RFC3339), "endsAt": start.Add(time.Hour).UTC().Format(time.RFC3339),
			"items": []map[string]any{{"name": "Sneaker", "priceCents": 89900, "quantity": 200}, {"name": "Cap", "priceCents": 9900, "quantity": 100}},
		})
		if r.Status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", name, r.Status, r.Raw)
		}
		return r.str("saleId")
	}
	upcoming := create("Sneaker launch", time.Now().Add(2*time.Hour))
	live := create("Cap drop", time.Now().Add(-time.Second))

	browserCtx := startE2EBrowser(t, ctx)
	b := openE2ETab(t, browserCtx, "merchant")
	b.do("the desktop", chromedp.EmulateViewport(1280, 900))
	b.do("open the upcoming sale's live view", chromedp.Navigate(h.srv.URL+"/admin/sales/"+upcoming+"?lang=en"))
	b.e2eLogin(username, password)
	b.do("reload signed in", chromedp.Reload())
	b.waitFor("not loaded yet, and when it loads", 10*time.Second, `e.shown(e.q('live-panel')) && e.qa('live-item-row').length === 2
		&& e.text(e.q('live-displayed')) === '\u2013'
		&& /^not loaded yet: it loads 10 minutes before the start, at .+, or now with Warm up now$/.test(e.text(e.q('live-displayed-note')))
		&& e.qa('live-item-row').every((r) => e.text(r.querySelector('[data-col="displayed"]')) === 'not loaded yet')`)
	// Nothing to balance before the stock is loaded: the books say so, neither green nor a list
	// of checks failing for want of it.
	b.waitFor("the books before the stock is loaded", 10*time.Second, `e.q('recon-state').getAttribute('data-state') === 'waiting'
		&& e.text(e.q('recon-state')) === 'Not loaded yet' && e.qa('recon-failed').length === 0
		&& e.q('tile-books').getAttribute('data-state') === 'waiting' && e.text(e.q('live-books')) === 'Not loaded yet'
		&& /^The stock is not loaded for the sale yet/.test(e.text(e.q('recon-explain')))`)
	b.do("the page in Chinese", chromedp.Navigate(h.srv.URL+"/admin/sales/"+upcoming+"?lang=zh"))
	b.waitFor("not loaded yet, in Chinese", 10*time.Second, `e.shown(e.q('live-panel')) && e.qa('live-item-row').length === 2
		&& e.text(e.q('live-displayed')) === '\u2013'
		&& /^尚未载入：系统会在开始前 10 分钟（.+）自动载入，也可以点击“立即预热”马上载入$/.test(e.text(e.q('live-displayed-note')))
		&& e.qa('live-item-row').every((r) => e.text(r.querySelector('[data-col="displayed"]')) === '尚未载入')
		&& e.text(e.q('recon-state')) === '尚未载入库存' && e.qa('recon-failed').length === 0`)
	b.shootBoth(e2eShotDir(t), "live-not-loaded-zh")

	// The started sale: loaded, then Redis loses every key of it.
	if r := h.saleAction(merchant, mustID(t, live), "warm"); r.Status != http.StatusOK {
		t.Fatalf("warm: %d %s", r.Status, r.Raw)
	}
	b.do("open the started sale's live view", chromedp.Navigate(h.srv.URL+"/admin/sales/"+live+"?lang=en"))
	b.waitFor("its units left for shoppers", 10*time.Second, `e.text(e.q('live-displayed')) === '300'
		&& e.qa('live-item-row').map((r) => e.text(r.querySelector('[data-col="displayed"]'))).join() === '200,100'`)
	for _, pat := range store.SaleKeyPatterns(mustID(t, live)) {
		keys, err := h.app.Redis.Keys(ctx, pat).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			h.app.Redis.Del(ctx, k)
		}
	}
	b.waitFor("being rebuilt", 10*time.Second, `e.text(e.q('live-displayed')) === '\u2013'
		&& /^being rebuilt: the fast stock counter lost this sale\u2019s stock, which is rebuilt from the recorded orders/.test(e.text(e.q('live-displayed-note')))
		&& e.qa('live-item-row').every((r) => e.text(r.querySelector('[data-col="displayed"]')) === 'being rebuilt')`)
	b.do("the page in Chinese", chromedp.Navigate(h.srv.URL+"/admin/sales/"+live+"?lang=zh"))
	b.waitFor("being rebuilt, in Chinese", 10*time.Second, `e.text(e.q('live-displayed')) === '\u2013'
		&& /^正在重建：本场活动的库存计数丢失了数据/.test(e.text(e.q('live-displayed-note')))
		&& e.qa('live-item-row').every((r) => e.text(r.querySelector('[data-col="displayed"]')) === '正在重建')`)

	// /admin's live stock table: the same words, never -1.
	b.do("the admin page", chromedp.Navigate(h.srv.URL+"/admin?lang=en"))
	for _, c := range []struct{ sale, want string }{{upcoming, "not loaded yet"}, {live, "being rebuilt"}} {
		b.do("open the live stock of sale "+c.sale, chromedp.Click(fmt.Sprintf(`[data-testid="show-stock"][data-sale-id="%s"]`, c.sale)))
		b.waitFor("the live stock of sale "+c.sale, 10*time.Second, fmt.Sprintf(`e.shown(e.q('stock-panel')) && e.qa('stock-row').length === 2
			&& e.qa('stock-row').every((r) => e.text(r.querySelector('[data-col="displayed"]')) === %q)`, c.want))
	}
	b.checkConsole()
}

func mustID(t *testing.T, s string) int64 {
	t.Helper()
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("id %q: %v", s, err)
	}
	return id
}
