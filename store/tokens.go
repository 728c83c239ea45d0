package store

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// TokenGrant asks a sale's token budget (lua/tokens.lua) for a block of purchase tokens, in the
// shard of the shopper who asked: Want tokens living TTL, under a budget of the units left plus
// SlackPercent of them. GiveBack are tokens of that shard given back in the same call, by the
// expiry they are counted under: what this instance did not hand out of its previous block,
// and tokens it refused before they reached the reserve script.
type TokenGrant struct {
	SaleID, UserID int64
	Items          []int64 // every item of the sale
	Want           int
	TTL            time.Duration
	SlackPercent   int
	GiveBack       map[time.Time]int
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
	args := make([]any, 0, 3+2*len(g.GiveBack))
	args = append(args, g.Want, g.TTL.Milliseconds(), g.SlackPercent)
	for exp, n := range g.GiveBack {
		if n > 0 {
			args = append(args, strconv.FormatInt(exp.UnixMilli(), 10), n)
		}
	}
	v, err := s.tokens.Run(ctx, s.rdb, keys, args...).Int64Slice()
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
