package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Snapshot is a sale's state as Postgres sees it, to (re)build Redis from.
type Snapshot struct {
	SaleID   int64
	Epoch    int64 // bumped in Postgres for this rebuild
	Limit    string
	StartsAt time.Time
	EndsAt   time.Time
	MaxSeq   int64           // the highest reservation seq of the orders written
	Left     map[int64]int64 // item id -> quantity - live orders
	Quantity map[int64]int64 // item id -> quantity, as the snapshot read it
	Items    []int64         // item ids, in order
	Buyers   map[string]string
	Gone     []string // orders whose unit Postgres gave back and Redis may not have yet
	Paused   bool
	Shards   int // the sale's stock shards (0 is taken as 1)
	// DrawEnds: the end of a fair start's draw window (zero: the sale has none); Drawn: Postgres
	// holds its draw decided (Left counts its winners).
	DrawEnds time.Time
	Drawn    bool
}

// Load (re)builds a sale's keys from a Postgres snapshot when the sale is not loaded or marked
// lost, unless a rebuild of an equal or newer epoch already ran. voidTokens > 0 voids the
// purchase tokens issued before now (a rebuild after data loss: their use marks may be gone).
// It reports whether it loaded now.
//
// A sharded sale is loaded shard by shard, each with its part of every item's units (an even
// split, the remainder to the lowest shards), the buyers pinned to it and every tombstone, all at
// the snapshot's epoch. Unless every shard is held healthy (then nothing is done), the shards of
// an older load are first marked lost, so none of them sells or lends units of the old state
// while the others are replaced; after the load every shard must hold this epoch, else the sale
// is marked lost again for the next rebuild (another instance's load interleaved).
func (s *Stock) Load(ctx context.Context, snap Snapshot, voidTokens time.Duration) (bool, error) {
	k := max(snap.Shards, 1)
	s.RememberShards(snap.SaleID, k)
	if k == 1 {
		return s.loadShard(ctx, snap, 0, 1, snap.Buyers, voidTokens)
	}
	states, err := s.shardStates(ctx, snap.SaleID, k)
	if err != nil {
		return false, err
	}
	healthy := true
	for _, st := range states {
		healthy = healthy && st.Loaded && !st.Lost
	}
	if healthy {
		return false, nil
	}
	for sh, st := range states {
		if st.Loaded && !st.Lost && st.Epoch < snap.Epoch {
			if err := s.markLost.Run(ctx, s.rdb, []string{MetaKeyOf(snap.SaleID, sh)}, 0, "").Err(); err != nil {
				return false, fmt.Errorf("load(sale %d, shard %d): %w", snap.SaleID, sh, err)
			}
		}
	}
	buyers := make([]map[string]string, k)
	for sh := range buyers {
		buyers[sh] = map[string]string{}
	}
	for m, o := range snap.Buyers {
		u, _ := strconv.ParseInt(m[strings.LastIndexByte(m, ':')+1:], 10, 64)
		buyers[ShardOf(u, k)][m] = o
	}
	loaded := false
	for sh := range k {
		ok, err := s.loadShard(ctx, snap, sh, k, buyers[sh], voidTokens)
		if err != nil {
			return false, err
		}
		loaded = loaded || ok
	}
	if states, err = s.shardStates(ctx, snap.SaleID, k); err != nil {
		return false, err
	}
	for _, st := range states {
		if !st.Loaded || st.Lost || st.Epoch != snap.Epoch {
			// Shards of different loads: fail the sale closed, the next rebuild loads them all.
			if _, err := s.MarkLost(ctx, snap.SaleID, 0, ""); err != nil {
				return false, err
			}
			return false, nil
		}
	}
	return loaded, nil
}

// loadShard runs the load script on one shard of k.
func (s *Stock) loadShard(ctx context.Context, snap Snapshot, sh, k int, buyers map[string]string, voidTokens time.Duration) (bool, error) {
	keys := []string{MetaKeyOf(snap.SaleID, sh), BuyersKeyOf(snap.SaleID, sh), InFlightKeyOf(snap.SaleID, sh), GoneKeyOf(snap.SaleID, sh),
		XferKeyOf(snap.SaleID, sh), XferInKeyOf(snap.SaleID, sh), EntrantsKeyOf(snap.SaleID, sh), DrawKeyOf(snap.SaleID, sh)}
	args := make([]any, 0, 10+len(snap.Items)+2*len(buyers)+len(snap.Gone))
	args = append(args, snap.Epoch, snap.Limit, snap.StartsAt.UnixMilli(), snap.EndsAt.UnixMilli(), snap.MaxSeq, voidTokens.Milliseconds(), len(buyers),
		flag(snap.Paused), drawEndsArg(snap.DrawEnds), flag(snap.Drawn))
	for _, it := range snap.Items {
		keys = append(keys, StockKeyOf(snap.SaleID, sh, it))
		args = append(args, SplitUnits(snap.Left[it], k)[sh])
	}
	for m, o := range buyers {
		args = append(args, m, o)
	}
	for _, g := range snap.Gone {
		args = append(args, g)
	}
	n, err := s.load.Run(ctx, s.rdb, keys, args...).Int64()
	if err != nil {
		return false, fmt.Errorf("load(sale %d, shard %d): %w", snap.SaleID, sh, err)
	}
	return n == 1, nil
}

// flag is a boolean as the scripts read it.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// drawEndsArg is a draw window's end as the scripts read it ("0": no draw).
func drawEndsArg(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}
