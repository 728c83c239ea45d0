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

// Config are the sessions' settings.
type Config struct {
	Secret    []byte        // signs the session tokens (HS256)
	TTL       time.Duration // how long a session token lives
	HashSlots int           // bcrypt hashes or compares at once; 0: half the CPUs, at least 2
}

// Deps are what accounts work with. A tool that only issues or checks tokens gives none but Now;
// without Revoked, a logout ends the session on this instance only; without Captcha,
// registration is refused; without Limiter, the account routes are not limited.
type Deps struct {
	DB      DB
	Now     func() time.Time
	Revoked RevocationLog   // the logouts every instance shares (store.Revocations)
	Limiter *limits.Limiter // per-IP and per-username limits of the account routes
	Captcha captcha.Captcha // the registration captcha
	Log     *slog.Logger
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

// New returns the accounts service, complete: with Revoked, the sessions other instances ended
// are read before it returns.
func New(cfg Config, d Deps) *Auth {
	slots := cfg.HashSlots
	if slots <= 0 {
		slots = defaultHashSlots()
	}
	log := d.Log
	if log == nil {
		log = slog.Default()
	}
	a := &Auth{db: d.DB, secret: cfg.Secret, ttl: cfg.TTL, now: d.Now, hashing: make(chan struct{}, slots),
		seen: new([verifiedSlots]atomic.Pointer[verified]), seed: maphash.MakeSeed(), macs: mac.NewPool(cfg.Secret), log: log,
		limiter: d.Limiter, captcha: d.Captcha}
	if d.Revoked != nil {
		a.revoked.shared, a.revoked.log = d.Revoked, log
		a.revoked.refresh()
	}
	go dummyHash() // computed before the first unknown username needs it
	return a
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
