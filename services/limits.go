package services

import (
	"context"
	"log/slog"
	"strconv"
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
	keys := [2]string{"rl:u:" + sale + ":" + strconv.FormatInt(userID, 10), "rl:ip:" + sale + ":" + ip}
	rates := [2]int{lim.UserPerSecond, lim.IPPerSecond}
	for i, key := range keys {
		if wait, ok := l.allowLocal(key, rates[i]); !ok {
			return &Error{Code: CodeRateLimited, Message: "too many attempts; slow down", RetryAfter: max(wait, time.Second)}
		}
	}
	for i, key := range keys {
		res, err := l.redis.Allow(ctx, key, redis_rate.Limit{Rate: rates[i], Burst: 2 * rates[i], Period: time.Second})
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

func (l *Limiter) allowLocal(key string, perSecond int) (time.Duration, bool) {
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
	b, ok := l.local[key]
	if !ok || b.lim.Limit() != rate.Limit(perSecond) {
		b = &localBucket{lim: rate.NewLimiter(rate.Limit(perSecond), 2*perSecond)}
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
