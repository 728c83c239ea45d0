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
)

// The fire drill on a sale's live view in a real browser: the merchant runs a small drill, reads
// the result in plain words (English, and Chinese after a reload: the result is kept), on a
// desktop and on a 390-pixel phone without a sideways scroll, is told when the next may run (the
// cooldown), and why no drill can run once a sale starts within 30 minutes. Screenshots: docs/screenshots/drill-*.png.
func TestE2EFireDrill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	h := newHarness(t, harnessOpts{})
	h.app.SetDrillTarget(h.srv.URL)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	username, password := "e2e_drill_"+suffix, "merchant test pass"
	m, err := h.app.Auth.AddUser(ctx, username, password, auth.RoleMerchant)
	if err != nil {
		t.Fatalf("add the merchant: %v", err)
	}
	start := time.Now().Add(2 * time.Hour)
	r := h.do("POST", "/api/admin/sales", h.token(m.ID, auth.RoleMerchant), map[string]any{
		"name": "Sneaker launch", "startsAt": start.UTC().Format(time.RFC3339), "endsAt": start.Add(time.Hour).UTC().Format(time.RFC3339),
		"items": []map[string]any{{"name": "Sneaker", "priceCents": 89900, "quantity": 200}, {"name": "Cap", "priceCents": 9900, "quantity": 100}},
	})
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Raw)
	}
	saleID := r.str("saleId")
	dir := e2eShotDir(t)

	browserCtx := startE2EBrowser(t, ctx)
	b := openE2ETab(t, browserCtx, "merchant")
	b.do("the desktop", chromedp.EmulateViewport(1280, 900))
	b.do("open the live view", chromedp.Navigate(h.srv.URL+"/admin/sales/"+saleID))
	status, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`fetch('/api/auth/login', {method: 'POST', headers: {'Content-Type': 'application/json'},
		body: JSON.stringify({username: `+strconv.Quote(username)+`, password: `+strconv.Quote(password)+`})}).then((r) => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusOK {
		b.fatalf("login answered %d (%v)", status, err)
	}
	b.do("reload signed in", chromedp.Reload())
	b.waitFor("the fire drill ready to run", 10*time.Second,
		`e.shown(e.q('fire-drill')) && !e.q('drill-start').disabled && e.q('fire-drill').getAttribute('data-phase') === 'none'`)
	b.do("a small drill", chromedp.SetValue(e2eTestID("drill-shoppers"), "1500"), chromedp.SetValue(e2eTestID("drill-seconds"), "2"))
	b.clickUntil("run the drill", e2eTestID("drill-start"), `e.q('fire-drill').getAttribute('data-phase') !== 'none'`)
	b.waitFor("the drill's progress, the button off", 10*time.Second,
		`['preparing', 'running', 'draining', 'cleaning', 'done'].includes(e.q('fire-drill').getAttribute('data-phase')) && (e.q('drill-start').disabled || e.q('fire-drill').getAttribute('data-phase') === 'done')`)
	b.waitFor("the result in plain words", 60*time.Second,
		`e.q('fire-drill').getAttribute('data-phase') === 'done' && e.shown(e.q('drill-result')) && /^(This instance can take about [\d,]+ shoppers per second; your expected crowd of 6,000 needs [\d,]+ instances?\.|This instance answered every shopper of the drill within a second, [\d,]+ per second, as many as the drill sent: it did not reach its limit\. Your expected crowd of 6,000 needs at most [\d,]+ instances?; a larger drill tells more\.)$/.test(e.text(e.q('drill-verdict')))`)
	got := e2eEval[map[string]string](b, "the figures", `({sellout: e.text(e.q('drill-sellout')), refusals: e.text(e.q('drill-refusals')),
		latency: e.text(e.q('drill-latency')), writer: e.text(e.q('drill-writer')), when: e.text(e.q('drill-when'))})`)
	if !strings.HasSuffix(got["sellout"], " s") || !strings.HasPrefix(got["refusals"], "80% (1,200 of 1,500)") ||
		!strings.Contains(got["latency"], " ms / ") || !strings.Contains(got["writer"], "after the last accepted order") ||
		!strings.Contains(got["when"], "1,500 shoppers over 2 s") || !strings.Contains(got["when"], "units on sale ×20") {
		b.errorf("the figures: %v", got)
	}
	drillShot(b, dir, "drill-desktop.png")

	b.do("a 390-pixel phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	b.do("the page in Chinese", chromedp.Navigate(h.srv.URL+"/admin/sales/"+saleID+"?lang=zh"))
	b.waitFor("the kept result, in Chinese", 10*time.Second,
		`e.shown(e.q('fire-drill')) && e.q('fire-drill').getAttribute('data-phase') === 'done' && /^(本实例每秒约可接待 [\d,]+ 位顾客；你预计的 6,000 人需要 [\d,]+ 个实例。|本实例在一秒内应答了演练的每位顾客，每秒 [\d,]+ 位，正是演练发送的速度：没有测到它的上限。你预计的 6,000 人最多需要 [\d,]+ 个实例；更大规模的演练可以测得更准。)$/.test(e.text(e.q('drill-verdict')))`)
	// the merchant's next drill waits for the cooldown after this one: the page says until when
	b.waitFor("the cooldown explained, in Chinese, the button off", 10*time.Second,
		`e.q('drill-start').disabled && /^你的上一次消防演练刚结束不久，同一商家的演练之间需要间隔：下一次可在 .+（(9|10) 分钟后）开始。$/.test(e.text(e.q('drill-status')))`)
	if w := e2eEval[[]float64](b, "the width", `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`); w[0] != w[1] || w[1] != 390 {
		b.errorf("phone: the page is %v px wide in a %v px viewport, want no sideways scroll", w[0], w[1])
	}
	drillShot(b, dir, "drill-phone-zh.png")

	// a sale starting within 30 minutes: no drill, and the page says why
	soon := time.Now().Add(20 * time.Minute)
	if r := h.do("POST", "/api/admin/sales", h.token(m.ID, auth.RoleMerchant), map[string]any{
		"name": "Flash socks", "startsAt": soon.UTC().Format(time.RFC3339), "endsAt": soon.Add(time.Hour).UTC().Format(time.RFC3339),
		"items": []map[string]any{{"name": "Socks", "priceCents": 990, "quantity": 5}},
	}); r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Raw)
	}
	b.do("the page in English", chromedp.Navigate(h.srv.URL+"/admin/sales/"+saleID+"?lang=en"))
	b.waitFor("the refusal explained, the button off", 15*time.Second,
		`e.shown(e.q('fire-drill')) && e.q('drill-start').disabled && /^"Flash socks" \(sale \d+\) starts in 2\d min, at .*: no fire drill within 30 minutes of a sale's start/.test(e.text(e.q('drill-status')))`)
	if w := e2eEval[[]float64](b, "the width", `[document.documentElement.scrollWidth, document.documentElement.clientWidth]`); w[0] != w[1] {
		b.errorf("phone: the page is %v px wide in a %v px viewport", w[0], w[1])
	}
	drillShot(b, dir, "drill-blocked-phone.png")
	b.do("the page in Chinese", chromedp.Navigate(h.srv.URL+"/admin/sales/"+saleID+"?lang=zh"))
	b.waitFor("the refusal in Chinese, from the sale's facts", 15*time.Second,
		`e.q('drill-start').disabled && /^“Flash socks”（活动 \d+）将在 2\d 分钟后（.+）开始：活动开始前 30 分钟内不能进行消防演练/.test(e.text(e.q('drill-status')))`)
	b.checkConsole()
}

// drillShot saves a picture of the fire drill's section, once the live panel around it is shown
// (the drill's state may arrive before the sale's live figures that show the panel).
func drillShot(b *e2eTab, dir, file string) {
	b.t.Helper()
	b.do("scroll to the fire drill", chromedp.ScrollIntoView(e2eTestID("fire-drill"), chromedp.NodeVisible))
	buf, err := chromedp.Run(b.ctx, chromedp.Screenshot(e2eTestID("fire-drill"), chromedp.NodeVisible))
	if err != nil {
		b.fatalf("screenshot %s: %v", file, err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("%s: %s", b.name, fmt.Sprintf("screenshot %s", file))
}
