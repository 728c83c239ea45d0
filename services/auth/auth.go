package auth

import (
	"fmt"
	"hash/maphash"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale/services/captcha"
	"github.com/flashsale/flashsale/services/internal/mac"
	"github.com/flashsale/flashsale/services/limits"
	"github.com/flashsale/flashsale/shop"
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
	db     DB
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
func NewAuth(db DB, secret []byte, ttl time.Duration, now func() time.Time) *Auth {
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
