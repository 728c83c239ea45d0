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
)

// The merchant's control room in a real browser (issue 9, points 1 to 4): the merchant edits a
// sale in the form prefilled from it (times in the browser's zone, only what changed sent in the
// PATCH, an error beside its field with nothing saved), forces its warm-up and sees "loaded at
// HH:MM:SS", pauses it while a shopper's sale page, in a browser context of its own, says the
// sale is paused, and resumes it; the live view shows the shopper's order frozen, then paid with
// the real stock one lower; the merchant ends the sale early (after a confirm step) and lists its
// orders. The live view is photographed before, during and after the sale, at desktop width and
// on a 390-pixel phone, into docs/screenshots/.

// e2eLiveView is what the test reads of the live view.
type e2eLiveView struct {
	Status string            `json:"status"`
	Tiles  map[string]string `json:"tiles"`
	Items  map[string]struct {
		Quantity  string `json:"quantity"`
		Displayed string `json:"displayed"`
		Frozen    string `json:"frozen"`
		Real      string `json:"real"`
		Paid      string `json:"paid"`
		PaidCents string `json:"paidCents"`
		SoldOut   string `json:"soldOut"`
	} `json:"items"`
	Funnel map[string]string `json:"funnel"`
	Books  string            `json:"books"`
	Chart  struct {
		Accepted string `json:"accepted"`
		Refused  string `json:"refused"`
		Bars     int    `json:"bars"`
	} `json:"chart"`
}

const e2eLiveViewJS = `(() => {
	const tiles = {}; for (const k of ['paid', 'frozen', 'displayed', 'accepted', 'refused', 'books', 'lag', 'queue']) { tiles[k] = e.text(e.q('live-' + k)); }
	const items = {};
	for (const tr of e.qa('live-item-row')) {
		const c = (k) => e.text(tr.querySelector('[data-col="' + k + '"]'));
		items[c('name')] = { quantity: c('quantity'), displayed: c('displayed'), frozen: c('frozen'), real: c('real'), paid: c('paid'), paidCents: c('paidCents'), soldOut: c('soldOut') };
	}
	const funnel = {}; for (const li of document.querySelectorAll('[data-step]')) { funnel[li.getAttribute('data-step')] = e.text(li.querySelector('.funnel-value')); }
	const svg = e.q('chart-svg');
	return { status: e.q('live-status').getAttribute('data-status'), tiles, items, funnel, books: e.q('recon-state').getAttribute('data-state'),
		chart: { accepted: svg ? svg.getAttribute('data-accepted') : '', refused: svg ? svg.getAttribute('data-refused') : '',
			bars: svg ? svg.querySelectorAll('rect').length : 0 } };
})()`

// e2eLocalInput is a time as the form writes it in a datetime-local field: local, with the
// seconds only when there are any.
func e2eLocalInput(t time.Time) string {
	if t.Second() == 0 {
		return t.Local().Format("2006-01-02T15:04")
	}
	return t.Local().Format("2006-01-02T15:04:05")
}

func (b *e2eTab) liveView() e2eLiveView {
	b.t.Helper()
	return e2eEval[e2eLiveView](b, "the live view", e2eLiveViewJS)
}

// e2eEntry is a CSS selector inside the /admin entry of a sale.
func e2eEntry(saleID int64, testid string) chromedp.CSS {
	return chromedp.CSS(fmt.Sprintf(`[data-testid="admin-sale"][data-sale-id="%d"] [data-testid=%q]`, saleID, testid))
}

// e2eLogin signs the tab's browser context in through the API, from the page.
func (b *e2eTab) e2eLogin(username, password string) {
	b.t.Helper()
	status, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`fetch('/api/auth/login', {method: 'POST', headers: {'Content-Type': 'application/json'},
		body: JSON.stringify({username: `+strconv.Quote(username)+`, password: `+strconv.Quote(password)+`})}).then((r) => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != http.StatusOK {
		b.fatalf("login of %s answered %d (%v)", username, status, err)
	}
}

// shootBoth photographs the page at desktop width and on a 390-pixel phone (checking that the
// phone needs no sideways scroll), then goes back to the desktop.
func (b *e2eTab) shootBoth(dir, name string) {
	b.t.Helper()
	b.waitFor("the chart drawn at desktop width", 5*time.Second, `!!e.q('chart-svg') && innerWidth === 1280`)
	b.screenshot(dir, name+"-desktop.png", "")
	b.do("a 390-pixel phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	b.waitFor("the chart redrawn for the phone", 5*time.Second,
		`innerWidth === 390 && !!e.q('chart-svg') && +e.q('chart-svg').getAttribute('width') <= 390`)
	over := e2eEval[[]string](b, "what is wider than the phone", `(() => {
		const vw = document.documentElement.clientWidth; const out = [];
		if (document.documentElement.scrollWidth > vw) { out.push('page ' + document.documentElement.scrollWidth); }
		for (const x of document.querySelectorAll('[data-testid="live-panel"] *')) {
			const r = x.getBoundingClientRect(); if (r.width > 0 && (r.right > vw + 0.5 || r.left < -0.5)) { out.push((x.getAttribute('data-testid') || x.className || x.tagName) + ' ' + Math.round(r.left) + '..' + Math.round(r.right)); }
		}
		return out.slice(0, 8); })()`)
	if len(over) > 0 {
		b.errorf("%s on a 390-pixel phone: sticks out of the screen: %q", name, over)
	}
	b.screenshot(dir, name+"-phone.png", "")
	b.do("back to the desktop", chromedp.EmulateViewport(1280, 900))
}

// controlRoom is the merchant's control room scenario: the harness, the merchant's tab (b), the
// shopper's (s), the sale and what the steps learn on the way.
type controlRoom struct {
	t            *testing.T
	h            *harness
	b, s         *e2eTab
	ctx          context.Context
	browserCtx   context.Context
	saleID       int64
	items        map[string]int64 // item name -> id
	sale         saleIDs
	start, soon  time.Time
	dir          string // screenshots
	shopperID    int64
	sName, sPass string
	orderID      string
	editEnds     string // the end as the edit form showed it
}

// newControlRoom creates a merchant, a shopper and a sale half an hour ahead, and opens the admin
// page in a browser, signed in as the merchant.
func newControlRoom(t *testing.T, ctx context.Context) *controlRoom {
	h := newHarness(t, harnessOpts{})
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	mName, mPass := "ctl_merchant_"+suffix, "merchant test pass"
	sName, sPass := "ctl_shopper_"+suffix, "shopper test pass"
	m, err := h.app.Auth.AddUser(ctx, mName, mPass, auth.RoleMerchant)
	if err != nil {
		t.Fatalf("add the merchant: %v", err)
	}
	shopper, err := h.app.Auth.AddUser(ctx, sName, sPass, auth.RoleShopper)
	if err != nil {
		t.Fatalf("add the shopper: %v", err)
	}
	shopperID := shopper.ID

	// A sale half an hour ahead: past the automatic warm-up (ten minutes before the start), so
	// Redis does not hold it until the merchant asks.
	start := time.Now().Add(30 * time.Minute).Truncate(time.Minute)
	r := h.do("POST", "/api/admin/sales", h.token(m.ID, auth.RoleMerchant), map[string]any{
		"name": "Desk lamps", "startsAt": start.UTC().Format(time.RFC3339), "endsAt": start.Add(time.Hour).UTC().Format(time.RFC3339),
		"items": []map[string]any{{"name": "Lamp", "priceCents": 4900, "quantity": 5}, {"name": "Desk", "priceCents": 25000, "quantity": 3}},
	})
	if r.Status != http.StatusCreated {
		t.Fatalf("create the sale: %d %s", r.Status, r.Raw)
	}
	saleID, _ := strconv.ParseInt(r.str("saleId"), 10, 64)
	items := map[string]int64{}
	for _, it := range r.Body["items"].([]any) {
		id, _ := strconv.ParseInt(it.(map[string]any)["itemId"].(string), 10, 64)
		items[it.(map[string]any)["name"].(string)] = id
	}
	sale := saleIDs{sale: saleID, items: []int64{items["Lamp"], items["Desk"]}}

	browserCtx := startE2EBrowser(t, ctx)
	b := openE2ETab(t, browserCtx, "merchant")
	b.do("the desktop", chromedp.EmulateViewport(1280, 900))
	b.do("open the admin page", chromedp.Navigate(h.srv.URL+"/admin"))
	b.e2eLogin(mName, mPass)
	b.do("reload signed in", chromedp.Reload())
	return &controlRoom{t: t, h: h, b: b, ctx: ctx, browserCtx: browserCtx, saleID: saleID, items: items, sale: sale, start: start,
		shopperID: shopperID, sName: sName, sPass: sPass}
}

func TestE2EControlRoom(t *testing.T) {
	t.Parallel()
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	c := newControlRoom(t, ctx)

	c.warmUp()
	c.openTheEditForm()
	c.editAndSave()
	c.moveTheStartSoon()
	c.openLiveViewBefore()
	c.editAsTheSaleStarts()
	c.pauseAndResume()
	c.buyAndPay()
	c.sellOutTheShadeAndRefuseACut()
	c.endEarly()
	c.checkOrdersPage()
	c.h.checkInvariants(c.sale)
	c.b.checkConsole()
	c.s.checkConsole()
	t.Logf("control room in %v", time.Since(began).Round(time.Millisecond))
}
