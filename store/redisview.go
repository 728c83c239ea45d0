package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisView is a sale's Redis state read in one MULTI: what the reconciliation compares with
// Postgres.
type RedisView struct {
	State    SaleState
	Levels   map[int64]int64 // item id -> units left (-1 missing)
	Buyers   int64           // members of the buyers hash
	InFlight []InFlightEntry
	Gone     map[string]bool // of the order ids asked about
	Now      time.Time       // Redis's clock at the reading (shard 0's node's, for a sharded sale)
	// ShardNow is each shard's node's clock, read in the shard's MULTI (index: shard). On a Redis
	// Cluster the shards live on different nodes whose clocks differ: a reservation's age is
	// judged by the clock of its own shard (Age).
	ShardNow []time.Time
	// InTransit is, per item of a sharded sale, the units taken from one shard for another and not
	// yet added there (counted in Levels too).
	InTransit map[int64]int64
}

// Age is how long ago e was reserved, by the clock of the node holding e's shard.
func (v RedisView) Age(e InFlightEntry) time.Duration {
	now := v.Now
	if e.Shard >= 0 && e.Shard < len(v.ShardNow) {
		now = v.ShardNow[e.Shard]
	}
	return now.Sub(e.ReservedAt)
}

// View reads a sale's Redis state atomically; gone lists the order ids to look up in the
// tombstones.
//
// A sharded sale is read one MULTI per shard (each shard is its own slot), then its transfer logs:
// the shards are read moments apart, which the reconciliation's quiet-sale rule allows for.
func (s *Stock) View(ctx context.Context, saleID int64, items []int64, gone []string) (RedisView, error) {
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return RedisView{}, fmt.Errorf("redis view(sale %d): %w", saleID, err)
	}
	if k == 1 {
		return s.viewShard(ctx, saleID, 0, items, gone)
	}
	// A transfer between shards during the reads could show its units in neither or both: the
	// view is read again (a few times at most) until no transfer started while it was read.
	var v RedisView
	for range 3 {
		before, err := s.transferCounts(ctx, saleID, k)
		if err != nil {
			return RedisView{}, err
		}
		if v, err = s.shardedView(ctx, saleID, k, items, gone); err != nil {
			return RedisView{}, err
		}
		after, err := s.transferCounts(ctx, saleID, k)
		if err != nil {
			return RedisView{}, err
		}
		if after == before {
			break
		}
	}
	return v, nil
}

// shardedView reads every shard of a sale, one MULTI each, then the transfer logs.
func (s *Stock) shardedView(ctx context.Context, saleID int64, k int, items []int64, gone []string) (RedisView, error) {
	v := RedisView{Levels: map[int64]int64{}, Gone: map[string]bool{}, InTransit: map[int64]int64{}}
	states := make([]SaleState, k)
	for sh := range k {
		x, err := s.viewShard(ctx, saleID, sh, items, gone)
		if err != nil {
			return RedisView{}, err
		}
		states[sh] = x.State
		if sh == 0 {
			v.Now = x.Now
		}
		v.ShardNow = append(v.ShardNow, x.Now)
		for it, n := range x.Levels {
			if n >= 0 {
				v.Levels[it] = max(v.Levels[it], 0) + n
			} else if _, ok := v.Levels[it]; !ok {
				v.Levels[it] = -1
			}
		}
		v.Buyers += x.Buyers
		v.InFlight = append(v.InFlight, x.InFlight...)
		for id, g := range x.Gone {
			v.Gone[id] = v.Gone[id] || g
		}
	}
	v.State = combine(states)
	ts, err := s.Transfers(ctx, saleID)
	if err != nil {
		return RedisView{}, err
	}
	for _, t := range ts {
		if !t.Applied && t.Epoch == v.State.Epoch {
			v.InTransit[t.ItemID] += t.N
			if v.Levels[t.ItemID] >= 0 {
				v.Levels[t.ItemID] += t.N
			}
		}
	}
	return v, nil
}

// viewShard reads one shard's state in one MULTI.
func (s *Stock) viewShard(ctx context.Context, saleID int64, sh int, items []int64, gone []string) (RedisView, error) {
	var meta *redis.MapStringStringCmd
	var flight *redis.MapStringStringCmd
	var buyers *redis.IntCmd
	var tm *redis.TimeCmd
	var goneCmd *redis.BoolSliceCmd
	levels := make([]*redis.StringCmd, len(items))
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		meta = p.HGetAll(ctx, MetaKeyOf(saleID, sh))
		for i, it := range items {
			levels[i] = p.Get(ctx, StockKeyOf(saleID, sh, it))
		}
		buyers = p.HLen(ctx, BuyersKeyOf(saleID, sh))
		flight = p.HGetAll(ctx, InFlightKeyOf(saleID, sh))
		tm = p.Time(ctx)
		if len(gone) > 0 {
			args := make([]any, len(gone))
			for i, g := range gone {
				args[i] = g
			}
			goneCmd = p.SMIsMember(ctx, GoneKeyOf(saleID, sh), args...)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return RedisView{}, fmt.Errorf("redis view(sale %d): %w", saleID, err)
	}
	v := RedisView{Levels: map[int64]int64{}, Gone: map[string]bool{}, Now: tm.Val(), ShardNow: []time.Time{tm.Val()}, State: parseMeta(meta.Val())}
	for i, it := range items {
		n, err := levels[i].Int64()
		if err != nil {
			n = -1
		}
		v.Levels[it] = n
	}
	v.Buyers = buyers.Val()
	for id, raw := range flight.Val() {
		if e, ok := parseInFlight(id, raw); ok {
			e.Shard = sh
			v.InFlight = append(v.InFlight, e)
		}
	}
	if goneCmd != nil {
		for i, ok := range goneCmd.Val() {
			v.Gone[gone[i]] = ok
		}
	}
	return v, nil
}
