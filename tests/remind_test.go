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

// "Remind me" before a sale: POST /api/flash-sales/{saleId}/remind needs a signed-in shopper
// (401 UNAUTHENTICATED without a session or with a bad one, 403 CSRF for a session cookie
// without its header, 403 FORBIDDEN for a merchant: nothing counted) and counts each shopper
// once: the same shopper again, with the same browser id or another, counts nothing more;
// distinct shoppers each count. It refuses a body whose reminderId is not one (400 INVALID_INPUT,
// nothing counted), an unknown sale (404) and a sale that has started (409 SALE_STARTED); the
// count is in a HyperLogLog under the sale's hash tag that expires a day after the sale's end,
// and the merchant's live view shows it as "reminders" (0 for a sale without any).
func TestRemindMe(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	merchant := h.token(9000, auth.RoleMerchant)
	s := h.createSale(time.Now().Add(time.Hour), 5)
	other := h.createSale(time.Now().Add(time.Hour), 5)
	remindAs := func(bearer string, saleID int64, body any, headers ...string) response {
		t.Helper()
		return h.do("POST", fmt.Sprintf("/api/flash-sales/%d/remind", saleID), bearer, body, headers...)
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
	// counted is the HyperLogLog's count itself, at once (the live view may be a moment old).
	ctx := context.Background()
	counted := func(what string, saleID int64, want int64) {
		t.Helper()
		if n, err := h.app.Redis.PFCount(ctx, store.RemindersKey(saleID)).Result(); err != nil || n != want {
			t.Errorf("%s: %d reminders counted (%v), want %d", what, n, err, want)
		}
	}

	ids := []string{"0b6f2f4e-5a43-4c2e-9d7b-2a8e1f0c9d11", "A1b2C3d4E5f6G7h8", strings.Repeat("z", 64)}
	// Nobody signed in, a token that is none, a session cookie without its CSRF header, a
	// merchant: refused, nothing counted, however many browser ids are sent.
	for _, id := range ids {
		wantCode(t, "remind without a session", remindAs("", s.sale, map[string]string{"reminderId": id}), http.StatusUnauthorized, "UNAUTHENTICATED")
	}
	wantCode(t, "remind with a bad token", remindAs("not-a-token", s.sale, map[string]string{"reminderId": ids[0]}), http.StatusUnauthorized, "UNAUTHENTICATED")
	wantCode(t, "remind with a session cookie and no CSRF header",
		remindAs("", s.sale, map[string]string{"reminderId": ids[0]}, "Cookie", "fs_session="+h.token(41, auth.RoleShopper)+"; fs_csrf=c5rf"), http.StatusForbidden, "CSRF")
	wantCode(t, "a merchant's remind", remindAs(merchant, s.sale, map[string]string{"reminderId": ids[0]}), http.StatusForbidden, "FORBIDDEN")
	counted("after the refused reminds", s.sale, 0)

	// Three shoppers; the first one four times, from three browsers (ids), and by its session
	// cookie as the page sends it: counted once.
	first, second, third := h.token(41, auth.RoleShopper), h.token(42, auth.RoleShopper), h.token(43, auth.RoleShopper)
	for i, id := range ids {
		if r := remindAs(first, s.sale, map[string]string{"reminderId": id}); r.Status != http.StatusNoContent {
			t.Fatalf("the first shopper's remind #%d: %d %s, want 204", i+1, r.Status, r.Raw)
		} else if r.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("remind: Cache-Control %q, want no-store", r.Header.Get("Cache-Control"))
		}
	}
	if r := remindAs("", s.sale, map[string]string{"reminderId": ids[0]}, "Cookie", "fs_session="+first+"; fs_csrf=c5rf", "X-CSRF-Token", "c5rf"); r.Status != http.StatusNoContent {
		t.Fatalf("the first shopper's remind by its session cookie: %d %s, want 204", r.Status, r.Raw)
	}
	counted("the first shopper, four times", s.sale, 1)
	// Two more shoppers, one of them sending the first one's browser id: each counts.
	for _, sh := range []string{second, third} {
		if r := remindAs(sh, s.sale, map[string]string{"reminderId": ids[0]}); r.Status != http.StatusNoContent {
			t.Fatalf("another shopper's remind: %d %s, want 204", r.Status, r.Raw)
		}
	}
	// Bad input: 400 INVALID_INPUT, and nothing counted (a fourth shopper).
	fourth := h.token(44, auth.RoleShopper)
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
		r := remindAs(fourth, s.sale, body)
		if r.Status != http.StatusBadRequest || r.str("error") != "INVALID_INPUT" {
			t.Errorf("remind %v: %d %s, want 400 INVALID_INPUT", body, r.Status, r.Raw)
		}
	}
	if r := h.do("POST", "/api/flash-sales/abc/remind", fourth, map[string]string{"reminderId": ids[0]}); r.Status != http.StatusBadRequest {
		t.Errorf("remind with a bad sale id: %d %s, want 400", r.Status, r.Raw)
	}
	// Unknown sale: 404.
	if r := remindAs(fourth, other.sale+1000, map[string]string{"reminderId": ids[0]}); r.Status != http.StatusNotFound || r.str("error") != "NOT_FOUND" {
		t.Errorf("remind of an unknown sale: %d %s, want 404 NOT_FOUND", r.Status, r.Raw)
	}
	// Another sale's count is its own: the first shopper counts there too.
	if r := remindAs(first, other.sale, map[string]string{"reminderId": ids[1]}); r.Status != http.StatusNoContent {
		t.Fatalf("remind other sale: %d %s", r.Status, r.Raw)
	}

	counted("three shoppers, bad input refused", s.sale, 3)
	reminders(s.sale, 3)
	reminders(other.sale, 1)

	// The HyperLogLog is under the sale's hash tag and expires a day after the sale's end.
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
	r := remindAs(first, live.sale, map[string]string{"reminderId": ids[2]})
	if r.Status != http.StatusConflict || r.str("error") != "SALE_STARTED" {
		t.Errorf("remind after the start: %d %s, want 409 SALE_STARTED", r.Status, r.Raw)
	}
	reminders(live.sale, 0)
	if n, err := h.app.Redis.Exists(ctx, store.RemindersKey(live.sale)).Result(); err != nil || n != 0 {
		t.Errorf("a refused reminder wrote its key: %d %v", n, err)
	}
}
