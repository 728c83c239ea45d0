package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale/handlers"
	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/purchase"
)

// badCase is one request that must be refused with a contract error.
type badCase struct {
	name    string
	method  string
	path    string
	auth    string // the whole Authorization header; empty sends none
	body    string // raw body; empty sends none
	headers []string
	cookies []*http.Cookie
	status  int
	code    string
}

// badReply is the raw answer to a badCase.
type badReply struct {
	status int
	header http.Header
	raw    []byte
}

// send issues c against the harness's server; it reports failures on t, so subtests may run
// in parallel.
func (h *harness) send(t *testing.T, c badCase) badReply {
	t.Helper()
	var rd io.Reader
	if c.body != "" {
		rd = strings.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, h.srv.URL+c.path, rd)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	for i := 0; i+1 < len(c.headers); i += 2 {
		req.Header.Set(c.headers[i], c.headers[i+1])
	}
	for _, ck := range c.cookies {
		req.AddCookie(ck)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", c.method, c.path, err)
	}
	return badReply{status: resp.StatusCode, header: resp.Header, raw: raw}
}

// checkContractError asserts that r is exactly the contract's error body with the wanted status
// and code.
func checkContractError(t *testing.T, c badCase, r badReply) {
	t.Helper()
	if r.status >= 500 {
		t.Errorf("%s %s: status %d (server error) %s", c.method, c.path, r.status, r.raw)
	}
	var body struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	dec := json.NewDecoder(bytes.NewReader(r.raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		t.Errorf("%s %s: body is not the {\"error\",\"message\"} JSON (%v): %.300s", c.method, c.path, err, r.raw)
	}
	if got, want := r.status, c.status; got != want {
		t.Errorf("%s %s: status = %d, want %d (body %.300s)", c.method, c.path, got, want, r.raw)
	}
	if got, want := body.Error, c.code; got != want {
		t.Errorf("%s %s: error = %q, want %q (body %.300s)", c.method, c.path, got, want, r.raw)
	}
	if strings.TrimSpace(body.Message) == "" {
		t.Errorf("%s %s: empty message: %s", c.method, c.path, r.raw)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s %s: Content-Type = %q, want application/json", c.method, c.path, ct)
	}
}

// signJWT signs claims with method and key, for the forged identities.
func signJWT(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatalf("sign %s: %v", method.Alg(), err)
	}
	return s
}

// badTokens returns bearer tokens that must all be refused with 401 UNAUTHENTICATED, built for
// user sub with role, plus a self-built valid token of the same identity (the control).
func badTokens(t *testing.T, secret []byte, rsaKey *rsa.PrivateKey, sub, role string) (valid string, bad map[string]string) {
	now := time.Now()
	claims := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"sub": sub, "role": role, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
		if edit != nil {
			edit(c)
		}
		return c
	}
	hs256 := func(edit func(jwt.MapClaims)) string { return signJWT(t, jwt.SigningMethodHS256, secret, claims(edit)) }
	valid = hs256(nil)
	parts := strings.Split(valid, ".")
	other := strings.Split(hs256(func(c jwt.MapClaims) { c["sub"] = "1"; c["role"] = auth.RoleMerchant }), ".")
	bad = map[string]string{
		"forged (wrong secret)": "Bearer " + signJWT(t, jwt.SigningMethodHS256, []byte("not-the-server-secret-at-all!!"), claims(nil)),
		"expired": "Bearer " + hs256(func(c jwt.MapClaims) {
			c["iat"] = now.Add(-2 * time.Hour).Unix()
			c["exp"] = now.Add(-time.Hour).Unix()
		}),
		"alg none":              "Bearer " + signJWT(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(nil)),
		"alg none, no dot":      "Bearer " + strings.TrimSuffix(signJWT(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(nil)), "."),
		"HS512":                 "Bearer " + signJWT(t, jwt.SigningMethodHS512, secret, claims(nil)),
		"HS384":                 "Bearer " + signJWT(t, jwt.SigningMethodHS384, secret, claims(nil)),
		"RS256":                 "Bearer " + signJWT(t, jwt.SigningMethodRS256, rsaKey, claims(nil)),
		"no exp":                "Bearer " + hs256(func(c jwt.MapClaims) { delete(c, "exp") }),
		"exp a string":          "Bearer " + hs256(func(c jwt.MapClaims) { c["exp"] = "tomorrow" }),
		"nbf in the future":     "Bearer " + hs256(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Hour).Unix() }),
		"sub non-numeric":       "Bearer " + hs256(func(c jwt.MapClaims) { c["sub"] = "alice" }),
		"sub zero":              "Bearer " + hs256(func(c jwt.MapClaims) { c["sub"] = "0" }),
		"sub negative":          "Bearer " + hs256(func(c jwt.MapClaims) { c["sub"] = "-" + sub }),
		"sub leading zero":      "Bearer " + hs256(func(c jwt.MapClaims) { c["sub"] = "0" + sub }),
		"sub huge":              "Bearer " + hs256(func(c jwt.MapClaims) { c["sub"] = "99999999999999999999" }),
		"sub a JSON number":     "Bearer " + hs256(func(c jwt.MapClaims) { c["sub"] = 7 }),
		"sub missing":           "Bearer " + hs256(func(c jwt.MapClaims) { delete(c, "sub") }),
		"role unknown":          "Bearer " + hs256(func(c jwt.MapClaims) { c["role"] = "admin" }),
		"role upper case":       "Bearer " + hs256(func(c jwt.MapClaims) { c["role"] = strings.ToUpper(role) }),
		"role missing":          "Bearer " + hs256(func(c jwt.MapClaims) { delete(c, "role") }),
		"payload swapped":       "Bearer " + parts[0] + "." + other[1] + "." + parts[2],
		"signature stripped":    "Bearer " + parts[0] + "." + parts[1] + ".",
		"garbage":               "Bearer not-a-jwt",
		"three dots of garbage": "Bearer a.b.c",
		"oversized":             "Bearer " + valid + strings.Repeat("A", 5000),
		"token plus junk":       "Bearer " + valid + " junk",
		"Basic scheme":          "Basic dXNlcjpwYXNzd29yZA==",
		"Token scheme":          "Token " + valid,
		"scheme only":           "Bearer",
		"no scheme":             valid,
		"missing":               "",
	}
	return valid, bad
}

// Bad input on every API route: the documented error code, never a 500, and nothing changed.
// TestBadInput sends hundreds of malformed, forged or misdirected requests, grouped by what is
// wrong with them, and checks each is refused with the contract's status and error code and that
// none of them changed anything in Redis or Postgres.
func TestBadInput(t *testing.T) {
	t.Parallel()
	f := newBadFixture(t)
	before := f.snap(t)
	usersBefore := f.h.sqlInt(`SELECT count(*) FROM users`)

	// One after the other: parallel subtests would queue behind every other test of the package
	// for a slot, and hundreds of loopback requests take well under a second anyway.
	groups := []struct {
		name  string
		cases func(*testing.T) []badCase
	}{
		{"bodies", f.bodyCases},
		{"registration", f.registrationCases},
		{"login", f.loginCases},
		{"sale creation", f.saleCreationCases},
		{"path ids", f.pathIDCases},
		{"order ids", f.orderIDCases},
		{"purchase tokens and captchas", f.purchaseTokenCases},
		{"identities", f.identityCases},
		{"unknown routes", f.unknownRouteCases},
	}
	start, n := time.Now(), 0
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			cases := g.cases(t)
			if len(cases) == 0 {
				t.Fatal("no cases")
			}
			n += len(cases)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) { checkContractError(t, c, f.h.send(t, c)) })
			}
		})
	}
	t.Logf("%d bad requests in %v", n, time.Since(start).Round(time.Millisecond))
	f.checkUnchanged(t, before, usersBefore)
}

// badFixture is what the bad requests are made from: a harness with two live sales, good and
// broken credentials of every kind, a browser session and purchase tokens for the wrong things.
type badFixture struct {
	h                                   *harness
	sale, otherSale                     saleIDs
	a0                                  int64
	shopperTok, shopper, merchant       string
	otherMerchant                       string
	badShopper, badMerchant             map[string]string
	session, csrf                       *http.Cookie
	sessionOnly, cookies                []*http.Cookie
	ptShopper, ptOtherUser, ptOtherSale string
	unknownOrder                        string
}

func newBadFixture(t *testing.T) *badFixture {
	h := newHarness(t, harnessOpts{})
	sale := h.liveSale(5, 3)
	otherSale := h.liveSale(2)
	a0 := sale.items[0]

	secret := []byte(h.cfg.JWTSecret)
	if h.cfg.JWTSecret != app.DevJWTSecret {
		t.Fatalf("the harness runs with JWT secret %q, want the development default", h.cfg.JWTSecret)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	shopperTok, merchantTok := h.token(101, auth.RoleShopper), h.token(9000, auth.RoleMerchant)
	shopper, merchant := "Bearer "+shopperTok, "Bearer "+merchantTok
	otherMerchant := "Bearer " + h.token(9001, auth.RoleMerchant)
	validShopperJWT, badShopper := badTokens(t, secret, rsaKey, "101", auth.RoleShopper)
	validMerchantJWT, badMerchant := badTokens(t, secret, rsaKey, "9000", auth.RoleMerchant)

	// A real browser session, from a real registration.
	reg := h.send(t, badCase{method: "POST", path: "/api/auth/register", body: `{"username":"carol","password":"correct horse","captchaId":"c","answer":"test"}`})
	if reg.status != http.StatusCreated {
		t.Fatalf("register: %d %s", reg.status, reg.raw)
	}
	var session, csrf *http.Cookie
	for _, ck := range (&http.Response{Header: reg.header}).Cookies() {
		switch ck.Name {
		case handlers.SessionCookie:
			session = ck
		case handlers.CSRFCookie:
			csrf = ck
		}
	}
	if session == nil || csrf == nil || session.Value == "" || csrf.Value == "" {
		t.Fatalf("register set no session and csrf cookies: %v", reg.header.Values("Set-Cookie"))
	}
	sessionOnly := []*http.Cookie{{Name: session.Name, Value: session.Value}}
	cookies := []*http.Cookie{{Name: session.Name, Value: session.Value}, {Name: csrf.Name, Value: csrf.Value}}

	// Purchase tokens that are valid, but not for what they will be used for.
	ptShopper := h.purchaseToken(shopper[len("Bearer "):], sale.sale)
	ptOtherUser := h.purchaseToken(h.token(102, auth.RoleShopper), sale.sale)
	ptOtherSale := h.purchaseToken(shopperTok, otherSale.sale)
	unknownOrder := purchase.NewOrderID(a0, time.Now())

	// Controls: the same requests with good credentials pass, so the refusals below are about
	// the bad part only.
	controls := []struct {
		c    badCase
		want int
	}{
		{badCase{method: "GET", path: "/api/auth/me", auth: "Bearer " + validShopperJWT}, http.StatusOK},
		{badCase{method: "GET", path: "/api/admin/sales", auth: "Bearer " + validMerchantJWT}, http.StatusOK},
		{badCase{method: "GET", path: "/api/auth/me", cookies: sessionOnly}, http.StatusOK},
		{badCase{method: "POST", path: fmt.Sprintf("/api/flash-sales/%d/captcha", sale.sale), cookies: cookies, headers: []string{"X-CSRF-Token", csrf.Value}}, http.StatusOK},
		{badCase{method: "POST", path: fmt.Sprintf("/api/flash-sales/%d/captcha", sale.sale), auth: shopper, body: "{}"}, http.StatusOK},
		{badCase{method: "GET", path: fmt.Sprintf("/api/admin/sales/%d/stock", sale.sale), auth: merchant}, http.StatusOK},
		{badCase{method: "POST", path: "/api/auth/login", body: `{"username":"carol","password":"correct horse"}`}, http.StatusOK},
	}
	for _, c := range controls {
		if r := h.send(t, c.c); r.status != c.want {
			t.Fatalf("control %s %s: %d %s, want %d", c.c.method, c.c.path, r.status, r.raw, c.want)
		}
	}

	return &badFixture{h: h, sale: sale, otherSale: otherSale, a0: a0, shopperTok: shopperTok, shopper: shopper,
		merchant: merchant, otherMerchant: otherMerchant, badShopper: badShopper, badMerchant: badMerchant,
		session: session, csrf: csrf, sessionOnly: sessionOnly, cookies: cookies,
		ptShopper: ptShopper, ptOtherUser: ptOtherUser, ptOtherSale: ptOtherSale, unknownOrder: unknownOrder}
}

// badSnapshot is the state every refusal must leave alone.
type badSnapshot struct {
	keys   []string
	stocks map[int64]int64
}

func (f *badFixture) snap(t *testing.T) badSnapshot {
	all, err := f.h.app.Redis.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	// A refused purchase is counted in its sale's funnel (the merchant's live view): those
	// keys are the one change a refusal makes, once a second.
	var keys []string
	for _, k := range all {
		if !strings.HasSuffix(k, ":funnel") && !strings.HasSuffix(k, ":series") && !strings.HasSuffix(k, ":seriesidx") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	s := badSnapshot{keys: keys, stocks: map[int64]int64{}}
	for _, it := range f.sale.items {
		s.stocks[it] = f.h.redisStock(f.sale, it)
	}
	for _, it := range f.otherSale.items {
		s.stocks[it] = f.h.redisStock(f.otherSale, it)
	}
	return s
}

// checkUnchanged: the Redis keyspace and stock, Postgres's sales, orders and users are as before.
func (f *badFixture) checkUnchanged(t *testing.T, before badSnapshot, usersBefore int64) {
	h := f.h
	after := f.snap(t)
	if !slices.Equal(before.keys, after.keys) {
		t.Errorf("redis keys changed:\nbefore %v\nafter  %v", before.keys, after.keys)
	}
	for it, n := range before.stocks {
		if after.stocks[it] != n {
			t.Errorf("item %d: redis stock %d, want %d", it, after.stocks[it], n)
		}
	}
	if got := h.sqlInt(`SELECT count(*) FROM orders`); got != 0 {
		t.Errorf("orders in postgres = %d, want 0", got)
	}
	if got := h.sqlInt(`SELECT count(*) FROM sales`); got != 2 {
		t.Errorf("sales in postgres = %d, want the 2 the test created", got)
	}
	if got := h.sqlInt(`SELECT count(*) FROM users`); got != usersBefore {
		t.Errorf("users in postgres = %d, want %d", got, usersBefore)
	}
	if got := h.sqlInt(`SELECT coalesce(sum(sold), 0) FROM items`); got != 0 {
		t.Errorf("units sold = %d, want 0", got)
	}
	h.mu.Lock()
	acked := len(h.acked)
	h.mu.Unlock()
	if acked != 0 {
		t.Errorf("%d orders acknowledged, want none", acked)
	}
	h.checkInvariants(f.sale)
	h.checkInvariants(f.otherSale)
}

// invalidCase is a request refused with 400 INVALID_INPUT.
func invalidCase(method, path, auth, body, name string) badCase {
	return badCase{name: name, method: method, path: path, auth: auth, body: body, status: 400, code: "INVALID_INPUT"}
}

// bodyCases: bodies that are not one strict JSON object of the known fields, on every route
// that takes one.
func (f *badFixture) bodyCases(t *testing.T) []badCase {
	var cases []badCase
	add := func(c badCase) { cases = append(cases, c) }
	invalid := func(method, path, auth, body, name string) { add(invalidCase(method, path, auth, body, name)) }
	big := `{"username":"` + strings.Repeat("a", 70<<10) + `","password":"12345678"}`
	malformed := map[string]string{
		"empty body":         "",
		"whitespace body":    " \n\t ",
		"truncated":          `{"username":`,
		"not JSON":           `username=alice&password=x`,
		"array":              `[]`,
		"string":             `"hello"`,
		"number":             `42`,
		"two objects":        `{} {}`,
		"trailing garbage":   `{}x`,
		"single quotes":      `{'username':'abc'}`,
		"oversized (>64KiB)": big,
		"control character":  "{\"username\":\"a\x01b\"}",
	}
	bodyRoutes := []struct{ method, path, auth, good string }{
		{"POST", "/api/auth/register", "", `{"username":"dave","password":"12345678","captchaId":"c","answer":"test"}`},
		{"POST", "/api/auth/login", "", `{"username":"carol","password":"correct horse"}`},
		{"POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", f.sale.sale), f.shopper, `{"captchaId":"abc","answer":"test"}`},
		{"POST", "/api/admin/sales", f.merchant, saleBody(nil)},
	}
	for _, r := range bodyRoutes {
		for name, body := range malformed {
			invalid(r.method, r.path, r.auth, body, name)
		}
		// unknown fields, and the known ones with the wrong types
		var good map[string]any
		if err := json.Unmarshal([]byte(r.good), &good); err != nil {
			t.Fatal(err)
		}
		good["role"] = auth.RoleMerchant
		invalid(r.method, r.path, r.auth, mustJSON(t, good), "unknown field role")
		delete(good, "role")
		for k := range good {
			wrong := map[string]any{}
			for k2, v := range good {
				wrong[k2] = v
			}
			wrong[k] = 12345
			if k == "name" || k == "startsAt" || k == "endsAt" || k == "username" || k == "password" || k == "captchaId" || k == "answer" {
				invalid(r.method, r.path, r.auth, mustJSON(t, wrong), "field "+k+" a number")
			}
			wrong[k] = map[string]any{"x": 1}
			invalid(r.method, r.path, r.auth, mustJSON(t, wrong), "field "+k+" an object")
		}
	}
	for name, body := range malformed {
		if strings.TrimSpace(body) == "" {
			continue // the captcha body is optional
		}
		invalid("POST", fmt.Sprintf("/api/flash-sales/%d/captcha", f.sale.sale), f.shopper, body, name)
	}
	invalid("POST", fmt.Sprintf("/api/flash-sales/%d/captcha", f.sale.sale), f.shopper, `{"answer":"test"}`, "captcha unknown field")

	return cases
}

// registrationCases: invalid usernames and passwords, a taken username, unsolved captchas.
func (f *badFixture) registrationCases(t *testing.T) []badCase {
	var cases []badCase
	add := func(c badCase) { cases = append(cases, c) }
	invalid := func(method, path, auth, body, name string) { add(invalidCase(method, path, auth, body, name)) }
	for _, u := range []string{"", "ab", strings.Repeat("a", 33), "a b", "ali/ce", "al!ce", "émile", "<script>", "a\tb", "ali\u0000ce"} {
		invalid("POST", "/api/auth/register", "", mustJSON(t, map[string]string{"username": u, "password": "12345678"}), "username "+u)
	}
	for _, p := range []string{"", "short", "1234567", strings.Repeat("p", 73)} {
		invalid("POST", "/api/auth/register", "", mustJSON(t, map[string]string{"username": "erin", "password": p}), fmt.Sprintf("password of %d bytes", len(p)))
	}
	add(badCase{name: "username taken", method: "POST", path: "/api/auth/register", body: `{"username":"carol","password":"another one","captchaId":"c","answer":"test"}`, status: 409, code: "USERNAME_TAKEN"})
	add(badCase{name: "username taken, other case", method: "POST", path: "/api/auth/register", body: `{"username":"CaRoL","password":"another one","captchaId":"c","answer":"test"}`, status: 409, code: "USERNAME_TAKEN"})
	for name, body := range map[string]string{
		"no captcha":         `{"username":"heidi","password":"12345678"}`,
		"wrong answer":       `{"username":"heidi","password":"12345678","captchaId":"c","answer":"nope"}`,
		"empty captcha id":   `{"username":"heidi","password":"12345678","captchaId":"","answer":"test"}`,
		"overlong captchaId": mustJSON(t, map[string]string{"username": "heidi", "password": "12345678", "captchaId": strings.Repeat("c", 129), "answer": "test"}),
	} {
		add(badCase{name: "register " + name, method: "POST", path: "/api/auth/register", body: body, status: 403, code: "CAPTCHA_FAILED"})
	}

	return cases
}

// loginCases: wrong credentials are 401, whatever is wrong with them.
func (f *badFixture) loginCases(t *testing.T) []badCase {
	var cases []badCase
	add := func(c badCase) { cases = append(cases, c) }
	for _, cr := range []struct{ user, pass string }{
		{"carol", "wrong password"}, {"carol", ""}, {"nobody", "correct horse"}, {"", ""}, {"CAROL", "wrong password"},
		{strings.Repeat("c", 65), "correct horse"}, {"carol", strings.Repeat("p", 73)}, {"carol'--", "x"}, {"a b", "12345678"},
	} {
		add(badCase{name: "login " + cr.user, method: "POST", path: "/api/auth/login", body: mustJSON(t, map[string]string{"username": cr.user, "password": cr.pass}),
			status: 401, code: "INVALID_CREDENTIALS"})
	}

	return cases
}

// saleCreationCases: bad times, no items, bad prices, quantities and names.
func (f *badFixture) saleCreationCases(t *testing.T) []badCase {
	var cases []badCase
	add := func(c badCase) { cases = append(cases, c) }
	invalid := func(method, path, auth, body, name string) { add(invalidCase(method, path, auth, body, name)) }
	now := time.Now().UTC()
	ts := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	manyItems := make([]any, 51)
	for i := range manyItems {
		manyItems[i] = map[string]any{"name": fmt.Sprintf("item %d", i), "priceCents": 100, "quantity": 1}
	}
	item := func(k string, v any) func(map[string]any) {
		return func(m map[string]any) { m["items"].([]any)[0].(map[string]any)[k] = v }
	}
	field := func(k string, v any) func(map[string]any) { return func(m map[string]any) { m[k] = v } }
	drop := func(k string) func(map[string]any) { return func(m map[string]any) { delete(m, k) } }
	for name, edit := range map[string]func(map[string]any){
		"startsAt not a time":        field("startsAt", "tomorrow"),
		"startsAt without zone":      field("startsAt", "2030-01-01T10:00:00"),
		"startsAt with a space":      field("startsAt", now.Format("2006-01-02 15:04:05Z07:00")),
		"startsAt empty":             field("startsAt", ""),
		"startsAt missing":           drop("startsAt"),
		"endsAt missing":             drop("endsAt"),
		"endsAt month 13":            field("endsAt", "2030-13-01T10:00:00Z"),
		"endsAt before startsAt":     func(m map[string]any) { m["startsAt"], m["endsAt"] = ts(2*time.Hour), ts(time.Hour) },
		"endsAt equals startsAt":     func(m map[string]any) { m["startsAt"], m["endsAt"] = ts(time.Hour), ts(time.Hour) },
		"ended in the past":          func(m map[string]any) { m["startsAt"], m["endsAt"] = ts(-2*time.Hour), ts(-time.Hour) },
		"longer than 30 days":        func(m map[string]any) { m["startsAt"], m["endsAt"] = ts(time.Hour), ts(31*24*time.Hour) },
		"no items":                   field("items", []any{}),
		"items null":                 field("items", nil),
		"items missing":              drop("items"),
		"items an object":            field("items", map[string]any{"name": "x"}),
		"too many items":             field("items", manyItems),
		"negative price":             item("priceCents", -1),
		"price too high":             item("priceCents", int64(100_000_000_01)),
		"price a fraction":           item("priceCents", 9.99),
		"price a string":             item("priceCents", "100"),
		"zero quantity":              item("quantity", 0),
		"negative quantity":          item("quantity", -5),
		"quantity over a million":    item("quantity", 1_000_001),
		"huge quantity":              item("quantity", json.Number("99999999999999999999")),
		"quantity in exponent form":  item("quantity", json.Number("1e3")),
		"item unknown field sold":    item("sold", 0),
		"item name empty":            item("name", ""),
		"item name blank":            item("name", "   "),
		"item name overlong":         item("name", strings.Repeat("é", 201)),
		"sale name empty":            field("name", ""),
		"sale name overlong":         field("name", strings.Repeat("x", 201)),
		"unknown field merchantId":   field("merchantId", "9001"),
		"sale name a list":           field("name", []string{"a"}),
		"items a list of numbers":    field("items", []int{1, 2}),
		"startsAt a unix timestamp":  field("startsAt", now.Unix()),
		"endsAt RFC 1123":            field("endsAt", now.Add(time.Hour).Format(time.RFC1123)),
		"quantity a negative string": item("quantity", "-1"),
	} {
		invalid("POST", "/api/admin/sales", f.merchant, saleBody(edit), name)
	}

	return cases
}

// pathIDCases: ids not positive decimal int64 → 400; well formed but unknown → 404.
func (f *badFixture) pathIDCases(t *testing.T) []badCase {
	var cases []badCase
	add := func(c badCase) { cases = append(cases, c) }
	idRoutes := []struct{ method, pattern, auth, body string }{
		{"GET", "/api/flash-sales/%s", "", ""},
		{"GET", "/api/flash-sales/%s/stock", "", ""},
		{"POST", "/api/flash-sales/%s/captcha", f.shopper, ""},
		{"POST", "/api/flash-sales/%s/purchase-token", f.shopper, `{"captchaId":"abc","answer":"test"}`},
		{"POST", "/api/flash-sales/items/%s/purchase", f.shopper, ""},
		{"GET", "/api/admin/sales/%s/stock", f.merchant, ""},
	}
	for _, r := range idRoutes {
		for _, id := range []string{"-1", "0", "-0", "abc", "99999999999999999999", "9223372036854775808", "+1", "1.5", "0x1F", "1e3", "%20", "1%20", "%E2%91%A0", "١"} {
			add(badCase{name: "id " + id, method: r.method, path: fmt.Sprintf(r.pattern, id), auth: r.auth, body: r.body,
				headers: []string{"X-Purchase-Token", f.ptShopper}, status: 400, code: "INVALID_INPUT"})
		}
		for _, id := range []string{"999999999", "9223372036854775807"} {
			add(badCase{name: "unknown id " + id, method: r.method, path: fmt.Sprintf(r.pattern, id), auth: r.auth, body: r.body,
				headers: []string{"X-Purchase-Token", f.ptShopper}, status: 404, code: "NOT_FOUND"})
		}
	}
	add(badCase{name: "another f.merchant's f.sale", method: "GET", path: fmt.Sprintf("/api/admin/sales/%d/stock", f.sale.sale), auth: f.otherMerchant, status: 404, code: "NOT_FOUND"})

	return cases
}

// orderIDCases: anything but an order id this server made, or one it does not hold → 404.
func (f *badFixture) orderIDCases(t *testing.T) []badCase {
	var cases []badCase
	add := func(c badCase) { cases = append(cases, c) }
	for _, id := range []string{
		"abc", "-1", "0", "1", "99999999999999999999",
		"3f2b8c1e-4a5d-4e6f-9a7b-1c2d3e4f5a6b", // v4
		"00000000-0000-0000-0000-000000000000",
		"00000000-0000-8000-8000-000000000000", // v8, item 0
		"zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz",
		f.unknownOrder, strings.ToUpper(f.unknownOrder), f.unknownOrder + "0", "%7B" + f.unknownOrder + "%7D",
		"urn:uuid:" + f.unknownOrder, strings.ReplaceAll(f.unknownOrder, "-", ""), "%00" + f.unknownOrder[1:],
	} {
		add(badCase{name: "order " + id, method: "GET", path: "/api/flash-sales/orders/" + id, auth: f.shopper, status: 404, code: "NOT_FOUND"})
		add(badCase{name: "pay " + id, method: "POST", path: "/api/flash-sales/orders/" + id + "/pay", auth: f.shopper, status: 404, code: "NOT_FOUND"})
	}

	return cases
}

// purchaseTokenCases: purchase tokens that do not fit the request, captchas not solved.
func (f *badFixture) purchaseTokenCases(t *testing.T) []badCase {
	var cases []badCase
	add := func(c badCase) { cases = append(cases, c) }
	ptPath := fmt.Sprintf("/api/flash-sales/items/%d/purchase", f.a0)
	for name, pt := range map[string]string{
		"missing": "", "garbage": "not-a-token", "another f.shopper's": f.ptOtherUser, "another f.sale's": f.ptOtherSale,
		"tampered": flipChar(f.ptShopper, 5), "truncated": f.ptShopper[:len(f.ptShopper)-1], "padded": f.ptShopper + "=",
		"a JWT": f.shopperTok,
	} {
		add(badCase{name: "purchase token " + name, method: "POST", path: ptPath, auth: f.shopper, headers: []string{"X-Purchase-Token", pt},
			status: 403, code: "INVALID_PURCHASE_TOKEN"})
	}
	add(badCase{name: "token of f.sale A on f.sale B", method: "POST", path: fmt.Sprintf("/api/flash-sales/items/%d/purchase", f.otherSale.items[0]), auth: f.shopper,
		headers: []string{"X-Purchase-Token", f.ptShopper}, status: 403, code: "INVALID_PURCHASE_TOKEN"})
	tokPath := fmt.Sprintf("/api/flash-sales/%d/purchase-token", f.sale.sale)
	for name, body := range map[string]string{
		"wrong answer":       `{"captchaId":"abc","answer":"wrong"}`,
		"empty answer":       `{"captchaId":"abc","answer":""}`,
		"no answer":          `{"captchaId":"abc"}`,
		"empty captcha id":   `{"captchaId":"","answer":"test"}`,
		"empty object":       `{}`,
		"overlong answer":    mustJSON(t, map[string]string{"captchaId": "abc", "answer": "test" + strings.Repeat(" ", 70)}),
		"overlong captchaId": mustJSON(t, map[string]string{"captchaId": strings.Repeat("c", 129), "answer": "test"}),
	} {
		add(badCase{name: "captcha " + name, method: "POST", path: tokPath, auth: f.shopper, body: body, status: 403, code: "CAPTCHA_FAILED"})
	}

	return cases
}

// identityCases: every authenticated route, every broken token, forged cookies, CSRF.
func (f *badFixture) identityCases(t *testing.T) []badCase {
	var cases []badCase
	add := func(c badCase) { cases = append(cases, c) }
	tokPath := fmt.Sprintf("/api/flash-sales/%d/purchase-token", f.sale.sale)
	ptPath := fmt.Sprintf("/api/flash-sales/items/%d/purchase", f.a0)
	authRoutes := []struct {
		method, path, body string
		merchant           bool
	}{
		{"GET", "/api/auth/me", "", false},
		{"POST", fmt.Sprintf("/api/flash-sales/%d/captcha", f.sale.sale), "", false},
		{"POST", tokPath, `{"captchaId":"abc","answer":"test"}`, false},
		{"POST", ptPath, "", false},
		{"GET", "/api/flash-sales/orders/" + f.unknownOrder, "", false},
		{"POST", "/api/flash-sales/orders/" + f.unknownOrder + "/pay", "", false},
		{"POST", "/api/admin/sales", saleBody(nil), true},
		{"GET", "/api/admin/sales", "", true},
		{"GET", fmt.Sprintf("/api/admin/sales/%d/stock", f.sale.sale), "", true},
	}
	for _, r := range authRoutes {
		bad := f.badShopper
		if r.merchant {
			bad = f.badMerchant
		}
		for name, auth := range bad {
			add(badCase{name: "auth " + name, method: r.method, path: r.path, auth: auth, body: r.body,
				headers: []string{"X-Purchase-Token", f.ptShopper}, status: 401, code: "UNAUTHENTICATED"})
		}
		// A forged cookie is no better than a forged header.
		add(badCase{name: "forged f.session cookie", method: r.method, path: r.path, body: r.body,
			cookies: []*http.Cookie{{Name: handlers.SessionCookie, Value: bad["forged (wrong secret)"][len("Bearer "):]}, {Name: handlers.CSRFCookie, Value: f.csrf.Value}},
			headers: []string{"X-CSRF-Token", f.csrf.Value}, status: 401, code: "UNAUTHENTICATED"})
		// Cookie sessions: every state-changing request needs the double-submit header.
		if r.method == "POST" {
			for name, cc := range map[string]struct {
				cookies []*http.Cookie
				header  string
			}{
				"no X-CSRF-Token":           {f.cookies, ""},
				"wrong X-CSRF-Token":        {f.cookies, strings.Repeat("0", len(f.csrf.Value))},
				"X-CSRF-Token, no fs_csrf":  {f.sessionOnly, f.csrf.Value},
				"X-CSRF-Token is the token": {f.cookies, f.session.Value},
			} {
				c := badCase{name: "csrf " + name, method: r.method, path: r.path, body: r.body, cookies: cc.cookies,
					headers: []string{"X-Purchase-Token", f.ptShopper}, status: 403, code: "CSRF"}
				if cc.header != "" {
					c.headers = append(c.headers, "X-CSRF-Token", cc.header)
				}
				add(c)
			}
		}
		if r.merchant {
			add(badCase{name: "shopper on admin", method: r.method, path: r.path, auth: f.shopper, body: r.body, status: 403, code: "FORBIDDEN"})
			add(badCase{name: "shopper cookie on admin", method: r.method, path: r.path, body: r.body, cookies: f.cookies,
				headers: []string{"X-CSRF-Token", f.csrf.Value}, status: 403, code: "FORBIDDEN"})
		}
	}

	return cases
}

// unknownRouteCases: routes that do not exist answer the contract's 404, whatever the method.
func (f *badFixture) unknownRouteCases(t *testing.T) []badCase {
	var cases []badCase
	add := func(c badCase) { cases = append(cases, c) }
	for _, r := range [][2]string{
		{"GET", "/api/nope"}, {"DELETE", "/api/admin/sales"}, {"GET", "/api/auth/register"}, {"PUT", "/api/flash-sales/orders/x/pay"},
		{"POST", "/api/flash-sales/1"}, {"GET", "/api/flash-sales/1/"}, {"POST", "/api/admin/sales/1/stock"}, {"GET", "/api/flash-sales/1%2F2"},
	} {
		add(badCase{name: "no route", method: r[0], path: r[1], auth: f.merchant, status: 404, code: "NOT_FOUND"})
	}

	return cases
}

// saleBody is a valid sale creation body, changed by edit.
func saleBody(edit func(map[string]any)) string {
	now := time.Now().UTC()
	m := map[string]any{
		"name": "bad input sale", "startsAt": now.Add(time.Hour).Format(time.RFC3339), "endsAt": now.Add(2 * time.Hour).Format(time.RFC3339),
		"items": []any{map[string]any{"name": "thing", "priceCents": 100, "quantity": 3}},
	}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// flipChar changes the character at i of an ASCII string.
func flipChar(s string, i int) string {
	b := []byte(s)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// Input that reaches past the first checks: NUL bytes, which Postgres refuses in text, are the
// client's mistake (4xx), not an outage (503) or a crash (500); a body with something after its
// object is not "one JSON object" and must change nothing.
func TestBadInputPastTheFirstChecks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	sale := h.liveSale(2)
	merchant := "Bearer " + h.token(9000, auth.RoleMerchant)
	cases := []badCase{
		{name: "login username", method: "POST", path: "/api/auth/login", body: `{"username":"ca\u0000rol","password":"12345678"}`, status: 401, code: "INVALID_CREDENTIALS"},
		{name: "sale name", method: "POST", path: "/api/admin/sales", auth: merchant, body: saleBody(func(m map[string]any) { m["name"] = "a\u0000b" }), status: 400, code: "INVALID_INPUT"},
		{name: "item name", method: "POST", path: "/api/admin/sales", auth: merchant,
			body: saleBody(func(m map[string]any) { m["items"].([]any)[0].(map[string]any)["name"] = "a\u0000b" }), status: 400, code: "INVALID_INPUT"},
		{name: "register, trailing ]", method: "POST", path: "/api/auth/register", body: `{"username":"frank","password":"12345678"}]`, status: 400, code: "INVALID_INPUT"},
		{name: "register, trailing }", method: "POST", path: "/api/auth/register", body: `{"username":"grace","password":"12345678"}}`, status: 400, code: "INVALID_INPUT"},
		{name: "sale, trailing }", method: "POST", path: "/api/admin/sales", auth: merchant, body: saleBody(nil) + "}", status: 400, code: "INVALID_INPUT"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkContractError(t, c, h.send(t, c)) })
	}
	if got := h.sqlInt(`SELECT count(*) FROM sales`); got != 1 {
		t.Errorf("sales = %d, want 1", got)
	}
	if got := h.sqlInt(`SELECT count(*) FROM users`); got != 0 {
		t.Errorf("users = %d, want 0", got)
	}
	h.checkInvariants(sale)
}
