package auth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/bcrypt"

	"github.com/flashsale/flashsale/services/captcha"
	"github.com/flashsale/flashsale/services/internal/mac"
	"github.com/flashsale/flashsale/services/limits"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// Roles a token can carry.
const (
	RoleShopper  = "shopper"
	RoleMerchant = "merchant"
)

// Identity is who a request is from, taken only from a verified token.
type Identity struct {
	UserID int64
	Role   string
}

// Auth issues and verifies the HS256 JWTs that are the identity, and keeps the local accounts.
type Auth struct {
	db     *store.DB
	secret []byte
	ttl    time.Duration
	now    func() time.Time
	seen   *[verifiedSlots]atomic.Pointer[verified]
	seed   maphash.Seed
	macs   *mac.Pool // HMAC-SHA256 keyed with secret

	limiter *limits.Limiter // per-IP and per-username limits of the account routes (nil: none)
	captcha captcha.Captcha // the registration captcha (nil: registration refused)
	hashing chan struct{}   // one slot per bcrypt in flight
	hashMu  sync.Mutex
	hashBy  map[string]int // bcrypt in flight per client address (limits.ClientKey); no entry at 0
	revoked revocations    // sessions ended by a logout
	log     *slog.Logger
}

// AuthOptions are what Auth needs besides tokens: the limits, the registration captcha, the
// bound on bcrypt work and Redis, where logouts are shared between instances.
type AuthOptions struct {
	Revoked   RevocationLog // the logouts every instance shares (store.Revocations); nil: this instance's own only
	Limiter   *limits.Limiter
	Captcha   captcha.Captcha
	HashSlots int // bcrypt hashes or compares at once; 0: defaultHashSlots
	Log       *slog.Logger
}

// With sets the options and, with Redis, loads the sessions already ended; it returns a.
func (a *Auth) With(o AuthOptions) *Auth {
	a.limiter, a.captcha = o.Limiter, o.Captcha
	if o.HashSlots > 0 {
		a.hashing = make(chan struct{}, o.HashSlots)
	}
	if o.Log != nil {
		a.log = o.Log
	}
	if o.Revoked != nil {
		a.revoked.shared, a.revoked.log = o.Revoked, a.log
		a.revoked.refresh()
	}
	go dummyHash() // computed before the first unknown username needs it
	return a
}

// verifiedSlots is the size of the cache of verified tokens (about 80 MiB at the very worst).
const verifiedSlots = 1 << 18

// The cache of verified tokens: in a rush every shopper presents the same token two or three
// times within seconds, and a lookup is far cheaper than parsing and checking the JWT again. It
// is a direct-mapped table, each token in the slot its hash names and a newcomer replacing
// whatever was there: no lock and no map to grow, since in a rush almost every request brings a
// token not seen before. An entry holds the whole token, signature included, so a hit is the
// very string that passed; its expiry is checked again on every hit.
type verified struct {
	token string
	id    Identity
	exp   time.Time
}

// defaultHashSlots is how many bcrypt hashes or compares run at once: half the CPUs, so a flood
// of logins never takes the CPU the purchase path needs, and at least two, so one login in
// flight never refuses another.
func defaultHashSlots() int { return max(2, runtime.NumCPU()/2) }

// NewAuth returns an Auth signing with secret; tokens live for ttl.
func NewAuth(db *store.DB, secret []byte, ttl time.Duration, now func() time.Time) *Auth {
	return &Auth{db: db, secret: secret, ttl: ttl, now: now, hashing: make(chan struct{}, defaultHashSlots()),
		seen: new([verifiedSlots]atomic.Pointer[verified]), seed: maphash.MakeSeed(), macs: mac.NewPool(secret), log: slog.Default()}
}

// slot is the cache slot of token.
func (a *Auth) slot(token string) *atomic.Pointer[verified] {
	return &a.seen[maphash.String(a.seed, token)&(verifiedSlots-1)]
}

type claims struct {
	Role string `json:"role"`
	jwt.RegisteredClaims
}

// Issue signs a token for id.
func (a *Auth) Issue(id Identity) (string, error) {
	now := a.now()
	c := claims{Role: id.Role, RegisteredClaims: jwt.RegisteredClaims{
		Subject:   strconv.FormatInt(id.UserID, 10),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(a.ttl)),
	}}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(a.secret)
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	return s, nil
}

// Verify checks a token: HS256 only, signature, exp required and in the future, sub a positive
// decimal user id, role shopper or merchant.
func (a *Auth) Verify(token string) (Identity, error) {
	if token == "" || len(token) > 4096 {
		return Identity{}, shop.Errorf(shop.CodeUnauthenticated, "a valid bearer token or session cookie is required")
	}
	if a.revoked.has(token) {
		return Identity{}, shop.Errorf(shop.CodeUnauthenticated, "this session has ended (logged out); log in again")
	}
	slot := a.slot(token)
	if v := slot.Load(); v != nil && v.token == token && a.now().Before(v.exp) {
		return v.id, nil
	}
	id, exp, err := a.verify(token)
	if err != nil {
		return Identity{}, err
	}
	slot.Store(&verified{token: strings.Clone(token), id: id, exp: exp})
	return id, nil
}

// hs256Header is the header segment of every token Issue signs: {"alg":"HS256","typ":"JWT"}.
var hs256Header = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))

// b64 decodes a token's segments strictly: unpadded base64url whose unused low bits in the last
// character are zero, as every encoder writes it. A lenient decoder ignores those bits, so one
// signed token would have several spellings (four for an HS256 signature), each a different
// string for the verified-token cache and for a logout keyed on the token.
var b64 = base64.RawURLEncoding.Strict()

// tokenLeeway is the clock skew allowed around a token's exp and nbf.
const tokenLeeway = 5 * time.Second

// verifyOwn is the fast path for a token in exactly the form Issue writes: the header segment
// compared as a string (no JSON), the HMAC checked, then the claims decoded once. It answers ok
// only for a token that is valid by the same rules as the library's parser below; for anything
// else (another header, a bad signature or encoding, a claim out of its time) it answers false
// and the library decides, with its own error, so the two paths never disagree on a refusal.
func (a *Auth) verifyOwn(token string) (claims, bool) {
	var c claims
	dot := len(hs256Header)
	if len(token) <= dot || token[:dot] != hs256Header || token[dot] != '.' {
		return c, false
	}
	last := strings.LastIndexByte(token, '.')
	if last <= dot {
		return c, false
	}
	var sig [sha256.Size]byte
	if base64.RawURLEncoding.EncodedLen(sha256.Size) != len(token)-last-1 {
		return c, false
	}
	var sigEnc [43]byte
	if n, err := b64.Decode(sig[:], sigEnc[:copy(sigEnc[:], token[last+1:])]); err != nil || n != sha256.Size {
		return c, false
	}
	var sum [sha256.Size]byte
	a.macs.Sum(token[:last], &sum)
	if !hmac.Equal(sum[:], sig[:]) {
		return c, false
	}
	// The claims Issue writes fit in a few hundred bytes: decoded on the stack (a longer
	// payload goes to the library).
	var enc [684]byte
	var buf [513]byte
	seg := token[dot+1 : last]
	if len(seg) > len(enc) {
		return c, false
	}
	n, err := b64.Decode(buf[:], enc[:copy(enc[:], seg)])
	if err != nil {
		return c, false
	}
	payload := buf[:n]
	if !flatClaims(payload, &c) {
		// copies, so that payload and c stay on the stack on the usual path
		var u claims
		if json.Unmarshal(bytes.Clone(payload), &u) != nil {
			return claims{}, false
		}
		c = u
	}
	now := a.now()
	if c.ExpiresAt == nil || !now.Before(c.ExpiresAt.Add(tokenLeeway)) {
		return c, false
	}
	if c.NotBefore != nil && now.Add(tokenLeeway).Before(c.NotBefore.Time) {
		return c, false
	}
	return c, true
}

// flatClaims reads the claims of a payload in the plain form Issue writes, without reflection: one
// flat JSON object whose values are strings of printable ASCII without escapes (role, sub, iss,
// jti) or integers of up to 15 digits (exp, iat, nbf). It answers false for anything else
// (another key, an escape, a fraction, an audience, a duplicate, white space), which
// json.Unmarshal then reads.
func flatClaims(p []byte, c *claims) bool {
	if len(p) < 2 || p[0] != '{' || p[len(p)-1] != '}' {
		return false
	}
	var seen uint8
	i := 1
	for i < len(p)-1 {
		key, next, ok := flatString(p, i)
		if !ok || next >= len(p) || p[next] != ':' {
			return false
		}
		i = next + 1
		str, next, isStr := flatString(p, i)
		var num int64
		if !isStr {
			if num, next, ok = flatInt(p, i); !ok {
				return false
			}
		}
		i = next
		bit, ok := setFlatClaim(c, key, str, num)
		if !ok || isStr != (bit < 16) || seen&bit != 0 {
			return false
		}
		seen |= bit
		if i < len(p)-1 {
			if p[i] != ',' {
				return false
			}
			i++
		}
	}
	return i == len(p)-1 && p[i-1] != ','
}

// flatString reads a string of printable ASCII without escapes at p[i] (JSON reads it as it is),
// and the index after its closing quote.
func flatString(p []byte, i int) ([]byte, int, bool) {
	if i >= len(p) || p[i] != '"' {
		return nil, i, false
	}
	end := bytes.IndexByte(p[i+1:], '"')
	if end < 0 {
		return nil, i, false
	}
	for _, b := range p[i+1 : i+1+end] {
		if b < 0x20 || b > 0x7e || b == '\\' {
			return nil, i, false
		}
	}
	return p[i+1 : i+1+end], i + end + 2, true
}

// flatInt reads a non-negative integer of up to 15 digits at p[i] (exact as JSON's float64, no
// leading zero), and the index after it.
func flatInt(p []byte, i int) (int64, int, bool) {
	j := i
	for j < len(p) && p[j] >= '0' && p[j] <= '9' {
		j++
	}
	if j == i || j-i > 15 || (p[i] == '0' && j-i > 1) {
		return 0, i, false
	}
	var n int64
	for _, d := range p[i:j] {
		n = n*10 + int64(d-'0')
	}
	return n, j, true
}

// setFlatClaim sets the claim key to str (the string claims) or num (the times) and returns its
// bit: below 16 for the string claims.
func setFlatClaim(c *claims, key, str []byte, num int64) (uint8, bool) {
	switch string(key) {
	case "role":
		switch string(str) { // the two known roles without a copy
		case RoleShopper:
			c.Role = RoleShopper
		case RoleMerchant:
			c.Role = RoleMerchant
		default:
			c.Role = string(str)
		}
		return 1, true
	case "sub":
		c.Subject = string(str)
		return 2, true
	case "iss":
		c.Issuer = string(str)
		return 4, true
	case "jti":
		c.ID = string(str)
		return 8, true
	case "exp":
		c.ExpiresAt = jwt.NewNumericDate(time.Unix(num, 0))
		return 16, true
	case "iat":
		c.IssuedAt = jwt.NewNumericDate(time.Unix(num, 0))
		return 32, true
	case "nbf":
		c.NotBefore = jwt.NewNumericDate(time.Unix(num, 0))
		return 64, true
	}
	return 0, false
}

func (a *Auth) verify(token string) (Identity, time.Time, error) {
	c, ok := a.verifyOwn(token)
	if !ok {
		c = claims{}
		if err := a.parse(token, &c); err != nil {
			return Identity{}, time.Time{}, err
		}
	}
	// a positive decimal in its canonical form: ParseInt would also take "+7" and "007"
	uid, err := strconv.ParseInt(c.Subject, 10, 64)
	if err != nil || uid <= 0 || c.Subject[0] < '1' || c.Subject[0] > '9' {
		return Identity{}, time.Time{}, shop.Errorf(shop.CodeUnauthenticated, "the token's subject is not a user id")
	}
	if c.Role != RoleShopper && c.Role != RoleMerchant {
		return Identity{}, time.Time{}, shop.Errorf(shop.CodeUnauthenticated, "the token's role is unknown")
	}
	// The parser allowed 5 s of leeway past exp; the cache allows none beyond it.
	return Identity{UserID: uid, Role: c.Role}, c.ExpiresAt.Add(tokenLeeway), nil
}

// parse is the library's full check of any token: HS256 only, the signature, exp required, every
// segment in its one strict spelling (as on the fast path).
func (a *Auth) parse(token string, c *claims) error {
	_, err := jwt.ParseWithClaims(token, c, func(*jwt.Token) (any, error) { return a.secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithStrictDecoding(),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(a.now),
		jwt.WithLeeway(tokenLeeway),
	)
	if err != nil {
		msg := "the token is invalid"
		if errors.Is(err, jwt.ErrTokenExpired) {
			msg = "the token has expired; log in again"
		}
		return &shop.Error{Code: shop.CodeUnauthenticated, Message: msg, Err: err}
	}
	return nil
}

func validCredentials(username, password string) error {
	if n := utf8.RuneCountInString(username); n < 3 || n > 32 {
		return shop.Errorf(shop.CodeInvalidInput, "username must be 3 to 32 characters")
	}
	for _, r := range username {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return shop.Errorf(shop.CodeInvalidInput, "username may hold only letters, digits, '_', '-' and '.'")
		}
	}
	if len(password) < 8 || len(password) > 72 || strings.ContainsRune(password, 0) {
		return shop.Errorf(shop.CodeInvalidInput, "password must be 8 to 72 bytes")
	}
	return nil
}

// hashSlot takes one of the bcrypt slots for a client at ip, or refuses at once with
// Retry-After: a burst of logins must not queue up CPU-bound work behind which every other
// request waits. With the rate limits on, one client address (an IPv6 client by its /64) holds
// at most a quarter of the slots (at least one); beyond its share it is refused with 429, so
// one client's burst never takes every slot and refuses everyone else's login. When every
// slot is taken: 503. An empty ip (the command line) has no share.
func (a *Auth) hashSlot(ip string) (release func(), err error) {
	client := ""
	if ip != "" && a.limiter.On() {
		client = limits.ClientKey(ip)
		share := max(1, cap(a.hashing)/4)
		a.hashMu.Lock()
		if a.hashBy[client] >= share {
			a.hashMu.Unlock()
			return nil, &shop.Error{Code: shop.CodeRateLimited, Message: "a login from your address is already in progress; try again in a moment", RetryAfter: time.Second}
		}
		if a.hashBy == nil {
			a.hashBy = map[string]int{}
		}
		a.hashBy[client]++
		a.hashMu.Unlock()
	}
	select {
	case a.hashing <- struct{}{}:
		return func() { <-a.hashing; a.hashDone(client) }, nil
	default:
		a.hashDone(client)
		return nil, &shop.Error{Code: shop.CodeUnavailable, Message: "too many logins at once; try again in a moment", RetryAfter: time.Second}
	}
}

// hashDone ends a bcrypt of client counted by hashSlot.
func (a *Auth) hashDone(client string) {
	if client == "" {
		return
	}
	a.hashMu.Lock()
	if a.hashBy[client]--; a.hashBy[client] <= 0 {
		delete(a.hashBy, client)
	}
	a.hashMu.Unlock()
}

// NewCaptcha renders a registration challenge for a client at ip.
func (a *Auth) NewCaptcha(ctx context.Context, ip string) (id, image string, err error) {
	if err := a.limiter.AllowAuth(ctx, limits.AuthCaptcha, ip, ""); err != nil {
		return "", "", err
	}
	if a.captcha == nil {
		return "", "", shop.Errorf(shop.CodeUnavailable, "registration is closed")
	}
	id, img, err := a.captcha.New(ctx, captcha.RegistrationUser, captcha.RegistrationSale)
	if err != nil {
		return "", "", shop.Unavailable(err)
	}
	return id, img, nil
}

// Register creates a shopper account for a client at ip that solved a registration captcha,
// and returns a token for it.
func (a *Auth) Register(ctx context.Context, username, password, captchaID, answer, ip string) (string, Identity, error) {
	if err := validCredentials(username, password); err != nil {
		return "", Identity{}, err
	}
	if err := a.limiter.AllowAuth(ctx, limits.AuthRegister, ip, username); err != nil {
		return "", Identity{}, err
	}
	failed := shop.Errorf(shop.CodeCaptchaFailed, "the captcha answer is wrong or expired; get a new captcha")
	if a.captcha == nil || captchaID == "" || len(captchaID) > 128 || len(answer) > 64 {
		return "", Identity{}, failed
	}
	ok, err := a.captcha.Verify(ctx, captcha.RegistrationUser, captcha.RegistrationSale, captchaID, answer)
	if err != nil {
		return "", Identity{}, shop.Unavailable(err)
	}
	if !ok {
		return "", Identity{}, failed
	}
	u, err := a.addUser(ctx, username, password, RoleShopper, ip)
	if err != nil {
		return "", Identity{}, err
	}
	id := Identity{UserID: u.ID, Role: u.Role}
	tok, err := a.Issue(id)
	return tok, id, err
}

// AddUser creates an account with the given role (merchants come from the command line or the
// development seed, never from the public API).
func (a *Auth) AddUser(ctx context.Context, username, password, role string) (store.User, error) {
	return a.addUser(ctx, username, password, role, "")
}

// addUser creates an account, its bcrypt counted against the client at ip (empty: none).
func (a *Auth) addUser(ctx context.Context, username, password, role, ip string) (store.User, error) {
	if err := validCredentials(username, password); err != nil {
		return store.User{}, err
	}
	release, err := a.hashSlot(ip)
	if err != nil {
		return store.User{}, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	release()
	if err != nil {
		return store.User{}, fmt.Errorf("hash password: %w", err)
	}
	u := store.User{Username: username, PasswordHash: string(hash), Role: role}
	if err := a.db.CreateUser(ctx, &u); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return store.User{}, shop.Errorf(shop.CodeUsernameTaken, "the username %q is taken", username)
		}
		return store.User{}, shop.Unavailable(err)
	}
	return u, nil
}

// dummyHash is compared against when the username is unknown, so that an unknown username takes
// as long as a wrong password and the timing tells nothing of which accounts exist.
var dummyHash = sync.OnceValue(func() []byte {
	h, err := bcrypt.GenerateFromPassword([]byte("flashsale: no such user"), bcrypt.DefaultCost)
	if err != nil {
		panic(err)
	}
	return h
})

// Login checks a username (case-insensitively) and password from a client at ip and returns a
// token.
func (a *Auth) Login(ctx context.Context, username, password, ip string) (string, Identity, error) {
	bad := shop.Errorf(shop.CodeInvalidCredentials, "wrong username or password")
	if username == "" || len(username) > 64 || len(password) > 72 || strings.ContainsRune(username, 0) {
		return "", Identity{}, bad
	}
	if err := a.limiter.AllowAuth(ctx, limits.AuthLogin, ip, username); err != nil {
		return "", Identity{}, err
	}
	release, err := a.hashSlot(ip)
	if err != nil {
		return "", Identity{}, err
	}
	defer release()
	u, err := a.db.UserByName(ctx, username)
	hash := []byte(u.PasswordHash)
	switch {
	case errors.Is(err, store.ErrNotFound):
		hash = dummyHash()
	case err != nil:
		return "", Identity{}, shop.Unavailable(err)
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil || u.ID == 0 {
		return "", Identity{}, bad
	}
	id := Identity{UserID: u.ID, Role: u.Role}
	tok, err := a.Issue(id)
	return tok, id, err
}

// Logout ends the session of token on every instance: it is refused from now on, here at once
// and on the other instances within revocationRefresh. A token that does not verify is ignored.
func (a *Auth) Logout(ctx context.Context, token string) error {
	if _, err := a.Verify(token); err != nil {
		return nil
	}
	var c claims
	if _, _, err := jwt.NewParser(jwt.WithStrictDecoding()).ParseUnverified(token, &c); err != nil || c.ExpiresAt == nil {
		return nil
	}
	exp := c.ExpiresAt.Add(5 * time.Second)
	if err := a.revoked.add(ctx, token, exp, a.ttl); err != nil {
		return shop.Unavailable(err)
	}
	return nil
}

// RevocationLog is the log of ended sessions every instance shares (store.Revocations).
type RevocationLog interface {
	// Add records an ended session, dropping entries older than keep.
	Add(ctx context.Context, key [16]byte, exp time.Time, keep time.Duration) error
	// Since returns up to n sessions ended after the entry afterID ("": from the first); an
	// entry that cannot be read has a zero Expires.
	Since(ctx context.Context, afterID string, n int64) ([]store.Revocation, error)
}

// revocationRefresh is how often an instance reads the logouts of the others, at most: the
// check on each request is then a lookup in memory, never a Redis call.
const revocationRefresh = time.Second

// revocations is this instance's copy of the sessions ended by a logout, by the hash of the
// token's canonical form (revocationKey).
type revocations struct {
	shared RevocationLog // nil until With: the logouts of this instance only
	log    *slog.Logger

	mu     sync.RWMutex
	set    map[[16]byte]time.Time // revocationKey → when the token expires anyway
	lastID string                 // the last stream entry read
	size   atomic.Int64           // len(set), read without the lock (none: the usual case)
	pruned time.Time              // when expired entries were last dropped

	last    atomic.Int64 // when the last refresh started (Unix ns)
	running atomic.Bool
}

func tokenHash(token string) [16]byte {
	sum := sha256.Sum256([]byte(token))
	var h [16]byte
	copy(h[:], sum[:16])
	return h
}

// revocationKey is the key of token's session among the revoked ones: the hash of its canonical
// form, in which an HS256 signature is spelled as the encoder writes it (the unused low bits of
// its last character zero). Every spelling of one signed token has one key, so a logout ends
// them all even where a lenient decoder would take another spelling; the canonical form of a
// token Issue wrote is the token itself, so its key is what earlier versions recorded.
func revocationKey(token string) [16]byte {
	last := strings.LastIndexByte(token, '.')
	const sigLen = 43 // base64.RawURLEncoding.EncodedLen(sha256.Size)
	if last < 0 || len(token)-last-1 != sigLen {
		return tokenHash(token)
	}
	var sig [sha256.Size]byte
	var enc, canon [sigLen]byte
	if n, err := base64.RawURLEncoding.Decode(sig[:], enc[:copy(enc[:], token[last+1:])]); err != nil || n != len(sig) {
		return tokenHash(token)
	}
	base64.RawURLEncoding.Encode(canon[:], sig[:])
	if canon == enc {
		return tokenHash(token)
	}
	d := sha256.New()
	d.Write([]byte(token[:last+1]))
	d.Write(canon[:])
	var h [16]byte
	copy(h[:], d.Sum(nil))
	return h
}

// has reports whether token's session was ended, starting a refresh in the background when the
// last one is older than revocationRefresh.
func (r *revocations) has(token string) bool {
	if r.shared != nil {
		if now := time.Now().UnixNano(); now-r.last.Load() > int64(revocationRefresh) && r.running.CompareAndSwap(false, true) {
			go func() {
				defer r.running.Store(false)
				r.refresh()
			}()
		}
	}
	if r.size.Load() == 0 {
		return false
	}
	h := revocationKey(token)
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.set[h]
	return ok
}

// add records an ended session here and in Redis.
func (r *revocations) add(ctx context.Context, token string, exp time.Time, maxTTL time.Duration) error {
	h := revocationKey(token)
	r.mu.Lock()
	if r.set == nil {
		r.set = map[[16]byte]time.Time{}
	}
	r.set[h] = exp
	r.size.Store(int64(len(r.set)))
	r.mu.Unlock()
	if r.shared == nil {
		return nil
	}
	return r.shared.Add(ctx, h, exp, maxTTL+time.Minute)
}

// refresh reads the logouts recorded since the last read and forgets sessions expired anyway.
func (r *revocations) refresh() {
	r.last.Store(time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r.mu.RLock()
	from := r.lastID
	r.mu.RUnlock()
	for {
		msgs, err := r.shared.Since(ctx, from, 1000)
		if err != nil {
			if r.log != nil {
				r.log.Warn("sessions: cannot read logouts from redis", "err", err)
			}
			return
		}
		now := time.Now()
		r.mu.Lock()
		if r.set == nil {
			r.set = map[[16]byte]time.Time{}
		}
		for _, m := range msgs {
			r.lastID = m.ID
			if m.Expires.After(now) {
				r.set[m.Key] = m.Expires
			}
		}
		if now.Sub(r.pruned) > time.Minute {
			for h, exp := range r.set {
				if !exp.After(now) {
					delete(r.set, h)
				}
			}
			r.pruned = now
		}
		r.size.Store(int64(len(r.set)))
		r.mu.Unlock()
		if len(msgs) < 1000 {
			return
		}
		from = msgs[len(msgs)-1].ID
	}
}

// Username returns the name of a user id, or "" when this shop does not know it (a token from an
// external identity provider): pages then show the id.
func (a *Auth) Username(ctx context.Context, userID int64) (string, error) {
	name, err := a.db.UsernameByID(ctx, userID)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", shop.Unavailable(err)
	}
	return name, nil
}
