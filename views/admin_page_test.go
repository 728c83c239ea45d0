package views

import (
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
)

func TestAdminPage(t *testing.T) {
	doc, _ := render(t, AdminPage(Admin{}))
	form := doc.Find(byTestID("login-form"))
	for _, name := range []string{"username", "password"} {
		if got := form.Find(`input[name="` + name + `"]`).Length(); got != 1 {
			t.Errorf("login inputs named %s = %d, want 1", name, got)
		}
	}
	if got := form.Find(byTestID("register-button")).Length(); got != 0 {
		t.Errorf("register buttons = %d, want 0 (merchants are created by the operator)", got)
	}
	if _, hidden := doc.Find(byTestID("admin-panel")).Attr("hidden"); !hidden {
		t.Errorf("admin panel visible before login, want hidden")
	}

	create := doc.Find("form" + byTestID("create-sale-form"))
	inputs := []struct {
		name, typ string
	}{
		{"name", "text"},
		{"startsAt", "datetime-local"},
		{"endsAt", "datetime-local"},
	}
	for _, in := range inputs {
		if got := create.Find(`input[name="`+in.name+`"]`).AttrOr("type", ""); got != in.typ {
			t.Errorf("input %s type = %q, want %q", in.name, got, in.typ)
		}
	}
	row := create.Find(byTestID("item-rows") + " " + byTestID("item-row"))
	if got, want := row.Length(), 1; got != want {
		t.Fatalf("item rows = %d, want %d", got, want)
	}
	for _, in := range []struct{ name, typ string }{{"itemName", "text"}, {"price", "text"}, {"quantity", "number"}} {
		if got := row.Find(`input[name="`+in.name+`"]`).AttrOr("type", ""); got != in.typ {
			t.Errorf("item input %s type = %q, want %q", in.name, got, in.typ)
		}
	}
	if got := create.Find("template" + byTestID("item-row-template")).Length(); got != 1 {
		t.Errorf("item row templates = %d, want 1", got)
	}
	if got := create.Find("button" + byTestID("add-item")).Text(); got != "Add item" {
		t.Errorf("add item button = %q, want %q", got, "Add item")
	}
	if got := doc.Find(byTestID("admin-sales")).Length(); got != 1 {
		t.Errorf("admin sales lists = %d, want 1", got)
	}
	headers := doc.Find("table" + byTestID("stock-table") + " thead th").Map(func(_ int, s *goquery.Selection) string { return s.Text() })
	if got, want := strings.Join(headers, ","), "Item,Price,Quantity,Displayed,Frozen,Real,Paid,Reconciled"; got != want {
		t.Errorf("stock table columns = %q, want %q", got, want)
	}
}

// TestAdminPageMerchantForm: the merchant's points in the markup. A price is typed as a
// decimal after the sale's currency symbol, the sale has a currency, a payment window and a
// purchase limit with defaults, every field has a place for its error (tied to it for screen
// readers), each item is one group with its own Remove button, and the live stock panel has a
// way to close it.
func TestAdminPageMerchantForm(t *testing.T) {
	doc, _ := render(t, AdminPage(Admin{}))
	create := doc.Find("form" + byTestID("create-sale-form"))
	if _, ok := create.Attr("novalidate"); !ok {
		t.Errorf("the create form lacks novalidate: the browser's own bubbles would stand in for the merchant's words")
	}
	checkFormMoney(t, create)
	checkFormTerms(t, create)
	checkFormErrorPlaces(t, create)
	checkFormItemGroups(t, create)

	// The stock panel starts hidden, can be closed, and stacks on a phone by labelled cells.
	panel := doc.Find(byTestID("stock-panel"))
	if _, hidden := panel.Attr("hidden"); !hidden || panel.AttrOr("id", "") != "stock-panel" {
		t.Errorf("stock panel: hidden %v, id %q; want hidden with id stock-panel", hidden, panel.AttrOr("id", ""))
	}
	if got := panel.Find("button" + byTestID("stock-close")).Text(); got != "Close" {
		t.Errorf("stock panel close button = %q, want Close", got)
	}
}

// checkFormMoney: a price in the sale's currency, as a decimal.
func checkFormMoney(t *testing.T, create *goquery.Selection) {
	t.Helper()
	cur := create.Find("select[name=currency]" + byTestID("create-currency"))
	opts := cur.Find("option").Map(func(_ int, s *goquery.Selection) string { return s.AttrOr("value", "") })
	if got := strings.Join(opts, ","); got != "CNY,USD,EUR" {
		t.Errorf("currency options = %q, want CNY,USD,EUR", got)
	}
	if got := cur.Find("option[selected]").AttrOr("value", ""); got != "CNY" {
		t.Errorf("default currency = %q, want CNY", got)
	}
	price := create.Find(byTestID("item-rows") + " " + byTestID("item-price-input"))
	if price.AttrOr("type", "") != "text" || price.AttrOr("inputmode", "") != "decimal" || price.AttrOr("name", "") != "price" {
		t.Errorf("price input: type %q inputmode %q name %q, want a decimal text field named price",
			price.AttrOr("type", ""), price.AttrOr("inputmode", ""), price.AttrOr("name", ""))
	}
	if _, has := price.Attr("step"); has {
		t.Errorf("the price input has a step: the browser would refuse 19.99")
	}
	if got := create.Find(byTestID("item-rows") + " " + byTestID("item-price-symbol")).Text(); got != "¥" {
		t.Errorf("price symbol = %q, want ¥ (CNY)", got)
	}
	if strings.Contains(create.Text(), "cents") {
		t.Errorf("the form still speaks of cents: %q", create.Text())
	}
}

// checkFormTerms: the payment window and the purchase limit, with their defaults.
func checkFormTerms(t *testing.T, create *goquery.Selection) {
	t.Helper()
	win := create.Find(`input[name="paymentWindowMinutes"]`)
	if win.AttrOr("value", "") != "10" || win.AttrOr("min", "") != "1" || win.AttrOr("max", "") != "1440" {
		t.Errorf("payment window: value %q min %q max %q, want 10 minutes, 1 to 1440",
			win.AttrOr("value", ""), win.AttrOr("min", ""), win.AttrOr("max", ""))
	}
	limits := create.Find(`input[type="radio"][name="purchaseLimit"]`)
	if got := strings.Join(limits.Map(func(_ int, s *goquery.Selection) string { return s.AttrOr("value", "") }), ","); got != "per-sale,per-item" {
		t.Errorf("purchase limit choices = %q, want per-sale,per-item", got)
	}
	if got := limits.Filter("[checked]").AttrOr("value", ""); got != "per-sale" {
		t.Errorf("default purchase limit = %q, want per-sale", got)
	}
}

// checkFormErrorPlaces: a place for each field's error, named by the field's aria-describedby.
func checkFormErrorPlaces(t *testing.T, create *goquery.Selection) {
	t.Helper()
	for _, f := range []struct{ input, errID string }{
		{`input[name="name"]`, "error-name"},
		{`input[name="startsAt"]`, "error-starts-at"},
		{`input[name="endsAt"]`, "error-ends-at"},
		{`select[name="currency"]`, "error-currency"},
		{`input[name="paymentWindowMinutes"]`, "error-payment-window"},
	} {
		in := create.Find(f.input)
		if !strings.Contains(" "+in.AttrOr("aria-describedby", "")+" ", " "+f.errID+" ") {
			t.Errorf("%s aria-describedby = %q, want it to name %s", f.input, in.AttrOr("aria-describedby", ""), f.errID)
		}
		errEl := create.Find("#" + f.errID)
		if errEl.Length() != 1 || !errEl.HasClass("field-error") || errEl.Closest("[data-field]").Find(f.input).Length() != 1 {
			t.Errorf("error place #%s: %d found, want one .field-error beside %s", f.errID, errEl.Length(), f.input)
		}
		if _, hidden := errEl.Attr("hidden"); !hidden {
			t.Errorf("#%s is shown before anything went wrong", f.errID)
		}
	}
	if got := create.Find(byTestID("form-status")).AttrOr("role", ""); got != "status" {
		t.Errorf("form status role = %q, want status", got)
	}
}

// checkFormItemGroups: each item is one group (a fieldset with a numbered legend) holding its
// fields and its Remove button, in the page and in the template the script clones.
func checkFormItemGroups(t *testing.T, create *goquery.Selection) {
	t.Helper()
	for _, where := range []string{byTestID("item-rows"), "template" + byTestID("item-row-template")} {
		row := create.Find(where + " " + byTestID("item-row"))
		if row.Length() != 1 || goquery.NodeName(row) != "fieldset" {
			t.Errorf("%s: item rows = %d (%s), want one fieldset", where, row.Length(), goquery.NodeName(row))
			continue
		}
		if got := strings.Join(strings.Fields(row.ChildrenFiltered("legend").Text()), " "); got != "Item 1" {
			t.Errorf("%s: item legend = %q, want \"Item 1\"", where, got)
		}
		for _, id := range []string{"item-name-input", "item-price-input", "item-quantity-input", "remove-item", "item-name-error", "item-price-error", "item-quantity-error"} {
			if row.Find(byTestID(id)).Length() != 1 {
				t.Errorf("%s: the item group lacks %s", where, id)
			}
		}
	}
}
