package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/golang-jwt/jwt/v5"
)

var testSecret = []byte("a-test-secret-of-32-bytes-length")

func fixedNow(t time.Time) func() time.Time { return func() time.Time { return t } }

func TestAuthIssueVerify(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	a := New(Config{Secret: testSecret, TTL: time.Hour}, Deps{Now: fixedNow(now)})
	for _, id := range []Identity{{UserID: 1, Role: RoleShopper}, {UserID: 9000, Role: RoleMerchant}, {UserID: 1<<63 - 1, Role: RoleShopper}} {
		tok, err := a.Issue(id)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.Verify(tok)
		if err != nil || got != id {
			t.Errorf("Verify(Issue(%+v)) = %+v, %v", id, got, err)
		}
		// The token is HS256 with the claims of the contract.
		var c jwt.MapClaims
		parsed, err := jwt.ParseWithClaims(tok, &c, func(*jwt.Token) (any, error) { return testSecret, nil }, jwt.WithTimeFunc(fixedNow(now)))
		if err != nil {
			t.Fatal(err)
		}
		if parsed.Method.Alg() != "HS256" || c["role"] != id.Role || c["exp"] != float64(now.Add(time.Hour).Unix()) {
			t.Errorf("issued token: alg %s, claims %v", parsed.Method.Alg(), c)
		}
		if sub, _ := c.GetSubject(); sub == "" || strings.HasPrefix(sub, "0") {
			t.Errorf("issued sub = %q", sub)
		}
	}
	// Within the leeway of a few seconds a just-expired token still passes; after, it does not.
	tok, _ := a.Issue(Identity{UserID: 3, Role: RoleShopper})
	if _, err := New(Config{Secret: testSecret, TTL: time.Hour}, Deps{Now: fixedNow(now.Add(time.Hour + 3*time.Second))}).Verify(tok); err != nil {
		t.Errorf("3 s after exp (within leeway): %v", err)
	}
	_, err := New(Config{Secret: testSecret, TTL: time.Hour}, Deps{Now: fixedNow(now.Add(time.Hour + 10*time.Second))}).Verify(tok)
	var e *shop.Error
	if !errors.As(err, &e) || e.Code != shop.CodeUnauthenticated || !strings.Contains(e.Message, "expired") {
		t.Errorf("10 s after exp: %v, want UNAUTHENTICATED saying expired", err)
	}
}

func TestAuthVerifyRejects(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	a := New(Config{Secret: testSecret, TTL: time.Hour}, Deps{Now: fixedNow(now)})
	f := tokenForge{t: t, now: now}

	// The control: a hand-built HS256 token of the same shape passes.
	if id, err := a.Verify(f.hs(testSecret, nil)); err != nil || id != (Identity{UserID: 42, Role: RoleShopper}) {
		t.Fatalf("control token: %+v, %v", id, err)
	}
	for name, tok := range refusedTokens(f) {
		assertRefused(t, a, name, tok)
	}
}

// tokenForge signs tokens by hand: the claims of an issued token for user 42, a shopper, at now,
// edited as a case needs.
type tokenForge struct {
	t   testing.TB
	now time.Time
}

func (f tokenForge) claims(edit func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{"sub": "42", "role": RoleShopper, "iat": f.now.Unix(), "exp": f.now.Add(time.Hour).Unix()}
	if edit != nil {
		edit(c)
	}
	return c
}

func (f tokenForge) sign(m jwt.SigningMethod, key any, c jwt.MapClaims) string {
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// hs is an HS256 token under secret with the claims edited by edit (nil: as issued).
func (f tokenForge) hs(secret []byte, edit func(jwt.MapClaims)) string {
	return f.sign(jwt.SigningMethodHS256, secret, f.claims(edit))
}

// refusedTokens are the tokens Verify must refuse, by what is wrong with them.
func refusedTokens(f tokenForge) map[string]string {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		f.t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.t.Fatal(err)
	}
	now := f.now
	hs := func(edit func(jwt.MapClaims)) string { return f.hs(testSecret, edit) }
	valid := hs(nil)
	parts := strings.Split(valid, ".")
	merchantParts := strings.Split(hs(func(c jwt.MapClaims) { c["role"] = RoleMerchant }), ".")
	return map[string]string{
		"empty":              "",
		"garbage":            "garbage",
		"oversized":          valid + strings.Repeat("A", 4096),
		"alg none":           f.sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, f.claims(nil)),
		"HS384":              f.sign(jwt.SigningMethodHS384, testSecret, f.claims(nil)),
		"HS512":              f.sign(jwt.SigningMethodHS512, testSecret, f.claims(nil)),
		"RS256":              f.sign(jwt.SigningMethodRS256, rsaKey, f.claims(nil)),
		"ES256":              f.sign(jwt.SigningMethodES256, ecKey, f.claims(nil)),
		"wrong secret":       f.hs([]byte("another-secret-of-32-bytes-long!"), nil),
		"expired":            hs(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Minute).Unix() }),
		"missing exp":        hs(func(c jwt.MapClaims) { delete(c, "exp") }),
		"exp a string":       hs(func(c jwt.MapClaims) { c["exp"] = "soon" }),
		"nbf in the future":  hs(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Minute).Unix() }),
		"sub missing":        hs(func(c jwt.MapClaims) { delete(c, "sub") }),
		"sub empty":          hs(func(c jwt.MapClaims) { c["sub"] = "" }),
		"sub letters":        hs(func(c jwt.MapClaims) { c["sub"] = "alice" }),
		"sub zero":           hs(func(c jwt.MapClaims) { c["sub"] = "0" }),
		"sub negative":       hs(func(c jwt.MapClaims) { c["sub"] = "-42" }),
		"sub plus":           hs(func(c jwt.MapClaims) { c["sub"] = "+42" }),
		"sub leading zero":   hs(func(c jwt.MapClaims) { c["sub"] = "042" }),
		"sub space":          hs(func(c jwt.MapClaims) { c["sub"] = " 42" }),
		"sub huge":           hs(func(c jwt.MapClaims) { c["sub"] = "99999999999999999999" }),
		"sub exponent":       hs(func(c jwt.MapClaims) { c["sub"] = "4e1" }),
		"sub a number":       hs(func(c jwt.MapClaims) { c["sub"] = 42 }),
		"role missing":       hs(func(c jwt.MapClaims) { delete(c, "role") }),
		"role unknown":       hs(func(c jwt.MapClaims) { c["role"] = "admin" }),
		"role upper case":    hs(func(c jwt.MapClaims) { c["role"] = "SHOPPER" }),
		"role a list":        hs(func(c jwt.MapClaims) { c["role"] = []string{RoleMerchant} }),
		"payload swapped":    parts[0] + "." + merchantParts[1] + "." + parts[2],
		"signature stripped": parts[0] + "." + parts[1] + ".",
		"two parts":          parts[0] + "." + parts[1],
		"four parts":         valid + ".x",
	}
}

// assertRefused checks that Verify refuses tok as UNAUTHENTICATED, with a message and no identity.
func assertRefused(t *testing.T, a *Auth, name, tok string) {
	t.Helper()
	id, err := a.Verify(tok)
	var e *shop.Error
	if !errors.As(err, &e) || e.Code != shop.CodeUnauthenticated || e.Message == "" {
		t.Errorf("%s: Verify = %+v, %v; want UNAUTHENTICATED", name, id, err)
	}
	if id != (Identity{}) {
		t.Errorf("%s: a refused token yields identity %+v", name, id)
	}
}

func TestValidCredentials(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		user, pass string
		ok         bool
	}{
		{"abc", "12345678", true},
		{"A.b-c_9", strings.Repeat("p", 72), true},
		{strings.Repeat("u", 32), "12345678", true},
		{"ab", "12345678", false},
		{strings.Repeat("u", 33), "12345678", false},
		{"", "12345678", false},
		{"a b", "12345678", false},
		{"émile", "12345678", false},
		{"abc/", "12345678", false},
		{"abc\x00", "12345678", false},
		{"abc", "1234567", false},
		{"abc", strings.Repeat("p", 73), false},
		{"abc", "", false},
	} {
		err := validCredentials(c.user, c.pass)
		if c.ok && err != nil {
			t.Errorf("validCredentials(%q, %d bytes) = %v, want ok", c.user, len(c.pass), err)
		}
		if !c.ok && shop.ErrorCode(err) != shop.CodeInvalidInput {
			t.Errorf("validCredentials(%q, %d bytes) = %v, want INVALID_INPUT", c.user, len(c.pass), err)
		}
	}
}

// BenchmarkVerifyFirstSight is the cost of a token's first request on an instance (its
// verification is not cached yet): what every shopper of a rush pays once.
func BenchmarkVerifyFirstSight(b *testing.B) {
	now := time.Now()
	a := New(Config{Secret: []byte("a secret of a sensible length, 32+"), TTL: time.Hour}, Deps{Now: func() time.Time { return now }})
	toks := make([]string, 4096)
	for i := range toks {
		var err error
		if toks[i], err = a.Issue(Identity{UserID: int64(i + 1), Role: RoleShopper}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := a.verify(toks[i%len(toks)]); err != nil {
			b.Fatal(err)
		}
	}
}

// The fast path for the shop's own tokens accepts exactly what the library's parser accepts, with
// the same claims, and is the path an ordinary token takes; everything it does not accept goes to
// the library, whose refusal stands.
func TestVerifyOwnAgreesWithTheLibrary(t *testing.T) {
	now := time.Now()
	secret := []byte("a secret of a sensible length, 32+")
	a := New(Config{Secret: secret, TTL: time.Hour}, Deps{Now: func() time.Time { return now }})
	for name, c := range fastPathCases(t, a, tokenForge{t: t, now: now}, secret) {
		t.Run(name, func(t *testing.T) { checkAgreesWithLibrary(t, a, c) })
	}
}

type fastPathCase struct {
	token string
	fast  bool // the fast path must accept it
}

// fastPathCases are tokens of every shape, with whether the fast path must accept them: a's own
// issue, hand-signed ones under secret (or not), and issued tokens cut, padded or re-spelled.
func fastPathCases(t *testing.T, a *Auth, f tokenForge, secret []byte) map[string]fastPathCase {
	issued, err := a.Issue(Identity{UserID: 42, Role: RoleShopper})
	if err != nil {
		t.Fatal(err)
	}
	now := f.now
	hs := func(edit func(jwt.MapClaims)) string { return f.hs(secret, edit) }
	return map[string]fastPathCase{
		"issued":                  {issued, true},
		"map claims, same header": {hs(nil), true},
		"expired beyond leeway":   {hs(func(c jwt.MapClaims) { c["exp"] = now.Add(-6 * time.Second).Unix() }), false},
		"expired within leeway":   {hs(func(c jwt.MapClaims) { c["exp"] = now.Add(-3 * time.Second).Unix() }), true},
		"no exp":                  {hs(func(c jwt.MapClaims) { delete(c, "exp") }), false},
		"nbf in the future":       {hs(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Minute).Unix() }), false},
		"nbf within leeway":       {hs(func(c jwt.MapClaims) { c["nbf"] = now.Add(3 * time.Second).Unix() }), true},
		"exp a string":            {hs(func(c jwt.MapClaims) { c["exp"] = "soon" }), false},
		"another secret":          {f.hs([]byte("another secret of some length, 32+"), nil), false},
		"HS384":                   {f.sign(jwt.SigningMethodHS384, secret, f.claims(nil)), false},
		"alg none":                {f.sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, f.claims(nil)), false},
		"signature cut":           {issued[:len(issued)-1], false},
		"signature padded":        {issued + "=", false},
		"signature's unused bits": {flipUnusedBits(t, issued, 1), false},
		"signature stripped":      {issued[:strings.LastIndexByte(issued, '.')+1], false},
		"no signature segment":    {issued[:strings.LastIndexByte(issued, '.')], false},
		"payload swapped":         {flipSegment(issued, hs(func(c jwt.MapClaims) { c["sub"] = "1" })), false},
		"payload not base64":      {strings.Replace(issued, ".", ".*", 1), false},
		"four segments":           {issued + ".x", false},
		"empty":                   {"", false},
		"header only":             {hs256Header, false},
		"header and dot":          {hs256Header + ".", false},
	}
}

// checkAgreesWithLibrary checks that the fast path accepts c.token exactly when it must, never
// one the library refuses, with the library's claims; and that verify answers as the library.
func checkAgreesWithLibrary(t *testing.T, a *Auth, c fastPathCase) {
	fc, fast := a.verifyOwn(c.token)
	if fast != c.fast {
		t.Fatalf("fast path accepted = %v, want %v", fast, c.fast)
	}
	var lc claims
	libErr := a.parse(c.token, &lc)
	if fast && libErr != nil {
		t.Fatalf("the fast path accepted a token the library refuses: %v", libErr)
	}
	if fast && (fc.Subject != lc.Subject || fc.Role != lc.Role || !fc.ExpiresAt.Equal(lc.ExpiresAt.Time)) {
		t.Fatalf("claims differ: fast %+v, library %+v", fc, lc)
	}
	// Whatever path, verify answers as the library does.
	_, _, err := a.verify(c.token)
	if (err == nil) != (libErr == nil) {
		t.Fatalf("verify: %v, library: %v", err, libErr)
	}
}

// flipSegment puts other's payload into token, keeping token's header and signature.
func flipSegment(token, other string) string {
	p := strings.Split(token, ".")
	q := strings.Split(other, ".")
	return p[0] + "." + q[1] + "." + p[2]
}

// flatClaims reads what json.Unmarshal reads whenever it answers at all, and answers for the
// payloads Issue writes.
func FuzzFlatClaimsAgreesWithJSON(f *testing.F) {
	for _, seed := range []string{
		`{"role":"shopper","sub":"42","exp":1796098024,"iat":1796094424}`,
		`{"role":"merchant","sub":"9000","exp":1,"nbf":2,"iat":3,"iss":"x","jti":"y"}`,
		`{}`, `{"role":"shopper",}`, `{"role":"a\"b"}`, `{"exp":1.5}`, `{"exp":-1}`, `{"exp":01}`,
		`{"sub":"1","sub":"2"}`, `{"ROLE":"shopper"}`, `{"aud":["a"]}`, `{"role":1}`, `{"exp":"1"}`,
		`{ "role":"shopper"}`, `{"role":"shopper"}x`, `{"role":"é"}`, `{"exp":99999999999999999999}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		var flat claims
		if !flatClaims(p, &flat) {
			return
		}
		var std claims
		if err := json.Unmarshal(p, &std); err != nil {
			t.Fatalf("flatClaims read %q, json.Unmarshal refuses it: %v", p, err)
		}
		same := func(a, b *jwt.NumericDate) bool { return (a == nil) == (b == nil) && (a == nil || a.Equal(b.Time)) }
		if flat.Role != std.Role || flat.Subject != std.Subject || flat.Issuer != std.Issuer || flat.ID != std.ID ||
			!same(flat.ExpiresAt, std.ExpiresAt) || !same(flat.IssuedAt, std.IssuedAt) || !same(flat.NotBefore, std.NotBefore) {
			t.Fatalf("%q: flatClaims %+v, json.Unmarshal %+v", p, flat, std)
		}
	})
}

func TestFlatClaimsReadsIssuedTokens(t *testing.T) {
	now := time.Now()
	a := New(Config{Secret: []byte("a secret of a sensible length, 32+"), TTL: time.Hour}, Deps{Now: func() time.Time { return now }})
	tok, err := a.Issue(Identity{UserID: 42, Role: RoleMerchant})
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c claims
	if !flatClaims(payload, &c) {
		t.Fatalf("flatClaims does not read the payload Issue writes: %s", payload)
	}
	if c.Subject != "42" || c.Role != RoleMerchant || c.ExpiresAt == nil || c.ExpiresAt.Unix() != now.Add(time.Hour).Unix() {
		t.Fatalf("flatClaims read %+v from %s", c, payload)
	}
}

// flipUnusedBits returns token with the unused low bits of its signature's last character set
// to bits (1 to 3): a 32-byte HMAC takes 43 base64 characters, the last of which carries four
// bits of the signature and two bits a lenient decoder ignores.
func flipUnusedBits(t testing.TB, token string, bits byte) string {
	t.Helper()
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, token[len(token)-1])
	if i < 0 || strings.LastIndexByte(token, '.') != len(token)-44 {
		t.Fatalf("not an HS256 token: %q", token)
	}
	flipped := token[:len(token)-1] + string(alphabet[i^int(bits)])
	// Leniently decoded, it is the very same signature.
	lenient, err1 := base64.RawURLEncoding.DecodeString(token[len(token)-43:])
	same, err2 := base64.RawURLEncoding.DecodeString(flipped[len(flipped)-43:])
	if err1 != nil || err2 != nil || string(lenient) != string(same) {
		t.Fatalf("the flipped signature decodes to other bytes: %v %v", err1, err2)
	}
	return flipped
}

// Issue 18, item 6: a token has one spelling. Setting the unused low bits of the signature's
// last character gives a different string for the same signature; it is refused by the fast path
// and by the library alike, so a logout (keyed on the token) cannot be sidestepped with it.
func TestTokenWithUnusedBitsSetRefused(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	a := New(Config{Secret: testSecret, TTL: time.Hour}, Deps{Now: fixedNow(now)})
	tok, err := a.Issue(Identity{UserID: 7, Role: RoleShopper})
	if err != nil {
		t.Fatal(err)
	}
	for bits := byte(1); bits <= 3; bits++ {
		flipped := flipUnusedBits(t, tok, bits)
		if _, fast := a.verifyOwn(flipped); fast {
			t.Errorf("bits %d: the fast path accepts the other spelling %q", bits, flipped)
		}
		var c claims
		if err := a.parse(flipped, &c); err == nil {
			t.Errorf("bits %d: the library path accepts the other spelling %q", bits, flipped)
		}
		if id, err := a.Verify(flipped); shop.ErrorCode(err) != shop.CodeUnauthenticated {
			t.Errorf("bits %d: Verify = %+v, %v; want UNAUTHENTICATED", bits, id, err)
		}
	}
	if _, err := a.Verify(tok); err != nil {
		t.Fatalf("the token itself: %v", err)
	}
}

// Issue 18, item 6: the revocation of a logout is keyed on the token's canonical form, so every
// spelling of one signed token is ended by it, whichever spelling was logged out.
func TestLogoutCoversEverySpellingOfTheToken(t *testing.T) {
	t.Parallel()
	a := New(Config{Secret: testSecret, TTL: time.Hour}, Deps{Now: time.Now})
	tok, _ := a.Issue(Identity{UserID: 8, Role: RoleShopper})
	flipped := flipUnusedBits(t, tok, 3)
	if err := a.Logout(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	if !a.revoked.has(flipped) {
		t.Errorf("after logging out the token, its other spelling is not revoked")
	}
	if _, err := a.Verify(flipped); shop.ErrorCode(err) != shop.CodeUnauthenticated {
		t.Errorf("the other spelling after logout: %v, want UNAUTHENTICATED", err)
	}
	// The other way round: a revocation recorded under a non-canonical spelling (an older
	// instance, or a stream entry written by hand) ends the canonical token too.
	var r revocations
	if err := r.add(context.Background(), flipped, time.Now().Add(time.Hour), time.Hour); err != nil {
		t.Fatal(err)
	}
	if !r.has(tok) {
		t.Errorf("a revocation of the other spelling does not end the token")
	}
	if revocationKey(tok) != tokenHash(tok) {
		t.Errorf("the key of a canonical token changed: logouts already in the stream would be lost")
	}
}
