package store

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// TokenGrant asks a sale's token budget (lua/tokens.lua) for a block of purchase tokens, in the
// shard of the shopper who asked: Want tokens living TTL, under a budget of the units left plus
// SlackPercent of them. GiveBack (its expiry) and GiveBackN are the tokens of this instance's
// previous block of that shard it did not hand out, given back in the same call.
type TokenGrant struct {
	SaleID, UserID int64
	Items          []int64 // every item of the sale
	Want           int
	TTL            time.Duration
	SlackPercent   int
	GiveBack       time.Time
	GiveBackN      int
}

// TokenBlock is what the budget granted: N tokens (0: the budget is spent), each expiring at
// Expires; Left is the units the shard holds, Outstanding its tokens not used yet with this
// block. Unjudged: the sale is not loaded in Redis (or marked lost): nothing granted, nothing
// to judge by. Shard is the shopper's shard, Shards the sale's count of them.
type TokenBlock struct {
	N                 int
	Expires           time.Time
	Left, Outstanding int64
	Unjudged          bool
	Shard, Shards     int
}

// GrantTokens runs the token budget's script in the shopper's shard (one round trip).
func (s *Stock) GrantTokens(ctx context.Context, g TokenGrant) (TokenBlock, error) {
	k, err := s.shards.get(ctx, g.SaleID)
	if err != nil {
		return TokenBlock{}, fmt.Errorf("token budget(sale %d): %w", g.SaleID, err)
	}
	shard := ShardOf(g.UserID, k)
	keys := make([]string, 0, 2+len(g.Items))
	keys = append(keys, TokensKeyOf(g.SaleID, shard), MetaKeyOf(g.SaleID, shard))
	for _, it := range g.Items {
		keys = append(keys, StockKeyOf(g.SaleID, shard, it))
	}
	back := "0"
	if g.GiveBackN > 0 {
		back = strconv.FormatInt(g.GiveBack.UnixMilli(), 10)
	}
	v, err := s.tokens.Run(ctx, s.rdb, keys, g.Want, g.TTL.Milliseconds(), g.SlackPercent, back, g.GiveBackN).Int64Slice()
	if err != nil {
		return TokenBlock{}, fmt.Errorf("token budget(sale %d): %w", g.SaleID, err)
	}
	if len(v) != 4 {
		return TokenBlock{}, fmt.Errorf("token budget(sale %d): unexpected reply %v", g.SaleID, v)
	}
	n, exp, left, out := v[0], v[1], v[2], v[3]
	b := TokenBlock{Left: left, Outstanding: out, Shard: shard, Shards: k}
	if n < 0 {
		b.Unjudged = true
		return b, nil
	}
	b.N, b.Expires = int(n), time.UnixMilli(exp)
	return b, nil
}
