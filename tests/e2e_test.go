package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// The browser end-to-end test: Debian's chromium, headless, drives the sale page of a harness
// (real Redis, Postgres and JetStream) through the "done means": the page counts down
// to the start, enables the buy button at the server-synced start second and not before, a
// purchase goes QUEUED → PENDING and is paid, and a second shopper is told "sold out" in words.

const (
	e2eChromium = "/usr/bin/chromium"
	// e2eEarlyTolerance is how much earlier than startsAt a buy button may light up: the
	// page follows the server's clock, synced over loopback, so anything earlier is a defect.
	e2eEarlyTolerance = 300 * time.Millisecond
	// e2eLead is how far ahead of its creation the sale starts (rounded up to a whole second,
	// as the merchant API takes RFC 3339 seconds): long enough for the page to load, a shopper
	// to register and the captcha to arrive on a loaded 2-core box.
	e2eLead = 4 * time.Second
)

// e2eRecorderJS runs in every document of a tab before the page's own script. It records, from
// a MutationObserver, the browser time at which each buy button was first enabled and the
// successive texts of the order status, the countdown and the message area, so that short
// states (QUEUED) and the exact enabling moment are seen without polling races. It also holds
// the small DOM helpers the test's expressions use.
const e2eRecorderJS = `(() => {
  if (window.__e2e) { return; }
  const q = (id) => document.querySelector('[data-testid="' + id + '"]');
  const qa = (id) => Array.from(document.querySelectorAll('[data-testid="' + id + '"]'));
  const text = (el) => el ? el.textContent.replace(/\s+/g, ' ').trim() : null;
  const shown = (el) => !!el && el.getClientRects().length > 0;
  const rec = window.__e2e = { q, qa, text, shown, enabledAt: {}, statuses: [], countdowns: [], messages: [] };
  rec.buy = (id) => document.querySelector('[data-testid="buy-button"][data-item-id="' + id + '"]');
  rec.stock = (id) => document.querySelector('[data-testid="stock"][data-item-id="' + id + '"]');
  const push = (list, v) => { if (v && list[list.length - 1] !== v) { list.push(v); } };
  const scan = () => {
    for (const b of qa('buy-button')) {
      const id = b.getAttribute('data-item-id');
      if (!b.disabled && !(id in rec.enabledAt)) { rec.enabledAt[id] = Date.now(); }
    }
    push(rec.statuses, text(q('order-status')));
    push(rec.countdowns, text(q('countdown')));
    push(rec.messages, text(q('message')));
  };
  rec.state = () => ({
    url: location.href, now: Date.now(),
    countdown: text(q('countdown')), phase: q('countdown') && q('countdown').getAttribute('data-phase'),
    message: text(q('message')), messageKind: q('message') && q('message').getAttribute('data-kind'),
    session: shown(q('session-user')) ? text(q('session-user')) : (shown(q('login-form')) ? 'login form shown' : 'nothing shown'),
    captcha: { box: shown(q('captcha')), image: shown(q('captcha-image')), hint: text(q('captcha-hint')),
      answer: q('captcha-answer') && q('captcha-answer').value },
    items: qa('item').map((li) => ({ id: li.getAttribute('data-item-id'),
      stock: text(li.querySelector('[data-testid="stock"]')),
      button: text(li.querySelector('[data-testid="buy-button"]')),
      disabled: li.querySelector('[data-testid="buy-button"]').disabled })),
    order: { shown: shown(q('order')), id: q('order') && q('order').getAttribute('data-order-id'),
      status: text(q('order-status')), payBy: shown(q('pay-by-row')) ? text(q('pay-by-row')) : null,
      note: text(q('order-note')), pay: shown(q('pay-button')) },
    recorded: { enabledAt: rec.enabledAt, statuses: rec.statuses, countdowns: rec.countdowns, messages: rec.messages },
  });
  new MutationObserver(scan).observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
})()`

// e2eConsole keeps a tab's console messages, exceptions and browser log entries.
type e2eConsole struct {
	mu   sync.Mutex
	msgs []chromedp.ConsoleMessage
}

func (c *e2eConsole) all() []chromedp.ConsoleMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]chromedp.ConsoleMessage(nil), c.msgs...)
}

// e2eTab is one browser tab with helpers that fail the test, showing the page's state and
// console, when something does not happen in time.
type e2eTab struct {
	t       *testing.T
	name    string
	ctx     context.Context
	console *e2eConsole
}

// startE2EBrowser launches headless chromium with a fresh profile under t.TempDir() and returns
// the context of its first tab. Everything ends when ctx ends; the browser and any process
// left over from it are gone before the profile directory is removed.
func startE2EBrowser(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	if _, err := os.Stat(e2eChromium); err != nil {
		t.Fatalf("%s is missing (%v): run `make deps` to install Debian's chromium", e2eChromium, err)
	}
	profile := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(e2eChromium),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// Two tabs are open at once: keep the one in the background running at full speed.
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		// The pages follow Accept-Language: the tests read English unless a tab asks otherwise
		// (e2eChinese), whatever the machine's locale.
		chromedp.Flag("lang", "en-US"),
		chromedp.Flag("accept-lang", "en-US,en"),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 1024),
	}
	allocCtx, allocCancel := chromedp.NewExecAllocator(ctx, opts...)
	var done sync.Mutex // guards finished: chromedp may log after the test has returned
	finished := false
	logf := func(format string, args ...any) {
		done.Lock()
		defer done.Unlock()
		if !finished {
			t.Logf("chromedp: "+format, args...)
		}
	}
	bctx, _ := chromedp.NewContext(allocCtx, chromedp.WithErrorf(logf))
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(bctx, 5*time.Second)
		_ = chromedp.Cancel(cctx) // a graceful close; then make sure it is gone
		cancel()
		allocCancel() // waits for the browser process
		e2eReapProfile(profile)
		done.Lock()
		finished = true
		done.Unlock()
	})
	start := time.Now()
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", e2eChromium, err)
	}
	t.Logf("chromium started in %v", time.Since(start).Round(time.Millisecond))
	return bctx
}

// e2eReapProfile waits until no process of the browser that used the profile directory is left
// (a renderer can outlive the browser by a moment and write into the directory), and ends any
// that is still there after a while, by its pid.
func e2eReapProfile(profile string) {
	want := []byte("--user-data-dir=" + profile)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []int
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if err != nil {
				continue
			}
			for _, arg := range bytes.Split(cmdline, []byte{0}) {
				if bytes.Equal(arg, want) {
					left = append(left, pid)
					break
				}
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			deadline = time.Now().Add(2 * time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openE2ETab opens (or takes, for the browser's first tab) a tab, installs the recorder for
// every document it loads and collects its console.
func openE2ETab(t *testing.T, ctx context.Context, name string) *e2eTab {
	t.Helper()
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("%s: open a tab: %v", name, err)
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: e2eRecorderJS}); err != nil {
		t.Fatalf("%s: install the recorder: %v", name, err)
	}
	b := &e2eTab{t: t, name: name, ctx: ctx, console: &e2eConsole{}}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			b.console.mu.Lock()
			b.console.msgs = append(b.console.msgs, m)
			b.console.mu.Unlock()
		}
	}()
	return b
}

// fatalf fails the test with the page's state and console.
func (b *e2eTab) fatalf(format string, args ...any) {
	b.t.Helper()
	b.t.Fatalf("%s: %s\npage state: %s\nconsole:\n%s", b.name, fmt.Sprintf(format, args...), b.state(), b.consoleText())
}

func (b *e2eTab) state() string {
	ctx, cancel := context.WithTimeout(b.ctx, 3*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](`window.__e2e ? window.__e2e.state() : {recorder: "missing"}`))
	if err != nil {
		return fmt.Sprintf("(unavailable: %v)", err)
	}
	return string(raw)
}

func (b *e2eTab) consoleText() string {
	var sb strings.Builder
	for _, m := range b.console.all() {
		fmt.Fprintf(&sb, "  [%s] %s (%s:%d)\n", m.Type, m.Text, m.URL, m.Line+1)
	}
	return sb.String()
}

// do runs actions, failing the test on an error.
func (b *e2eTab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.fatalf("%s: %v", what, err)
	}
}

// waitFor polls a JavaScript expression every 20 ms until it is truthy, and returns its value
// as JSON. The expression may use window.__e2e (the recorder and its helpers) as e.
func (b *e2eTab) waitFor(what string, timeout time.Duration, expr string) []byte {
	b.t.Helper()
	start := time.Now()
	v, err := chromedp.Run(b.ctx, chromedp.Poll[[]byte](`((e) => (`+expr+`))(window.__e2e)`,
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
	if err != nil {
		b.fatalf("waited %v for %s: %v", timeout, what, err)
	}
	b.t.Logf("%s: %s (%v)", b.name, what, time.Since(start).Round(time.Millisecond))
	return v
}

// e2eEval evaluates a JavaScript expression (with the recorder as e) and decodes its value.
func e2eEval[T any](b *e2eTab, what, expr string) T {
	b.t.Helper()
	raw, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]byte](`((e) => (`+expr+`))(window.__e2e)`))
	if err != nil {
		b.fatalf("%s: %v", what, err)
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		b.fatalf("%s: decode %s: %v", what, raw, err)
	}
	return v
}

func e2eTestID(id string) chromedp.CSS {
	return chromedp.CSS(fmt.Sprintf(`[data-testid=%q]`, id))
}

func e2eBuyButton(itemID int64) chromedp.CSS {
	return chromedp.CSS(fmt.Sprintf(`[data-testid="buy-button"][data-item-id="%d"]`, itemID))
}

// openSalePage loads the sale page and waits until its script has synced with the shop's clock.
func (b *e2eTab) openSalePage(url string) {
	b.t.Helper()
	b.do("open the sale page", chromedp.Navigate(url))
	if !e2eEval[bool](b, "the recorder", `!!e`) {
		b.fatalf("the recorder script did not run in the page")
	}
	b.waitFor("the page synced its clock with the shop", 10*time.Second,
		`['upcoming', 'live'].includes(e.q('countdown').getAttribute('data-phase'))`)
}

// register signs a new shopper up through the page's form and returns the user id it shows.
func (b *e2eTab) register(username, password string) int64 {
	b.t.Helper()
	if !e2eEval[bool](b, "the login form", `e.shown(e.q('login-form')) && !e.shown(e.q('session-user'))`) {
		b.fatalf("a new visitor should see the login form and no signed-in user")
	}
	b.do("fill in the register form and ask for its captcha",
		chromedp.SendKeys(e2eTestID("username"), username),
		chromedp.SendKeys(e2eTestID("password"), password),
		chromedp.Click(e2eTestID("register-button")),
	)
	// Registration takes a captcha: its picture shows, the answer goes in, Enter registers.
	b.waitFor("the registration captcha", 10*time.Second,
		`e.shown(e.q('register-captcha-image')) && e.q('register-captcha-image').complete && e.q('register-captcha-image').naturalWidth > 0`)
	b.do("answer the captcha and press Enter",
		chromedp.SendKeys(e2eTestID("register-captcha-answer"), "test\r"),
	)
	b.waitFor("the session area shows the shopper signed in", 10*time.Second,
		`e.shown(e.q('session-user')) && !e.shown(e.q('login-form')) && /^\d+$/.test(e.q('session-user').getAttribute('data-user-id'))`)
	session := e2eEval[string](b, "the session line", `e.text(e.q('session-user'))`)
	if want := "Signed in as " + username + " · Log out"; session != want {
		b.fatalf("session area = %q, want %q", session, want)
	}
	if role := e2eEval[string](b, "the role", `e.q('session-user').getAttribute('data-role')`); role != "shopper" {
		b.fatalf("session role = %q, want shopper", role)
	}
	if msg := e2eEval[string](b, "the message", `e.text(e.q('message'))`); msg != "Account created; signed in as "+username+"." {
		b.fatalf("message after registering = %q", msg)
	}
	id, _ := strconv.ParseInt(e2eEval[string](b, "the user id", `e.q('session-user').getAttribute('data-user-id')`), 10, 64)
	return id
}

// solveCaptcha waits for the captcha image, types the test provider's answer and returns the
// browser time (Unix ms) at which the image was seen.
func (b *e2eTab) solveCaptcha() int64 {
	b.t.Helper()
	raw := b.waitFor("the captcha image is shown", 10*time.Second,
		`e.shown(e.q('captcha')) && e.shown(e.q('captcha-image')) && e.q('captcha-image').src.startsWith('data:image/') && e.q('captcha-image').complete && e.q('captcha-image').naturalWidth > 0 ? Date.now() : 0`)
	shownAt, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		b.fatalf("captcha poll answered %s", raw)
	}
	b.do("type the captcha answer", chromedp.SendKeys(e2eTestID("captcha-answer"), "test"))
	if v := e2eEval[string](b, "the captcha answer", `e.q('captcha-answer').value`); v != "test" {
		b.fatalf("captcha answer field = %q, want \"test\"", v)
	}
	return int64(shownAt)
}

// screenshot saves a PNG of the whole page under dir, checks that it decodes, and copies it to
// copyTo when that is set.
func (b *e2eTab) screenshot(dir, file, copyTo string) {
	b.t.Helper()
	buf, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.fatalf("screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		b.fatalf("the screenshot is not a PNG: %v", err)
	}
	if r := img.Bounds(); r.Dx() < 300 || r.Dy() < 300 {
		b.fatalf("screenshot is only %dx%d", r.Dx(), r.Dy())
	}
	path := filepath.Join(dir, file)
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
	if copyTo != "" {
		if err := os.WriteFile(copyTo, buf, 0o644); err != nil {
			b.t.Fatalf("copy the screenshot to %s: %v", copyTo, err)
		}
		b.t.Logf("%s: screenshot (%dx%d) copied to %s", b.name, img.Bounds().Dx(), img.Bounds().Dy(), copyTo)
	}
}

// checkConsole fails on uncaught exceptions and Content-Security-Policy refusals, and logs the
// rest of the console.
func (b *e2eTab) checkConsole() {
	b.t.Helper()
	for _, m := range b.console.all() {
		if m.IsException() || strings.Contains(m.Text, "Content Security Policy") {
			b.t.Errorf("%s: console: [%s] %s (%s:%d)", b.name, m.Type, m.Text, m.URL, m.Line+1)
		}
	}
	if s := b.consoleText(); s != "" {
		b.t.Logf("%s console:\n%s", b.name, s)
	}
}

func TestE2EBrowserFlashSale(t *testing.T) {
	t.Parallel()
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	h := newHarness(t, harnessOpts{})
	browserCtx := startE2EBrowser(t, ctx)
	one := openE2ETab(t, browserCtx, "shopper 1")
	// Warm the browser and its cache of the static files before the countdown is running.
	one.do("open the home page", chromedp.Navigate(h.srv.URL+"/"))

	// 1. A sale starting four to five seconds from now: "item 0" has one unit, "item 1" five.
	startsAt := time.Now().Add(e2eLead).Truncate(time.Second).Add(time.Second)
	s := h.createSale(startsAt, 1, 5)
	startMs := startsAt.UnixMilli()
	item, other := s.items[0], s.items[1]
	itemJS, otherJS := strconv.FormatInt(item, 10), strconv.FormatInt(other, 10) // for expressions
	saleURL := fmt.Sprintf("%s/sales/%d", h.srv.URL, s.sale)
	t.Logf("sale %d starts at %s (in %v)", s.sale, startsAt.Format("15:04:05.000"), time.Until(startsAt).Round(time.Millisecond))

	one.openSalePage(saleURL)
	if got := e2eEval[string](one, "data-starts-at", `e.q('sale').getAttribute('data-starts-at')`); got != startsAt.UTC().Format("2006-01-02T15:04:05Z") {
		one.fatalf("data-starts-at = %q, want %s", got, startsAt.UTC().Format(time.RFC3339))
	}
	if e2eEval[bool](one, "the captcha box", `e.shown(e.q('captcha'))`) {
		one.fatalf("the captcha is shown to a visitor who is not signed in")
	}

	// Before the start: a running countdown and every buy button disabled. Checked live as soon
	// as the page has synced (before the slower steps, so that a loaded box cannot make the
	// check race the start), and after the start from the recorder, which saw every change.
	before := e2eEval[struct {
		Now       float64  `json:"now"`
		Disabled  bool     `json:"disabled"`
		Labels    []string `json:"labels"`
		Phase     string   `json:"phase"`
		Countdown string   `json:"countdown"`
		Detail    string   `json:"detail"`
	}](one, "the page before the start", `({now: Date.now(), disabled: e.qa('buy-button').every((b) => b.disabled),
		labels: e.qa('buy-button').map((b) => e.text(b)), phase: e.q('countdown').getAttribute('data-phase'),
		countdown: e.text(e.q('countdown')), detail: e.text(e.q('countdown-detail'))})`)
	if int64(before.Now) >= startMs {
		one.fatalf("setup took too long: the sale had started (at %s) before the page was ready", startsAt.Format("15:04:05.000"))
	}
	if !before.Disabled || before.Phase != "upcoming" || len(before.Labels) != 2 || before.Labels[0] != "Buy" {
		one.fatalf("%dms before the start: buttons disabled = %v (labels %q), phase %q; want 2 disabled \"Buy\" buttons, upcoming",
			startMs-int64(before.Now), before.Disabled, before.Labels, before.Phase)
	}
	if !regexp.MustCompile(`^Starts in \d+:\d\d$`).MatchString(before.Countdown) || !strings.Contains(before.Detail, "solve the captcha") {
		one.fatalf("countdown %q (%q), want \"Starts in m:ss\" and the advice to solve the captcha now", before.Countdown, before.Detail)
	}

	// 2. Register through the page's form.
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	user1 := one.register("e2e_first_"+suffix, "correct horse battery")

	// 3. The captcha is shown to the signed-in shopper during the countdown; type the answer.
	// (The disabled buttons and the running countdown: above, and from the recorder below.)
	shownAt := one.solveCaptcha()
	t.Logf("captcha shown %v before the start; answer typed %v before the start",
		time.Duration(startMs-shownAt)*time.Millisecond, time.Until(startsAt).Round(time.Millisecond))
	if shownAt >= startMs {
		t.Logf("note: the box was too slow to show the captcha before the start; the disabled buttons are checked from the recorder")
	}

	// 4. The buy button lights up at the start second, not before; click it.
	one.waitFor("the buy button of item 0 is enabled", time.Until(startsAt)+10*time.Second, `!e.buy(`+itemJS+`).disabled`)
	one.do("click Buy", chromedp.Click(e2eBuyButton(item)))
	enabledAt := e2eEval[map[string]float64](one, "when the buttons were enabled", `e.enabledAt`)
	for i, id := range s.items {
		at, ok := enabledAt[strconv.FormatInt(id, 10)]
		if !ok {
			one.fatalf("the recorder saw no enabling of item %d's button (item id %d)", i, id)
		}
		early := time.Duration(startMs-int64(at)) * time.Millisecond
		t.Logf("item %d's buy button (item id %d) enabled at startsAt %+dms", i, id, -early.Milliseconds())
		if early > e2eEarlyTolerance {
			t.Errorf("item %d's buy button was enabled %v before the sale's start (tolerance %v)", i, early, e2eEarlyTolerance)
		}
		if early < -5*time.Second {
			t.Errorf("item %d's buy button was enabled only %v after the sale's start", i, -early)
		}
	}
	if cd := e2eEval[string](one, "the countdown", `e.text(e.q('countdown'))`); cd != "Live now" {
		one.errorf("countdown after the start = %q, want \"Live now\"", cd)
	}
	// The countdown ran: it went down second by second (never showing 0:00), then said "Live now".
	countdowns := e2eEval[[]string](one, "the recorded countdown", `e.countdowns`)
	if err := checkCountdown(countdowns); err != nil {
		one.errorf("countdown texts %q: %v", countdowns, err)
	}

	// 5. QUEUED, then PENDING with a pay-by time; pay → PAID.
	res := string(one.waitFor("the order is PENDING (or the page reports an error)", 20*time.Second,
		`e.q('order-status') && e.q('order-status').getAttribute('data-status') === 'PENDING' ? 'PENDING' : (e.q('message').getAttribute('data-kind') === 'error' ? 'error: ' + e.text(e.q('message')) : '')`))
	if res != `"PENDING"` {
		one.fatalf("the purchase failed: %s", res)
	}
	statuses := e2eEval[[]string](one, "the recorded statuses", `e.statuses`)
	if i := indexOf(statuses, "Confirming"); i < 0 || indexOf(statuses[i:], "Awaiting payment") < 0 {
		one.errorf("order status went through %q, want Confirming (QUEUED) then Awaiting payment (PENDING)", statuses)
	}
	if msgs := e2eEval[[]string](one, "the recorded messages", `e.messages`); indexOf(msgs, "Got it! Your unit is reserved and the order is queued.") < 0 {
		one.errorf("messages %q: want the reservation confirmed in words", msgs)
	}
	order := e2eEval[struct {
		ID    string `json:"id"`
		Href  string `json:"href"`
		Code  string `json:"code"`
		PayBy string `json:"payBy"`
		Left  string `json:"left"`
		Pay   bool   `json:"pay"`
	}](one, "the order panel", `({id: e.q('order').getAttribute('data-order-id'), href: e.q('order-link').getAttribute('href'),
		code: e.text(e.q('order-id')), payBy: e.shown(e.q('pay-by-row')) ? e.text(e.q('pay-by')) : '',
		left: e.text(e.q('pay-left')), pay: e.shown(e.q('pay-button'))})`)
	h.mu.Lock()
	h.acked = append(h.acked, order.ID) // answered 202 to the page: must be durable
	h.mu.Unlock()
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(order.ID) ||
		order.Code != order.ID || order.Href != "/orders/"+order.ID {
		one.errorf("order panel: id %q, shown %q, link %q; want a UUID shown and linked to /orders/<id>", order.ID, order.Code, order.Href)
	}
	if !regexp.MustCompile(`^Pay by \d\d:\d\d:\d\d$`).MatchString(order.PayBy) || !regexp.MustCompile(`^\((9|10):\d\d left\)$`).MatchString(order.Left) || !order.Pay {
		one.errorf("pending order: pay-by %q, left %q, pay button shown %v; want a pay-by time, about 10 minutes left and a pay button", order.PayBy, order.Left, order.Pay)
	}
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE id = ? AND user_id = ? AND item_id = ? AND status = 'PENDING'`, order.ID, user1, item); got != 1 {
		t.Errorf("PENDING order %s of user %d for item %d in postgres: %d rows, want 1", order.ID, user1, item, got)
	}
	one.do("click Pay", chromedp.Click(e2eTestID("pay-button")))
	one.waitFor("the order is PAID", 10*time.Second,
		`e.text(e.q('order-status')) === 'Paid' && e.text(e.q('message')) === 'Payment received: the order is paid.' && !e.shown(e.q('pay-button')) && !e.shown(e.q('pay-by-row'))`)
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE id = ? AND status = 'PAID'`, order.ID); got != 1 {
		t.Errorf("order %s is not PAID in postgres", order.ID)
	}
	// The shopper's own page learns from the stock badge that the single unit is gone.
	// One per shopper in the sale: item 1 is still on sale, but not to shopper 1, who is told why.
	one.waitFor("item 0 shows sold out and bought, item 1 stays on sale but says why shopper 1 cannot buy it", 10*time.Second,
		`e.text(e.stock(`+itemJS+`)) === 'sold out' && e.buy(`+itemJS+`).disabled && e.text(e.buy(`+itemJS+`)) === 'Bought'
		&& e.text(e.stock(`+otherJS+`)) === '5 left' && e.buy(`+otherJS+`).disabled
		&& e.text(document.querySelector('[data-testid="item-note"][data-item-id="`+otherJS+`"]')) === 'One per shopper in this sale: you already have item 0.'`)

	// 6. A second shopper in a fresh browser context (own cookies and storage). Its page is kept
	// from learning the stock (the stock endpoint is blocked, as if the micro-cached snapshot
	// were stale), so its Buy button is live and the refusal has to come from the server.
	twoCtx, twoCancel := chromedp.NewContext(browserCtx, chromedp.WithNewBrowserContext())
	defer twoCancel()
	two := openE2ETab(t, twoCtx, "shopper 2")
	if _, err := chromedp.Call(twoCtx, network.SetBlockedURLs, network.SetBlockedURLsParams{
		URLPatterns: []*network.BlockPattern{{URLPattern: "*://*:*/api/flash-sales/*/stock", Block: true}},
	}); err != nil {
		t.Fatalf("block the stock endpoint for shopper 2: %v", err)
	}
	two.openSalePage(saleURL)
	user2 := two.register("e2e_second_"+suffix, "another fine password")
	if user2 == user1 {
		t.Fatalf("both shoppers are user %d", user1)
	}
	two.solveCaptcha()
	two.waitFor("the buy button of item 0 is enabled for shopper 2", 10*time.Second,
		`e.q('countdown').getAttribute('data-phase') === 'live' && !e.buy(`+itemJS+`).disabled`)
	if st := e2eEval[string](two, "item 0's stock badge", `e.text(e.stock(`+itemJS+`))`); st != "–" {
		two.fatalf("item 0's stock badge = %q although the stock endpoint is blocked", st)
	}
	two.do("click Buy", chromedp.Click(e2eBuyButton(item)))
	res = string(two.waitFor("the message area answers", 15*time.Second,
		`e.q('message').getAttribute('data-kind') === 'error' || e.shown(e.q('order')) ? e.text(e.q('message')) : ''`))
	if res != strconv.Quote("Sold out: every unit has been taken.") {
		two.fatalf("message after buying a sold-out item = %s, want \"Sold out: every unit has been taken.\"", res)
	}
	two.waitFor("item 0 is marked sold out after the refusal", 5*time.Second,
		`e.text(e.stock(`+itemJS+`)) === 'sold out' && e.buy(`+itemJS+`).disabled && e.text(e.buy(`+itemJS+`)) === 'Sold out' && !e.shown(e.q('order'))`)
	if got := h.sqlInt(`SELECT count(*) FROM orders WHERE user_id = ?`, user2); got != 0 {
		t.Errorf("shopper 2 (user %d) has %d orders, want none", user2, got)
	}

	// 7. Screenshots: shopper 1's page (paid order, item 0 sold out) and shopper 2's (refused).
	if _, err := chromedp.CallBrowser(browserCtx, target.ActivateTarget, target.ActivateTargetParams{TargetID: chromedp.FromContext(browserCtx).Target.TargetID}); err != nil {
		t.Fatalf("bring shopper 1's tab to the front: %v", err)
	}
	one.waitFor("shopper 1's page still shows the paid order", 5*time.Second,
		`!document.hidden && e.text(e.q('order-status')) === 'Paid' && e.text(e.q('countdown')) === 'Live now'`)
	dir := t.TempDir()
	shot := os.Getenv("FLASHSALE_E2E_SCREENSHOT")
	one.screenshot(dir, "sale-page.png", shot)
	shot2 := ""
	if shot != "" {
		shot2 = strings.TrimSuffix(shot, filepath.Ext(shot)) + "-second-shopper.png"
	}
	two.screenshot(dir, "sale-page-second-shopper.png", shot2)
	one.checkConsole()
	two.checkConsole()

	// 8. The invariants.
	h.checkInvariants(s)
	if got := h.sqlInt(`SELECT sold FROM items WHERE id = ?`, item); got != 1 {
		t.Errorf("item 0 sold = %d, want 1", got)
	}
	t.Logf("end to end in %v", time.Since(began).Round(time.Millisecond))
}

// errorf reports a failed check without stopping, with the page's state.
func (b *e2eTab) errorf(format string, args ...any) {
	b.t.Helper()
	b.t.Errorf("%s: %s\npage state: %s", b.name, fmt.Sprintf(format, args...), b.state())
}

// checkCountdown checks the successive texts of the countdown: "Syncing with the shop's clock…"
// until the clock is synced, then "Starts in m:ss" strictly decreasing down to 0:01, then
// "Live now".
func checkCountdown(texts []string) error {
	re := regexp.MustCompile(`^Starts in (\d+):(\d\d)$`)
	last, shown := -1, 0
	for i, s := range texts {
		if last < 0 && strings.HasPrefix(s, "Syncing with the shop") {
			continue
		}
		if s == "Live now" {
			if i != len(texts)-1 {
				return fmt.Errorf("%q after \"Live now\"", texts[i+1:])
			}
			if last != 1 {
				return fmt.Errorf("the last countdown before the start showed %d s, want 0:01", last)
			}
			if shown < 2 {
				return fmt.Errorf("only %d \"Starts in\" value: the countdown did not run", shown)
			}
			return nil
		}
		m := re.FindStringSubmatch(s)
		if m == nil {
			return fmt.Errorf("unexpected text %q", s)
		}
		mins, _ := strconv.Atoi(m[1])
		sec, _ := strconv.Atoi(m[2])
		left := mins*60 + sec
		if last >= 0 && left >= last {
			return fmt.Errorf("%q does not count down from %d s", s, last)
		}
		last = left
		shown++
	}
	return errors.New("never reached \"Live now\"")
}

func indexOf(list []string, v string) int {
	for i, s := range list {
		if s == v {
			return i
		}
	}
	return -1
}

// The sale page is the same bytes for every visitor (a CDN may cache it): anonymous, two
// different shoppers by bearer token and by session cookie. A revalidation with its ETag gets
// 304 without a body.
func TestSalePageSameForEveryVisitor(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.createSale(time.Now().Add(time.Hour), 1, 5)
	path := fmt.Sprintf("/sales/%d", s.sale)

	type visitor struct {
		name    string
		headers http.Header
		secrets []string // what must not appear in the page
	}
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	visitors := []visitor{{name: "anonymous", headers: http.Header{}}}
	for _, who := range []string{"alice", "bob"} {
		username := "page_" + who + "_" + suffix
		r := h.do("POST", "/api/auth/register", "", map[string]string{"username": username, "password": "password for " + who, "captchaId": "c", "answer": "test"})
		if r.Status != http.StatusCreated || r.str("token") == "" {
			t.Fatalf("register %s: %d %s", username, r.Status, r.Raw)
		}
		var cookies []string
		for _, c := range (&http.Response{Header: r.Header}).Cookies() {
			cookies = append(cookies, c.Name+"="+c.Value)
		}
		if len(cookies) != 2 {
			t.Fatalf("register %s: cookies %q, want fs_session and fs_csrf", username, cookies)
		}
		secrets := []string{username, r.str("token")}
		visitors = append(visitors,
			visitor{who + " by bearer token", http.Header{"Authorization": {"Bearer " + r.str("token")}}, secrets},
			visitor{who + " by session cookie", http.Header{"Cookie": {strings.Join(cookies, "; ")}}, secrets})
	}

	get := func(v visitor, extra ...string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest("GET", h.srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range v.headers {
			req.Header[k] = vs
		}
		for i := 0; i+1 < len(extra); i += 2 {
			req.Header.Set(extra[i], extra[i+1])
		}
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatalf("%s: GET %s: %v", v.name, path, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}

	ref, refBody := get(visitors[0])
	etag := ref.Header.Get("ETag")
	if ref.StatusCode != http.StatusOK || etag == "" || !bytes.Contains(refBody, []byte(`data-testid="sale"`)) {
		t.Fatalf("anonymous GET %s: %d, ETag %q, %d bytes", path, ref.StatusCode, etag, len(refBody))
	}
	if cc := ref.Header.Get("Cache-Control"); !strings.HasPrefix(cc, "public") {
		t.Errorf("Cache-Control = %q, want public (the page is shared)", cc)
	}
	for _, v := range visitors {
		resp, body := get(v)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d", v.name, resp.StatusCode)
			continue
		}
		if !bytes.Equal(body, refBody) {
			t.Errorf("%s: the page differs from the anonymous one (%d vs %d bytes)", v.name, len(body), len(refBody))
		}
		if got := resp.Header.Get("ETag"); got != etag {
			t.Errorf("%s: ETag %q, want %q", v.name, got, etag)
		}
		if sc := resp.Header.Values("Set-Cookie"); len(sc) > 0 {
			t.Errorf("%s: the shared page sets cookies: %q", v.name, sc)
		}
		if cc := resp.Header.Get("Cache-Control"); cc != ref.Header.Get("Cache-Control") {
			t.Errorf("%s: Cache-Control %q, want %q", v.name, cc, ref.Header.Get("Cache-Control"))
		}
		for _, secret := range v.secrets {
			if bytes.Contains(body, []byte(secret)) {
				t.Errorf("%s: the page contains %q", v.name, secret)
			}
		}

		// Revalidation: the ETag (also weak, also in a list) gets 304 and no body.
		for _, inm := range []string{etag, "W/" + etag, `"something-else", ` + etag} {
			resp, body := get(v, "If-None-Match", inm)
			if resp.StatusCode != http.StatusNotModified || len(body) != 0 {
				t.Errorf("%s: If-None-Match %s: %d with %d bytes, want 304 without a body", v.name, inm, resp.StatusCode, len(body))
			}
			if got := resp.Header.Get("ETag"); got != etag {
				t.Errorf("%s: 304's ETag %q, want %q", v.name, got, etag)
			}
		}
		if resp, _ := get(v, "If-None-Match", `"something-else"`); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: a stale ETag: %d, want 200", v.name, resp.StatusCode)
		}
	}
}
