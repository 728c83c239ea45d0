package tests

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/flashsale/flashsale/testenv"
)

// The shopper pages in Chinese (issue 9, item 7): a browser that asks for Chinese
// (Accept-Language: zh-CN) gets the sale page in Chinese, and everything the script writes on
// the way to a paid order is Chinese too: the countdown, the stock badges, the Buy button, the
// messages, the order's status, deadline and Pay button. The header's switch then turns the page
// into English, and the choice sticks: the next page is English, even one opened by its plain
// address, which the browser still asks for in Chinese. Screenshots: the Chinese sale page at
// desktop width and on a 390-pixel phone, docs/screenshots/sale-zh-{desktop,phone}.png.

// e2eChinese makes a tab ask for pages in Chinese, as a browser set to Chinese does.
func e2eChinese(b *e2eTab) {
	b.t.Helper()
	if _, err := chromedp.Call(b.ctx, network.Enable, network.EnableParams{}); err != nil {
		b.fatalf("enable the network domain: %v", err)
	}
	if _, err := chromedp.Call(b.ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
		Headers: network.Headers{"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.6"},
	}); err != nil {
		b.fatalf("send Accept-Language zh-CN: %v", err)
	}
}

// e2eLangState is what the test reads of a page's language.
type e2eLangState struct {
	URL      string `json:"url"`
	Lang     string `json:"lang"`
	Current  string `json:"current"`  // the switch link marked aria-current
	Title    string `json:"title"`    // document.title
	Heading  string `json:"heading"`  // the first h1
	Nav      string `json:"nav"`      // the header's "Sales" link
	Login    string `json:"login"`    // the login button
	Cookie   string `json:"cookie"`   // document.cookie's fs_lang
	Overflow bool   `json:"overflow"` // the page scrolls sideways
}

const e2eLangStateJS = `({
  url: location.href, lang: document.documentElement.lang,
  current: (document.querySelector('[data-testid="lang-switch"] a[aria-current="true"]') || {}).textContent || '',
  title: document.title, heading: e.text(document.querySelector('h1')), nav: e.text(e.q('nav-sales')),
  login: e.text(e.q('login-button')),
  cookie: (document.cookie.split('; ').find((c) => c.startsWith('fs_lang=')) || '').slice(8),
  overflow: document.documentElement.scrollWidth > document.documentElement.clientWidth
})`

// waitAcross is waitFor across navigations the page starts itself (a link, the script's
// redirect): a poll cut by the old document going away is asked again in the new one.
func (b *e2eTab) waitAcross(what string, timeout time.Duration, expr string) {
	b.t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	var last error
	err := testenv.Poll(timeout, testenv.PollInterval, func() error {
		if left := time.Until(deadline); left > 0 || last == nil {
			_, last = chromedp.Run(b.ctx, chromedp.Poll[[]byte](`((e) => (`+expr+`))(window.__e2e)`,
				chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(max(left, time.Millisecond))))
		}
		return last
	})
	if err != nil {
		b.fatalf("waited %v for %s: %v", timeout, what, last)
	}
	b.t.Logf("%s: %s (%v)", b.name, what, time.Since(start).Round(time.Millisecond))
}

func (b *e2eTab) langState() e2eLangState {
	b.t.Helper()
	return e2eEval[e2eLangState](b, "the page's language", e2eLangStateJS)
}

// chineseSale is the state of TestE2EChineseSalePage: the Chinese shopper's tab, the sale's
// items and the shopper's name and order.
type chineseSale struct {
	t                 *testing.T
	h                 *harness
	b                 *e2eTab
	dir               string
	item0             int64
	js0, js1, saleURL string
	username, orderID string
}

func TestE2EChineseSalePage(t *testing.T) {
	t.Parallel()
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	h := newHarness(t, harnessOpts{})
	browserCtx := startE2EBrowser(t, ctx)
	dir := e2eShotDir(t)

	sale := h.createSaleWith(map[string]any{"purchaseLimit": "per-item"}, time.Now().Add(-time.Second), 5, 5)
	item0 := sale.items[0]
	js0, js1 := strconv.FormatInt(item0, 10), strconv.FormatInt(sale.items[1], 10)
	saleURL := fmt.Sprintf("%s/sales/%d", h.srv.URL, sale.sale)

	// The browser of the other tests asks for English (startE2EBrowser pins it), so their English
	// expectations hold whatever the machine's locale.
	plain := openShopperTab(t, browserCtx, e2eViewport{"desktop", 1280, 900, false}, "english browser")
	plain.openSalePage(saleURL)
	langs := e2eEval[[]string](plain, "navigator.languages", `navigator.languages`)
	if st := plain.langState(); st.Lang != "en" || st.Current != "English" || len(langs) == 0 || !strings.HasPrefix(langs[0], "en") {
		plain.fatalf("the tests' browser: page %+v, navigator.languages %q; want English", st, langs)
	}

	b := openShopperTab(t, browserCtx, e2eViewport{"desktop", 1280, 900, false}, "chinese shopper")
	e2eChinese(b)
	b.openSalePage(saleURL)

	// The page as the server sent it, and as the script wrote it: Chinese.
	st := b.langState()
	if st.Lang != "zh-CN" || st.Current != "中文" || st.Title != "test sale · flashsale" || st.Nav != "秒杀活动" || st.Login != "登录" || st.Cookie != "" {
		b.fatalf("the sale page asked for in Chinese: %+v; want <html lang=zh-CN>, 中文 current, 秒杀活动, 登录 and no remembered choice", st)
	}
	b.waitFor("the live countdown and the stock in Chinese", 10*time.Second,
		`e.text(e.q('countdown')) === '正在秒杀' && /^距结束还有 \d+:\d\d$/.test(e.text(e.q('countdown-detail')))
		&& window.__shop.item('`+js0+`').stock === '剩余 5 件' && window.__shop.item('`+js1+`').stock === '剩余 5 件'
		&& window.__shop.item('`+js0+`').button === '立即抢购'`)

	c := &chineseSale{t: t, h: h, b: b, dir: dir, item0: item0, js0: js0, js1: js1, saleURL: saleURL}

	c.registerInChinese()
	c.buyInChinese()
	c.onAPhoneInChinese()
	c.payAndMyOrdersInChinese()
	c.switchToEnglishAndBack()
	b.checkConsole()
	t.Logf("Chinese sale page in %v", time.Since(began).Round(time.Millisecond))
}

// registerInChinese: register in Chinese, the captcha asked for and the sign-in said in Chinese.
func (c *chineseSale) registerInChinese() {
	b := c.b
	// Register in Chinese.
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	c.username = "zh_" + suffix
	username := c.username
	b.do("fill in the register form and ask for its captcha",
		chromedp.SendKeys(e2eTestID("username"), username),
		chromedp.SendKeys(e2eTestID("password"), "a shopper's password"),
		chromedp.Click(e2eTestID("register-button")),
	)
	// Asked for beside the picture, in the form (on a phone the page's message is out of sight).
	b.waitFor("the registration captcha, asked for in Chinese", 10*time.Second,
		`e.shown(e.q('register-captcha-image')) && e.shown(e.q('login-note')) && e.text(e.q('login-note')) === '请输入图中的字符，然后点击“注册”。' && e.text(e.q('message')) === ''`)
	// A wrong answer: said once, beside the form (not again in the page's message), a new picture.
	b.do("a wrong answer, Enter", chromedp.SendKeys(e2eTestID("register-captcha-answer"), "wrong\r"))
	b.waitFor("the wrong answer said once, beside the form, in Chinese", 10*time.Second,
		`e.shown(e.q('login-note')) && e.text(e.q('login-note')) === '验证码错误或已过期，请输入新图片中的字符。' && e.text(e.q('message')) === ''
		&& e.q('register-captcha-answer').value === '' && e.shown(e.q('register-captcha-image'))`)
	// An Enter's keypress delivered on its own, after its keydown was handled (a loaded browser,
	// or the DevTools protocol, sends them as two events): it submits nothing. Before, it was the
	// form's implicit submission, a login that answered 401 and replaced the captcha's note.
	b.do("a stray Enter keypress in the answer field", chromedp.Focus(e2eTestID("register-captcha-answer")))
	if _, err := chromedp.Call(b.ctx, input.DispatchKeyEvent, input.DispatchKeyEventParams{
		Type: input.DispatchKeyEventTypeChar, Key: "Enter", Code: "Enter", Text: "\r", UnmodifiedText: "\r", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13,
	}); err != nil {
		b.fatalf("a stray Enter keypress: %v", err)
	}
	notes, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`new Promise((ok) => setTimeout(() => ok(window.__e2e.notes), 300))`, chromedp.EvalAwaitPromise))
	if err != nil {
		b.fatalf("the sign-in form's notes, a moment later: %v", err)
	}
	if indexOf(notes, "正在登录…") >= 0 {
		b.fatalf("a stray Enter keypress while the registration captcha is shown sent a login: notes %q", notes)
	}
	b.do("answer the captcha and press Enter", chromedp.SendKeys(e2eTestID("register-captcha-answer"), "test\r"))
	b.waitFor("signed in, said in Chinese", 10*time.Second,
		`e.shown(e.q('session-user')) && e.text(e.q('session-user')) === '已登录：`+username+` · 退出登录'
		&& e.text(e.q('message')) === '账号已创建，欢迎！'`)

}

// buyInChinese: buy item 0: the buy flow's words in Chinese, up to the order awaiting payment;
// no English word on the page.
func (c *chineseSale) buyInChinese() {
	h, b, dir, item0, js0 := c.h, c.b, c.dir, c.item0, c.js0
	// Buy item 0: the buy flow's words in Chinese, up to the order awaiting payment.
	b.solveCaptcha()
	b.do("click 立即抢购 on item 0", chromedp.Click(e2eBuyButton(item0)))
	b.waitFor("item 0's order awaits payment", 20*time.Second,
		`window.__shop.orders().length === 1 && window.__shop.orders()[0].status === 'PENDING'`)
	order := b.boxOrders()[0]
	c.orderID = order.ID
	h.mu.Lock()
	h.acked = append(h.acked, order.ID)
	h.mu.Unlock()
	if order.Words != "待支付" || order.Pay != "立即支付 · ¥10.00" || order.Price != "¥10.00" ||
		!regexp.MustCompile(`^请在 \d\d:\d\d:\d\d 前支付 （剩余 (9|10):\d\d）$`).MatchString(order.PayBy) {
		b.fatalf("the order box in Chinese: %+v; want 待支付, a deadline 请在 … 前支付 （剩余 …）, 立即支付 · ¥10.00", order)
	}
	messages := e2eEval[[]string](b, "the messages", `e.q('message') && window.__e2e.messages`)
	if indexOf(messages, "正在为你锁定商品…") < 0 || indexOf(messages, "抢到了！商品已为你锁定，订单正在排队处理。") < 0 {
		b.fatalf("messages of the purchase %q: want 正在为你锁定商品… and 抢到了！…", messages)
	}
	b.waitFor("item 0 held, the stock counted, the confirmation said", 10*time.Second,
		`window.__shop.item('`+js0+`').button === '已下单' && window.__shop.item('`+js0+`').disabled
		&& window.__shop.item('`+js0+`').stock === '剩余 4 件'
		&& window.__shop.item('`+js0+`').note === '你已下单此商品，请在下方的订单中完成支付。'
		&& e.text(e.q('message')) === '你的“item 0”订单已确认：请在下方的截止时间前支付，否则商品将重新开放抢购。'`)
	if text := e2eEval[string](b, "the page's text", `document.body.innerText`); regexp.MustCompile(`\b(Buy|left|Pay|Awaiting|Sold|Syncing|Starts|Ends|Log in|Signed)\b`).MatchString(text) {
		b.fatalf("English words on the Chinese page:\n%s", text)
	}
	b.do("scroll to the top", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	b.screenshot(dir, "sale-zh-desktop.png", "")

}

// onAPhoneInChinese: the same page on a 390-pixel phone: Chinese, and nothing wider than the
// screen.
func (c *chineseSale) onAPhoneInChinese() {
	b, dir, js0, js1 := c.b, c.dir, c.js0, c.js1
	// The same page on a 390-pixel phone: Chinese, and nothing wider than the screen.
	b.do("turn into a phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile), chromedp.Reload())
	b.waitFor("the reloaded phone page shows the order", 10*time.Second,
		`window.__shop.orders().length === 1 && window.__shop.orders()[0].pay === '立即支付 · ¥10.00' && window.__shop.item('`+js0+`').button === '已下单'
		&& e.text(e.q('countdown')) === '正在秒杀' && window.__shop.item('`+js1+`').button === '立即抢购' && !window.__shop.item('`+js1+`').disabled
		&& window.__shop.item('`+js0+`').stock === '剩余 4 件'
		&& e.shown(e.q('captcha-image')) && e.q('captcha-image').complete && e.q('captcha-image').naturalWidth > 0`)
	if st := b.langState(); st.Overflow || st.Lang != "zh-CN" {
		b.fatalf("the Chinese sale page on a phone: %+v; want Chinese and no sideways scrolling", st)
	}
	b.screenshot(dir, "sale-zh-phone.png", "")
	b.do("back to the desktop", chromedp.EmulateViewport(1280, 900))

}

// payAndMyOrdersInChinese: pay, in Chinese; my orders and the order page, in Chinese too (a plain
// link: Accept-Language still decides).
func (c *chineseSale) payAndMyOrdersInChinese() {
	b, js0, saleURL, orderID := c.b, c.js0, c.saleURL, c.orderID
	// Pay, in Chinese.
	b.payOnProvider("click 立即支付", e2eOrderButton(orderID, "pay-button"), orderID)
	b.waitFor("paid, said in Chinese on the order page", 10*time.Second,
		`e.text(e.q('order-status')) === '已支付' && e.text(e.q('order-note')) === '支付成功，感谢你的购买！' && document.documentElement.lang === 'zh-CN'`)
	b.openSalePage(saleURL)
	b.waitFor("paid, said in Chinese", 10*time.Second,
		`window.__shop.orders().length === 1 && window.__shop.orders()[0].status === 'PAID' && window.__shop.orders()[0].words === '已支付'
		&& window.__shop.item('`+js0+`').button === '已购买'`)

	// My orders and the order page, in Chinese too (a plain link: Accept-Language still decides).
	b.do("open 我的订单 from the header", chromedp.Click(e2eTestID("nav-orders")))
	b.waitAcross("my orders, in Chinese", 10*time.Second,
		`location.pathname === '/orders' && document.documentElement.lang === 'zh-CN' && e.text(document.querySelector('h1')) === '我的订单'
		&& e.qa('order-row').length === 1 && e.text(e.q('order-row-status')) === '已支付' && e.text(e.q('order-row-link')) === '查看订单'
		&& e.text(e.q('order-row-price')) === '¥10.00' && /^下单时间 2\d{3}年\d{1,2}月\d{1,2}日/.test(e.text(e.q('order-row-created')))`)
	b.do("open the order", chromedp.Click(e2eTestID("order-row-link")))
	b.waitAcross("the order page, in Chinese", 10*time.Second,
		`location.pathname === '/orders/`+orderID+`' && e.text(document.querySelector('h1')) === '订单状态'
		&& e.text(e.q('order-status')) === '已支付' && e.text(e.q('order-note')) === '支付成功，感谢你的购买！'
		&& e.text(e.q('all-orders-link')) === '我的全部订单'`)
	b.do("back to the sale page", chromedp.Navigate(saleURL))
	b.waitFor("the sale page again", 10*time.Second, `window.__shop.orders().length === 1 && window.__shop.orders()[0].words === '已支付'`)

}

// switchToEnglishAndBack: the switch: English, the same page, remembered; the next page by a link
// keeps the language, and by its plain address (still asked for in Chinese) the remembered choice
// wins; then back to Chinese with the switch.
func (c *chineseSale) switchToEnglishAndBack() {
	h, b, js0, saleURL, username := c.h, c.b, c.js0, c.saleURL, c.username
	// The switch: English, the same page, remembered.
	b.do("focus the switch's English link and press Enter", chromedp.Focus(e2eTestID("lang-en")), chromedp.KeyEvent("\r"))
	b.waitAcross("the English page", 10*time.Second,
		`document.documentElement.lang === 'en' && e.text(e.q('countdown')) === 'Live now' && window.__shop && window.__shop.orders().length === 1
		&& window.__shop.orders()[0].words === 'Paid' && window.__shop.item('`+js0+`').button === 'Bought'`)
	st := b.langState()
	if want := saleURL + "?lang=en"; st.URL != want || st.Current != "English" || st.Cookie != "en" || st.Nav != "Sales" {
		b.fatalf("after the switch: %+v; want %s, English current, fs_lang=en", st, want)
	}
	if got := e2eEval[string](b, "the session line", `e.text(e.q('session-user'))`); got != "Signed in as "+username+" · Log out" {
		b.fatalf("session line in English = %q", got)
	}

	// The next page by a link: it keeps the language.
	b.do("open My orders from the header", chromedp.Click(e2eTestID("nav-orders")))
	b.waitAcross("My orders, in English", 10*time.Second,
		`location.pathname === '/orders' && document.documentElement.lang === 'en'
		&& e.qa('order-row').length === 1 && e.text(e.q('order-row-status')) === 'Paid' && e.text(document.querySelector('h1')) === 'My orders'`)
	// The next page by its plain address, still asked for in Chinese: the remembered choice wins.
	b.do("open the home page by its address", chromedp.Navigate(h.srv.URL+"/"))
	b.waitAcross("the home page, in English", 10*time.Second,
		`location.search === '?lang=en' && document.documentElement.lang === 'en' && e.text(document.querySelector('h1')) === 'Flash sales'`)
	// And back to Chinese with the switch.
	b.do("switch back to 中文", chromedp.Click(e2eTestID("lang-zh")))
	b.waitAcross("the home page, in Chinese", 10*time.Second,
		`location.search === '?lang=zh' && document.documentElement.lang === 'zh-CN' && e.text(document.querySelector('h1')) === '限时秒杀'
		&& document.cookie.includes('fs_lang=zh')`)
}
