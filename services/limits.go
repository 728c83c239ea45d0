package services

import (
	"context"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/flashsale/flashsale/store"
)

// RateLimits are requests per second allowed on a sale's purchase path (captcha, purchase token,
// purchase), per shopper and per client IP, each its own bucket with a burst of twice the rate.
type RateLimits struct {
	UserPerSecond int
	IPPerSecond   int
}

// DefaultRateLimits suit a human clicking: a few attempts a second per shopper, and room for an
// office or campus behind one address.
var DefaultRateLimits = RateLimits{UserPerSecond: 5, IPPerSecond: 100}

// Limiter enforces the rate limits across instances with Redis GCRA (go-redis/redis_rate),
// preceded by an in-process token bucket per key so one instance never floods Redis with a
// shopper who is over the limit anyway.
type Limiter struct {
	on    bool
	redis *redis_rate.Limiter
	log   *slog.Logger
	now   func() time.Time

	mu    sync.Mutex
	local map[string]*localBucket
	swept time.Time
}

type localBucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// NewLimiter returns a limiter on rdb; with on false every request is allowed.
func NewLimiter(rdb redis.UniversalClient, on bool, log *slog.Logger, now func() time.Time) *Limiter {
	return &Limiter{on: on, redis: redis_rate.NewLimiter(rdb), log: log, now: now, local: map[string]*localBucket{}}
}

// LimitsOf returns a sale's limits, its own where set, else the defaults.
func LimitsOf(s store.Sale) RateLimits {
	l := DefaultRateLimits
	if s.UserRatePerSec != nil {
		l.UserPerSecond = *s.UserRatePerSec
	}
	if s.IPRatePerSec != nil {
		l.IPPerSecond = *s.IPRatePerSec
	}
	return l
}

// Allow takes one request from the shopper's bucket and the IP's bucket of a sale, or returns
// RATE_LIMITED with the wait. If Redis cannot answer, the local buckets decide: the purchase
// path fails closed at the reserve anyway.
func (l *Limiter) Allow(ctx context.Context, saleID, userID int64, ip string, lim RateLimits) error {
	if !l.on {
		return nil
	}
	sale := strconv.FormatInt(saleID, 10)
	return l.allow(ctx, []string{"rl:u:" + sale + ":" + strconv.FormatInt(userID, 10), "rl:ip:" + sale + ":" + ClientKey(ip)},
		[]redis_rate.Limit{perSecond(lim.UserPerSecond), perSecond(lim.IPPerSecond)})
}

func perSecond(n int) redis_rate.Limit {
	return redis_rate.Limit{Rate: n, Burst: 2 * n, Period: time.Second}
}

// allow takes one request from each of the buckets keys (local first, then Redis), or returns
// RATE_LIMITED with the longest wait.
func (l *Limiter) allow(ctx context.Context, keys []string, limits []redis_rate.Limit) error {
	for i, key := range keys {
		if wait, ok := l.allowLocal(key, limits[i]); !ok {
			return &Error{Code: CodeRateLimited, Message: "too many attempts; slow down", RetryAfter: max(wait, time.Second)}
		}
	}
	for i, key := range keys {
		res, err := l.redis.Allow(ctx, key, limits[i])
		if err != nil {
			l.log.Warn("rate limiter: redis unavailable, local buckets only", "err", err)
			return nil
		}
		if res.Allowed == 0 {
			return &Error{Code: CodeRateLimited, Message: "too many attempts; slow down", RetryAfter: max(res.RetryAfter, time.Second)}
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

// AuthLimits are the buckets of the account routes: per client address (an IPv6 client by its
// /64) for each action, and per username for logging in and registering together, so guessing
// one account's password is slow whatever the addresses it comes from. A person typing never
// meets them; a script guessing passwords or creating accounts does at once.
var AuthLimits = map[AuthAction]redis_rate.Limit{
	AuthLogin:    {Rate: 60, Burst: 30, Period: time.Minute},
	AuthRegister: {Rate: 20, Burst: 10, Period: time.Minute},
	AuthCaptcha:  {Rate: 40, Burst: 20, Period: time.Minute},
}

// AuthUsernameLimit is the bucket of one username (case-insensitively), logins and
// registrations together.
var AuthUsernameLimit = redis_rate.Limit{Rate: 10, Burst: 10, Period: time.Minute}

// AllowAuth takes one request of action from the client address's bucket and, when username is
// not empty, from the username's bucket, or returns RATE_LIMITED with the wait.
func (l *Limiter) AllowAuth(ctx context.Context, action AuthAction, ip, username string) error {
	if l == nil || !l.on {
		return nil
	}
	keys := []string{"rl:a:" + string(action) + ":ip:" + ClientKey(ip)}
	limits := []redis_rate.Limit{AuthLimits[action]}
	if username != "" {
		keys = append(keys, "rl:a:user:"+strings.ToLower(username))
		limits = append(limits, AuthUsernameLimit)
	}
	return l.allow(ctx, keys, limits)
}

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

func (l *Limiter) allowLocal(key string, lim redis_rate.Limit) (time.Duration, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > time.Minute {
		for k, b := range l.local {
			if now.Sub(b.seen) > time.Minute {
				delete(l.local, k)
			}
		}
		l.swept = now
	}
	every := rate.Limit(float64(lim.Rate) / lim.Period.Seconds())
	b, ok := l.local[key]
	if !ok || b.lim.Limit() != every || b.lim.Burst() != lim.Burst {
		b = &localBucket{lim: rate.NewLimiter(every, lim.Burst)}
		l.local[key] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}
