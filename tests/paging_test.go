package tests

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// The listing and the home page show every live or upcoming sale, a page at a time.
func TestSalesListingPages(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noWriter: true})
	// 60 sales straight into Postgres (the listing reads Postgres), starting one minute apart.
	err := h.sql().Exec(`INSERT INTO sales (merchant_id, name, starts_at, ends_at)
		SELECT 9000, 'listed ' || g, now() + g * interval '1 minute', now() + interval '1 day'
		FROM generate_series(1, 60) g`).Error
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	cursor, pages := "", 0
	for {
		path := "/api/flash-sales"
		if cursor != "" {
			path += "?cursor=" + cursor
		}
		r := h.do("GET", path, "", nil)
		if r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", path, r.Status, r.Raw)
		}
		pages++
		for _, s := range r.Body["sales"].([]any) {
			names = append(names, s.(map[string]any)["name"].(string))
		}
		if cursor = r.str("next"); cursor == "" {
			break
		}
	}
	if pages != 2 || len(names) != 60 || names[0] != "listed 1" || names[59] != "listed 60" {
		t.Errorf("listing: %d sales on %d pages (first %q), want 60 on 2 by start time", len(names), pages, names[0])
	}
	if r := h.do("GET", "/api/flash-sales?cursor=nonsense", "", nil); r.Status != http.StatusBadRequest || r.str("error") != "INVALID_INPUT" {
		t.Errorf("bad cursor: %d %s, want 400 INVALID_INPUT", r.Status, r.Raw)
	}
	home := h.do("GET", "/", "", nil)
	if home.Status != http.StatusOK || strings.Count(home.Raw, `data-testid="sale-card"`) != 50 || !strings.Contains(home.Raw, `data-testid="sales-more"`) {
		t.Fatalf("home page: %d, %d cards, more link %v", home.Status, strings.Count(home.Raw, `data-testid="sale-card"`), strings.Contains(home.Raw, "sales-more"))
	}
	i := strings.Index(home.Raw, `href="/?cursor=`)
	j := strings.Index(home.Raw[i+6:], `"`)
	next := h.do("GET", home.Raw[i+6:i+6+j], "", nil)
	if next.Status != http.StatusOK || strings.Count(next.Raw, `data-testid="sale-card"`) != 10 || strings.Contains(next.Raw, `data-testid="sales-more"`) ||
		!strings.Contains(next.Raw, "listed 60") {
		t.Errorf("second page: %d, %d cards", next.Status, strings.Count(next.Raw, `data-testid="sale-card"`))
	}
	if r := h.do("GET", "/?cursor=edited", "", nil); r.Status != http.StatusOK || strings.Count(r.Raw, `data-testid="sale-card"`) != 50 {
		t.Errorf("home with a cursor it did not give out: %d, want the first page", r.Status)
	}
}

// The background jobs look after every live sale, however many there are: a sale far down the
// list (after 1,100 others) whose Redis state is lost is still rebuilt.
func TestKeeperPagesThroughEverySale(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noWriter: true})
	err := h.sql().Exec(`INSERT INTO sales (merchant_id, name, starts_at, ends_at)
		SELECT 9000, 'crowd ' || g, now() - interval '1 hour', now() + interval '1 day'
		FROM generate_series(1, 1100) g`).Error
	if err != nil {
		t.Fatal(err)
	}
	s := h.createSale(time.Now().Add(5*time.Minute), 5) // starts after all of them, within FLASHSALE_WARM_AHEAD
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	// deleted, then looked at 300 ms later: out once deleted after the keeper's last look
	testenv.EventuallyEvery(t, 60*time.Second, 0, "the sale taken out of redis", func() error {
		h.app.Redis.Del(ctx, store.MetaKey(s.sale), store.StockKey(s.sale, s.items[0]))
		time.Sleep(300 * time.Millisecond)
		if st, err := h.app.Stock.State(ctx, s.sale); err != nil || st.Loaded {
			return fmt.Errorf("state %+v, %v: the keeper loaded it again", st, err)
		}
		return nil
	})
	testenv.EventuallyEvery(t, time.Until(deadline), 200*time.Millisecond, fmt.Sprintf("the keeper reloaded sale %d, 1,101st by start time", s.sale), func() error {
		st, err := h.app.Stock.State(ctx, s.sale)
		if err != nil || !st.Loaded {
			return fmt.Errorf("state %+v, %v", st, err)
		}
		return nil
	})
	h.checkInvariants(s)
}

// The ended sales are folded behind a link of the home page: /?ended=1 lists them, the latest end
// first, 20 a page, on real Postgres; none of them is on the current list.
func TestEndedSalesPages(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{noWriter: true})
	err := h.sql().Exec(`INSERT INTO sales (merchant_id, name, starts_at, ends_at)
		SELECT 9000, 'ended ' || g, now() - interval '2 days', now() - g * interval '1 minute'
		FROM generate_series(1, 25) g`).Error
	if err != nil {
		t.Fatal(err)
	}
	cur := h.do("GET", "/", "", nil)
	if cur.Status != http.StatusOK || strings.Contains(cur.Raw, "ended 1<") || !strings.Contains(cur.Raw, `href="/?ended=1"`) {
		t.Fatalf("home: %d; want no ended sale listed and a link to them", cur.Status)
	}
	first := h.do("GET", "/?ended=1", "", nil)
	if first.Status != http.StatusOK || strings.Count(first.Raw, `data-testid="sale-card"`) != 20 {
		t.Fatalf("ended sales, first page: %d, %d cards, want 20", first.Status, strings.Count(first.Raw, `data-testid="sale-card"`))
	}
	if a, b := strings.Index(first.Raw, ">ended 1<"), strings.Index(first.Raw, ">ended 2<"); a < 0 || b < a {
		t.Errorf("ended sales not listed latest end first (ended 1 at %d, ended 2 at %d)", a, b)
	}
	i := strings.Index(first.Raw, `href="/?cursor=`)
	if i < 0 {
		t.Fatalf("no next page link on the first page of ended sales")
	}
	j := strings.Index(first.Raw[i+6:], `"`)
	next := h.do("GET", strings.ReplaceAll(first.Raw[i+6:i+6+j], "&amp;", "&"), "", nil)
	if next.Status != http.StatusOK || strings.Count(next.Raw, `data-testid="sale-card"`) != 5 || !strings.Contains(next.Raw, ">ended 25<") || strings.Contains(next.Raw, ">ended 1<") {
		t.Errorf("ended sales, second page: %d, %d cards, want the last 5", next.Status, strings.Count(next.Raw, `data-testid="sale-card"`))
	}
}
