package store

import (
	"context"
	"fmt"
	"strings"
)

// MarkLost fails a sale closed until it is rebuilt from Postgres. fence is the reconciliation
// lease's fencing token (0 outside the lease); atSeq, if not empty, is the counter value the
// decision was taken at (the sale is left alone if it moved on). It reports whether it marked.
//
// A sharded sale fails closed as a whole: atSeq is then the shards' counters joined by commas
// (SaleState.SeqRaw). Under a guard (fence or atSeq) every shard's guard is checked first
// (marklost.lua's check mode, which writes nothing): if any shard moved on or knows a newer
// lease holder, no shard is marked. Then each shard is marked under its guard, and once one
// shard is marked every other shard is marked too (one that moved on between the check and its
// mark included: a shard lost alone would fail the sale closed anyway).
func (s *Stock) MarkLost(ctx context.Context, saleID int64, fence int64, atSeq string) (bool, error) {
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return false, fmt.Errorf("mark lost(sale %d): %w", saleID, err)
	}
	if k == 1 {
		n, err := s.markLost.Run(ctx, s.rdb, []string{MetaKey(saleID)}, fence, atSeq).Int64()
		if err != nil {
			return false, fmt.Errorf("mark lost(sale %d): %w", saleID, err)
		}
		return n == 1, nil
	}
	seqs := strings.Split(atSeq, ",")
	atOf := func(sh int) string {
		if atSeq != "" && len(seqs) == k {
			return seqs[sh]
		}
		return ""
	}
	if fence != 0 || atSeq != "" {
		for sh := range k {
			n, err := s.markLost.Run(ctx, s.rdb, []string{MetaKeyOf(saleID, sh)}, fence, atOf(sh), "check").Int64()
			if err != nil {
				return false, fmt.Errorf("mark lost(sale %d, shard %d): %w", saleID, sh, err)
			}
			if n < 0 {
				return false, nil // this shard moved on, or a newer lease holder acted
			}
		}
	}
	marked := make([]bool, k)
	anyMarked := false
	for sh := range k {
		n, err := s.markLost.Run(ctx, s.rdb, []string{MetaKeyOf(saleID, sh)}, fence, atOf(sh)).Int64()
		if err != nil {
			return anyMarked, fmt.Errorf("mark lost(sale %d, shard %d): %w", saleID, sh, err)
		}
		marked[sh] = n == 1
		anyMarked = anyMarked || marked[sh]
	}
	if !anyMarked {
		return false, nil
	}
	for sh := range k {
		if !marked[sh] {
			if err := s.markLost.Run(ctx, s.rdb, []string{MetaKeyOf(saleID, sh)}, 0, "").Err(); err != nil {
				return true, fmt.Errorf("mark lost(sale %d, shard %d): %w", saleID, sh, err)
			}
		}
	}
	return true, nil
}
