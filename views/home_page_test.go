package views

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
)

func TestHomePage(t *testing.T) {
	tests := []struct {
		name       string
		home       Home
		wantCards  int
		wantEmpty  bool
		wantLinks  []string
		wantBadges []string
	}{
		{name: "no sales", home: Home{}, wantEmpty: true},
		{
			name: "live and upcoming",
			home: Home{Sales: []SaleCard{
				{ID: "1", Name: "Phones", StartsAt: saleStart, EndsAt: saleEnd, Status: "live"},
				{ID: "a/b", Name: "Tea <b>", StartsAt: saleStart, EndsAt: saleEnd, Status: "upcoming"},
			}},
			wantCards:  2,
			wantLinks:  []string{"/sales/1", "/sales/a%2Fb"},
			wantBadges: []string{"Live now", "Upcoming"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, _ := render(t, HomePage(tt.home))
			cards := doc.Find(byTestID("sale-card"))
			if got := cards.Length(); got != tt.wantCards {
				t.Fatalf("sale cards = %d, want %d", got, tt.wantCards)
			}
			if got := doc.Find(byTestID("empty-state")).Length() == 1; got != tt.wantEmpty {
				t.Errorf("empty state shown = %v, want %v", got, tt.wantEmpty)
			}
			cards.Each(func(i int, c *goquery.Selection) {
				sc := tt.home.Sales[i]
				link := c.Find("a" + byTestID("sale-link"))
				if got := link.AttrOr("href", ""); got != tt.wantLinks[i] {
					t.Errorf("card %d href = %q, want %q", i, got, tt.wantLinks[i])
				}
				if got := link.Text(); got != sc.Name {
					t.Errorf("card %d name = %q, want %q", i, got, sc.Name)
				}
				badge := c.Find(byTestID("sale-status"))
				if got := badge.Text(); got != tt.wantBadges[i] {
					t.Errorf("card %d badge = %q, want %q", i, got, tt.wantBadges[i])
				}
				if got := badge.AttrOr("data-status", ""); got != sc.Status {
					t.Errorf("card %d data-status = %q, want %q", i, got, sc.Status)
				}
				if got, want := c.Find("time").Length(), 2; got != want {
					t.Errorf("card %d times = %d, want %d", i, got, want)
				}
				if got, want := c.AttrOr("data-starts-at", ""), "2031-03-04T02:00:00Z"; got != want {
					t.Errorf("card %d data-starts-at = %q, want %q", i, got, want)
				}
			})
		})
	}
}

// Each card of the home page shows its sale's items with their prices in the sale's currency,
// and an empty countdown that the script fills in; more than five items are counted, not listed.
func TestHomePageCardItems(t *testing.T) {
	items := func(n int) []SaleItem {
		var out []SaleItem
		for i := range n {
			out = append(out, SaleItem{ID: strconv.Itoa(i + 1), Name: "Thing " + strconv.Itoa(i+1), PriceCents: int64(100*i + 5)})
		}
		return out
	}
	home := Home{Sales: []SaleCard{
		{ID: "1", Name: "Phones", StartsAt: saleStart, EndsAt: saleEnd, Status: "live", Currency: "CNY",
			Items: []SaleItem{{ID: "7", Name: "Phone <X>", PriceCents: 1999, Quantity: 100}, {ID: "8", Name: "Case", PriceCents: 5, Quantity: 5}}},
		{ID: "2", Name: "Shoes", StartsAt: saleStart, EndsAt: saleEnd, Status: "upcoming", Currency: "USD",
			Items: []SaleItem{{ID: "9", Name: "Runner", PriceCents: 123456}}},
		{ID: "3", Name: "Tea", StartsAt: saleStart, EndsAt: saleEnd, Status: "upcoming", Currency: "EUR", Items: items(7)},
		{ID: "4", Name: "Old", StartsAt: saleStart, EndsAt: saleEnd, Status: "upcoming"},
	}}
	doc, _ := render(t, HomePage(home))
	type item struct{ name, price string }
	want := [][]item{
		{{"Phone <X>", "¥19.99"}, {"Case", "¥0.05"}},
		{{"Runner", "$1,234.56"}},
		{{"Thing 1", "€0.05"}, {"Thing 2", "€1.05"}, {"Thing 3", "€2.05"}, {"Thing 4", "€3.05"}, {"Thing 5", "€4.05"}},
		nil,
	}
	wantMore := []string{"", "", "and 2 more items", ""}
	cards := doc.Find(byTestID("sale-card"))
	if cards.Length() != len(want) {
		t.Fatalf("cards = %d, want %d", cards.Length(), len(want))
	}
	cards.Each(func(i int, c *goquery.Selection) {
		var got []item
		c.Find(byTestID("card-item")).Each(func(_ int, li *goquery.Selection) {
			got = append(got, item{li.Find(byTestID("card-item-name")).Text(), li.Find(byTestID("card-item-price")).Text()})
		})
		if len(got) != len(want[i]) {
			t.Errorf("card %d items = %v, want %v", i, got, want[i])
			return
		}
		for j := range got {
			if got[j] != want[i][j] {
				t.Errorf("card %d item %d = %v, want %v", i, j, got[j], want[i][j])
			}
		}
		if got := strings.TrimSpace(c.Find(byTestID("card-items-more")).Text()); got != wantMore[i] {
			t.Errorf("card %d more line = %q, want %q", i, got, wantMore[i])
		}
		if want[i] == nil && c.Find(byTestID("card-items")).Length() != 0 {
			t.Errorf("card %d without items has an item list", i)
		}
		cd := c.Find(byTestID("card-countdown"))
		if _, hidden := cd.Attr("hidden"); cd.Length() != 1 || !hidden || cd.Text() != "" {
			t.Errorf("card %d countdown: %d, hidden %v, text %q; want one, hidden and empty until the script fills it", i, cd.Length(), hidden, cd.Text())
		}
	})
	if _, hidden := doc.Find(byTestID("all-ended")).Attr("hidden"); !hidden {
		t.Errorf("the all-ended note is visible in the page, want hidden until the script sees every sale ended")
	}
}

// The home page holds nothing that depends on the visitor or on the moment of rendering beyond
// what its model says, so a shared cache may give it to everyone.
func TestHomePageSameForEveryVisitor(t *testing.T) {
	home := Home{Sales: []SaleCard{{ID: "1", Name: "Phones", StartsAt: saleStart, EndsAt: saleEnd, Status: "live",
		Items: []SaleItem{{ID: "7", Name: "Phone", PriceCents: 1999}}}}}
	_, first := render(t, HomePage(home))
	time.Sleep(1100 * time.Millisecond)
	_, second := render(t, HomePage(home))
	if first != second {
		t.Errorf("two renders of the same home page differ; want byte-identical pages")
	}
}

// The home page folds the ended sales behind a link; that list (Ended) has its own title, a link
// back to the current sales, and pages that keep ended=1. The cards show the sale's description
// and the items' pictures.
func TestHomePageEndedSalesFolded(t *testing.T) {
	cur := Home{Sales: []SaleCard{{ID: "1", Name: "Phones", StartsAt: saleStart, EndsAt: saleEnd, Status: "live",
		Description: "Fresh phones", Items: []SaleItem{{ID: "3", Name: "P", PriceCents: 100, Quantity: 1, ImageURL: "https://img.example/p.png"}, {ID: "4", Name: "Q", PriceCents: 100, Quantity: 1}}}}}
	doc, _ := render(t, HomePage(cur))
	if got := doc.Find(byTestID("ended-sales-link")).AttrOr("href", ""); got != "/?ended=1" {
		t.Errorf("ended sales link = %q, want /?ended=1", got)
	}
	if got := doc.Find(byTestID("card-description")).Text(); got != "Fresh phones" {
		t.Errorf("card description = %q", got)
	}
	img := doc.Find(byTestID("card-item") + " " + byTestID("item-image"))
	if img.Length() != 1 || img.AttrOr("src", "") != "https://img.example/p.png" || img.AttrOr("loading", "") != "lazy" || img.AttrOr("width", "") == "" || img.AttrOr("height", "") == "" {
		t.Errorf("card pictures = %d (%s), want the one item's, lazy, with its size", img.Length(), img.AttrOr("src", ""))
	}
	ended := Home{Ended: true, Next: "abc", Paged: true, Sales: []SaleCard{{ID: "2", Name: "Old", StartsAt: saleStart, EndsAt: saleEnd, Status: "ended"}}}
	doc, _ = render(t, HomePage(ended))
	if got := doc.Find("h1").Text(); got != "Ended sales" {
		t.Errorf("heading = %q, want Ended sales", got)
	}
	if doc.Find(byTestID("ended-sales-link")).Length() != 0 || doc.Find(byTestID("current-sales-link")).AttrOr("href", "") != "/" {
		t.Errorf("the ended list should link back to the current sales, not to itself")
	}
	if got := doc.Find(byTestID("sales-more")).AttrOr("href", ""); got != "/?cursor=abc&ended=1" {
		t.Errorf("next page = %q, want /?cursor=abc&ended=1", got)
	}
	if got := doc.Find(byTestID("sales-first")).AttrOr("href", ""); got != "/?ended=1" {
		t.Errorf("first page = %q, want /?ended=1", got)
	}
	if got := doc.Find(byTestID("sale-status")).Text(); got != "Ended" {
		t.Errorf("badge = %q, want Ended", got)
	}
	doc, _ = render(t, HomePage(Home{Ended: true}))
	if got := doc.Find(byTestID("empty-state")).Text(); got != "No sale has ended yet." {
		t.Errorf("empty ended list = %q", got)
	}
}
