package store

import (
	"context"
	"fmt"
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

// KnownLogins remembers in Redis which client addresses logged in to which usernames: one key
// per pair (KnownLoginKey), set on each success with the time to keep it. It implements
// limits.KnownLogins.
type KnownLogins struct{ rdb redis.UniversalClient }

// NewKnownLogins returns the pairs kept in rdb.
func NewKnownLogins(rdb redis.UniversalClient) KnownLogins { return KnownLogins{rdb: rdb} }

// KnownLoginKey is the key that remembers that client (limits.ClientKey) logged in to username
// (lower case) successfully. A username holds no colon, so no pair can name another's key.
func KnownLoginKey(client, username string) string { return "login:known:" + username + ":" + client }

// Known reports whether client logged in to username within the time its last success set.
func (k KnownLogins) Known(ctx context.Context, client, username string) (bool, error) {
	n, err := k.rdb.Exists(ctx, KnownLoginKey(client, username)).Result()
	if err != nil {
		return false, fmt.Errorf("known login: %w", err)
	}
	return n == 1, nil
}

// Remember records that client logged in to username, for keep from now (a later success
// starts it again).
func (k KnownLogins) Remember(ctx context.Context, client, username string, keep time.Duration) error {
	if err := k.rdb.Set(ctx, KnownLoginKey(client, username), "1", keep).Err(); err != nil {
		return fmt.Errorf("remember login: %w", err)
	}
	return nil
}
