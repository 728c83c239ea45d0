package views

import (
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/a-h/templ"
)

// Every page carries the offline notice (issue 9, item 6): hidden on the page as served, a
// polite status region the script shows while the browser is offline, outside main so that it
// reads the same on every page.
func TestOfflineNotice(t *testing.T) {
	for name, c := range map[string]templ.Component{
		"home": HomePage(Home{}), "sale": SalePage(demoSale()), "order": OrderPage(Order{ID: "b3c1"}),
		"my orders": MyOrdersPage(MyOrders{}), "admin": AdminPage(Admin{}), "not found": NotFoundPage("no such sale"),
	} {
		t.Run(name, func(t *testing.T) {
			doc, _ := render(t, c)
			n := doc.Find(byTestID("offline-notice"))
			if got := n.Length(); got != 1 {
				t.Fatalf("offline notices = %d, want 1", got)
			}
			if _, hidden := n.Attr("hidden"); !hidden {
				t.Errorf("the offline notice is shown on the served page, want hidden until the browser is offline")
			}
			if got := n.AttrOr("role", ""); got != "status" {
				t.Errorf("offline notice role = %q, want status (announced when it appears)", got)
			}
			if got := strings.Join(strings.Fields(n.Text()), " "); !strings.HasPrefix(got, "You are offline: nothing reaches the shop") {
				t.Errorf("offline notice = %q, want it to say that nothing reaches the shop while offline", got)
			}
			if n.ParentsFiltered("main").Length() != 0 || !n.Prev().Is("header") {
				t.Errorf("the offline notice is not right under the site header")
			}
		})
	}
}

// A QUEUED order's place in the queue (issue 9, item 5) has its line in both order panels: the
// order page's and each order of the sale page's box. Empty and hidden until the script knows it.
func TestQueueLine(t *testing.T) {
	orderDoc, _ := render(t, OrderPage(Order{ID: "0b9f6a4e-2f6c-4c35-9d3b-3a1f0c9e7d11"}))
	saleDoc, _ := render(t, SalePage(demoSale()))
	tmpl := saleDoc.Find("template" + byTestID("sale-order-template") + " li" + byTestID("order"))
	for name, panel := range map[string]*goquery.Selection{
		"order page": orderDoc.Find(byTestID("order")),
		"sale page":  tmpl,
	} {
		q := panel.Find(byTestID("order-queue"))
		if got := q.Length(); got != 1 {
			t.Errorf("%s: queue lines in the order panel = %d, want 1", name, got)
			continue
		}
		if _, hidden := q.Attr("hidden"); !hidden || strings.TrimSpace(q.Text()) != "" {
			t.Errorf("%s: queue line %q, hidden %v; want empty and hidden", name, q.Text(), hidden)
		}
		// It follows the line with the status, so that it reads as part of it.
		if !panel.Find(byTestID("order-status")).Parent().Next().Is(byTestID("order-queue")) {
			t.Errorf("%s: the queue line does not follow the status line", name)
		}
	}
}
