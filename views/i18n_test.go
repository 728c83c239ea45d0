package views

import (
	"bytes"
	"context"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"
	"golang.org/x/net/html"
)

// renderIn renders c in a locale and parses it.
func renderIn(t *testing.T, c templ.Component, loc Locale) *goquery.Document {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(WithLocale(context.Background(), loc), &buf); err != nil {
		t.Fatalf("Render: %v", err)
	}
	doc, err := goquery.NewDocumentFromReader(&buf)
	if err != nil {
		t.Fatalf("parse HTML: %v", err)
	}
	return doc
}

// Every word of the server-rendered pages exists in both languages, and the Chinese is not a
// copy of the English.
func TestMessagesComplete(t *testing.T) {
	en, zh := reflect.ValueOf(enMessages), reflect.ValueOf(zhMessages)
	typ := en.Type()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		e, z := en.Field(i), zh.Field(i)
		switch e.Kind() {
		case reflect.String:
			if e.String() == "" || z.String() == "" {
				t.Errorf("%s: en %q, zh %q; want both set", name, e.String(), z.String())
			}
			if name != "SiteName" && e.String() == z.String() {
				t.Errorf("%s: the Chinese is the English (%q)", name, e.String())
			}
		case reflect.Func:
			if e.IsNil() || z.IsNil() {
				t.Errorf("%s: a function is missing (en %v, zh %v)", name, !e.IsNil(), !z.IsNil())
			}
		default:
			t.Errorf("%s: kind %s not checked", name, e.Kind())
		}
	}
	if got, want := enMessages.UnitsInSale(1), "1 unit in this sale"; got != want {
		t.Errorf("en UnitsInSale(1) = %q, want %q", got, want)
	}
	if got, want := zhMessages.UnitsInSale(100), "本场共 100 件"; got != want {
		t.Errorf("zh UnitsInSale(100) = %q, want %q", got, want)
	}
	if got, want := enMessages.MoreItems(3), "and 3 more items"; got != want {
		t.Errorf("en MoreItems(3) = %q, want %q", got, want)
	}
	if got, want := zhMessages.MoreItems(3), "还有 3 件商品"; got != want {
		t.Errorf("zh MoreItems(3) = %q, want %q", got, want)
	}
}

func TestParseLang(t *testing.T) {
	for in, want := range map[string]Lang{"zh": Chinese, "ZH": Chinese, " en ": English, "en": English, "fr": "", "": "", "zh-CN": ""} {
		got, ok := ParseLang(in)
		if got != want || ok != (want != "") {
			t.Errorf("ParseLang(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// latinWord finds words in Latin letters: on a Chinese page, the only ones may be the data
// (sale and item names), the brand, "JavaScript" and the switch's "English".
var latinWord = regexp.MustCompile(`[A-Za-z]{2,}`)

// untranslated lists the Latin words of a page's text, alt, aria-label, title and placeholder,
// leaving out the elements that hold data, not words.
func untranslated(doc *goquery.Document) []string {
	skip := map[string]bool{"sale-name": true, "item-name": true, "sale-link": true, "card-item-name": true,
		"home-link": true, "lang-en": true, "starts-at": true, "ends-at": true, "price": true, "card-item-price": true}
	var found []string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			for _, a := range n.Attr {
				if a.Key == "data-testid" && skip[a.Val] {
					return
				}
			}
			if n.Data == "script" || n.Data == "style" || n.Data == "title" || n.Data == "noscript" {
				return
			}
			for _, a := range n.Attr {
				switch a.Key {
				case "alt", "aria-label", "title", "placeholder":
					found = append(found, latinWord.FindAllString(a.Val, -1)...)
				}
			}
		}
		if n.Type == html.TextNode {
			text := strings.NewReplacer("JavaScript", "", "flashsale", "").Replace(n.Data)
			found = append(found, latinWord.FindAllString(text, -1)...)
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	for _, n := range doc.Nodes {
		walk(n)
	}
	// goquery does not parse into <template>: its rows are checked by text below.
	doc.Find("template").Each(func(_ int, s *goquery.Selection) {
		inner, _ := s.Html()
		frag, err := goquery.NewDocumentFromReader(strings.NewReader("<ul>" + inner + "</ul>"))
		if err == nil {
			found = append(found, untranslated(frag)...)
		}
	})
	return found
}

type localizedPage struct {
	name  string
	c     templ.Component
	title map[Lang]string
	h1    map[Lang]string
	// texts: data-testid → the text of that element in each language
	texts map[string]map[Lang]string
}

func localizedPages() []localizedPage {
	home := Home{Sales: []SaleCard{{ID: "1", Name: "Phones", StartsAt: saleStart, EndsAt: saleEnd, Status: "live", Currency: "CNY",
		Items: []SaleItem{{ID: "1", Name: "A", PriceCents: 100}, {ID: "2", Name: "B", PriceCents: 100}, {ID: "3", Name: "C", PriceCents: 100},
			{ID: "4", Name: "D", PriceCents: 100}, {ID: "5", Name: "E", PriceCents: 100}, {ID: "6", Name: "F", PriceCents: 100}}}},
		Next: "abc", Paged: true}
	return []localizedPage{
		{name: "home", c: HomePage(home),
			title: map[Lang]string{English: "Flash sales · flashsale", Chinese: "限时秒杀 · flashsale"},
			h1:    map[Lang]string{English: "Flash sales", Chinese: "限时秒杀"},
			texts: map[string]map[Lang]string{
				"sale-status":     {English: "Live now", Chinese: "正在秒杀"},
				"card-items-more": {English: "and 1 more item", Chinese: "还有 1 件商品"},
				"sales-more":      {English: "More sales", Chinese: "更多活动"},
				"nav-sales":       {English: "Sales", Chinese: "秒杀活动"},
			}},
		{name: "home empty", c: HomePage(Home{}),
			title: map[Lang]string{English: "Flash sales · flashsale", Chinese: "限时秒杀 · flashsale"},
			texts: map[string]map[Lang]string{
				"empty-state": {English: "No sales are live or coming up right now. Check back soon.", Chinese: "目前没有正在进行或即将开始的秒杀活动，请稍后再来看看。"},
			}},
		{name: "sale", c: SalePage(demoSale()),
			title: map[Lang]string{English: "Spring phones · flashsale", Chinese: "Spring phones · flashsale"},
			texts: map[string]map[Lang]string{
				"countdown":       {English: "Syncing with the shop’s clock…", Chinese: "正在与商城时钟同步…"},
				"buy-button":      {English: "BuyBuyBuy", Chinese: "立即抢购立即抢购立即抢购"},
				"login-button":    {English: "Log in", Chinese: "登录"},
				"register-button": {English: "Register", Chinese: "注册"},
				"session-user":    {English: "Signed in as · Log out", Chinese: "已登录： · 退出登录"},
				"captcha-hint":    {English: "Solve this now, before the sale starts; then press Buy the moment it opens.", Chinese: "请在秒杀开始前输入验证码，开始后立即点击“立即抢购”。"},
				"quantity":        {English: "100 units in this sale5 units in this sale1 unit in this sale", Chinese: "本场共 100 件本场共 5 件本场共 1 件"},
			}},
		{name: "order", c: OrderPage(Order{ID: "0b9f6a4e-2f6c-4c35-9d3b-3a1f0c9e7d11"}),
			title: map[Lang]string{English: "Order · flashsale", Chinese: "订单 · flashsale"},
			h1:    map[Lang]string{English: "Order status", Chinese: "订单状态"},
			texts: map[string]map[Lang]string{
				"logged-out":      {English: "You are not signed in. Log in to see this order.", Chinese: "你还没有登录。登录后即可查看此订单。"},
				"order-status":    {English: "checking…", Chinese: "查询中…"},
				"pay-button":      {English: "Pay now", Chinese: "立即支付"},
				"cancel-button":   {English: "Cancel order", Chinese: "取消订单"},
				"all-orders-link": {English: "All my orders", Chinese: "我的全部订单"},
			}},
		{name: "my orders", c: MyOrdersPage(MyOrders{}),
			title: map[Lang]string{English: "My orders · flashsale", Chinese: "我的订单 · flashsale"},
			h1:    map[Lang]string{English: "My orders", Chinese: "我的订单"},
			texts: map[string]map[Lang]string{
				"logged-out":   {English: "You are not signed in. Log in to see your orders.", Chinese: "你还没有登录。登录后即可查看你的订单。"},
				"orders-empty": {English: "You have no orders yet. See the current sales.", Chinese: "你还没有订单。查看当前的秒杀活动。"},
				"load-more":    {English: "Load more", Chinese: "加载更多"},
			}},
		{name: "not found", c: NotFoundPage(""),
			title: map[Lang]string{English: "Not found · flashsale", Chinese: "页面不存在 · flashsale"},
			h1:    map[Lang]string{English: "Nothing here", Chinese: "这里什么也没有"},
			texts: map[string]map[Lang]string{
				"not-found-message": {English: "The page you asked for does not exist, or the sale is over.", Chinese: "你要找的页面不存在，或者活动已经结束。"},
				"home-button":       {English: "See the current sales", Chinese: "查看当前的秒杀活动"},
			}},
	}
}

// Each shopper page in each language: <html lang>, the title, the heading, its words, no
// English left on the Chinese page, and the language switch with the page's own language
// marked current.
func TestPagesInBothLanguages(t *testing.T) {
	for _, p := range localizedPages() {
		for _, lang := range Langs {
			t.Run(p.name+"/"+string(lang), func(t *testing.T) {
				doc := renderIn(t, p.c, Locale{Lang: lang, Path: "/somewhere"})
				if got, want := doc.Find("html").AttrOr("lang", ""), lang.Tag(); got != want {
					t.Errorf("<html lang> = %q, want %q", got, want)
				}
				if got, want := doc.Find("title").Text(), p.title[lang]; got != want {
					t.Errorf("title = %q, want %q", got, want)
				}
				if want, ok := p.h1[lang]; ok {
					if got := doc.Find("h1").Text(); got != want {
						t.Errorf("h1 = %q, want %q", got, want)
					}
				}
				for id, want := range p.texts {
					if got := strings.Join(strings.Fields(doc.Find(byTestID(id)).Text()), " "); got != strings.Join(strings.Fields(want[lang]), " ") {
						t.Errorf("%s = %q, want %q", id, got, want[lang])
					}
				}
				if got, want := doc.Find(byTestID("nav-orders")).Text(), MessagesOf(lang).NavOrders; got != want {
					t.Errorf("nav my orders = %q, want %q", got, want)
				}
				if lang == Chinese {
					if words := untranslated(doc); len(words) > 0 {
						t.Errorf("English words on the Chinese page: %q", words)
					}
				}
				checkLangSwitch(t, doc, lang, "/somewhere")
			})
		}
	}
}

// checkLangSwitch: one link per language to the same page with ?lang=, in the header, each
// named in its own language, and only the page's own aria-current.
func checkLangSwitch(t *testing.T, doc *goquery.Document, lang Lang, path string) {
	t.Helper()
	sw := doc.Find("header nav" + byTestID("lang-switch"))
	if got, want := sw.Length(), 1; got != want {
		t.Fatalf("language switches in the header = %d, want %d", got, want)
	}
	if got := sw.AttrOr("aria-label", ""); got != MessagesOf(lang).LangLabel {
		t.Errorf("switch aria-label = %q, want %q", got, MessagesOf(lang).LangLabel)
	}
	links := sw.Find("a[href]")
	if got, want := links.Length(), 2; got != want {
		t.Fatalf("switch links = %d, want %d", got, want)
	}
	for _, l := range Langs {
		a := sw.Find(byTestID("lang-" + string(l)))
		if got, want := a.AttrOr("href", ""), path+"?lang="+string(l); got != want {
			t.Errorf("switch link to %s = %q, want %q", l, got, want)
		}
		if got := a.Text(); got != l.Name() {
			t.Errorf("switch link to %s says %q, want %q", l, got, l.Name())
		}
		if got := a.AttrOr("lang", ""); got != l.Tag() {
			t.Errorf("switch link to %s lang = %q, want %q", l, got, l.Tag())
		}
		cur, has := a.Attr("aria-current")
		if l == lang && (!has || cur != "true") {
			t.Errorf("switch link to %s (the page's language) aria-current = %q, %v; want true", l, cur, has)
		}
		if l != lang && has {
			t.Errorf("switch link to %s (not the page's language) has aria-current=%q", l, cur)
		}
	}
}

// A page asked for with ?lang= keeps it in its own links (the next page is in the same
// language, whatever the browser's Accept-Language); a page chosen by Accept-Language links
// without it. The switch keeps the page's other query parameters.
func TestInternalLinksKeepPinnedLanguage(t *testing.T) {
	home := Home{Sales: []SaleCard{{ID: "7", Name: "Phones", StartsAt: saleStart, EndsAt: saleEnd, Status: "live"}}, Next: "abc", Paged: true}
	const orderID = "0b9f6a4e-2f6c-4c35-9d3b-3a1f0c9e7d11"
	cases := []struct {
		c    templ.Component
		want map[string]string // selector → href, pinned to zh
	}{
		{HomePage(home), map[string]string{
			byTestID("home-link"): "/?lang=zh", byTestID("nav-sales"): "/?lang=zh", byTestID("nav-orders"): "/orders?lang=zh",
			byTestID("sale-link"): "/sales/7?lang=zh", byTestID("sales-more"): "/?cursor=abc&lang=zh", byTestID("sales-first"): "/?lang=zh",
		}},
		{OrderPage(Order{ID: orderID}), map[string]string{
			byTestID("order-link"): "/orders/" + orderID + "?lang=zh", byTestID("all-orders-link"): "/orders?lang=zh",
		}},
		{NotFoundPage(""), map[string]string{byTestID("home-button"): "/?lang=zh"}},
	}
	for _, tc := range cases {
		pinned := renderIn(t, tc.c, Locale{Lang: Chinese, Pinned: true, Path: "/", Query: url.Values{"cursor": {"abc"}}})
		free := renderIn(t, tc.c, Locale{Lang: Chinese, Path: "/"})
		for sel, want := range tc.want {
			if got := pinned.Find(sel).First().AttrOr("href", ""); got != want {
				t.Errorf("pinned %s href = %q, want %q", sel, got, want)
			}
			plain := strings.TrimSuffix(strings.TrimSuffix(want, "?lang=zh"), "&lang=zh")
			if got := free.Find(sel).First().AttrOr("href", ""); got != plain {
				t.Errorf("by Accept-Language %s href = %q, want %q", sel, got, plain)
			}
		}
		if got, want := pinned.Find(byTestID("lang-en")).AttrOr("href", ""), "/?cursor=abc&lang=en"; got != want {
			t.Errorf("switch to English = %q, want %q (the page's other parameters kept)", got, want)
		}
	}
}

// The merchant's page is not translated: rendered without a locale it is English, with no
// switch (whose choice it would not follow).
func TestPageWithoutLocale(t *testing.T) {
	doc, _ := render(t, AdminPage(Admin{}))
	if got := doc.Find("html").AttrOr("lang", ""); got != "en" {
		t.Errorf("<html lang> = %q, want en", got)
	}
	if got := doc.Find(byTestID("lang-switch")).Length(); got != 0 {
		t.Errorf("language switches = %d, want 0", got)
	}
}
