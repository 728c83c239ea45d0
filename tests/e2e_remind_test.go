package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/flashsale/flashsale/services/auth"
)

// e2eNotificationJS wraps window.Notification before the page's script runs: every notification
// the page shows is recorded in window.__notes (title, body, when), then shown for real.
const e2eNotificationJS = `(() => {
  if (window.__notes) { return; }
  window.__notes = [];
  const N = window.Notification;
  if (typeof N !== 'function') { return; }
  const W = function (title, opts) {
    window.__notes.push({ title: String(title), body: String((opts && opts.body) || ''), at: Date.now() });
    try { return new N(title, opts); } catch (e) { return { close() {} }; }
  };
  W.requestPermission = (cb) => N.requestPermission(cb);
  Object.defineProperty(W, 'permission', { get: () => N.permission });
  window.Notification = W;
})()`

type e2eNote struct {
	Title string `json:"title"`
	Body  string `json:"body"`
	At    int64  `json:"at"`
}

// "Remind me" in a browser, on a desktop and on a 390-pixel phone: before the start the sale page
// offers it beside the countdown with the calendar link; pressed while logged out, it says to log
// in first (and leads to the login form), sets nothing and counts nothing; once the shopper has
// signed in, pressing it (notifications granted) says "Reminder set" with an undo, and the shop
// counts the shopper once (the merchant's live view); undo and remind again count nothing more; a
// reload keeps the reminder; at the start second the page shows one notification naming the sale,
// and the box goes away. Screenshots: sale-remind-desktop.png and sale-remind-phone.png in
// docs/screenshots.
func TestE2ERemindMe(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	h := newHarness(t, harnessOpts{})
	merchant := h.token(9000, auth.RoleMerchant)
	browserCtx := startE2EBrowser(t, ctx)
	dir := e2eShotDir(t)
	for _, v := range []e2eViewport{{"desktop", 1280, 900, false}, {"phone", 390, 844, true}} {
		t.Run(v.name, func(t *testing.T) {
			name := "Remind drop " + v.name
			// Ten minutes ahead while the page is tried before the start (a loaded machine may take
			// its time); the start is brought near for the reload and the notification.
			start := time.Now().Add(10 * time.Minute).Truncate(time.Second)
			s := h.createSaleWith(map[string]any{"name": name}, start, 3)
			b := openShopperTab(t, browserCtx, v, "shopper")
			if _, err := chromedp.CallBrowser(b.ctx, browser.SetPermission, browser.SetPermissionParams{
				Permission: &browser.PermissionDescriptor{Name: "notifications"}, Setting: browser.PermissionSettingGranted,
				Origin: h.srv.URL, BrowserContextID: chromedp.FromContext(b.ctx).BrowserContextID}); err != nil {
				t.Fatalf("grant notifications: %v", err)
			}
			if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: e2eNotificationJS}); err != nil {
				t.Fatalf("install the notification recorder: %v", err)
			}
			saleURL := h.srv.URL + "/sales/" + strconv.FormatInt(s.sale, 10)
			reminders := func() int64 {
				t.Helper()
				r := h.do("GET", fmt.Sprintf("/api/admin/sales/%d/live", s.sale), merchant, nil)
				n, _ := r.Body["reminders"].(float64)
				return int64(n)
			}

			b.openSalePage(saleURL)
			b.waitFor("Remind me and the calendar link offered", 5*time.Second,
				`e.shown(e.q('remind-button')) && e.shown(e.q('remind-calendar')) && !e.shown(e.q('remind-set'))`)
			if href := e2eEval[string](b, "the calendar link", `e.q('remind-calendar').getAttribute('href')`); href != "/sales/"+strconv.FormatInt(s.sale, 10)+"/calendar.ics" {
				t.Errorf("calendar link = %q", href)
			}
			if label := e2eEval[string](b, "the button's name", `e.text(e.q('remind-button'))`); label != "Remind me" {
				t.Errorf("remind button says %q, want Remind me", label)
			}
			// Logged out: "log in first", the login form's username focused, nothing set or counted.
			b.clickUntil("press Remind me logged out", e2eTestID("remind-button"), `e.text(e.q('remind-status')) !== ''`)
			b.waitFor("the page asks to log in first", 5*time.Second,
				`e.text(e.q('remind-status')) === 'Log in first to set a reminder.' && document.activeElement === e.q('username') &&
				 e.shown(e.q('remind-button')) && !e.shown(e.q('remind-set'))`)
			time.Sleep(300 * time.Millisecond)
			if n := reminders(); n != 0 {
				t.Errorf("a logged-out Remind me: the live view counts %d reminders, want 0", n)
			}
			uid := b.register("remind_"+v.name[:1]+"_"+strconv.FormatInt(time.Now().UnixNano()%1e9, 36), "a reminded shopper's password")
			b.waitFor("the log-in sentence gone once signed in", 5*time.Second, `e.text(e.q('remind-status')) === ''`)

			b.clickUntil("press Remind me", e2eTestID("remind-button"), `e.shown(e.q('remind-set'))`)
			b.waitFor("Reminder set, with an undo and the tab sentence", 5*time.Second,
				`e.text(e.q('remind-set')) === 'Reminder set' && e.shown(e.q('remind-undo')) && !e.shown(e.q('remind-button')) &&
				 e.text(e.q('remind-status')).includes('keep this tab open')`)
			wantOne := func(what string) {
				t.Helper()
				deadline := time.Now().Add(5 * time.Second)
				for reminders() != 1 && time.Now().Before(deadline) {
					time.Sleep(100 * time.Millisecond)
				}
				if n := reminders(); n != 1 {
					t.Errorf("%s: the live view counts %d reminders, want 1", what, n)
				}
			}
			wantOne("after Remind me")
			b.screenshot(dir, "sale-remind-"+v.name+".png", "")

			// Undo, then remind again: the same shopper still counts once.
			b.clickUntil("undo", e2eTestID("remind-undo"), `e.shown(e.q('remind-button'))`)
			b.clickUntil("remind again", e2eTestID("remind-button"), `e.shown(e.q('remind-set'))`)

			// The merchant brings the start near; a reload keeps the reminder.
			start = time.Now().Add(12 * time.Second).Truncate(time.Second)
			if r := h.patchSale(merchant, s.sale, map[string]any{"startsAt": start.UTC().Format(time.RFC3339),
				"endsAt": start.Add(time.Hour).UTC().Format(time.RFC3339)}); r.Status != http.StatusOK {
				t.Fatalf("bring the start near: %d %s", r.Status, r.Raw)
			}
			b.openSalePage(saleURL)
			b.waitFor("Reminder set after a reload", 5*time.Second, `e.shown(e.q('remind-set')) && !e.shown(e.q('remind-button'))`)
			wantOne("after an undo, a second Remind me and a reload")

			// The start: one notification naming the sale, and the box goes away.
			raw := b.waitFor("the notification at the start", time.Until(start)+8*time.Second, `window.__notes.length > 0 && window.__notes`)
			var notes []e2eNote
			if err := json.Unmarshal(raw, &notes); err != nil {
				t.Fatalf("notifications %s: %v", raw, err)
			}
			if len(notes) != 1 || !strings.Contains(notes[0].Title, name) || notes[0].Body == "" {
				t.Errorf("notifications = %+v, want one naming %q", notes, name)
			} else if early := start.UnixMilli() - notes[0].At; early > 1000 {
				t.Errorf("notified %d ms before the start", early)
			} else if late := -early; late > 3000 {
				t.Errorf("notified %d ms after the start", late)
			}
			b.waitFor("the remind box gone at the start", 3*time.Second, `!e.shown(e.q('remind'))`)
			time.Sleep(600 * time.Millisecond)
			if n := e2eEval[int](b, "notifications", `window.__notes.length`); n != 1 {
				t.Errorf("%d notifications, want exactly 1", n)
			}
			if r := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/remind", s.sale), h.token(uid, auth.RoleShopper), map[string]string{"reminderId": "late-0123456789abcdef"}); r.Status != http.StatusConflict {
				t.Errorf("remind after the start: %d", r.Status)
			}
			b.checkConsole()
		})
	}
}
