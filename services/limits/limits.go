// Package limits holds the rate limits: per shopper and per address on the purchase path, per client
// and username on the account routes, per address on the cacheable reads.
package limits

import (
	"context"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/flashsale/flashsale/shop"
)

// Rate is one bucket's size: Rate requests per Period, up to Burst at once.
type Rate struct {
	Rate   int
	Burst  int
	Period time.Duration
}

// GCRA is the buckets shared by every instance (store.RateLimiter: GCRA in Redis).
type GCRA interface {
	// Allow takes one request from key's bucket, or tells how long until the next is allowed.
	Allow(ctx context.Context, key string, rate, burst int, period time.Duration) (allowed bool, retryAfter time.Duration, err error)
}

// KnownLogins remembers the client addresses that logged in to a username (store.KnownLogins:
// one key per pair in Redis).
type KnownLogins interface {
	// Known reports whether client (ClientKey) logged in to username (lower case) within the
	// time its last success set.
	Known(ctx context.Context, client, username string) (bool, error)
	// Remember records that client logged in to username, for keep from now.
	Remember(ctx context.Context, client, username string, keep time.Duration) error
}

// Config says whether the limits are enforced (FLASHSALE_RATE_LIMITS), where to log, and where
// the addresses that logged in to a username are remembered (nil: none, every login attempt
// meets the username's global bucket).
type Config struct {
	On    bool
	Log   *slog.Logger
	Now   func() time.Time
	Known KnownLogins
}

// Limiter enforces the rate limits across instances with shared GCRA buckets, preceded by an
// in-process token bucket per key so one instance never floods Redis with a shopper who is over
// the limit anyway.
type Limiter struct {
	on    bool
	gcra  GCRA
	known KnownLogins // nil: no address is known
	log   *slog.Logger
	now   func() time.Time

	// The in-process buckets, in two generations: lookups find a key in cur, or move it there
	// from prev; cur becomes prev (and the old prev is dropped) once it holds localMax keys or
	// is a minute old. So at most 2*localMax buckets are held however many keys a flood brings
	// (made-up usernames, IPv6 /64s), a bucket untouched for two minutes is gone (every bucket
	// here is full again by then), and nothing ever walks the map under the lock. A bucket
	// dropped early only sends its key to Redis, which decides anyway.
	mu       sync.Mutex
	cur      map[string]*localBucket
	prev     map[string]*localBucket
	rotated  time.Time
	localMax int
}

// localMax is the number of in-process buckets of one generation (two are kept): some 15 MiB
// each at the very worst.
const localMax = 1 << 16

// localAge is how long a generation of in-process buckets lasts at most.
const localAge = time.Minute

type localBucket struct {
	lim *rate.Limiter
}

// localBuckets is how many in-process buckets the limiter holds.
func (l *Limiter) localBuckets() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.cur) + len(l.prev)
}

// NewLimiter returns a limiter on the shared buckets gcra; with cfg.On false every request is
// allowed.
func NewLimiter(gcra GCRA, cfg Config) *Limiter {
	return &Limiter{on: cfg.On, gcra: gcra, known: cfg.Known, log: cfg.Log, now: cfg.Now, cur: map[string]*localBucket{}, localMax: localMax}
}

// Allow takes one request from the shopper's bucket and the IP's bucket of a sale, or returns
// RATE_LIMITED with the wait. If Redis cannot answer, the local buckets decide: the purchase
// path fails closed at the reserve anyway.
func (l *Limiter) Allow(ctx context.Context, saleID, userID int64, ip string, lim shop.RateLimits) error {
	if !l.on {
		return nil
	}
	sale := strconv.FormatInt(saleID, 10)
	return l.allow(ctx, []string{"rl:u:" + sale + ":" + strconv.FormatInt(userID, 10), "rl:ip:" + sale + ":" + ClientKey(ip)},
		[]Rate{perSecond(lim.UserPerSecond), perSecond(lim.IPPerSecond)})
}

func perSecond(n int) Rate {
	return Rate{Rate: n, Burst: 2 * n, Period: time.Second}
}

// allow takes one request from each of the buckets keys (local first, then Redis), or returns
// RATE_LIMITED with the longest wait.
func (l *Limiter) allow(ctx context.Context, keys []string, limits []Rate) error {
	for i, key := range keys {
		if wait, ok := l.allowLocal(key, limits[i]); !ok {
			return &shop.Error{Code: shop.CodeRateLimited, Message: "too many attempts; slow down", RetryAfter: max(wait, time.Second)}
		}
	}
	for i, key := range keys {
		allowed, wait, err := l.gcra.Allow(ctx, key, limits[i].Rate, limits[i].Burst, limits[i].Period)
		if err != nil {
			l.log.Warn("rate limiter: redis unavailable, local buckets only", "err", err)
			return nil
		}
		if !allowed {
			return &shop.Error{Code: shop.CodeRateLimited, Message: "too many attempts; slow down", RetryAfter: max(wait, time.Second)}
		}
	}
	return nil
}

// AuthAction names an account route with its own limits.
type AuthAction string

// The account routes' actions.
const (
	AuthLogin    AuthAction = "login"
	AuthRegister AuthAction = "register"
	AuthCaptcha  AuthAction = "captcha"
)

// AuthLimits are the buckets of the account routes per client address (an IPv6 client by its
// /64) for each action. With AuthUserClientLimit and AuthUsernameLimit (logging in and
// registering together), guessing one account's password is slow whatever the addresses it
// comes from, and no one client can keep the account's owner out. A person typing never meets
// them; a script guessing passwords or creating accounts does at once.
var AuthLimits = map[AuthAction]Rate{
	AuthLogin:    {Rate: 60, Burst: 30, Period: time.Minute},
	AuthRegister: {Rate: 20, Burst: 10, Period: time.Minute},
	AuthCaptcha:  {Rate: 40, Burst: 20, Period: time.Minute},
}

// AuthUserClientLimit is the bucket of one username (case-insensitively) from one client
// address, logins and registrations together: a client that spends it keeps out only itself,
// never the account's owner at another address.
var AuthUserClientLimit = Rate{Rate: 10, Burst: 10, Period: time.Minute}

// AuthUsernameLimit is the bucket of one username from every address together: the cap on
// guessing one account's password from many addresses. It is ten times one client's (five times
// its burst), so spending it takes ten addresses (or IPv6 /64s) guessing without pause; that
// keeps out only the addresses new to the account, since a login from an address that logged in
// to it before (KnownLoginKeep) does not meet this bucket.
var AuthUsernameLimit = Rate{Rate: 100, Burst: 50, Period: time.Minute}

// KnownLoginKeep is how long a client address that logged in to a username (or registered it)
// is remembered, from its last success: for so long its logins to that username skip the
// username's global bucket (AuthUsernameLimit), so that guesses from elsewhere cannot keep the
// owner out; its own buckets (AuthLimits, AuthUserClientLimit) still hold.
const KnownLoginKeep = 30 * 24 * time.Hour

// AllowAuth takes one request of action from the client address's bucket and, when username is
// not empty, from the bucket of the username at that address and then the username's global
// bucket (one a client over its own limit does not spend; a login from an address that logged
// in to the username before skips it), or returns RATE_LIMITED with the wait.
func (l *Limiter) AllowAuth(ctx context.Context, action AuthAction, ip, username string) error {
	if l == nil || !l.on {
		return nil
	}
	client := ClientKey(ip)
	keys := []string{"rl:a:" + string(action) + ":ip:" + client}
	limits := []Rate{AuthLimits[action]}
	if username == "" {
		return l.allow(ctx, keys, limits)
	}
	name := strings.ToLower(username)
	// rl:a:uc: and rl:a:user: are apart, so no username can name another's bucket.
	keys = append(keys, "rl:a:uc:"+client+":"+name)
	limits = append(limits, AuthUserClientLimit)
	if err := l.allow(ctx, keys, limits); err != nil {
		return err
	}
	// Looked up only for a request its own buckets let through: a flood from one address is
	// refused in memory, never sent to Redis.
	if action == AuthLogin && l.knownLogin(ctx, client, name) {
		return nil
	}
	return l.allow(ctx, []string{"rl:a:user:" + name}, []Rate{AuthUsernameLimit})
}

// knownLogin reports whether client logged in to name (lower case) within KnownLoginKeep. If
// Redis cannot answer, it is not known: the username's global bucket holds it.
func (l *Limiter) knownLogin(ctx context.Context, client, name string) bool {
	if l.known == nil {
		return false
	}
	known, err := l.known.Known(ctx, client, name)
	if err != nil {
		l.log.Warn("rate limiter: known logins unavailable, the username's bucket applies", "err", err)
		return false
	}
	return known
}

// SignedIn remembers, for KnownLoginKeep, that the client at ip logged in to username (or
// registered it): its next logins to it skip the username's global bucket (AllowAuth). Best
// effort: a failure is logged, and the login stands.
func (l *Limiter) SignedIn(ctx context.Context, ip, username string) {
	if l == nil || !l.on || l.known == nil || ip == "" || username == "" {
		return
	}
	if err := l.known.Remember(ctx, ClientKey(ip), strings.ToLower(username), KnownLoginKeep); err != nil {
		l.log.Warn("rate limiter: could not remember a login's address", "err", err)
	}
}

// On reports whether the limits are enforced (FLASHSALE_RATE_LIMITS); a nil Limiter has none.
func (l *Limiter) On() bool { return l != nil && l.on }

// ClientKey is the address a client is limited by: an IPv4 address as it is, an IPv6 address by
// its /64 (one subscriber usually holds a whole /64, and would otherwise have 2^64 buckets), an
// IPv4-mapped IPv6 address as the IPv4 one. Anything that is not an address is kept as it is,
// cut to 64 bytes.
func ClientKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		if len(ip) > 64 {
			ip = ip[:64]
		}
		return ip
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, err := a.WithZone("").Prefix(64)
	if err != nil {
		return a.String()
	}
	return p.String()
}

func (l *Limiter) allowLocal(key string, lim Rate) (time.Duration, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.cur) >= l.localMax || now.Sub(l.rotated) >= localAge || now.Before(l.rotated) {
		l.prev, l.cur, l.rotated = l.cur, make(map[string]*localBucket, min(len(l.cur), l.localMax)), now
	}
	every := rate.Limit(float64(lim.Rate) / lim.Period.Seconds())
	b, ok := l.cur[key]
	if !ok {
		if b, ok = l.prev[key]; ok {
			delete(l.prev, key)
			l.cur[key] = b
		}
	}
	if !ok || b.lim.Limit() != every || b.lim.Burst() != lim.Burst {
		b = &localBucket{lim: rate.NewLimiter(every, lim.Burst)}
		l.cur[key] = b
	}
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}
