package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/lua"
)

// Refusals the reserve script can answer instead of a reservation.
var (
	ErrSoldOut          = errors.New("sold out")
	ErrAlreadyBuyer     = errors.New("already a buyer")
	ErrStockUnknown     = errors.New("sale not loaded in redis, or its data was lost")
	ErrTokenAlreadyUsed = errors.New("purchase token already used, expired or void")
	ErrRedisWentBack    = errors.New("redis lost reservations (its counter went back); the sale is rebuilt from postgres")
	ErrNotStarted       = errors.New("the sale has not started (redis clock)")
	ErrEnded            = errors.New("the sale has ended (redis clock)")
	ErrPaused           = errors.New("the merchant paused the sale")
)

// Stock keeps the hot state of every sale in Redis: remaining units per item, buyers, reservations
// in flight, used purchase tokens and the tombstones of units given back. All keys of one sale
// share the hash tag {sale:S}, so each script touches one slot (one Redis Cluster shard per sale).
type Stock struct {
	rdb      redis.UniversalClient
	reserve  *redis.Script
	reserves *scriptCalls // the reserve script's calls, sent together when they come together
	release  *redis.Script
	load     *redis.Script
	claim    *redis.Script
	markLost *redis.Script
	adjust   *redis.Script
	funnel   *redis.Script
	transfer *redis.Script
	tokens   *redis.Script
	shards   shardCache
}

// NewStock returns a Stock on rdb; scripts run with EVALSHA and fall back to EVAL on NOSCRIPT.
// shards tells a sale's count of stock shards, fixed at its creation (Postgres:
// DB.StockShardsCached; OneShard where every sale has one).
func NewStock(rdb redis.UniversalClient, shards ShardCounter) *Stock {
	reserve := redis.NewScript(lua.Reserve)
	return &Stock{
		shards:   shardCache{fn: shards},
		rdb:      rdb,
		reserve:  reserve,
		reserves: newScriptCalls(rdb, reserve),
		release:  redis.NewScript(lua.Release),
		load:     redis.NewScript(lua.Load),
		claim:    redis.NewScript(lua.Claim),
		markLost: redis.NewScript(lua.MarkLost),
		adjust:   redis.NewScript(lua.Adjust),
		funnel:   redis.NewScript(lua.Funnel),
		transfer: redis.NewScript(lua.Transfer),
		tokens:   redis.NewScript(lua.Tokens),
	}
}

// Now reads Redis's clock: the one clock every instance agrees on. On a Redis Cluster it is the
// clock of any node: a decision about a sale's reservations reads its own node's (InFlightOlder,
// View).
func (s *Stock) Now(ctx context.Context) (time.Time, error) {
	t, err := s.rdb.Time(ctx).Result()
	if err != nil {
		return time.Time{}, fmt.Errorf("redis time: %w", err)
	}
	return t, nil
}

// ReconcileLease takes or renews the reconciliation lease for owner (AcquireReconcileLease) on
// the stock's Redis.
func (s *Stock) ReconcileLease(ctx context.Context, owner string, ttl time.Duration) (*Lease, error) {
	return AcquireReconcileLease(ctx, s.rdb, owner, ttl)
}
