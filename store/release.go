package store

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/shop"
)

// ReleaseOutcome tells what a release did.
type ReleaseOutcome int

// The outcomes of Release.
const (
	// NotInFlight: nothing to do (already released, returned or written).
	NotInFlight ReleaseOutcome = iota
	// Released: the unit went back now.
	Released
	// Claimed: the writer holds the order from the queue; it will be written, not released.
	Claimed
	// RetryLater: ReturnUnit on a sale Redis does not hold healthy (not loaded, or lost): its
	// rebuild from Postgres will count the unit; keep the return until then.
	RetryLater
)

// Release runs one release operation for an order. Idempotent: the unit goes back at most once.
// In a sharded sale it runs in the shopper's shard, where the reservation was made.
func (s *Stock) Release(ctx context.Context, o shop.OrderRef, op shop.ReleaseOp) (ReleaseOutcome, error) {
	keys, err := s.releaseKeys(ctx, o)
	if err != nil {
		return NotInFlight, releaseErr(o, op, err)
	}
	n, err := s.release.Run(ctx, s.rdb, keys, releaseArgs(o, op)...).Int64()
	if err != nil {
		return NotInFlight, releaseErr(o, op, err)
	}
	return ReleaseOutcome(n), nil
}

// releaseKeys are the release script's keys for o, in its shopper's shard.
func (s *Stock) releaseKeys(ctx context.Context, o shop.OrderRef) ([]string, error) {
	sh, err := s.ShardOfUser(ctx, o.SaleID, o.UserID)
	if err != nil {
		return nil, err
	}
	return []string{MetaKeyOf(o.SaleID, sh), StockKeyOf(o.SaleID, sh, o.ItemID), BuyersKeyOf(o.SaleID, sh), InFlightKeyOf(o.SaleID, sh), GoneKeyOf(o.SaleID, sh)}, nil
}

func releaseArgs(o shop.OrderRef, op shop.ReleaseOp) []any {
	return []any{o.OrderID, string(op), o.ItemID, o.UserID, o.HeldBy}
}

func releaseErr(o shop.OrderRef, op shop.ReleaseOp, err error) error {
	return fmt.Errorf("release %s(sale %d, order %s): %w", op, o.SaleID, o.OrderID, err)
}

// ReleaseMany is Release for many orders in pipelines of 500 (one round trip to each Redis node
// per pipeline, instead of one per order): the keeper's expiry gives back up to 500 units a
// pass. It returns an outcome and an error per order, in order: every command of a pipeline is
// sent, so on a Redis Cluster whose one node fails the others' releases still happen and are
// reported; a failed one may or may not have been released (each release is idempotent: run it
// again).
func (s *Stock) ReleaseMany(ctx context.Context, refs []shop.OrderRef, op shop.ReleaseOp) ([]ReleaseOutcome, []error) {
	const chunk = 500
	outs := make([]ReleaseOutcome, len(refs))
	errs := make([]error, len(refs))
	for i := 0; i < len(refs); i += chunk {
		j := min(len(refs), i+chunk)
		s.releasePipelined(ctx, refs[i:j], op, outs[i:j], errs[i:j])
	}
	return outs, errs
}

func (s *Stock) releasePipelined(ctx context.Context, refs []shop.OrderRef, op shop.ReleaseOp, outs []ReleaseOutcome, errs []error) {
	keys := make([][]string, len(refs))
	cmds := make([]*redis.Cmd, len(refs))
	pipe := s.rdb.Pipeline()
	for i, o := range refs {
		var err error
		if keys[i], err = s.releaseKeys(ctx, o); err != nil {
			errs[i] = releaseErr(o, op, err)
			continue
		}
		cmds[i] = s.release.EvalSha(ctx, pipe, keys[i], releaseArgs(o, op)...)
	}
	if pipe.Len() > 0 {
		_, _ = pipe.Exec(ctx) // each command's own error is read below
	}
	for i, o := range refs {
		if cmds[i] == nil {
			continue
		}
		n, err := cmds[i].Int64()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// a Redis that lost its script cache (a restart, a failover): Run loads it
			n, err = s.release.Run(ctx, s.rdb, keys[i], releaseArgs(o, op)...).Int64()
		}
		if err != nil {
			errs[i] = releaseErr(o, op, err)
			continue
		}
		outs[i] = ReleaseOutcome(n)
	}
}
