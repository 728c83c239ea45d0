package tests

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale/services/auth"
)

// A fair start in a real browser: the sale page says before the start that its first seconds are
// a draw; a shopper who buys inside the window is told "You are in the draw", the order box says
// "In the draw", and once the draw has closed the same order goes on as any order would (Awaiting
// payment, Pay), with a line saying it was drawn (the shopper is the only entrant of their item,
// so they are drawn). Two shoppers enter the other item, which has one unit, through the API: the
// one not drawn sees "Not drawn" and the draw's sentence, calmly, on My orders and on the order
// page, and checks the draw in the browser (its rank recomputed from the revealed seed). The
// merchant's live view shows the draw (window, entries, drawn, when it closed), its commitment
// and seed, and its record, every entry with its rank in its item and outcome. Screenshots at 1280 and 390 px go to
// docs/screenshots/fair-start-*.png.
func TestE2EFairStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	h := newHarness(t, harnessOpts{})
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	pass := "fair start test pass"
	add := func(name, role string) int64 {
		u, err := h.app.Auth.AddUser(ctx, name+suffix, pass, role)
		if err != nil {
			t.Fatalf("add %s: %v", name, err)
		}
		return u.ID
	}
	merchantID := add("fair_merchant_", auth.RoleMerchant)
	shopperName := "fair_shopper_" + suffix
	add("fair_shopper_", auth.RoleShopper)
	others := []int64{add("fair_a_", auth.RoleShopper), add("fair_b_", auth.RoleShopper)}
	otherNames := map[int64]string{others[0]: "fair_a_" + suffix, others[1]: "fair_b_" + suffix}
	dir := e2eShotDir(t)

	browserCtx := startE2EBrowser(t, ctx)
	one := openE2ETab(t, browserCtx, "shopper")
	one.do("open the home page", chromedp.Navigate(h.srv.URL+"/"))
	one.e2eLogin(shopperName, pass)

	// A sale starting a few seconds from now whose first 6 seconds are a draw: one unit of each item.
	const window = 6000
	startsAt := time.Now().Add(e2eLead).Truncate(time.Second).Add(time.Second)
	r := h.do("POST", "/api/admin/sales", h.token(merchantID, auth.RoleMerchant), map[string]any{
		"name": "Fair start sale", "startsAt": startsAt.UTC().Format(time.RFC3339), "endsAt": startsAt.Add(time.Hour).UTC().Format(time.RFC3339),
		"fairStartMillis": window, "items": []map[string]any{{"name": "Fair mug", "priceCents": 1500, "quantity": 1}, {"name": "Fair cap", "priceCents": 2500, "quantity": 1}},
	})
	if r.Status != http.StatusCreated || r.Body["fairStartMillis"] != float64(window) {
		t.Fatalf("create the sale: %d %s", r.Status, r.Raw)
	}
	s := saleIDs{}
	s.sale, _ = strconv.ParseInt(r.str("saleId"), 10, 64)
	for _, it := range r.Body["items"].([]any) {
		id, _ := strconv.ParseInt(it.(map[string]any)["itemId"].(string), 10, 64)
		s.items = append(s.items, id)
	}
	mug, capItem := s.items[0], s.items[1]
	saleURL := fmt.Sprintf("%s/sales/%d", h.srv.URL, s.sale)

	// Before the start: the draw in plain words, in the countdown box.
	one.openSalePage(saleURL)
	note := e2eEval[string](one, "the fair start's note", `e.shown(e.q('fair-start-note')) ? e.text(e.q('fair-start-note')) : ''`)
	if !strings.Contains(note, "the first 6 seconds after the start are a draw") || !strings.Contains(note, "whatever the speed of your connection") {
		one.fatalf("the fair start's note before the start = %q", note)
	}
	one.solveCaptcha()

	// The two other shoppers enter the cap's draw through the API as soon as it starts.
	entered := make(chan map[int64]string, 1)
	go func() {
		time.Sleep(time.Until(startsAt) + 300*time.Millisecond)
		out := map[int64]string{}
		for _, u := range others {
			bearer := h.token(u, auth.RoleShopper)
			b := h.buy(bearer, capItem, h.purchaseToken(bearer, s.sale))
			if b.Status != http.StatusAccepted || b.Body["draw"] != true {
				t.Errorf("shopper %d's entry: %d %s, want 202 draw: true", u, b.Status, b.Raw)
			}
			out[u] = b.str("orderId")
		}
		entered <- out
	}()

	// In the window: Buy, "You are in the draw", the order "In the draw", the note still there.
	one.waitFor("Buy of the mug lights up", time.Until(startsAt)+10*time.Second, `!e.buy(`+strconv.FormatInt(mug, 10)+`).disabled`)
	one.do("click Buy", chromedp.Click(e2eBuyButton(mug)))
	one.waitFor("the answer: in the draw", 10*time.Second,
		`e.messages.includes('You are in the draw \u2014 the result comes when the first 6 seconds close.')`)
	inDraw := e2eEval[struct {
		Words, Status, Note, Button string
		FairNote                    bool
		Kind                        string
	}](one, "the order in the draw", `(() => { const li = document.querySelector('[data-testid="sale-order-list"] > [data-testid="order"]');
		const p = (id) => li.querySelector('[data-testid="' + id + '"]');
		return { Words: e.text(p('order-status')), Status: p('order-status').getAttribute('data-status'), Note: e.text(p('order-note')),
			Button: e.text(e.buy(`+strconv.FormatInt(mug, 10)+`)), FairNote: e.shown(e.q('fair-start-note')), Kind: e.q('message').getAttribute('data-kind') }; })()`)
	if time.Since(startsAt) < window*time.Millisecond {
		if inDraw.Words != "In the draw" || inDraw.Status != "QUEUED" || !strings.HasPrefix(inDraw.Note, "You are in the draw") || inDraw.Button != "In the draw" || !inDraw.FairNote || inDraw.Kind != "ok" {
			one.errorf("in the window: %+v; want the order \"In the draw\" (QUEUED), its note, Buy saying \"In the draw\" and the fair start's note", inDraw)
		}
		one.screenshot(dir, "fair-start-in-draw-desktop.png", "")
	} else {
		t.Logf("note: the window had closed before the page was read (%v after the start); the in-draw state is not checked", time.Since(startsAt))
	}

	// The draw closes: the shopper, alone in the mug's draw, is drawn; the order goes on as any.
	one.waitFor("the order drawn and awaiting payment", 30*time.Second,
		`(() => { const li = document.querySelector('[data-testid="sale-order-list"] > [data-testid="order"]');
		return !!li && li.querySelector('[data-testid="order-status"]').getAttribute('data-status') === 'PENDING'; })()`)
	drawn := e2eEval[struct{ Words, Note, Message, Pay string }](one, "the drawn order",
		`(() => { const li = document.querySelector('[data-testid="sale-order-list"] > [data-testid="order"]');
		const p = (id) => li.querySelector('[data-testid="' + id + '"]');
		return { Words: e.text(p('order-status')), Note: e.text(p('order-note')), Message: e.text(e.q('message')),
			Pay: e.shown(p('pay-button')) ? e.text(p('pay-button')) : '' }; })()`)
	if drawn.Words != "Awaiting payment" || !strings.HasPrefix(drawn.Note, "You were drawn!") || !strings.HasPrefix(drawn.Pay, "Pay now") ||
		drawn.Message != "You were drawn! Your order of Fair mug is confirmed: pay before the deadline below, or the unit goes back on sale." {
		one.errorf("the drawn order: %+v", drawn)
	}
	one.waitFor("the fair start's note gone after the window", 5*time.Second, `!e.shown(e.q('fair-start-note'))`)
	// The stock badges follow the draw, which gave both units.
	one.waitFor("the stock badges say the units are gone", 10*time.Second,
		`e.qa('stock').every((el) => e.text(el) !== '1 left')`)
	one.screenshot(dir, "fair-start-drawn-desktop.png", "")
	one.do("a 390-pixel phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	one.waitFor("the phone's width", 5*time.Second, `innerWidth === 390`)
	one.screenshot(dir, "fair-start-drawn-phone.png", "")
	one.checkConsole()

	// The cap's draw: one of the two drawn, the other not.
	var orders map[int64]string
	select {
	case orders = <-entered:
	case <-ctx.Done():
		t.Fatal("the API shoppers' entries never came back")
	}
	loser, loserOrder := int64(0), ""
	for _, u := range others {
		if finalStatus(h, &drawShopper{user: u, bearer: h.token(u, auth.RoleShopper), orderID: orders[u]})["status"] == "NOT_SELECTED" {
			loser, loserOrder = u, orders[u]
		}
	}
	if loser == 0 {
		t.Fatalf("no entrant of the cap's draw ended NOT_SELECTED (orders %v)", orders)
	}

	// The shopper not drawn: "Not drawn" and the draw's sentence on My orders and the order page, not in red.
	lctx, lcancel := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
	defer lcancel()
	lost := openE2ETab(t, lctx, "not drawn")
	lost.do("open the home page", chromedp.Navigate(h.srv.URL+"/"))
	lost.e2eLogin(otherNames[loser], pass)
	lost.do("open My orders", chromedp.Navigate(h.srv.URL+"/orders"))
	lost.waitFor("the entry listed as not drawn", 10*time.Second,
		`(() => { const li = document.querySelector('[data-testid="order-row"][data-order-id="`+loserOrder+`"]');
		return !!li && e.text(li.querySelector('[data-testid="order-row-status"]')) === 'Not drawn' &&
			e.text(li.querySelector('[data-testid="order-row-note"]')).includes('You were not drawn this time; nothing was charged.'); })()`)
	lost.do("open the order page", chromedp.Navigate(h.srv.URL+"/orders/"+loserOrder))
	lost.waitFor("the order page says not drawn", 10*time.Second,
		`e.text(e.q('order-status')) === 'Not drawn' && e.text(e.q('order-note')).includes('every purchase in them had the same chance')`)
	calm := e2eEval[struct {
		Kind   string
		Pay    bool
		Cancel bool
	}](lost, "the order page's message and buttons", `({ Kind: e.q('message').getAttribute('data-kind') || '', Pay: e.shown(e.q('pay-button')), Cancel: e.shown(e.q('cancel-button')) })`)
	if calm.Kind == "error" || calm.Pay || calm.Cancel {
		lost.errorf("an entry not drawn: message kind %q, Pay shown %v, Cancel shown %v; want no error and no buttons", calm.Kind, calm.Pay, calm.Cancel)
	}
	// The shopper checks the draw in the browser: the seed against the commitment, their rank
	// recomputed from it (2 entrants of the cap, 1 unit: second, not drawn).
	lost.do("press Verify the draw", chromedp.Click(e2eTestID("draw-verify")))
	lost.waitFor("the draw checked in the browser", 20*time.Second,
		`e.q('draw-verify-result').getAttribute('data-ok') === 'true' && e.text(e.q('draw-verify-result')).includes('ranks 2 of 2 for this item') &&
			e.text(e.q('draw-verify-result')).includes('you were not drawn')`)
	lost.screenshot(dir, "fair-start-not-drawn-desktop.png", "")
	lost.do("a 390-pixel phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	lost.waitFor("the phone's width", 5*time.Second, `innerWidth === 390`)
	lost.screenshot(dir, "fair-start-not-drawn-phone.png", "")
	lost.checkConsole()
	// The draw's states pass axe-core as every other page does (issue 33, item 3): the drawn
	// shopper's sale page; the not-drawn shopper's order page, My orders and sale page (phone).
	var violations []string
	for _, v := range one.axe(saleURL) {
		violations = append(violations, "drawn, the sale page: "+v)
	}
	for _, u := range []string{h.srv.URL + "/orders/" + loserOrder, h.srv.URL + "/orders", saleURL} {
		for _, v := range lost.axe(u) {
			violations = append(violations, "not drawn, "+u+": "+v)
		}
	}
	if len(violations) > 0 {
		t.Errorf("axe-core on the draw's states:\n%s", strings.Join(violations, "\n"))
	}

	// The merchant's live view: the draw and its record.
	mctx, mcancel := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
	defer mcancel()
	m := openE2ETab(t, mctx, "merchant")
	m.do("open the admin page", chromedp.Navigate(h.srv.URL+"/admin"))
	m.e2eLogin("fair_merchant_"+suffix, pass)
	m.do("open the live view", chromedp.Navigate(fmt.Sprintf("%s/admin/sales/%d", h.srv.URL, s.sale)))
	m.waitFor("the draw panel with its record", 15*time.Second,
		`e.shown(e.q('live-draw')) && e.text(e.q('draw-entries')) === '3' && e.qa('draw-row').length === 3`)
	panel := e2eEval[struct {
		Window, Entries, Winners, Closed, Phase string
		Rows                                    []struct{ Place, Rank, Shopper, Item, Entered, Outcome, Won string }
	}](m, "the draw panel", `({ Window: e.text(e.q('draw-window')), Entries: e.text(e.q('draw-entries')), Winners: e.text(e.q('draw-winners')),
		Closed: e.text(e.q('draw-closed')), Phase: e.q('live-draw').getAttribute('data-phase'),
		Rows: e.qa('draw-row').map((tr) => { const c = (k) => e.text(tr.querySelector('[data-col="' + k + '"]'));
			return { Place: c('place'), Rank: c('rank'), Shopper: c('shopper'), Item: c('item'), Entered: c('entered'), Outcome: c('outcome'), Won: tr.getAttribute('data-won') }; }) })`)
	if panel.Window != "6 s" || panel.Entries != "3" || panel.Winners != "2" || panel.Phase != "closed" || !regexp.MustCompile(`^\d\d:\d\d:\d\d$`).MatchString(panel.Closed) {
		m.errorf("the draw's figures: %+v; want window 6 s, 3 entries, 2 drawn, closed at a time", panel)
	}
	proof := e2eEval[struct{ Commitment, Seed string }](m, "the draw's commitment and seed",
		`({ Commitment: e.text(e.q('draw-commitment')), Seed: e.shown(e.q('draw-seed-row')) ? e.text(e.q('draw-seed')) : '' })`)
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(proof.Commitment) || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(proof.Seed) {
		m.errorf("the draw's proof: %+v; want the commitment and, decided, the seed (64 hex digits each)", proof)
	}
	won, notDrawn := 0, 0
	var prevRank int64
	prevItem := ""
	for i, row := range panel.Rows {
		rank, err := strconv.ParseInt(row.Rank, 10, 64)
		want := int64(1) // ranks restart at 1 for each item
		if row.Item == prevItem {
			want = prevRank + 1
		}
		if row.Place != "#"+strconv.Itoa(i+1) || err != nil || rank != want || !regexp.MustCompile(`^\d\d:\d\d:\d\d$`).MatchString(row.Entered) {
			m.errorf("record row %d: %+v; want its place, its rank in its item (%d: best first) and when it entered", i, row, want)
		}
		prevRank, prevItem = rank, row.Item
		switch {
		case row.Won == "true" && strings.HasPrefix(row.Outcome, "drawn"):
			won++
		case row.Won == "false" && row.Outcome == "not drawn":
			notDrawn++
			if row.Shopper != otherNames[loser] || row.Item != "Fair cap" {
				m.errorf("the entry not drawn: %+v; want %s's entry for the cap", row, otherNames[loser])
			}
		default:
			m.errorf("record row %d: outcome %q (won %s)", i, row.Outcome, row.Won)
		}
	}
	if won != 2 || notDrawn != 1 {
		m.errorf("the record: %d drawn, %d not drawn; want 2 and 1 (%+v)", won, notDrawn, panel.Rows)
	}
	m.shootBoth(dir, "fair-start-live")
	// The sale's orders list says the entry was not drawn in words, as the filter does.
	m.do("open the sale's orders", chromedp.Navigate(fmt.Sprintf("%s/admin/sales/%d/orders", h.srv.URL, s.sale)))
	m.waitFor("the entry not drawn, in words, in the merchant's orders", 15*time.Second,
		`(() => { const tr = document.querySelector('[data-testid="order-row"][data-order-id="`+loserOrder+`"]');
		return !!tr && e.text(tr.querySelector('[data-testid="order-status"]')) === 'Not drawn'; })()`)
	m.checkConsole()

	h.checkInvariants(s)
}
