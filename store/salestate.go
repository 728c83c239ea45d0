package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// SaleState is a sale's Redis meta: whether it is loaded and healthy, and its counters.
//
// For a sharded sale it is every shard's meta together: loaded when every shard is, lost when
// any is; Seq is the lowest shard counter, ShardSeqs each one, SeqRaw them all joined by commas.
type SaleState struct {
	Loaded   bool
	Lost     bool
	Seq      int64
	SeqRaw   string
	Epoch    int64
	Limit    string
	LoadedAt time.Time
	Shards   int  // the sale's stock shards (1: not sharded)
	Partial  bool // sharded only: some shards hold the sale and others do not
	Mixed    bool // sharded only: the shards holding the sale hold different epochs (a load under way)
}

// ShardSeqs returns each shard's reservation counter (one value for a sale of one shard).
func (st SaleState) ShardSeqs() []int64 {
	parts := strings.Split(st.SeqRaw, ",")
	out := make([]int64, len(parts))
	for i, p := range parts {
		out[i], _ = strconv.ParseInt(p, 10, 64)
	}
	return out
}

func parseMeta(m map[string]string) SaleState {
	if len(m) == 0 {
		return SaleState{}
	}
	st := SaleState{Loaded: true, Lost: m["lost"] == "1", SeqRaw: m["seq"], Limit: m["limit"]}
	st.Seq, _ = strconv.ParseInt(m["seq"], 10, 64)
	st.Epoch, _ = strconv.ParseInt(m["epoch"], 10, 64)
	if ms, err := strconv.ParseInt(m["loadedAt"], 10, 64); err == nil {
		st.LoadedAt = time.UnixMilli(ms)
	}
	return st
}

// combine folds the states of a sale's shards into one.
func combine(states []SaleState) SaleState {
	if len(states) == 1 {
		return states[0]
	}
	st := states[0]
	st.Shards = len(states)
	raw := make([]string, len(states))
	some := false
	epoch := int64(-1) // the first loaded shard's
	for i, x := range states {
		if x.Loaded {
			st.Mixed = st.Mixed || (epoch >= 0 && x.Epoch != epoch)
			if epoch < 0 {
				epoch = x.Epoch
			}
		}
		st.Loaded = st.Loaded && x.Loaded
		st.Lost = st.Lost || x.Lost
		st.Seq = min(st.Seq, x.Seq)
		raw[i] = x.SeqRaw
		some = some || x.Loaded
	}
	st.Partial = some && !st.Loaded
	st.SeqRaw = strings.Join(raw, ",")
	return st
}

func (s *Stock) shardStates(ctx context.Context, saleID int64, k int) ([]SaleState, error) {
	cmds := make([]*redis.MapStringStringCmd, k)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for sh := range k {
			cmds[sh] = p.HGetAll(ctx, MetaKeyOf(saleID, sh))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sale state %d: %w", saleID, err)
	}
	out := make([]SaleState, k)
	for sh, c := range cmds {
		out[sh] = parseMeta(c.Val())
	}
	return out, nil
}

// State reads a sale's meta (every shard's, for a sharded sale).
func (s *Stock) State(ctx context.Context, saleID int64) (SaleState, error) {
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return SaleState{}, fmt.Errorf("sale state %d: %w", saleID, err)
	}
	states, err := s.shardStates(ctx, saleID, k)
	if err != nil {
		return SaleState{}, err
	}
	return combine(states), nil
}

// Levels reads the remaining units of a sale's items in one round trip; an item whose key is
// missing gets -1.
func (s *Stock) Levels(ctx context.Context, saleID int64, itemIDs []int64) ([]int64, error) {
	if len(itemIDs) == 0 {
		return nil, nil
	}
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("stock levels: %w", err)
	}
	if k > 1 {
		return s.shardedLevels(ctx, saleID, k, itemIDs)
	}
	cmds := make([]*redis.StringCmd, len(itemIDs))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range itemIDs {
			cmds[i] = p.Get(ctx, StockKey(saleID, id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("stock levels: %w", err)
	}
	out := make([]int64, len(itemIDs))
	for i, c := range cmds {
		v, err := c.Int64()
		switch {
		case errors.Is(err, redis.Nil):
			out[i] = -1
		case err != nil:
			return nil, fmt.Errorf("stock level(item %d): %w", itemIDs[i], err)
		default:
			out[i] = v
		}
	}
	return out, nil
}

// shardLevels reads an item's units in every shard (-1: no key).
func (s *Stock) shardLevels(ctx context.Context, saleID int64, k int, itemID int64) ([]int64, error) {
	cmds := make([]*redis.StringCmd, k)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for sh := range k {
			cmds[sh] = p.Get(ctx, StockKeyOf(saleID, sh, itemID))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("shard levels(sale %d, item %d): %w", saleID, itemID, err)
	}
	out := make([]int64, k)
	for i, c := range cmds {
		v, err := c.Int64()
		if err != nil {
			v = -1
		}
		out[i] = v
	}
	return out, nil
}

// allEmpty reports whether no shard holds a unit of the item and no transfer of the sale is in
// flight: only then is the item sold out everywhere. The shards cannot be read in one atomic
// step, so the transfer logs and counters are read before and after the levels: no record
// before and no transfer started until after means no unit moved while the levels were read.
func (s *Stock) allEmpty(ctx context.Context, saleID int64, k int, itemID int64) (bool, error) {
	moves := func() (string, error) {
		counts := make([]*redis.StringCmd, k)
		logs := make([]*redis.IntCmd, k)
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for sh := range k {
				counts[sh] = p.HGet(ctx, MetaKeyOf(saleID, sh), "xfers")
				logs[sh] = p.HLen(ctx, XferKeyOf(saleID, sh))
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", err
		}
		var b strings.Builder
		for sh := range k {
			if logs[sh].Val() > 0 {
				return "", nil // a transfer in flight
			}
			b.WriteString(counts[sh].Val() + ",")
		}
		return b.String(), nil
	}
	before, err := moves()
	if err != nil || before == "" {
		return false, err
	}
	levels, err := s.shardLevels(ctx, saleID, k, itemID)
	if err != nil {
		return false, err
	}
	for _, v := range levels {
		if v > 0 {
			return false, nil
		}
	}
	after, err := moves()
	return err == nil && after == before, err
}

// shardedLevels sums each item's units over the shards (-1: no shard holds the item's key).
func (s *Stock) shardedLevels(ctx context.Context, saleID int64, k int, itemIDs []int64) ([]int64, error) {
	cmds := make([]*redis.StringCmd, k*len(itemIDs))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range itemIDs {
			for sh := range k {
				cmds[i*k+sh] = p.Get(ctx, StockKeyOf(saleID, sh, id))
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("stock levels: %w", err)
	}
	out := make([]int64, len(itemIDs))
	for i := range itemIDs {
		out[i] = -1
		for sh := range k {
			v, err := cmds[i*k+sh].Int64()
			switch {
			case errors.Is(err, redis.Nil):
			case err != nil:
				return nil, fmt.Errorf("stock level(item %d): %w", itemIDs[i], err)
			default:
				out[i] = max(out[i], 0) + v
			}
		}
	}
	return out, nil
}
