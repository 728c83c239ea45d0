package tests

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// "Remind me" before a sale: POST /api/flash-sales/{saleId}/remind counts each browser's id once
// (the same id twice counts once, distinct ids each count), refuses an id that is not one (400
// INVALID_INPUT, nothing counted), an unknown sale (404) and a sale that has started (409
// SALE_STARTED); the count is in a HyperLogLog under the sale's hash tag that expires a day after
// the sale's end, and the merchant's live view shows it as "reminders" (0 for a sale without any).
func TestRemindMe(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	merchant := h.token(9000, auth.RoleMerchant)
	s := h.createSale(time.Now().Add(time.Hour), 5)
	other := h.createSale(time.Now().Add(time.Hour), 5)
	remind := func(saleID int64, body any) response {
		t.Helper()
		return h.do("POST", fmt.Sprintf("/api/flash-sales/%d/remind", saleID), "", body)
	}
	reminders := func(saleID int64, want int64) {
		t.Helper()
		testenv.Eventually(t, 10*time.Second, fmt.Sprintf("live view showing %d reminders", want), func() error {
			r := h.do("GET", fmt.Sprintf("/api/admin/sales/%d/live", saleID), merchant, nil)
			if r.Status != http.StatusOK {
				t.Fatalf("live view: %d %s", r.Status, r.Raw)
			}
			n, ok := r.Body["reminders"].(float64)
			if !ok || int64(n) != want {
				return fmt.Errorf("reminders = %v (present %v)", r.Body["reminders"], ok)
			}
			return nil
		})
	}
	reminders(s.sale, 0)

	ids := []string{"0b6f2f4e-5a43-4c2e-9d7b-2a8e1f0c9d11", "A1b2C3d4E5f6G7h8", strings.Repeat("z", 64)}
	for _, id := range ids {
		if r := remind(s.sale, map[string]string{"reminderId": id}); r.Status != http.StatusNoContent {
			t.Fatalf("remind %q: %d %s, want 204", id, r.Status, r.Raw)
		} else if r.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("remind: Cache-Control %q, want no-store", r.Header.Get("Cache-Control"))
		}
	}
	// The same browser again, twice: counted once.
	for range 2 {
		if r := remind(s.sale, map[string]string{"reminderId": ids[0]}); r.Status != http.StatusNoContent {
			t.Fatalf("remind again: %d %s", r.Status, r.Raw)
		}
	}
	// Bad input: 400 INVALID_INPUT, and nothing counted.
	for _, body := range []any{
		map[string]string{"reminderId": "short-id"},
		map[string]string{"reminderId": strings.Repeat("a", 65)},
		map[string]string{"reminderId": "has spaces in it, too many"},
		map[string]string{"reminderId": "0b6f2f4e_5a43_4c2e_9d7b"},
		map[string]string{"reminderId": "ünïcödé-0123456789"},
		map[string]string{},
		map[string]any{"reminderId": 1234567890123456789},
		map[string]string{"reminderId": "0b6f2f4e-5a43-4c2e-9d7b-2a8e1f0c9d12", "extra": "x"},
		`not json`,
	} {
		r := remind(s.sale, body)
		if r.Status != http.StatusBadRequest || r.str("error") != "INVALID_INPUT" {
			t.Errorf("remind %v: %d %s, want 400 INVALID_INPUT", body, r.Status, r.Raw)
		}
	}
	if r := h.do("POST", "/api/flash-sales/abc/remind", "", map[string]string{"reminderId": ids[0]}); r.Status != http.StatusBadRequest {
		t.Errorf("remind with a bad sale id: %d %s, want 400", r.Status, r.Raw)
	}
	// Unknown sale: 404.
	if r := remind(other.sale+1000, map[string]string{"reminderId": ids[0]}); r.Status != http.StatusNotFound || r.str("error") != "NOT_FOUND" {
		t.Errorf("remind of an unknown sale: %d %s, want 404 NOT_FOUND", r.Status, r.Raw)
	}
	// Another sale's count is its own.
	if r := remind(other.sale, map[string]string{"reminderId": ids[1]}); r.Status != http.StatusNoContent {
		t.Fatalf("remind other sale: %d %s", r.Status, r.Raw)
	}

	reminders(s.sale, int64(len(ids)))
	reminders(other.sale, 1)

	// The HyperLogLog is under the sale's hash tag and expires a day after the sale's end.
	ctx := context.Background()
	key := store.RemindersKey(s.sale)
	if !strings.HasPrefix(key, fmt.Sprintf("{sale:%d}", s.sale)) {
		t.Errorf("key %q is not under the sale's hash tag", key)
	}
	ttl, err := h.app.Redis.TTL(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := 26 * time.Hour; ttl < want-time.Minute || ttl > want+time.Minute {
		t.Errorf("reminders TTL = %v, want about %v (a day after the end, two hours away)", ttl, want)
	}

	// A sale that has started: 409 SALE_STARTED, nothing counted.
	live := h.liveSale(5)
	r := remind(live.sale, map[string]string{"reminderId": ids[2]})
	if r.Status != http.StatusConflict || r.str("error") != "SALE_STARTED" {
		t.Errorf("remind after the start: %d %s, want 409 SALE_STARTED", r.Status, r.Raw)
	}
	reminders(live.sale, 0)
	if n, err := h.app.Redis.Exists(ctx, store.RemindersKey(live.sale)).Result(); err != nil || n != 0 {
		t.Errorf("a refused reminder wrote its key: %d %v", n, err)
	}
}
