package store

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/flashsale/flashsale/shop"
)

// ShardOf pins a shopper to one of k shards: a fixed mix (splitmix64's finalizer) of the user id,
// modulo k. It never changes for a sale, since k is fixed at the sale's creation.
func ShardOf(userID int64, k int) int {
	if k <= 1 {
		return 0
	}
	x := uint64(userID) + 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	return int(x % uint64(k))
}

// SplitUnits splits n units over k shards: an even split, the remainder to the lowest shards.
func SplitUnits(n int64, k int) []int64 {
	out := make([]int64, k)
	if n <= 0 {
		return out
	}
	for i := range out {
		out[i] = n / int64(k)
		if int64(i) < n%int64(k) {
			out[i]++
		}
	}
	return out
}

// ShardCounter tells how many stock shards a sale has (fixed at its creation).
type ShardCounter func(ctx context.Context, saleID int64) (int, error)

// shardCache remembers each sale's shard count: it never changes once the sale exists.
type shardCache struct {
	m  sync.Map // sale id -> int
	fn ShardCounter
}

func (c *shardCache) get(ctx context.Context, saleID int64) (int, error) {
	if v, ok := c.m.Load(saleID); ok {
		return v.(int), nil
	}
	k, err := c.fn(ctx, saleID)
	if err != nil {
		return 0, err
	}
	if k < 1 || k > shop.MaxStockShards {
		return 0, fmt.Errorf("sale %d: %d stock shards", saleID, k)
	}
	c.m.Store(saleID, k)
	return k, nil
}

// OneShard is the ShardCounter of a Redis whose sales all have one stock shard.
func OneShard(context.Context, int64) (int, error) { return 1, nil }

// RememberShards records a sale's shard count (known from a snapshot or a row already read).
func (s *Stock) RememberShards(saleID int64, k int) {
	if k >= 1 && k <= shop.MaxStockShards {
		s.shards.m.Store(saleID, k)
	}
}

// Shards returns a sale's stock shard count.
func (s *Stock) Shards(ctx context.Context, saleID int64) (int, error) {
	return s.shards.get(ctx, saleID)
}

// ShardOfUser returns the shard a shopper is pinned to in a sale.
func (s *Stock) ShardOfUser(ctx context.Context, saleID, userID int64) (int, error) {
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return 0, err
	}
	return ShardOf(userID, k), nil
}

var errNoSale = errors.New("no such sale")

// StockShards reads a sale's stock shard count from Postgres.
func (d *DB) StockShards(ctx context.Context, saleID int64) (int, error) {
	var k []int
	if err := d.g.WithContext(ctx).Raw(`SELECT stock_shards FROM sales WHERE id = ?`, saleID).Scan(&k).Error; err != nil {
		return 0, fmt.Errorf("stock shards(sale %d): %w", saleID, err)
	}
	if len(k) == 0 {
		return 0, fmt.Errorf("stock shards(sale %d): %w", saleID, errNoSale)
	}
	return k[0], nil
}

// MaxSeqOfShards returns, per shard of a sharded sale, the highest reservation seq Postgres holds.
func (d *DB) MaxSeqOfShards(ctx context.Context, saleID int64, k int) ([]int64, error) {
	var rows []struct {
		Shard  int
		MaxSeq int64
	}
	err := d.g.WithContext(ctx).Raw(`SELECT s.shard, max(s.max_seq) AS max_seq FROM item_shard_seqs s JOIN items i ON i.id = s.item_id
		WHERE i.sale_id = ? GROUP BY s.shard`, saleID).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("max seq of shards(sale %d): %w", saleID, err)
	}
	out := make([]int64, k)
	for _, r := range rows {
		if r.Shard >= 0 && r.Shard < k {
			out[r.Shard] = r.MaxSeq
		}
	}
	return out, nil
}

// StockShardsCached is StockShards, remembered: a sale's shard count never changes.
func (d *DB) StockShardsCached(ctx context.Context, saleID int64) (int, error) {
	if v, ok := d.shards.Load(saleID); ok {
		return v.(int), nil
	}
	k, err := d.StockShards(ctx, saleID)
	if err != nil {
		return 0, err
	}
	d.shards.Store(saleID, k)
	return k, nil
}
