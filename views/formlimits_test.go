package views

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/static"
)

// The create form offers the currencies and enforces the limits of the one table the server's
// validation reads (shop): the same choices, the same numbers.
func TestCreateFormFollowsTheTable(t *testing.T) {
	doc, _ := render(t, AdminPage(Admin{}))
	form := doc.Find("form" + byTestID("create-sale-form"))
	var codes []string
	form.Find(`select[name="currency"] option`).Each(func(i int, o *goquery.Selection) {
		codes = append(codes, o.AttrOr("value", ""))
		if want := currencyLabel(shop.Currencies[min(i, len(shop.Currencies)-1)]); o.Text() != want {
			t.Errorf("currency option %d reads %q, want %q", i, o.Text(), want)
		}
	})
	var want []string
	for _, c := range shop.Currencies {
		want = append(want, c.Code)
	}
	if strings.Join(codes, ",") != strings.Join(want, ",") {
		t.Errorf("currency options %v, want the table's %v", codes, want)
	}
	attrs := []struct {
		selector, attr string
		want           int
	}{
		{`input[name="name"]`, "maxlength", shop.MaxNameRunes},
		{`textarea[name="description"]`, "maxlength", shop.MaxDescriptionRunes},
		{`input[name="paymentWindowMinutes"]`, "max", shop.MaxPaymentWindowSeconds / 60},
		{`input[name="fairStartSeconds"]`, "max", shop.MaxFairStartMillis / 1000},
		{`input[name="itemName"]`, "maxlength", shop.MaxNameRunes},
		{`input[name="quantity"]`, "max", shop.MaxQuantity},
		{`input[name="imageUrl"]`, "maxlength", shop.MaxImageURLBytes},
	}
	for _, a := range attrs {
		if got := form.Find(a.selector).AttrOr(a.attr, ""); got != strconv.Itoa(a.want) {
			t.Errorf("%s %s = %q, want %d", a.selector, a.attr, got, a.want)
		}
	}
	// the item rows' limit, which the form's script reads (admin_form_fields.js, maxItems)
	if got := form.AttrOr("data-max-items", ""); got != strconv.Itoa(shop.MaxItemsPerSale) {
		t.Errorf("the form's data-max-items = %q, want %d", got, shop.MaxItemsPerSale)
	}
}

// The scripts' copies of the table (money.js writes and reads prices, the form's messages name
// the limits) say what the table says.
func TestScriptsFollowTheTable(t *testing.T) {
	read := func(name string) string {
		b, err := fs.ReadFile(static.FS, path.Join("js", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	money := read("money.js")
	for _, c := range shop.Currencies {
		entry := regexp.MustCompile(c.Code + `: \{ symbol: '([^']*)', digits: (\d) \}`).FindStringSubmatch(money)
		if entry == nil {
			t.Errorf("money.js has no CURRENCIES entry for %s", c.Code)
			continue
		}
		symbol, err := strconv.Unquote(`"` + entry[1] + `"`)
		if err != nil || symbol != c.Symbol || entry[2] != strconv.Itoa(c.Digits) {
			t.Errorf("money.js writes %s with %q and %s digits, the table with %q and %d", c.Code, symbol, entry[2], c.Symbol, c.Digits)
		}
	}
	if !strings.Contains(money, fmt.Sprintf("const MAX_PRICE_MINOR = %d;", int64(shop.MaxPriceCents))) {
		t.Errorf("money.js's MAX_PRICE_MINOR is not the table's %d", int64(shop.MaxPriceCents))
	}
	messages := read("admin_form_errors.js") + read("admin_form_fields.js")
	var list []string
	for _, c := range shop.Currencies {
		list = append(list, c.Code)
	}
	choose := "Choose " + strings.Join(list[:len(list)-1], ", ") + " or " + list[len(list)-1] + "."
	for _, want := range []string{choose, fmt.Sprintf("1 to %d minutes", shop.MaxPaymentWindowSeconds/60),
		fmt.Sprintf("The fair start is 0 (off) to %s seconds.", strconv.FormatFloat(float64(shop.MaxFairStartMillis)/1000, 'f', -1, 64))} {
		if !strings.Contains(messages, want) {
			t.Errorf("the form's messages do not say %q", want)
		}
	}
}
