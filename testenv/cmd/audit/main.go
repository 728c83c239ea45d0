// Command audit runs Lighthouse (through npx) on every page of flashsale, on a phone and on a
// desktop, signed out and signed in, and prints the scores as a table: what `make audit` calls.
//
//	go run ./testenv/cmd/audit [-server .data/bin/flashsale | -base http://127.0.0.1:8080] [-out DIR]
//
// With -server it starts that binary itself, on -port, with the demo accounts and the test
// captcha (FLASHSALE_DEMO=1, FLASHSALE_CAPTCHA=test), inside `devenv with` (which gives it Redis
// and Postgres), and stops it at the end; with -base it audits a server already running
// (`make run`; its captcha must be `test` for the order page to be audited).
//
// Lighthouse cannot sign in, and the pages keep their session in cookies (an HttpOnly session
// cookie and the readable CSRF cookie the script looks for), so the command launches Chromium
// itself, sets the session's cookies in it through the DevTools protocol, and points Lighthouse
// at that browser (--port) without letting it clear the site's storage (--disable-storage-reset).
//
// The sales it audits it creates through the API as the demo merchant: one that starts in an
// hour (the sale page before its start) and one that has started (the live sale page), where the
// demo shopper alice buys a unit (the order page, My orders).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/remote"
)

type options struct {
	base, server, out, lighthouse, chromium string
	port, debugPort                         int
	only                                    string
}

func main() {
	var o options
	flag.StringVar(&o.base, "base", "", "audit the server running at this URL (make run's is http://127.0.0.1:8080) instead of starting one")
	flag.StringVar(&o.server, "server", "", "start this flashsale binary (inside devenv with) and audit it")
	flag.IntVar(&o.port, "port", 8091, "the port of the server -server starts")
	flag.IntVar(&o.debugPort, "debug-port", 9333, "the DevTools port of the Chromium Lighthouse drives")
	flag.StringVar(&o.out, "out", "bench-results/lighthouse", "where the reports go (one JSON file per page and form factor)")
	flag.StringVar(&o.lighthouse, "lighthouse", "lighthouse@12", "the npm package npx runs")
	flag.StringVar(&o.chromium, "chromium", "/usr/bin/chromium", "the Chromium binary")
	flag.StringVar(&o.only, "only", "", "audit only the pages whose name contains this")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "audit:", err)
		os.Exit(1)
	}
}

// page is one page to audit, as one visitor.
type page struct {
	name, path string
	session    []*http.Cookie // nil: signed out
}

// result is one Lighthouse run's scores (0–100) and layout shift.
type result struct {
	page, form                 string
	perf, a11y, practices, seo int
	cls                        float64
	lcp, tbt                   float64 // ms
	failed                     string
}

func run(o options) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if o.base == "" && o.server == "" {
		return errors.New("give -server BINARY or -base URL")
	}
	if o.base == "" {
		stop, err := startServer(o)
		if err != nil {
			return err
		}
		defer stop()
		o.base = fmt.Sprintf("http://127.0.0.1:%d", o.port)
	}
	o.base = strings.TrimSuffix(o.base, "/")
	if err := waitHealthy(o.base, 60*time.Second); err != nil {
		return err
	}
	pages, err := preparePages(o.base)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}

	profile := filepath.Join(os.TempDir(), fmt.Sprintf("flashsale-audit-%d", os.Getpid()))
	defer os.RemoveAll(profile)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(o.chromium),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("remote-debugging-port", strconv.Itoa(o.debugPort)),
		chromedp.UserDataDir(profile),
		remote.WebSocket, // a debugging port Lighthouse can reach too, not chromedp's pipe
	)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	if err := chromedp.Do(browser); err != nil {
		return fmt.Errorf("start %s: %w", o.chromium, err)
	}

	var results []result
	for _, p := range pages {
		if o.only != "" && !strings.Contains(p.name, o.only) {
			continue
		}
		if _, err := chromedp.Call(browser, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
			return err
		}
		for _, c := range p.session {
			if _, err := chromedp.Call(browser, network.SetCookie, network.SetCookieParams{Name: c.Name, Value: c.Value,
				URL: o.base, Path: "/", HTTPOnly: &c.HttpOnly}); err != nil {
				return fmt.Errorf("set cookie %s: %w", c.Name, err)
			}
		}
		for _, form := range []string{"mobile", "desktop"} {
			r := lighthouse(ctx, o, p, form)
			fmt.Fprintf(os.Stderr, "%-34s %-7s perf %3d  a11y %3d  best practices %3d  SEO %3d  CLS %.3f %s\n",
				r.page, r.form, r.perf, r.a11y, r.practices, r.seo, r.cls, r.failed)
			results = append(results, r)
		}
	}
	printTable(os.Stdout, results)
	return nil
}

// startServer starts the flashsale binary with the demo accounts and the test captcha.
func startServer(o options) (func(), error) {
	cmd := exec.Command(o.server, "serve")
	cmd.Env = append(os.Environ(),
		"FLASHSALE_ADDR=127.0.0.1:"+strconv.Itoa(o.port),
		"FLASHSALE_METRICS_ADDR=",
		"FLASHSALE_DEMO=1",
		"FLASHSALE_DEMO_START_DELAY=1h",
		"FLASHSALE_CAPTCHA=test",
		"FLASHSALE_RATE_LIMITS=off",
	)
	if os.Getenv("FLASHSALE_DATA_DIR") == "" {
		cmd.Env = append(cmd.Env, "FLASHSALE_DATA_DIR=.data")
	}
	log, err := os.Create(filepath.Join(os.TempDir(), "flashsale-audit-server.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
		}
		log.Close()
	}, nil
}

func waitHealthy(base string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s/healthz did not answer 200 within %s (%v): is the server running (make run)?", base, within, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// preparePages signs in the demo merchant and alice, creates the sales and alice's order, and
// returns the pages to audit.
func preparePages(base string) ([]page, error) {
	merchant, merchantTok, err := login(base, "merchant", "merchant-pass")
	if err != nil {
		return nil, err
	}
	alice, aliceTok, err := login(base, "alice", "alice-pass")
	if err != nil {
		return nil, err
	}
	before, _, err := createSale(base, merchantTok, "Autumn sale", time.Now().Add(time.Hour))
	if err != nil {
		return nil, err
	}
	live, item, err := createSale(base, merchantTok, "Spring sale", time.Now().Add(2*time.Second))
	if err != nil {
		return nil, err
	}
	time.Sleep(3 * time.Second)
	orderID, err := buy(base, aliceTok, live, item)
	if err != nil {
		return nil, err
	}
	time.Sleep(2 * time.Second) // the writer records it: the order page shows it PENDING
	// Not the 404 page: Lighthouse refuses to audit an answer with an error status (the axe test,
	// tests/e2e_axe_test.go, checks it).
	return []page{
		{"home", "/", nil},
		{"sale before the start", "/sales/" + before, nil},
		{"sale, live", "/sales/" + live, nil},
		{"my orders, signed out", "/orders", nil},
		{"admin, signed out", "/admin", nil},
		{"home, alice", "/", alice},
		{"sale live, alice", "/sales/" + live, alice},
		{"my orders, alice", "/orders", alice},
		{"order, alice", "/orders/" + orderID, alice},
		{"home, Chinese", "/?lang=zh", nil},
		{"sale live, alice, Chinese", "/sales/" + live + "?lang=zh", alice},
		{"admin, merchant", "/admin", merchant},
		{"live view, merchant", "/admin/sales/" + live, merchant},
		{"sale's orders, merchant", "/admin/sales/" + live + "/orders", merchant},
	}, nil
}

func call(method, url, bearer string, body any, header ...string) (*http.Response, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := map[string]any{}
	_ = json.Unmarshal(raw, &out)
	if resp.StatusCode >= 300 {
		return resp, out, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	return resp, out, nil
}

func login(base, user, pass string) ([]*http.Cookie, string, error) {
	resp, body, err := call("POST", base+"/api/auth/login", "", map[string]string{"username": user, "password": pass})
	if err != nil {
		return nil, "", fmt.Errorf("sign in the demo account %s (is FLASHSALE_DEMO=1?): %w", user, err)
	}
	tok, _ := body["token"].(string)
	return resp.Cookies(), tok, nil
}

func createSale(base, tok, name string, start time.Time) (string, string, error) {
	_, body, err := call("POST", base+"/api/admin/sales", tok, map[string]any{
		"name": name, "startsAt": start.UTC().Format(time.RFC3339), "endsAt": start.Add(time.Hour).UTC().Format(time.RFC3339),
		"items": []map[string]any{
			{"name": "Limited sneakers", "priceCents": 49900, "quantity": 100},
			{"name": "Wireless earbuds", "priceCents": 9900, "quantity": 1000},
			{"name": "Coffee beans 250 g", "priceCents": 1999, "quantity": 10000},
		},
	})
	if err != nil {
		return "", "", err
	}
	id, _ := body["saleId"].(string)
	items, _ := body["items"].([]any)
	if id == "" || len(items) == 0 {
		return "", "", fmt.Errorf("create sale: %v", body)
	}
	item, _ := items[0].(map[string]any)["itemId"].(string)
	return id, item, nil
}

func buy(base, tok, sale, item string) (string, error) {
	_, c, err := call("POST", base+"/api/flash-sales/"+sale+"/captcha", tok, nil)
	if err != nil {
		return "", err
	}
	_, t, err := call("POST", base+"/api/flash-sales/"+sale+"/purchase-token", tok, map[string]any{"captchaId": c["captchaId"], "answer": "test"})
	if err != nil {
		return "", fmt.Errorf("%w (the server's captcha must be `test`: FLASHSALE_CAPTCHA=test)", err)
	}
	ptok, _ := t["purchaseToken"].(string)
	_, o, err := call("POST", base+"/api/flash-sales/items/"+item+"/purchase", tok, nil, "X-Purchase-Token", ptok)
	if err != nil {
		return "", err
	}
	id, _ := o["orderId"].(string)
	return id, nil
}

// lighthouse runs Lighthouse once on p as form (mobile: its default, an emulated mid-range phone
// on a throttled network and CPU; desktop: its desktop preset) and reads its report.
func lighthouse(ctx context.Context, o options, p page, form string) result {
	r := result{page: p.name, form: form, perf: -1, a11y: -1, practices: -1, seo: -1}
	file := filepath.Join(o.out, strings.NewReplacer(" ", "-", ",", "", "'", "").Replace(p.name)+"."+form+".json")
	args := []string{"-y", o.lighthouse, o.base + p.path,
		"--port=" + strconv.Itoa(o.debugPort), "--disable-storage-reset",
		"--only-categories=performance,accessibility,best-practices,seo",
		"--output=json", "--output-path=" + file, "--quiet", "--max-wait-for-load=30000"}
	if form == "desktop" {
		args = append(args, "--preset=desktop")
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "npx", args...)
	cmd.Env = append(os.Environ(), "CHROME_PATH="+o.chromium)
	if out, err := cmd.CombinedOutput(); err != nil {
		r.failed = fmt.Sprintf("lighthouse: %v: %s", err, lastLine(out))
		return r
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		r.failed = err.Error()
		return r
	}
	var rep struct {
		Categories map[string]struct {
			Score *float64 `json:"score"`
		} `json:"categories"`
		Audits map[string]struct {
			NumericValue float64 `json:"numericValue"`
		} `json:"audits"`
		RuntimeError *struct {
			Message string `json:"message"`
		} `json:"runtimeError"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		r.failed = err.Error()
		return r
	}
	score := func(k string) int {
		if c, ok := rep.Categories[k]; ok && c.Score != nil {
			return int(*c.Score*100 + 0.5)
		}
		return -1
	}
	r.perf, r.a11y, r.practices, r.seo = score("performance"), score("accessibility"), score("best-practices"), score("seo")
	r.cls = rep.Audits["cumulative-layout-shift"].NumericValue
	r.lcp = rep.Audits["largest-contentful-paint"].NumericValue
	r.tbt = rep.Audits["total-blocking-time"].NumericValue
	if rep.RuntimeError != nil {
		r.failed = rep.RuntimeError.Message
	}
	return r
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// printTable prints the results as a Markdown table, a page a row, mobile then desktop, and the
// lowest score of each category.
func printTable(w io.Writer, results []result) {
	byPage := map[string]map[string]result{}
	var order []string
	for _, r := range results {
		if byPage[r.page] == nil {
			byPage[r.page] = map[string]result{}
			order = append(order, r.page)
		}
		byPage[r.page][r.form] = r
	}
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "| page\t mobile: perf / a11y / practices / SEO / CLS\t desktop: perf / a11y / practices / SEO / CLS\t")
	fmt.Fprintln(tw, "|---\t---\t---\t")
	cell := func(r result) string {
		if r.failed != "" && r.perf < 0 {
			return " failed: " + r.failed
		}
		return fmt.Sprintf(" %d / %d / %d / %d / %.3f", r.perf, r.a11y, r.practices, r.seo, r.cls)
	}
	for _, p := range order {
		fmt.Fprintf(tw, "| %s\t%s\t%s\t\n", p, cell(byPage[p]["mobile"]), cell(byPage[p]["desktop"]))
	}
	tw.Flush()
	lows := map[string]int{}
	for _, r := range results {
		if r.perf < 0 {
			continue
		}
		for k, v := range map[string]int{"performance": r.perf, "accessibility": r.a11y, "best practices": r.practices, "SEO": r.seo} {
			if old, ok := lows[k]; !ok || v < old {
				lows[k] = v
			}
		}
	}
	keys := make([]string, 0, len(lows))
	for k := range lows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, lows[k]))
	}
	fmt.Fprintf(w, "\nlowest: %s\n", strings.Join(parts, ", "))
}
