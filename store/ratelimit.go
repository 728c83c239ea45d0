package store

import (
	"context"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// RateLimiter is GCRA in Redis (go-redis/redis_rate): one bucket per key, shared by every
// instance. It implements limits.GCRA.
type RateLimiter struct{ l *redis_rate.Limiter }

// NewRateLimiter returns the buckets kept in rdb.
func NewRateLimiter(rdb redis.UniversalClient) RateLimiter {
	return RateLimiter{l: redis_rate.NewLimiter(rdb)}
}

// Allow takes one request from key's bucket of rate per period with burst, or tells how long
// until the next would be allowed.
func (r RateLimiter) Allow(ctx context.Context, key string, rate, burst int, period time.Duration) (bool, time.Duration, error) {
	res, err := r.l.Allow(ctx, key, redis_rate.Limit{Rate: rate, Burst: burst, Period: period})
	if err != nil {
		return false, 0, err
	}
	return res.Allowed > 0, res.RetryAfter, nil
}
