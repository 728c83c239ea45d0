package tests

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/flashsale/flashsale/services/auth"
)

// The home page in a browser, on a desktop and a 390-pixel phone: the live sale comes before the
// upcoming ones, every card lists its items with prices in the sale's currency and a countdown
// that ticks with the shop's clock, and after a login (Enter in the password field) the session
// area names the shopper by username. Screenshots go to docs/screenshots/home-desktop.png and
// home-phone.png.
func TestE2EHomePage(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h := newHarness(t, harnessOpts{noWriter: true})

	// Three sales, created upcoming-first so that the listing's order is not the creation order.
	now := time.Now().Truncate(time.Second)
	later := createHomeSale(t, h, "Tea harvest", "EUR", now.Add(26*time.Hour),
		homeItem{"Jasmine tea", 450}, homeItem{"Oolong", 1290}, homeItem{"Pu-erh cake", 3800}, homeItem{"Green tea", 700},
		homeItem{"Black tea", 650}, homeItem{"Tea set", 8900}, homeItem{"Kettle", 4500})
	soon := createHomeSale(t, h, "Running shoes", "USD", now.Add(72*time.Minute), homeItem{"Trail runner", 8999}, homeItem{"Socks, 3 pairs", 1250})
	live := createHomeSale(t, h, "Spring phones", "CNY", now.Add(-time.Minute), homeItem{"Phone X", 399900}, homeItem{"Phone case", 1999}, homeItem{"Charger", 9900})
	wantOrder := fmt.Sprintf("%d,%d,%d", live, soon, later)
	wantItems := map[int64]string{
		live:  "Phone X ¥3,999.00|Phone case ¥19.99|Charger ¥99.00",
		soon:  "Trail runner $89.99|Socks, 3 pairs $12.50",
		later: "Jasmine tea €4.50|Oolong €12.90|Pu-erh cake €38.00|Green tea €7.00|Black tea €6.50",
	}

	// A shopper with a password, registered through the API (the test captcha answers "test").
	username := fmt.Sprintf("Alice_%d", time.Now().UnixNano()%1_000_000)
	const password = "correct horse battery"
	registerWithPassword(t, h, username, password)

	outDir := filepath.Join("..", "docs", "screenshots")
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	browserCtx := startE2EBrowser(t, ctx)
	for i, v := range []struct {
		name          string
		width, height int64
		opts          []chromedp.EmulateViewportOption
	}{
		{"desktop", 1280, 900, nil},
		{"phone", 390, 844, []chromedp.EmulateViewportOption{chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait}},
	} {
		tabCtx := browserCtx
		if i > 0 { // a fresh browser context: no cookies from the first
			var tabCancel context.CancelFunc
			tabCtx, tabCancel = chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
			defer tabCancel()
		}
		b := openE2ETab(t, tabCtx, v.name)
		b.do("set the viewport", chromedp.EmulateViewport(v.width, v.height, v.opts...))

		b.loginOnMyOrders(h, username, password)

		b.checkHomeCards(h, wantOrder, wantItems)
		b.screenshot(t.TempDir(), "home.png", filepath.Join(outDir, "home-"+v.name+".png"))
		b.checkConsole()
	}
}

// homeItem is an item of a sale on the home page: its name and price in cents.
type homeItem struct {
	name  string
	price int64
}

// createHomeSale creates a sale of 100 units of each item, two hours long from startsAt, and
// returns its id.
func createHomeSale(t *testing.T, h *harness, name, currency string, startsAt time.Time, items ...homeItem) int64 {
	t.Helper()
	var its []map[string]any
	for _, it := range items {
		its = append(its, map[string]any{"name": it.name, "priceCents": it.price, "quantity": 100})
	}
	r := h.do("POST", "/api/admin/sales", h.token(9000, auth.RoleMerchant), map[string]any{
		"name": name, "currency": currency, "items": its,
		"startsAt": startsAt.UTC().Format(time.RFC3339), "endsAt": startsAt.Add(2 * time.Hour).UTC().Format(time.RFC3339),
	})
	if r.Status != http.StatusCreated {
		t.Fatalf("create sale %q: %d %s", name, r.Status, r.Raw)
	}
	id, _ := strconv.ParseInt(r.str("saleId"), 10, 64)
	return id
}

// registerWithPassword registers a shopper with a password through the API (the test captcha
// answers "test").
func registerWithPassword(t *testing.T, h *harness, username, password string) {
	t.Helper()
	c := h.do("POST", "/api/auth/captcha", "", map[string]any{})
	if c.Status != http.StatusOK {
		t.Fatalf("registration captcha: %d %s", c.Status, c.Raw)
	}
	if r := h.do("POST", "/api/auth/register", "", map[string]string{"username": username, "password": password, "captchaId": c.str("captchaId"), "answer": "test"}); r.Status != http.StatusCreated {
		t.Fatalf("register %s: %d %s", username, r.Status, r.Raw)
	}

}

// loginOnMyOrders logs in on "My orders" with Enter in the password field; the session area
// names the shopper by username.
func (b *e2eTab) loginOnMyOrders(h *harness, username, password string) {
	b.t.Helper()
	b.do("open my orders", chromedp.Navigate(h.srv.URL+"/orders"))
	b.waitFor("the login form", 10*time.Second, `e.shown(e.q('login-form')) && !e.shown(e.q('session-user'))`)
	b.do("log in with Enter",
		chromedp.SendKeys(e2eTestID("username"), username),
		chromedp.SendKeys(e2eTestID("password"), password+"\r"),
	)
	b.waitFor("the session area shows the username", 10*time.Second,
		`e.shown(e.q('session-user')) && !e.shown(e.q('login-form')) && e.text(e.q('session-name')) === `+strconv.Quote(username))
	if got, want := e2eEval[string](b, "the session line", `e.text(e.q('session-user'))`), "Signed in as "+username+" · Log out"; got != want {
		b.fatalf("session line = %q, want %q", got, want)
	}

}

// checkHomeCards checks the home page: the cards in order (live first, then upcoming by start
// time), items with prices in each sale's currency, badges, a countdown that ticks, the orders
// link, and no sideways scrolling.
func (b *e2eTab) checkHomeCards(h *harness, wantOrder string, wantItems map[int64]string) {
	b.t.Helper()
	b.do("open the home page", chromedp.Navigate(h.srv.URL+"/"))
	b.waitFor("the countdowns are filled in", 10*time.Second,
		`e.qa('card-countdown').length === 3 && e.qa('card-countdown').every((c) => e.shown(c) && c.textContent !== '')`)
	if got := e2eEval[string](b, "the order of the cards", `e.qa('sale-card').map((c) => c.getAttribute('data-sale-id')).join(',')`); got != wantOrder {
		b.fatalf("cards = %s, want %s (live first, then upcoming by start time)", got, wantOrder)
	}
	items := e2eEval[map[string]string](b, "the items of the cards", `Object.fromEntries(e.qa('sale-card').map((c) => [c.getAttribute('data-sale-id'),
		Array.from(c.querySelectorAll('[data-testid="card-item"]')).filter(e.shown).map((li) => e.text(li)).join('|')]))`)
	for id, want := range wantItems {
		if got := items[strconv.FormatInt(id, 10)]; got != want {
			b.errorf("sale %d items = %q, want %q", id, got, want)
		}
	}
	badges := e2eEval[[]string](b, "the badges", `e.qa('sale-status').map(e.text)`)
	if fmt.Sprint(badges) != "[Live now Upcoming Upcoming]" {
		b.errorf("badges = %v, want [Live now Upcoming Upcoming]", badges)
	}
	countdowns := e2eEval[[]string](b, "the countdowns", `e.qa('card-countdown').map(e.text)`)
	patterns := []string{`^Ends in 1:5\d:\d\d$`, `^Starts in 1:1\d:\d\d$`, `^Starts in 1 d [12]:\d\d:\d\d$`}
	for j, p := range patterns {
		if !regexp.MustCompile(p).MatchString(countdowns[j]) {
			b.errorf("countdown %d = %q, want %s", j, countdowns[j], p)
		}
	}
	first := countdowns[1]
	b.waitFor("the countdown ticks", 3*time.Second, `e.text(e.qa('card-countdown')[1]) !== `+strconv.Quote(first))
	if !e2eEval[bool](b, "the orders link", `e.shown(e.q('nav-orders'))`) {
		b.errorf("the \"My orders\" link is hidden for a signed-in shopper")
	}
	if w := e2eEval[[]int](b, "the page width", `[document.documentElement.scrollWidth, window.innerWidth]`); w[0] > w[1] {
		b.errorf("the page is %d px wide in a %d px window: it scrolls sideways", w[0], w[1])
	}
}
