package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/views"
)

func TestNegotiateLang(t *testing.T) {
	for header, want := range map[string]views.Lang{
		"":                               views.English,
		"zh":                             views.Chinese,
		"zh-CN":                          views.Chinese,
		"zh-cn,zh;q=0.9":                 views.Chinese,
		"zh-Hans":                        views.Chinese,
		"zh-Hans-CN":                     views.Chinese,
		"zh-SG":                          views.Chinese,
		"zh-CN,zh;q=0.9,en;q=0.8":        views.Chinese,
		"en-US,en;q=0.9,zh-CN;q=0.8":     views.English,
		"en":                             views.English,
		"fr-FR,fr;q=0.9":                 views.English, // nothing we serve: English
		"fr-FR, zh;q=0.5":                views.Chinese, // French first, but of ours Chinese
		"fr, zh;q=0.5, en;q=0.6":         views.English,
		"zh;q=0.3, en;q=0.7":             views.English, // q-values, not the order
		"en;q=0.3, zh-CN;q=0.7":          views.Chinese,
		"zh-TW":                          views.English, // Traditional Chinese is not served
		"zh-Hant, zh-CN;q=0.5":           views.Chinese,
		"zh;q=0, en":                     views.English, // q=0: not acceptable
		"zh;q=0":                         views.English,
		"zh;q=2":                         views.English, // malformed q: ignored
		"zh;q=abc, en;q=0.1":             views.English,
		"*":                              views.English,
		"de, *;q=0.5, zh;q=0.6":          views.Chinese,
		" ZH-cn ; Q=0.8 , EN ; q=0.5 ":   views.Chinese,
		"zh-CN;foo=bar":                  views.Chinese,
		strings.Repeat("xx,", 40) + "zh": views.English, // beyond the entries read
	} {
		if got := NegotiateLang(header); got != want {
			t.Errorf("NegotiateLang(%q) = %q, want %q", header, got, want)
		}
	}
}

// langCatalog serves one sale and a listing of it.
type langCatalog struct {
	Catalog
}

var langSale = shop.Sale{ID: 42, Name: "Spring phones", StartsAt: time.Date(2031, 3, 4, 2, 0, 0, 0, time.UTC),
	EndsAt: time.Date(2031, 3, 4, 3, 0, 0, 0, time.UTC), Currency: "CNY",
	Items: []shop.Item{{ID: 7, Name: "Phone X", PriceCents: 1234, Quantity: 100}}}

func (langCatalog) Cached(_ context.Context, id int64) (shop.Sale, error) {
	if id == langSale.ID {
		return langSale, nil
	}
	return shop.Sale{}, shop.Errorf(shop.CodeNotFound, "no sale %d", id)
}

func (langCatalog) Upcoming(context.Context, string) ([]shop.Sale, string, error) {
	return []shop.Sale{langSale}, "", nil
}

// langRouter serves the shopper pages as web.NewRouter does.
func langRouter(secure bool) *gin.Engine {
	gin.SetMode(gin.TestMode)
	p := &Pages{Catalog: langCatalog{}, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return langSale.StartsAt.Add(-time.Hour) },
		SecureCookie: secure}
	r := gin.New()
	r.GET("/", p.Home)
	r.GET("/sales/:saleId", p.Sale)
	r.GET("/orders", p.MyOrders)
	r.GET("/orders/:orderId", p.Order)
	r.GET("/admin", p.Admin)
	r.GET("/admin/sales/:saleId", p.AdminSale)
	r.GET("/admin/sales/:saleId/orders", p.AdminSaleOrders)
	r.NoRoute(p.NotFound)
	return r
}

type langGet struct {
	path, acceptLanguage, cookie, ifNoneMatch string
}

func (g langGet) do(t *testing.T, r http.Handler) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, g.path, nil)
	if g.acceptLanguage != "" {
		req.Header.Set("Accept-Language", g.acceptLanguage)
	}
	if g.cookie != "" {
		req.Header.Set("Cookie", g.cookie)
	}
	if g.ifNoneMatch != "" {
		req.Header.Set("If-None-Match", g.ifNoneMatch)
	}
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	return w
}

func htmlLang(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(w.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	return doc.Find("html").AttrOr("lang", "")
}

func varies(w *httptest.ResponseRecorder) bool {
	for _, v := range w.Header().Values("Vary") {
		for part := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), "Accept-Language") {
				return true
			}
		}
	}
	return false
}

// Every page, the merchant's too, follows ?lang=, else Accept-Language; a page chosen by Accept-Language
// says Vary: Accept-Language, a ?lang= page sets the fs_lang cookie and does not vary.
func TestPagesNegotiateLanguage(t *testing.T) {
	r := langRouter(false)
	const orderID = "0b9f6a4e-2f6c-4c35-9d3b-3a1f0c9e7d11"
	for _, path := range []string{"/", "/sales/42", "/orders", "/orders/" + orderID, "/sales/999", "/no/such/page",
		"/admin", "/admin/sales/42", "/admin/sales/42/orders"} {
		t.Run(path, func(t *testing.T) {
			for _, tc := range langCases(path) {
				checkLangAnswer(t, tc, tc.get.do(t, r))
			}
		})
	}
}

// langCase is a request for a shopper page and how its answer must be in language, Vary and cookie.
type langCase struct {
	get        langGet
	wantLang   string
	wantVary   bool
	wantCookie string // the fs_lang Set-Cookie, "" for none
}

// langCases are the requests of path with every way of asking for a language.
func langCases(path string) []langCase {
	return []langCase{
		{langGet{path: path}, "en", true, ""},
		{langGet{path: path, acceptLanguage: "zh-CN,zh;q=0.9,en;q=0.8"}, "zh-CN", true, ""},
		{langGet{path: path, acceptLanguage: "en-US,en;q=0.9"}, "en", true, ""},
		// The cookie alone never changes the HTML: the script follows it to ?lang=.
		{langGet{path: path, acceptLanguage: "en-US", cookie: "fs_lang=zh"}, "en", true, ""},
		{langGet{path: path + "?lang=zh", acceptLanguage: "en-US"}, "zh-CN", false, "zh"},
		{langGet{path: path + "?lang=en", acceptLanguage: "zh-CN"}, "en", false, "en"},
		// Already remembered: nothing to set.
		{langGet{path: path + "?lang=zh", cookie: "fs_lang=zh"}, "zh-CN", false, ""},
		{langGet{path: path + "?lang=zh", cookie: "fs_lang=en"}, "zh-CN", false, "zh"},
		// Not a language we serve: as if absent.
		{langGet{path: path + "?lang=fr", acceptLanguage: "zh"}, "zh-CN", true, ""},
		{langGet{path: path + "?lang=zh&lang=en", acceptLanguage: "en"}, "en", true, ""},
	}
}

// checkLangAnswer checks the answer w to tc's request: a page, in the language, varying or not.
func checkLangAnswer(t *testing.T, tc langCase, w *httptest.ResponseRecorder) {
	t.Helper()
	if w.Code != http.StatusOK && w.Code != http.StatusNotFound {
		t.Fatalf("%+v: status %d", tc.get, w.Code)
	}
	if got := htmlLang(t, w); got != tc.wantLang {
		t.Errorf("%+v: <html lang> = %q, want %q", tc.get, got, tc.wantLang)
	}
	if got := varies(w); got != tc.wantVary {
		t.Errorf("%+v: Vary %q, want Accept-Language in it: %v", tc.get, w.Header().Values("Vary"), tc.wantVary)
	}
	checkLangCookie(t, tc, w)
}

// checkLangCookie checks the fs_lang cookie w sets: none, or tc's, for a year, to the script.
func checkLangCookie(t *testing.T, tc langCase, w *httptest.ResponseRecorder) {
	t.Helper()
	var cookie *http.Cookie
	for _, c := range w.Result().Cookies() {
		if c.Name == LangCookie {
			cookie = c
		}
	}
	if tc.wantCookie == "" {
		if cookie != nil {
			t.Errorf("%+v: Set-Cookie %s, want none", tc.get, cookie)
		}
		return
	}
	if cookie == nil {
		t.Fatalf("%+v: no %s cookie set, want %s", tc.get, LangCookie, tc.wantCookie)
	}
	if cookie.Value != tc.wantCookie || cookie.Path != "/" || cookie.MaxAge != 365*24*3600 ||
		cookie.SameSite != http.SameSiteLaxMode || cookie.HttpOnly || cookie.Secure {
		t.Errorf("%+v: Set-Cookie %s; want %s=%s, Path=/, a year, SameSite=Lax, readable by the script", tc.get, cookie, LangCookie, tc.wantCookie)
	}
}

// In production the cookie is Secure.
func TestLangCookieSecure(t *testing.T) {
	w := langGet{path: "/sales/42?lang=zh"}.do(t, langRouter(true))
	cs := w.Result().Cookies()
	if len(cs) != 1 || cs[0].Name != LangCookie || !cs[0].Secure {
		t.Errorf("cookies %v, want one Secure %s", cs, LangCookie)
	}
}

// The cached sale page: one copy per language. Every visitor of a language gets the same bytes
// and ETag; the two languages' ETags differ, so a revalidation never answers 304 with the
// other language's copy.
func TestSalePageETagPerLanguage(t *testing.T) {
	r := langRouter(false)
	zh1 := langGet{path: "/sales/42", acceptLanguage: "zh-CN,zh;q=0.9"}.do(t, r)
	zh2 := langGet{path: "/sales/42", acceptLanguage: "zh", cookie: "fs_lang=en; fs_csrf=abc"}.do(t, r)
	en := langGet{path: "/sales/42", acceptLanguage: "en-GB"}.do(t, r)
	pinned := langGet{path: "/sales/42?lang=zh"}.do(t, r)
	for _, w := range []*httptest.ResponseRecorder{zh1, zh2, en, pinned} {
		if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Cache-Control"), "public") || w.Header().Get("ETag") == "" {
			t.Fatalf("status %d, Cache-Control %q, ETag %q; want 200, public, an ETag", w.Code, w.Header().Get("Cache-Control"), w.Header().Get("ETag"))
		}
	}
	if zh1.Body.String() != zh2.Body.String() || zh1.Header().Get("ETag") != zh2.Header().Get("ETag") {
		t.Errorf("two Chinese visitors got different pages or ETags (%s, %s)", zh1.Header().Get("ETag"), zh2.Header().Get("ETag"))
	}
	zhTag, enTag := zh1.Header().Get("ETag"), en.Header().Get("ETag")
	if zhTag == enTag {
		t.Fatalf("Chinese and English pages share the ETag %s", zhTag)
	}
	if !strings.HasPrefix(zhTag, `"zh-`) || !strings.HasPrefix(enTag, `"en-`) {
		t.Errorf("ETags %s, %s: want the language named in them", zhTag, enTag)
	}
	if pinned.Header().Get("ETag") == zhTag {
		t.Errorf("the ?lang=zh page (its links keep ?lang=zh) has the ETag of the Accept-Language one")
	}
	if w := (langGet{path: "/sales/42", acceptLanguage: "zh-CN", ifNoneMatch: zhTag}).do(t, r); w.Code != http.StatusNotModified {
		t.Errorf("revalidating the Chinese copy in Chinese = %d, want 304", w.Code)
	}
	if w := (langGet{path: "/sales/42", acceptLanguage: "en", ifNoneMatch: zhTag}).do(t, r); w.Code != http.StatusOK || htmlLang(t, w) != "en" {
		t.Errorf("revalidating the Chinese copy in English = %d, want 200 with the English page", w.Code)
	}
}
