package views

import (
	"regexp"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/flashsale/flashsale/services/catalog"
)

// The merchant's control room (issue 9, points 1 to 4) in the markup: the pages of one sale
// carry its id and nothing else of it, start with their data hidden until the script knows a
// merchant is signed in, and have a place, a label and a test id for everything the script fills in.

func texts(s *goquery.Selection) []string {
	return s.Map(func(_ int, x *goquery.Selection) string { return strings.Join(strings.Fields(x.Text()), " ") })
}

// checkSaleControls: the buttons of a sale start disabled (the script enables the meaningful
// ones), End has a confirm step, hidden, and the result of an action is announced.
func checkSaleControls(t *testing.T, c *goquery.Selection) {
	t.Helper()
	if c.Length() != 1 {
		t.Fatalf("sale controls = %d, want 1", c.Length())
	}
	for id, label := range map[string]string{"warm-button": "Warm up now", "pause-button": "Pause", "resume-button": "Resume", "end-button": "End early"} {
		b := c.Find("button" + byTestID(id))
		if b.Length() != 1 || b.AttrOr("type", "") != "button" || strings.TrimSpace(b.Text()) != label {
			t.Errorf("%s: %d buttons labelled %q, want one button %q", id, b.Length(), b.Text(), label)
		}
		if _, off := b.Attr("disabled"); !off {
			t.Errorf("%s is enabled before the script knows the sale's state", id)
		}
	}
	confirm := c.Find(byTestID("end-confirm"))
	if _, hidden := confirm.Attr("hidden"); !hidden || confirm.Find(byTestID("end-confirm-button")).Length() != 1 || confirm.Find(byTestID("end-keep-button")).Length() != 1 {
		t.Errorf("end confirm step: hidden %v, with a yes and a no button; want both, hidden", hidden)
	}
	if !strings.Contains(confirm.Text(), "cannot be undone") {
		t.Errorf("end confirm = %q, want it to say it cannot be undone", confirm.Text())
	}
	if got := c.Find(byTestID("control-status")).AttrOr("role", ""); got != "status" {
		t.Errorf("control status role = %q, want status", got)
	}
	if got := strings.Join(strings.Fields(c.Find(byTestID("sale-loaded")).Text()), " "); got != "Stock loaded for the sale: checking…" {
		t.Errorf("loaded line = %q, want \"Stock loaded for the sale: checking…\" until the script knows", got)
	}
}

func TestAdminLivePage(t *testing.T) {
	doc, html := render(t, AdminLivePage(AdminSale{ID: "42"}))
	if got, want := doc.Find("title").Text(), "Live view · sale 42 · flashsale"; got != want {
		t.Errorf("title = %q, want %q", got, want)
	}
	checkModulePreloads(t, doc)
	root := doc.Find(byTestID("admin-live"))
	if root.AttrOr("data-sale-id", "") != "42" {
		t.Fatalf("live view root: data-sale-id %q, want 42", root.AttrOr("data-sale-id", ""))
	}
	if _, hidden := root.Find(byTestID("live-panel")).Attr("hidden"); !hidden {
		t.Errorf("the live panel is shown before a merchant is known")
	}
	if root.Find(byTestID("login-form")).Length() != 1 || root.Find(byTestID("register-button")).Length() != 0 {
		t.Errorf("the page needs a login form for merchants, and no registration")
	}
	nav := map[string]string{"nav-admin": "/admin", "nav-orders-page": "/admin/sales/42/orders", "nav-edit": "/admin?edit=42", "nav-sale-page": "/sales/42"}
	for id, href := range nav {
		if got := root.Find("a"+byTestID(id)).AttrOr("href", ""); got != href {
			t.Errorf("%s href = %q, want %q", id, got, href)
		}
	}
	checkSaleControls(t, root.Find(byTestID("sale-controls")))
	checkLiveTiles(t, root, html)
	checkLiveItemsAndChart(t, root, html)
	checkLiveFunnel(t, root)
	// The money at a glance: paid, awaiting the provider's confirmation, refunded; the sentences
	// before the start and about refunds hidden until the script knows.
	money := root.Find(byTestID("live-money"))
	if got := strings.Join(texts(money.Find("dt")), ","); got != "Paid,Sent, awaiting the provider's confirmation,Refunded" || money.Find("h2").Text() != "Money" {
		t.Errorf("the money area: %q under %q", got, money.Find("h2").Text())
	}
	for _, id := range []string{"money-before", "money-refund-note"} {
		if _, hidden := money.Find(byTestID(id)).Attr("hidden"); !hidden {
			t.Errorf("%s is shown before the script knows the sale", id)
		}
	}
	for _, id := range []string{"recon-state", "recon-explain", "recon-redis-counter", "recon-pg-seq", "recon-loaded", "recon-checks", "live-lag", "live-updated"} {
		if root.Find(byTestID(id)).Length() != 1 {
			t.Errorf("the live view lacks %s", id)
		}
	}
}

// checkLiveTiles: headline numbers first, the tiles before the controls and every other section.
func checkLiveTiles(t *testing.T, root *goquery.Selection, html string) {
	t.Helper()
	tiles := root.Find(byTestID("live-tiles") + " > .live-tile")
	keys := tiles.Map(func(_ int, s *goquery.Selection) string {
		return strings.TrimPrefix(s.AttrOr("data-testid", ""), "tile-")
	})
	if got, want := strings.Join(keys, ","), "paid,frozen,displayed,accepted,refused,books,lag,queue"; got != want {
		t.Errorf("tiles = %q, want %q", got, want)
	}
	tiles.Each(func(_ int, s *goquery.Selection) {
		key := strings.TrimPrefix(s.AttrOr("data-testid", ""), "tile-")
		if s.Find("dt").Text() == "" || s.Find(byTestID("live-"+key)).Length() != 1 || s.Find(byTestID("live-"+key+"-note")).Length() != 1 {
			t.Errorf("tile %s: a label, a value (live-%s) and a note, want all three", key, key)
		}
	})
	if strings.Index(html, `data-testid="live-tiles"`) > strings.Index(html, `data-testid="sale-controls"`) ||
		strings.Index(html, `data-testid="sale-controls"`) > strings.Index(html, `data-testid="live-items"`) {
		t.Errorf("order on the page: want the headline numbers, then the controls, then the items")
	}
}

// checkLiveItemsAndChart: the items' table and the chart, drawn here with nothing from elsewhere.
func checkLiveItemsAndChart(t *testing.T, root *goquery.Selection, html string) {
	t.Helper()
	cols := texts(root.Find("table" + byTestID("live-items") + " thead th"))
	if got, want := strings.Join(cols, ","), "Item,Quantity,Displayed,Frozen,Real,Paid,Paid amount,Expired,Sold out"; got != want {
		t.Errorf("items columns = %q, want %q", got, want)
	}
	if root.Find("tbody"+byTestID("live-item-rows")).Length() != 1 {
		t.Errorf("no body for the item rows")
	}
	chart := root.Find(byTestID("live-chart"))
	if chart.AttrOr("role", "") != "img" || !strings.Contains(chart.AttrOr("aria-label", ""), "per second") {
		t.Errorf("chart: role %q label %q, want an img with a label", chart.AttrOr("role", ""), chart.AttrOr("aria-label", ""))
	}
	if got := strings.Join(texts(root.Find(byTestID("chart-legend")+" li")), ","); got != "Accepted,Refused" {
		t.Errorf("chart legend = %q, want Accepted,Refused", got)
	}
	if root.Find("script, img[src^=http], link[href^=http]").Length() != 0 || strings.Contains(html, "https://") {
		t.Errorf("the live view loads something from elsewhere (no library, nothing from the internet)")
	}
}

// checkLiveFunnel: requests, refused by every reason the server counts, then what became of the
// accepted ones.
func checkLiveFunnel(t *testing.T, root *goquery.Selection) {
	t.Helper()
	steps := root.Find(byTestID("funnel") + " [data-step]").Map(func(_ int, s *goquery.Selection) string { return s.AttrOr("data-step", "") })
	want := []string{"requests", "refused"}
	for _, r := range catalog.RefusalReasons {
		want = append(want, "refused-"+r)
	}
	want = append(want, "accepted", "written", "paid", "expired", "cancelled")
	if got := strings.Join(steps, ","); got != strings.Join(want, ",") {
		t.Errorf("funnel steps = %q, want %q", got, strings.Join(want, ","))
	}
	root.Find(byTestID("funnel") + " [data-step]").Each(func(_ int, s *goquery.Selection) {
		step := s.AttrOr("data-step", "")
		if s.Find(".funnel-label").Text() == "" || s.Find(byTestID("funnel-"+step+"-value")).Length() != 1 {
			t.Errorf("funnel step %s: want a label and a value", step)
		}
	})
}

func TestAdminOrdersPage(t *testing.T) {
	doc, _ := render(t, AdminOrdersPage(AdminSale{ID: "7"}))
	if got, want := doc.Find("title").Text(), "Orders · sale 7 · flashsale"; got != want {
		t.Errorf("title = %q, want %q", got, want)
	}
	checkModulePreloads(t, doc)
	root := doc.Find(byTestID("admin-orders"))
	if root.AttrOr("data-sale-id", "") != "7" {
		t.Fatalf("orders root: data-sale-id %q, want 7", root.AttrOr("data-sale-id", ""))
	}
	if _, hidden := root.Find(byTestID("orders-panel")).Attr("hidden"); !hidden {
		t.Errorf("the orders panel is shown before a merchant is known")
	}
	if got := root.Find("a"+byTestID("nav-live")).AttrOr("href", ""); got != "/admin/sales/7" {
		t.Errorf("live view link = %q", got)
	}
	opts := root.Find("select" + byTestID("filter-status") + " option")
	values := opts.Map(func(_ int, s *goquery.Selection) string { return s.AttrOr("value", "") })
	if got, want := strings.Join(values, ","), ",PENDING,PAID,EXPIRED,CANCELLED,FAILED,ENTERED,NOT_SELECTED"; got != want {
		t.Errorf("status filter values = %q, want %q", got, want)
	}
	if got := strings.Join(texts(opts), ","); got != "All,Awaiting payment,Paid,Expired,Cancelled,Failed,In the draw,Not drawn" {
		t.Errorf("status filter words = %q", got)
	}
	checkUserFilter(t, root)
	csv := root.Find("a" + byTestID("orders-csv"))
	if _, dl := csv.Attr("download"); csv.AttrOr("href", "") != "/api/admin/sales/7/orders.csv" || !dl || strings.TrimSpace(csv.Text()) != "Download CSV" {
		t.Errorf("CSV link: href %q, download %v, text %q", csv.AttrOr("href", ""), dl, csv.Text())
	}
	cols := texts(root.Find("table" + byTestID("orders-table") + " thead th"))
	if got, want := strings.Join(cols, ","), "Order,Item,Shopper,Status,Payment,Ordered,Pay by,Paid"; got != want {
		t.Errorf("orders columns = %q, want %q", got, want)
	}
	for _, id := range []string{"orders-first", "orders-next"} {
		if _, off := root.Find("button" + byTestID(id)).Attr("disabled"); !off {
			t.Errorf("%s is enabled before a page is loaded", id)
		}
	}
	if got := root.Find(byTestID("orders-summary")).AttrOr("role", ""); got != "status" {
		t.Errorf("orders summary role = %q, want status", got)
	}
}

// TestAdminPageEditAndControls: the /admin form edits as well as creates, and each sale's
// entry gets the controls from a template.
func TestAdminPageEditAndControls(t *testing.T) {
	doc, _ := render(t, AdminPage(Admin{}))
	form := doc.Find("form" + byTestID("create-sale-form"))
	if form.AttrOr("data-mode", "") != "create" {
		t.Errorf("form mode = %q, want create", form.AttrOr("data-mode", ""))
	}
	desc := form.Find("textarea[name=description]" + byTestID("create-description"))
	if desc.Length() != 1 || desc.AttrOr("maxlength", "") != "2000" || desc.AttrOr("aria-describedby", "") != "error-description" ||
		form.Find("#error-description.field-error").Length() != 1 {
		t.Errorf("description: want a textarea of at most 2000 characters tied to its error place")
	}
	for _, id := range []string{"edit-cancel", "edit-note", "starts-at-locked", "add-item-locked"} {
		if _, hidden := doc.Find(byTestID(id)).Attr("hidden"); !hidden {
			t.Errorf("%s is shown while creating", id)
		}
	}
	if got := doc.Find(byTestID("starts-at-locked")).Text(); !strings.Contains(got, "start can no longer move") {
		t.Errorf("locked start hint = %q", got)
	}
	for _, where := range []string{byTestID("item-rows"), "template" + byTestID("item-row-template")} {
		img := form.Find(where + " " + byTestID("item-image-input"))
		if img.AttrOr("type", "") != "url" || img.AttrOr("name", "") != "imageUrl" || img.Closest("[data-field]").AttrOr("data-field", "") != "imageUrl" ||
			img.Closest("[data-field]").Find(byTestID("item-image-error")).Length() != 1 {
			t.Errorf("%s: image URL input type %q name %q; want a url field named imageUrl with its error place", where, img.AttrOr("type", ""), img.AttrOr("name", ""))
		}
	}
	if doc.Find(byTestID("zone-hint")).Length() != 1 {
		t.Errorf("no word on the time zone of the form's times")
	}
	tpl := doc.Find("template" + byTestID("sale-controls-template"))
	if tpl.Length() != 1 {
		t.Fatalf("sale controls templates = %d, want 1", tpl.Length())
	}
	checkSaleControls(t, tpl.Find(byTestID("sale-controls")))
}

// checkUserFilter: the shopper filter takes a user id, as its pattern says (the browser checks
// it: the form is novalidate, and the script words the error beside the field).
func checkUserFilter(t *testing.T, root *goquery.Selection) {
	t.Helper()
	user := root.Find("input" + byTestID("filter-user"))
	errEl := root.Find("#" + user.AttrOr("aria-describedby", "-"))
	if errEl.AttrOr("data-testid", "") != "filter-user-error" || !errEl.HasClass("field-error") {
		t.Errorf("shopper filter: described by %q; want it tied to its error place", user.AttrOr("aria-describedby", ""))
	}
	if !strings.Contains(user.Closest("label").Text(), "username") {
		t.Errorf("shopper filter label = %q, want it to say it takes a username", user.Closest("label").Text())
	}
	if _, ok := user.Closest("form").Attr("novalidate"); !ok {
		t.Errorf("the orders filter lacks novalidate: the browser's own bubble would stand in for the page's words")
	}
	// The browser matches the whole value (a pattern is anchored) and skips an empty one.
	pattern, err := regexp.Compile(`^(?:` + user.AttrOr("pattern", "") + `)$`)
	if err != nil || user.AttrOr("pattern", "") == "" {
		t.Fatalf("shopper filter pattern %q: %v", user.AttrOr("pattern", ""), err)
	}
	// A username (3 to 32 letters, digits, _ - .), or # and a user id (a shopper without an account).
	for v, ok := range map[string]bool{"bob": true, " Li.Wei_2 ": true, "   ": true, "#42": true, " #42 ": true, "#9223372036854775807": true,
		"12345": true, "ab": false, "42": false, "#0": false, "#042": false, "# 42": false, "a b": false, "al'ice": false, "张三": false,
		strings.Repeat("a", 33): false, "#12345678901234567890": false} {
		if pattern.MatchString(v) != ok {
			t.Errorf("shopper filter pattern on %q: match %v, want %v", v, !ok, ok)
		}
	}
}
