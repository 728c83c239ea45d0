package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// e2eRecorderJS runs in every document of a tab before the page's own script. It records, from
// a MutationObserver, the browser time at which each buy button was first enabled and the
// successive texts of the order status, the countdown, the message area and the sign-in form's
// note, so that short
// states (QUEUED) and the exact enabling moment are seen without polling races. It also holds
// the small DOM helpers the test's expressions use.
const e2eRecorderJS = `(() => {
  if (window.__e2e) { return; }
  const q = (id) => document.querySelector('[data-testid="' + id + '"]');
  const qa = (id) => Array.from(document.querySelectorAll('[data-testid="' + id + '"]'));
  const text = (el) => el ? el.textContent.replace(/\s+/g, ' ').trim() : null;
  const shown = (el) => !!el && el.getClientRects().length > 0;
  const rec = window.__e2e = { q, qa, text, shown, enabledAt: {}, statuses: [], countdowns: [], messages: [], notes: [] };
  rec.buy = (id) => document.querySelector('[data-testid="buy-button"][data-item-id="' + id + '"]');
  rec.stock = (id) => document.querySelector('[data-testid="stock"][data-item-id="' + id + '"]');
  const push = (list, v) => { if (v && list[list.length - 1] !== v) { list.push(v); } };
  rec.changedAt = 0; // when the document last changed (performance.now()): an attribute set again to its value is no change
  const scan = (records) => {
    if (!records || records.some((r) => r.type !== 'attributes' || r.oldValue !== r.target.getAttribute(r.attributeName))) {
      rec.changedAt = performance.now();
    }
    for (const b of qa('buy-button')) {
      const id = b.getAttribute('data-item-id');
      if (!b.disabled && !(id in rec.enabledAt)) { rec.enabledAt[id] = Date.now(); }
    }
    push(rec.statuses, text(q('order-status')));
    push(rec.countdowns, text(q('countdown')));
    push(rec.messages, text(q('message')));
    push(rec.notes, text(q('login-note')));
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
  new MutationObserver(scan).observe(document, { subtree: true, childList: true, attributes: true, attributeOldValue: true, characterData: true });
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
	var v []byte
	var err error
	for {
		v, err = chromedp.Run(b.ctx, chromedp.Poll[[]byte](`((e) => (`+expr+`))(window.__e2e)`,
			chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(timeout-time.Since(start))))
		// a navigation that lands while the poll runs (a redirect after the load event) takes
		// the page's JavaScript context with it: poll again in the new one
		if err == nil || !contextGone(err) || time.Since(start) >= timeout {
			break
		}
	}
	if err != nil {
		b.fatalf("waited %v for %s: %v", timeout, what, err)
	}
	b.t.Logf("%s: %s (%v)", b.name, what, time.Since(start).Round(time.Millisecond))
	return v
}

// clickUntil clicks sel like a person and waits up to 3 s for took (a JavaScript expression, the
// recorder as e) to say the page acted on it; if it did not, it clicks once more. A click sent while
// the page is still laying itself out after a navigation (boxes appearing above the button) can
// land where the button was a moment before, and a person simply clicks again: seen once in a
// full run, where the test then waited in vain.
func (b *e2eTab) clickUntil(what string, sel chromedp.CSS, took string) {
	b.t.Helper()
	for try := 1; ; try++ {
		b.do(what, chromedp.Click(sel))
		_, err := chromedp.Run(b.ctx, chromedp.Poll[bool](`((e) => (`+took+`))(window.__e2e)`,
			chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(3*time.Second)))
		if err == nil || try == 2 {
			return
		}
		b.t.Logf("%s: %s: the page did not act on the click within 3 s; clicking again", b.name, what)
	}
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
	if msg := e2eEval[string](b, "the message", `e.text(e.q('message'))`); msg != "Account created. Welcome!" {
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

// errorf reports a failed check without stopping, with the page's state.
func (b *e2eTab) errorf(format string, args ...any) {
	b.t.Helper()
	b.t.Errorf("%s: %s\npage state: %s", b.name, fmt.Sprintf(format, args...), b.state())
}

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

// payOnProvider pays an order as a shopper does: Pay (sel) opens the payment provider's page (the
// simulated provider's, standing in for Stripe Checkout's), Pay there, and the provider sends the
// browser back to the order page, which shows the order PAID once the confirmation is in (the
// return itself marks nothing paid). It leaves the tab on the order page.
func (b *e2eTab) payOnProvider(what string, sel chromedp.CSS, orderID string) {
	b.t.Helper()
	b.do(what+": Pay", chromedp.Click(sel))
	b.waitAcross(what+": the provider's page", 10*time.Second,
		`location.pathname.startsWith('/pay/simulated/sim_cs_`+orderID+`_') && !!document.querySelector('[data-testid="simpay"][data-ready]')`)
	b.do(what+": Pay on the provider's page", chromedp.Click(e2eTestID("simpay-pay")))
	b.waitAcross(what+": back on the order page, paid", 10*time.Second,
		`location.pathname === '/orders/`+orderID+`' && location.search.includes('payment=done')
		&& !!document.querySelector('[data-testid="order-status"][data-status="PAID"]')`)
}

// contextGone tells whether a DevTools call failed because the page's JavaScript context it ran
// in went away (the page navigated meanwhile).
func contextGone(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Cannot find context with specified id") || strings.Contains(msg, "Execution context was destroyed")
}
