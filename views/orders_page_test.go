package views

import (
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
)

func TestOrderPage(t *testing.T) {
	const id = "0b9f6a4e-2f6c-4c35-9d3b-3a1f0c9e7d11"
	doc, _ := render(t, OrderPage(Order{ID: id}))
	panel := doc.Find(byTestID("order"))
	if got, want := panel.Length(), 1; got != want {
		t.Fatalf("order panels = %d, want %d", got, want)
	}
	if got := panel.AttrOr("data-order-id", ""); got != id {
		t.Errorf("data-order-id = %q, want %q", got, id)
	}
	if _, hidden := panel.Attr("hidden"); hidden {
		t.Errorf("order panel hidden, want visible")
	}
	if got, want := panel.Find("a"+byTestID("order-link")).AttrOr("href", ""), "/orders/"+id; got != want {
		t.Errorf("order link = %q, want %q", got, want)
	}
	for _, testid := range []string{"order-status", "pay-by", "pay-button"} {
		if got := panel.Find(byTestID(testid)).Length(); got != 1 {
			t.Errorf("elements with data-testid=%q = %d, want 1", testid, got)
		}
	}
	if _, hidden := panel.Find(byTestID("pay-button")).Attr("hidden"); !hidden {
		t.Errorf("pay button visible before the status is known, want hidden")
	}
	if got, _ := doc.Find(byTestID("message")).Attr("role"); got != "status" {
		t.Errorf("message role = %q, want status", got)
	}
}

func TestOrderPageActions(t *testing.T) {
	const id = "0b9f6a4e-2f6c-4c35-9d3b-3a1f0c9e7d11"
	doc, _ := render(t, OrderPage(Order{ID: id}))
	panel := doc.Find(byTestID("order"))

	// Item, price and sale come from the API: their rows keep their room for the script (drawn,
	// with their labels and no values), so that nothing below moves when the answer comes in.
	for _, id := range []string{"order-item-row", "order-price-row", "order-sale-row"} {
		el := panel.Find(byTestID(id))
		if got := el.Length(); got != 1 {
			t.Errorf("elements with data-testid=%q = %d, want 1", id, got)
		}
		if _, hidden := el.Attr("hidden"); hidden {
			t.Errorf("%s hidden before the order is known, want drawn (its room kept)", id)
		}
		if el.Find(".label").Text() == "" {
			t.Errorf("%s has no label", id)
		}
	}
	for _, id := range []string{"order-item", "order-price", "order-sale"} {
		if got := panel.Find(byTestID(id)).Text(); got != "" {
			t.Errorf("%s = %q before the order is known, want empty", id, got)
		}
	}
	if got := panel.Find("a" + byTestID("order-sale")).Length(); got != 1 {
		t.Errorf("sale links = %d, want 1", got)
	}

	// Pay and cancel: buttons, hidden until the order is known to be PENDING; cancelling asks first.
	buttons := []struct{ testid, text string }{
		{"pay-button", "Pay now"},
		{"cancel-button", "Cancel order"},
		{"cancel-confirm-button", "Yes, cancel the order"},
		{"cancel-keep-button", "No, keep it"},
	}
	for _, b := range buttons {
		el := panel.Find("button" + byTestID(b.testid))
		if got := el.Length(); got != 1 {
			t.Errorf("buttons with data-testid=%q = %d, want 1", b.testid, got)
			continue
		}
		if got := el.Text(); got != b.text {
			t.Errorf("%s text = %q, want %q", b.testid, got, b.text)
		}
		if got := el.AttrOr("type", ""); got != "button" {
			t.Errorf("%s type = %q, want button", b.testid, got)
		}
	}
	for _, id := range []string{"pay-button", "cancel-button", "cancel-confirm"} {
		if _, hidden := panel.Find(byTestID(id)).Attr("hidden"); !hidden {
			t.Errorf("%s visible before the status is known, want hidden", id)
		}
	}
	confirm := panel.Find(byTestID("cancel-confirm"))
	if got := confirm.Text(); !strings.Contains(got, "Cancel this order?") || !strings.Contains(got, "back on sale") {
		t.Errorf("cancel question = %q, want it to ask and say the unit goes back on sale", strings.Join(strings.Fields(got), " "))
	}
	if got := confirm.Find(byTestID("cancel-confirm-button") + "," + byTestID("cancel-keep-button")).Length(); got != 2 {
		t.Errorf("buttons in the confirmation = %d, want 2", got)
	}

	loginTarget(t, doc, "You are not signed in. Log in to see this order.", false)
	if got := doc.Find("main a"+byTestID("all-orders-link")).AttrOr("href", ""); got != "/orders" {
		t.Errorf("all orders link = %q, want /orders", got)
	}
}

func TestMyOrdersPage(t *testing.T) {
	doc, html := render(t, MyOrdersPage(MyOrders{}))
	page := doc.Find("section" + byTestID("my-orders"))
	if got, want := page.Length(), 1; got != want {
		t.Fatalf("my orders sections = %d, want %d", got, want)
	}
	if got, want := page.Find("h1").Text(), "My orders"; got != want {
		t.Errorf("heading = %q, want %q", got, want)
	}
	loginTarget(t, doc, "You are not signed in. Log in to see your orders.", true)
	checkMyOrdersStates(t, page)
	checkMyOrdersRowTemplate(t, page)
	if strings.Contains(html, "<script>") {
		t.Errorf("page has an inline script")
	}
}

// checkMyOrdersStates: nothing is shown as loading, empty or loaded until the script knows: a
// page whose script never runs must not spin forever.
func checkMyOrdersStates(t *testing.T, page *goquery.Selection) {
	t.Helper()
	for _, id := range []string{"orders-loading", "orders-empty", "load-more"} {
		el := page.Find(byTestID(id))
		if got := el.Length(); got != 1 {
			t.Errorf("elements with data-testid=%q = %d, want 1", id, got)
		}
		if _, hidden := el.Attr("hidden"); !hidden {
			t.Errorf("%s visible in the rendered page, want hidden", id)
		}
	}
	if got := page.Find(byTestID("orders-loading")).Text(); !strings.Contains(got, "Loading your orders") {
		t.Errorf("loading text = %q", got)
	}
	if got := page.Find(byTestID("orders-empty") + ` a[href="/"]`).Length(); got != 1 {
		t.Errorf("empty state links to the sales %d times, want 1", got)
	}
	more := page.Find("button" + byTestID("load-more"))
	if got, want := more.Text(), "Load more"; got != want {
		t.Errorf("load more button = %q, want %q", got, want)
	}
	if got := more.AttrOr("type", ""); got != "button" {
		t.Errorf("load more button type = %q, want button", got)
	}
	if got := page.Find("ul" + byTestID("order-list")).Children().Length(); got != 0 {
		t.Errorf("orders in the rendered list = %d, want 0 (the script loads them)", got)
	}
	if got, _ := page.Find("p" + byTestID("message")).Attr("role"); got != "status" {
		t.Errorf("message role = %q, want status", got)
	}
	if got := page.Find("noscript").Length(); got != 1 {
		t.Errorf("noscript notes = %d, want 1", got)
	}
}

// checkMyOrdersRowTemplate: one row template with every part the script fills in.
func checkMyOrdersRowTemplate(t *testing.T, page *goquery.Selection) {
	t.Helper()
	tpl := page.Find("template" + byTestID("order-row-template"))
	if got, want := tpl.Length(), 1; got != want {
		t.Fatalf("order row templates = %d, want %d", got, want)
	}
	// goquery does not see into <template>: parse its content on its own.
	inner, err := tpl.Html()
	if err != nil {
		t.Fatalf("template content: %v", err)
	}
	row, err := goquery.NewDocumentFromReader(strings.NewReader("<ul>" + inner + "</ul>"))
	if err != nil {
		t.Fatalf("parse the row template: %v", err)
	}
	if got, want := row.Find("li"+byTestID("order-row")).Length(), 1; got != want {
		t.Fatalf("rows in the template = %d, want %d", got, want)
	}
	for _, id := range []string{"order-row-item", "order-row-status", "order-row-price", "order-row-sale",
		"order-row-deadline", "order-row-pay-by", "order-row-pay-left", "order-row-note", "order-row-created", "order-row-link"} {
		if got := row.Find(byTestID(id)).Length(); got != 1 {
			t.Errorf("template elements with data-testid=%q = %d, want 1", id, got)
		}
	}
	if got := row.Find("a" + byTestID("order-row-link")).Text(); got != "View order" {
		t.Errorf("row link text = %q, want View order", got)
	}
	if got := row.Find("a" + byTestID("order-row-sale")).Length(); got != 1 {
		t.Errorf("row sale links = %d, want 1", got)
	}
	if _, hidden := row.Find(byTestID("order-row-deadline")).Attr("hidden"); !hidden {
		t.Errorf("row deadline visible in the template, want hidden (pending orders only)")
	}
	if got := row.Find(byTestID("order-row-status")).AttrOr("class", ""); !strings.Contains(got, "order-badge") {
		t.Errorf("row status class = %q, want the order badge", got)
	}
}
