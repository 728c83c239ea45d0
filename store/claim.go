package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Claim verdicts, per order.
const (
	ClaimGone    = 0 // its unit went back: do not write it
	ClaimClaimed = 1 // in flight, now owned by the writer
	ClaimUnknown = 2 // Redis does not know it: write it, Postgres decides
)

// ClaimItem is one order of a batch the writer claims.
type ClaimItem struct {
	OrderID string
	Seq     int64
	UserID  int64 // names the shard of a sharded sale
}

// Claim marks orders of one sale as being written by the writer and returns a verdict for each
// (ClaimGone, ClaimClaimed, ClaimUnknown). An order whose seq is above Redis's counter marks the
// sale lost: Redis went back in time.
// In a sharded sale each order is claimed in its shopper's shard (one call per shard), against
// that shard's counter.
func (s *Stock) Claim(ctx context.Context, saleID int64, orders []ClaimItem) ([]int, error) {
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("claim(sale %d): %w", saleID, err)
	}
	byShard := map[int][]int{}
	for i, o := range orders {
		sh := ShardOf(o.UserID, k)
		byShard[sh] = append(byShard[sh], i)
	}
	out := make([]int, len(orders))
	for sh, idx := range byShard {
		args := make([]any, 0, 2*len(idx))
		for _, i := range idx {
			args = append(args, orders[i].OrderID, orders[i].Seq)
		}
		res, err := s.claim.Run(ctx, s.rdb, []string{MetaKeyOf(saleID, sh), InFlightKeyOf(saleID, sh), GoneKeyOf(saleID, sh)}, args...).Int64Slice()
		if err != nil {
			return nil, fmt.Errorf("claim(sale %d): %w", saleID, err)
		}
		if len(res) != len(idx) {
			return nil, fmt.Errorf("claim(sale %d): %d verdicts for %d orders", saleID, len(res), len(idx))
		}
		for j, i := range idx {
			out[i] = int(res[j])
		}
	}
	if k > 1 {
		// A shard's claim marks that shard lost when an order's seq is above its counter: a
		// sharded sale then fails closed as a whole.
		lost := make(map[int]*redis.StringCmd, len(byShard))
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for sh := range byShard {
				lost[sh] = p.HGet(ctx, MetaKeyOf(saleID, sh), "lost")
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("claim(sale %d): %w", saleID, err)
		}
		for _, c := range lost {
			if c.Val() == "1" {
				if _, err := s.MarkLost(ctx, saleID, 0, ""); err != nil {
					return nil, err
				}
				break
			}
		}
	}
	return out, nil
}
