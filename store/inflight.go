package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Settle removes orders that Postgres now holds from the in-flight registers, in one round trip.
func (s *Stock) Settle(ctx context.Context, bySale map[int64][]string) error {
	if len(bySale) == 0 {
		return nil
	}
	ks := map[int64]int{}
	for sale, ids := range bySale {
		if len(ids) > 0 {
			k, err := s.shards.get(ctx, sale)
			if err != nil {
				return fmt.Errorf("settle: %w", err)
			}
			ks[sale] = k
		}
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for sale, ids := range bySale {
			if len(ids) > 0 {
				// the order ids alone do not name their shard: each shard forgets them
				for sh := range ks[sale] {
					p.HDel(ctx, InFlightKeyOf(sale, sh), ids...)
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	return nil
}

// InFlightEntry is one entry of a sale's in-flight register.
type InFlightEntry struct {
	OrderID    string
	ItemID     int64
	UserID     int64
	ReservedAt time.Time // Redis's clock
	Seq        int64
	Claimed    bool // the writer has taken it from the queue
	Shard      int  // the shard whose register holds it (0 for a sale of one shard)
}

// InFlight lists a sale's reservations that Postgres does not hold yet (as far as Redis knows),
// of every shard.
func (s *Stock) InFlight(ctx context.Context, saleID int64) ([]InFlightEntry, error) {
	ms, err := s.hashes(ctx, saleID, InFlightKeyOf)
	if err != nil {
		return nil, fmt.Errorf("in flight(sale %d): %w", saleID, err)
	}
	var out []InFlightEntry
	for sh, m := range ms {
		for id, v := range m {
			e, ok := parseInFlight(id, v)
			if ok {
				e.Shard = sh
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// InFlightOlder lists a sale's reservations in flight (every shard's) reserved more than age
// ago by the clock of the Redis holding them: each shard's register and its node's clock are read
// in one MULTI, since on a Redis Cluster each node has its own clock.
func (s *Stock) InFlightOlder(ctx context.Context, saleID int64, age time.Duration) ([]InFlightEntry, error) {
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("in flight(sale %d): %w", saleID, err)
	}
	var out []InFlightEntry
	for sh := range k {
		var flight *redis.MapStringStringCmd
		var tm *redis.TimeCmd
		if _, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			flight = p.HGetAll(ctx, InFlightKeyOf(saleID, sh))
			tm = p.Time(ctx)
			return nil
		}); err != nil {
			return nil, fmt.Errorf("in flight(sale %d, shard %d): %w", saleID, sh, err)
		}
		cutoff := tm.Val().Add(-age)
		for id, v := range flight.Val() {
			if e, ok := parseInFlight(id, v); ok && e.ReservedAt.Before(cutoff) {
				e.Shard = sh
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// hashes reads one hash of every shard of a sale.
func (s *Stock) hashes(ctx context.Context, saleID int64, key func(int64, int) string) ([]map[string]string, error) {
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return nil, err
	}
	return s.hashesOf(ctx, saleID, k, key)
}

// hashesOf is hashes for a sale of k shards.
func (s *Stock) hashesOf(ctx context.Context, saleID int64, k int, key func(int64, int) string) ([]map[string]string, error) {
	if k == 1 {
		m, err := s.rdb.HGetAll(ctx, key(saleID, 0)).Result()
		return []map[string]string{m}, err
	}
	cmds := make([]*redis.MapStringStringCmd, k)
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for sh := range k {
			cmds[sh] = p.HGetAll(ctx, key(saleID, sh))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]map[string]string, k)
	for sh, c := range cmds {
		out[sh] = c.Val()
	}
	return out, nil
}

// InFlightOrder looks one order up in its sale's in-flight register (every shard's).
func (s *Stock) InFlightOrder(ctx context.Context, saleID int64, orderID string) (InFlightEntry, bool, error) {
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return InFlightEntry{}, false, fmt.Errorf("in flight(sale %d, order %s): %w", saleID, orderID, err)
	}
	cmds := make([]*redis.StringCmd, k)
	if k == 1 {
		cmds[0] = s.rdb.HGet(ctx, InFlightKey(saleID), orderID)
	} else {
		_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for sh := range k {
				cmds[sh] = p.HGet(ctx, InFlightKeyOf(saleID, sh), orderID)
			}
			return nil
		})
	}
	for _, c := range cmds {
		v, err := c.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return InFlightEntry{}, false, fmt.Errorf("in flight(sale %d, order %s): %w", saleID, orderID, err)
		}
		e, ok := parseInFlight(orderID, v)
		return e, ok, nil
	}
	return InFlightEntry{}, false, nil
}

func parseInFlight(id, v string) (InFlightEntry, bool) {
	claimed := strings.HasSuffix(v, ":c")
	parts := strings.Split(strings.TrimSuffix(v, ":c"), ":")
	if len(parts) != 4 {
		return InFlightEntry{}, false
	}
	var n [4]int64
	for i, p := range parts {
		x, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return InFlightEntry{}, false
		}
		n[i] = x
	}
	return InFlightEntry{OrderID: id, ItemID: n[0], UserID: n[1], ReservedAt: time.UnixMilli(n[2]), Seq: n[3], Claimed: claimed}, true
}

// Buyers returns a sale's buyers hash (member -> order id).
// A sharded sale's shards' buyers together.
func (s *Stock) Buyers(ctx context.Context, saleID int64) (map[string]string, error) {
	ms, err := s.hashes(ctx, saleID, BuyersKeyOf)
	if err != nil {
		return nil, fmt.Errorf("buyers(sale %d): %w", saleID, err)
	}
	if len(ms) == 1 {
		return ms[0], nil
	}
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out, nil
}

// AreGone reports, for each order id, whether the sale's tombstones name it.
func (s *Stock) AreGone(ctx context.Context, saleID int64, ids []string) ([]bool, error) {
	out := make([]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	k, err := s.shards.get(ctx, saleID)
	if err != nil {
		return nil, fmt.Errorf("gone(sale %d): %w", saleID, err)
	}
	for sh := range k {
		// a unit goes back in its shopper's shard; a tombstone in any shard counts
		res, err := s.rdb.SMIsMember(ctx, GoneKeyOf(saleID, sh), args...).Result()
		if err != nil {
			return nil, fmt.Errorf("gone(sale %d): %w", saleID, err)
		}
		for i, g := range res {
			out[i] = out[i] || g
		}
	}
	return out, nil
}
