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
	session, csrf := registerForCookies(t, h)
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

// registerForCookies registers carol and returns the session and CSRF cookies the answer set: a
// real browser session, from a real registration.
func registerForCookies(t *testing.T, h *harness) (session, csrf *http.Cookie) {
	t.Helper()
	reg := h.send(t, badCase{method: "POST", path: "/api/auth/register", body: `{"username":"carol","password":"correct horse","captchaId":"c","answer":"test"}`})
	if reg.status != http.StatusCreated {
		t.Fatalf("register: %d %s", reg.status, reg.raw)
	}
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
	return session, csrf
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
	// keys are the one change a refusal makes, once a second, with the mark of each flush
	// ({sale:N}:fl:<instance>.<n>, kept a while so that a resent flush counts once).
	var keys []string
	for _, k := range all {
		if !strings.HasSuffix(k, ":funnel") && !strings.HasSuffix(k, ":series") && !strings.HasSuffix(k, ":seriesidx") && !strings.Contains(k, "}:fl:") {
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
