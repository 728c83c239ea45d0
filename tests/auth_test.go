package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/migrations"
	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// rawPost sends body as it is with the given headers (pairs), nothing added.
func (h *harness) rawPost(path, body string, headers ...string) response {
	h.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest("POST", h.srv.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
}

func wantCode(t *testing.T, what string, r response, status int, code string) {
	t.Helper()
	if r.Status != status || !strings.Contains(r.Raw, `"error":"`+code+`"`) {
		t.Errorf("%s: %d %s, want %d %s", what, r.Status, r.Raw, status, code)
	}
}

// Issue 10, point 1: a cross-site form can no longer sign the victim in to another account, nor
// post to any state-changing route: a body that is not declared JSON is 415, a request from
// another site 403 CSRF, and the double-submit check of cookie sessions stays.
func TestEdgeRefusesCrossSiteAndNonJSON(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	s := h.liveSale(3)
	if _, err := h.app.Auth.AddUser(context.Background(), "victor", "victor-pass", auth.RoleShopper); err != nil {
		t.Fatal(err)
	}
	own := h.srv.URL // http://127.0.0.1:port
	login := `{"username":"victor","password":"victor-pass"}`
	reg := `{"username":"mallory","password":"mallory-pass","captchaId":"c","answer":"test"}`

	// The attack of the issue: <form enctype="text/plain"> posting valid JSON.
	wantCode(t, "text/plain login", h.rawPost("/api/auth/login", login, "Content-Type", "text/plain"), 415, "UNSUPPORTED_MEDIA_TYPE")
	wantCode(t, "text/plain register", h.rawPost("/api/auth/register", reg, "Content-Type", "text/plain;charset=UTF-8"), 415, "UNSUPPORTED_MEDIA_TYPE")
	wantCode(t, "urlencoded login", h.rawPost("/api/auth/login", "username=victor&password=victor-pass", "Content-Type", "application/x-www-form-urlencoded"), 415, "UNSUPPORTED_MEDIA_TYPE")
	wantCode(t, "multipart login", h.rawPost("/api/auth/login", login, "Content-Type", "multipart/form-data; boundary=x"), 415, "UNSUPPORTED_MEDIA_TYPE")
	wantCode(t, "JSON body without a type", h.rawPost("/api/auth/login", login), 415, "UNSUPPORTED_MEDIA_TYPE")
	wantCode(t, "empty text/plain logout", h.rawPost("/api/auth/logout", "", "Content-Type", "text/plain"), 415, "UNSUPPORTED_MEDIA_TYPE")
	wantCode(t, "text/plain merchant POST", h.rawPost("/api/admin/sales", "{}", "Content-Type", "text/plain", "Authorization", "Bearer "+h.token(9000, auth.RoleMerchant)), 415, "UNSUPPORTED_MEDIA_TYPE")

	checkCrossSiteRefused(t, h, login, reg)

	// This site's own page: passes; the browser gets cookies, not the token in the body.
	r := h.rawPost("/api/auth/login", login, "Content-Type", "application/json; charset=utf-8", "Origin", own, "Sec-Fetch-Site", "same-origin")
	if r.Status != 200 || strings.Contains(r.Raw, `"token"`) || !strings.Contains(r.Raw, `"role":"shopper"`) || !strings.Contains(r.Raw, `"userId":"`) {
		t.Fatalf("same-origin browser login: %d %s, want 200 with role and userId, no token", r.Status, r.Raw)
	}
	session, csrf := sessionCookiesOf(t, r)
	// An API client (neither header) still gets {"token","role"}.
	if r := h.do("POST", "/api/auth/login", "", map[string]string{"username": "victor", "password": "victor-pass"}); r.Status != 200 || r.str("token") == "" || r.str("role") != "shopper" {
		t.Errorf("API login: %d %s, want the token", r.Status, r.Raw)
	}
	// A route without a body still takes a POST without one (the purchase: a token header only).
	if r := h.rawPost(fmt.Sprintf("/api/flash-sales/items/%d/purchase", s.items[0]), "", "Authorization", "Bearer "+h.token(5, auth.RoleShopper)); r.Status != 403 || !strings.Contains(r.Raw, "INVALID_PURCHASE_TOKEN") {
		t.Errorf("bodiless purchase: %d %s, want it past the edge (403 INVALID_PURCHASE_TOKEN)", r.Status, r.Raw)
	}
	// The cookie session's double-submit check stays, same origin or not.
	cookie := "fs_session=" + session + "; fs_csrf=" + csrf
	captcha := fmt.Sprintf("/api/flash-sales/%d/captcha", s.sale)
	wantCode(t, "same-origin cookie POST without X-CSRF-Token", h.rawPost(captcha, "{}", "Content-Type", "application/json", "Origin", own, "Cookie", cookie), 403, "CSRF")
	if r := h.rawPost(captcha, "{}", "Content-Type", "application/json", "Origin", own, "Cookie", cookie, "X-CSRF-Token", csrf); r.Status != 200 {
		t.Errorf("same-origin cookie POST with X-CSRF-Token: %d %s", r.Status, r.Raw)
	}
	wantCode(t, "cross-site cookie POST with X-CSRF-Token", h.rawPost(captcha, "{}", "Content-Type", "application/json", "Origin", "https://evil.example", "Cookie", cookie, "X-CSRF-Token", csrf), 403, "CSRF")
}

// checkCrossSiteRefused: another site, by Origin or by Sec-Fetch-Site, even with a JSON body, is
// refused (403 CSRF) on login and registration, and the refused registration creates nothing.
func checkCrossSiteRefused(t *testing.T, h *harness, login, reg string) {
	t.Helper()
	// Another site, by Origin or by Sec-Fetch-Site, even with a JSON body.
	for name, hdr := range map[string][]string{
		"foreign Origin":           {"Origin", "https://evil.example"},
		"Origin of another port":   {"Origin", "http://127.0.0.1:1"},
		"Origin null":              {"Origin", "null"},
		"Sec-Fetch-Site cross":     {"Sec-Fetch-Site", "cross-site"},
		"Sec-Fetch-Site same-site": {"Sec-Fetch-Site", "same-site"},
	} {
		wantCode(t, name+" login", h.rawPost("/api/auth/login", login, append([]string{"Content-Type", "application/json"}, hdr...)...), 403, "CSRF")
		wantCode(t, name+" register", h.rawPost("/api/auth/register", reg, append([]string{"Content-Type", "application/json"}, hdr...)...), 403, "CSRF")
	}
	if n := h.sqlInt(`SELECT count(*) FROM users WHERE username = 'mallory'`); n != 0 {
		t.Errorf("a refused registration created the account")
	}
}

// sessionCookiesOf is the session and CSRF cookies a browser login set; none is a failure.
func sessionCookiesOf(t *testing.T, r response) (session, csrf string) {
	t.Helper()
	for _, ck := range (&http.Response{Header: r.Header}).Cookies() {
		switch ck.Name {
		case "fs_session":
			session = ck.Value
		case "fs_csrf":
			csrf = ck.Value
		}
	}
	if session == "" || csrf == "" {
		t.Fatalf("browser login set no session cookies: %v", r.Header.Values("Set-Cookie"))
	}
	return session, csrf
}

// Issue 10, point 2: the registration captcha. Its challenge is bound to registration: answered
// once, never good for a purchase token, and a purchase's never good for a registration.
func TestRegistrationCaptcha(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{env: map[string]string{"FLASHSALE_CAPTCHA": "image"}})
	s := h.liveSale(3)
	ctx := context.Background()
	challenge := func(path, bearer string) (string, string) {
		t.Helper()
		c := h.do("POST", path, bearer, nil)
		if c.Status != 200 || c.str("captchaId") == "" || !strings.HasPrefix(c.str("image"), "data:image/png;base64,") || c.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("POST %s: %d %.200s", path, c.Status, c.Raw)
		}
		v, err := h.app.Redis.Get(ctx, "captcha:"+c.str("captchaId")).Result()
		if err != nil {
			t.Fatal(err)
		}
		_, answer, _ := strings.Cut(v, "|")
		return c.str("captchaId"), answer
	}
	register := func(user, id, answer string) response {
		return h.do("POST", "/api/auth/register", "", map[string]string{"username": user, "password": "password 123", "captchaId": id, "answer": answer})
	}
	wantCode(t, "no captcha", h.do("POST", "/api/auth/register", "", map[string]string{"username": "ivan", "password": "password 123"}), 403, "CAPTCHA_FAILED")
	id, answer := challenge("/api/auth/captcha", "")
	wantCode(t, "wrong answer", register("ivan", id, "000000x"), 403, "CAPTCHA_FAILED")
	wantCode(t, "right answer after a wrong one", register("ivan", id, answer), 403, "CAPTCHA_FAILED")
	id, answer = challenge("/api/auth/captcha", "")
	if r := register("ivan", id, answer); r.Status != 201 || r.str("token") == "" || r.str("role") != "shopper" {
		t.Fatalf("right answer: %d %s", r.Status, r.Raw)
	}
	wantCode(t, "replayed answer", register("judy", id, answer), 403, "CAPTCHA_FAILED")

	shopper := h.token(77, auth.RoleShopper)
	id, answer = challenge("/api/auth/captcha", "")
	wantCode(t, "registration challenge for a purchase token",
		h.do("POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", s.sale), shopper, map[string]string{"captchaId": id, "answer": answer}), 403, "CAPTCHA_FAILED")
	id, answer = challenge(fmt.Sprintf("/api/flash-sales/%d/captcha", s.sale), shopper)
	wantCode(t, "purchase challenge for a registration", register("judy", id, answer), 403, "CAPTCHA_FAILED")
	if n := h.sqlInt(`SELECT count(*) FROM users`); n != 1 {
		t.Errorf("users = %d, want the one registration that solved its captcha", n)
	}
}

// Issue 10, point 2: usernames are one account whatever their case, in registration and login.
func TestUsernamesCaseInsensitive(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	reg := func(u string) response {
		return h.do("POST", "/api/auth/register", "", map[string]string{"username": u, "password": "password 123", "captchaId": "c", "answer": "test"})
	}
	first := reg("Kevin.Lee")
	if first.Status != 201 {
		t.Fatalf("register: %d %s", first.Status, first.Raw)
	}
	wantCode(t, "same name, other case", reg("kevin.lee"), 409, "USERNAME_TAKEN")
	for _, u := range []string{"kevin.lee", "KEVIN.LEE", "Kevin.Lee"} {
		r := h.do("POST", "/api/auth/login", "", map[string]string{"username": u, "password": "password 123"})
		if r.Status != 200 || r.str("userId") != first.str("userId") {
			t.Errorf("login %q: %d %s, want user %s", u, r.Status, r.Raw, first.str("userId"))
		}
	}
	// The database itself refuses a second spelling (the migration's unique index).
	if err := h.sql().Exec(`INSERT INTO users (username, password_hash, role) VALUES ('KEVIN.lee', 'x', 'shopper')`).Error; err == nil {
		t.Errorf("postgres took a username differing only by case")
	}
}

// The case-insensitivity migration stops, naming them, on accounts that differ only by case.
func TestUsernameMigrationRefusesDuplicates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testenv.Postgres(t)
	db, err := store.OpenDB(ctx, dsn, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	g := testenv.SQL(t, dsn)
	names, _ := migrations.FS.ReadDir(".")
	var files []string
	for _, n := range names {
		files = append(files, n.Name())
	}
	sort.Strings(files)
	if err := g.Exec(`CREATE TABLE schema_migrations (version TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`).Error; err != nil {
		t.Fatal(err)
	}
	i := slices.Index(files, "004_username_case.sql")
	if i < 0 {
		t.Fatalf("no 004_username_case.sql in %v", files)
	}
	for _, f := range files[:i] {
		sql, _ := migrations.FS.ReadFile(f)
		if err := g.Exec(string(sql)).Error; err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		g.Exec(`INSERT INTO schema_migrations (version) VALUES (?)`, f)
	}
	g.Exec(`INSERT INTO users (username, password_hash, role) VALUES ('Olga', 'x', 'shopper'), ('olga', 'y', 'shopper'), ('peter', 'z', 'shopper')`)
	err = db.Migrate(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), "Olga (id 1), olga (id 2)") {
		t.Fatalf("migrate with duplicates: %v, want a refusal naming Olga and olga", err)
	}
	g.Exec(`UPDATE users SET username = 'olga2' WHERE id = 2`)
	if err := db.Migrate(ctx, nil); err != nil {
		t.Fatalf("migrate once renamed: %v", err)
	}
}

// Issue 10, point 2: an unknown username costs a bcrypt comparison like a wrong password, so
// the time of the answer does not tell which accounts exist.
func TestLoginTimingUnknownUser(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	if _, err := h.app.Auth.AddUser(context.Background(), "wendy", "wendy-pass", auth.RoleShopper); err != nil {
		t.Fatal(err)
	}
	timeLogin := func(user, pass string) time.Duration {
		start := time.Now()
		r := h.do("POST", "/api/auth/login", "", map[string]string{"username": user, "password": pass})
		if r.Status != 401 {
			t.Fatalf("login %s: %d %s", user, r.Status, r.Raw)
		}
		return time.Since(start)
	}
	timeLogin("nobody-at-all", "wendy-pass") // warms the dummy hash
	var unknown, wrong []time.Duration
	for i := range 7 {
		unknown = append(unknown, timeLogin(fmt.Sprintf("nobody%d", i), "wendy-pass"))
		wrong = append(wrong, timeLogin("wendy", "not her password"))
	}
	slices.Sort(unknown)
	slices.Sort(wrong)
	mu, mw := unknown[len(unknown)/2], wrong[len(wrong)/2]
	t.Logf("median login: unknown user %v, wrong password %v", mu, mw)
	if mu < mw/2 {
		t.Errorf("an unknown username answers in %v, a wrong password in %v: the difference tells which accounts exist", mu, mw)
	}
}

// wantLimited sends n requests (try), ten at a time, and answers how many passed the bucket: some
// must be refused by it (429 RATE_LIMITED "too many attempts", with Retry-After), at least three
// passed first. Sent at once, as an attacker would, so that the bucket empties however slowly
// each answer comes (a loaded machine: sent one after another, each login's password hash took
// longer than the bucket takes to refill one, and the test never saw a 429). A request that
// passed the bucket may still be refused because a login of its address is in progress (429
// "already in progress"): it spent its token all the same.
func wantLimited(t *testing.T, what string, n int, try func(i int) response) int {
	t.Helper()
	answers := make([]response, n)
	var wg sync.WaitGroup
	gate := make(chan struct{}, 10)
	for i := range n {
		wg.Add(1)
		gate <- struct{}{}
		go func() {
			defer func() { <-gate; wg.Done() }()
			answers[i] = try(i)
		}()
	}
	wg.Wait()
	limited := 0
	for _, r := range answers {
		if r.Status != 429 {
			continue
		}
		if r.str("error") != "RATE_LIMITED" || r.Header.Get("Retry-After") == "" {
			t.Errorf("%s: 429 without RATE_LIMITED and Retry-After: %v %s", what, r.Header, r.Raw)
		}
		if strings.HasPrefix(r.str("message"), "too many attempts") {
			limited++
		}
	}
	switch {
	case limited == 0:
		t.Errorf("%s: %d requests, never 429", what, n)
	case n-limited < 3:
		t.Errorf("%s: only %d of %d requests passed the bucket before it refused", what, n-limited, n)
	}
	return n - limited
}

// Issue 10, point 6: logging out ends the session on the server, on every instance; /me is
// never cached.
func TestLogoutEndsSession(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	second := newHarness(t, harnessOpts{shared: h})
	if _, err := h.app.Auth.AddUser(context.Background(), "xena", "xena-pass", auth.RoleShopper); err != nil {
		t.Fatal(err)
	}
	loginTok := func() string {
		r := h.do("POST", "/api/auth/login", "", map[string]string{"username": "xena", "password": "xena-pass"})
		if r.Status != 200 || r.str("token") == "" {
			t.Fatalf("login: %d %s", r.Status, r.Raw)
		}
		return r.str("token")
	}
	tok, other := loginTok(), ""
	time.Sleep(1100 * time.Millisecond) // a token issued a second later is another string
	other = loginTok()
	for _, inst := range []*harness{h, second} {
		r := inst.do("GET", "/api/auth/me", tok, nil)
		if r.Status != 200 || r.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("me: %d %s %q, want 200 no-store", r.Status, r.Raw, r.Header.Get("Cache-Control"))
		}
	}
	// Issue 18, item 6: the same signature spelled with the unused low bits of its last
	// character set is another string; it is refused, before and after the logout, so a logout
	// cannot be sidestepped with it.
	flipped := otherSpelling(t, tok)
	wantCode(t, "the other spelling of a live token", h.do("GET", "/api/auth/me", flipped, nil), 401, "UNAUTHENTICATED")
	if r := h.do("POST", "/api/auth/logout", tok, nil); r.Status != 204 {
		t.Fatalf("logout: %d %s", r.Status, r.Raw)
	}
	wantCode(t, "me after logout, same instance", h.do("GET", "/api/auth/me", tok, nil), 401, "UNAUTHENTICATED")
	for i, inst := range []*harness{h, second} {
		wantCode(t, fmt.Sprintf("the other spelling after logout, instance %d", i+1), inst.do("GET", "/api/auth/me", flipped, nil), 401, "UNAUTHENTICATED")
	}
	testenv.Eventually(t, 5*time.Second, "the other instance refuses the logged-out token", func() error {
		if r := second.do("GET", "/api/auth/me", tok, nil); r.Status != 401 {
			return fmt.Errorf("it still takes it: %d %s", r.Status, r.Raw)
		}
		return nil
	})
	// Another session of the same user lives on.
	if r := second.do("GET", "/api/auth/me", other, nil); r.Status != 200 {
		t.Errorf("another session of the user: %d %s", r.Status, r.Raw)
	}
	// A third instance started after the logout knows it from the start.
	third := newHarness(t, harnessOpts{shared: h})
	wantCode(t, "me on an instance started after the logout", third.do("GET", "/api/auth/me", tok, nil), 401, "UNAUTHENTICATED")
}

// otherSpelling is token with the unused low bits of its HS256 signature's last character set:
// the same signature bytes to a lenient base64 decoder, another string.
func otherSpelling(t *testing.T, token string) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, token[len(token)-1])
	if i < 0 || strings.LastIndexByte(token, '.') != len(token)-44 {
		t.Fatalf("not an HS256 token: %q", token)
	}
	return token[:len(token)-1] + string(alphabet[i^3])
}

// Issue 10, point 6: in production the cookies carry the __Host- prefix (an unprefixed one is
// not taken) and every answer carries HSTS; only https Origins pass.
func TestProductionCookies(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{env: map[string]string{"FLASHSALE_ENV": "production", "FLASHSALE_CAPTCHA": "image",
		"FLASHSALE_RATE_LIMITS": "on", "FLASHSALE_JWT_SECRET": "a-production-secret-for-the-test",
		// production takes payments through Stripe only (here its API is stripe-mock)
		"FLASHSALE_PAYMENTS": "stripe", "FLASHSALE_STRIPE_SECRET_KEY": "sk_test_flashsale", "FLASHSALE_STRIPE_WEBHOOK_SECRET": "whsec_flashsale_test",
		"FLASHSALE_STRIPE_TEST_MODE": "on",
		"FLASHSALE_STRIPE_API_URL":   testenv.StripeMock(t), "FLASHSALE_PUBLIC_URL": "https://shop.flashsale.test"}})
	if _, err := h.app.Auth.AddUser(context.Background(), "yuri", "yuri-pass", auth.RoleShopper); err != nil {
		t.Fatal(err)
	}
	origin := "https://" + strings.TrimPrefix(h.srv.URL, "http://")
	login := `{"username":"yuri","password":"yuri-pass"}`
	wantCode(t, "http Origin in production", h.rawPost("/api/auth/login", login, "Content-Type", "application/json", "Origin", h.srv.URL), 403, "CSRF")
	r := h.rawPost("/api/auth/login", login, "Content-Type", "application/json", "Origin", origin)
	if r.Status != 200 || strings.Contains(r.Raw, `"token"`) {
		t.Fatalf("browser login: %d %s", r.Status, r.Raw)
	}
	if hsts := r.Header.Get("Strict-Transport-Security"); !strings.HasPrefix(hsts, "max-age=") {
		t.Errorf("Strict-Transport-Security = %q", hsts)
	}
	var session string
	names := map[string]bool{}
	for _, ck := range (&http.Response{Header: r.Header}).Cookies() {
		names[ck.Name] = true
		if !ck.Secure || ck.Path != "/" || ck.Domain != "" {
			t.Errorf("cookie %s: Secure %v, Path %q, Domain %q; __Host- needs Secure, Path=/ and no Domain", ck.Name, ck.Secure, ck.Path, ck.Domain)
		}
		if ck.Name == "__Host-fs_session" {
			session = ck.Value
		}
	}
	if !names["__Host-fs_session"] || !names["__Host-fs_csrf"] || len(names) != 2 {
		t.Fatalf("cookies %v, want __Host-fs_session and __Host-fs_csrf", names)
	}
	me := func(cookie string) int {
		req, _ := http.NewRequest("GET", h.srv.URL+"/api/auth/me", nil)
		req.Header.Set("Cookie", cookie)
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := me("__Host-fs_session=" + session); st != 200 {
		t.Errorf("me with __Host-fs_session: %d", st)
	}
	if st := me("fs_session=" + session); st != 401 {
		t.Errorf("me with an unprefixed fs_session in production: %d, want 401", st)
	}
}
