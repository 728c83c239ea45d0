package purchase

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// The token budget: purchase tokens handed out and not used yet stay within the units a sale
// still displays plus tokenSlackPercent of them, counted in Redis for every instance at once
// (lua/tokens.lua; a sale of one stock shard). So almost no shopper is handed a token for a
// unit that is already spoken for: once the tokens out cover what is left, the token step answers
// SOLD_OUT, and a purchase is rarely refused for want of a unit. A token used (whatever its
// purchase's outcome) or expired frees its place.
//
// An instance takes tokens in blocks (one Redis round trip per block) and hands them out
// itself, for at most tokenBlockLife and while half their lifetime is left; what it did not
// hand out goes back with its next block. A block's tokens expire together, at the end of their
// lifetime rounded down to a second (a tenth of the lifetime if shorter).
// Near the end of the stock the blocks shrink (a quarter of what is left, at least one), so the
// instances share the last units' tokens.
const (
	tokenSlackPercent = 10
	tokenBlockSize    = 64
	tokenBlockLife    = time.Second
	// tokenBudgetSpent is how long an instance refuses tokens on its own after the budget said
	// spent while units were left (they are spoken for by tokens out): the next request after
	// it asks again. A budget spent with no unit left drains the items' flags instead.
	tokenBudgetSpent = 50 * time.Millisecond
)

// ErrSpokenFor answers a purchase token when every unit left is covered by the purchase tokens
// other shoppers hold: SOLD_OUT, as a sell-out answers, with words that say a unit may come back.
var ErrSpokenFor = &shop.Error{Code: shop.CodeSoldOut,
	Message: "sold out: every unit left is held for shoppers about to buy it; a unit they do not buy comes back on sale within a minute"}

// TokenBudget is the shared count of a sale's purchase tokens (store.Stock.GrantTokens), and
// the sale's count of stock shards.
type TokenBudget interface {
	GrantTokens(ctx context.Context, g store.TokenGrant) (store.TokenBlock, error)
	Shards(ctx context.Context, saleID int64) (int, error)
}

// tokenBlocks are this instance's blocks of tokens, one per sale. A sale of several stock shards
// (a hot sale spread over a Redis Cluster) has no budget: a shard's units are not all a shopper
// pinned to it may buy (a drained shard borrows from the others), and no script sees every shard
// at once; its tokens follow the sold-out flags alone.
type tokenBlocks struct {
	budget TokenBudget
	ttl    time.Duration
	now    func() time.Time
	log    *slog.Logger
	blocks sync.Map // sale id -> *tokenBlock
	warns  throttle // the warnings about a budget not asked
}

// tokenBlock is one sale's block: n tokens left to hand out, each expiring at exp, until until;
// spentUntil (unix ns): the budget was spent, refuse until then without asking.
type tokenBlock struct {
	mu         sync.Mutex
	exp        time.Time
	n          int
	until      time.Time
	spentUntil atomic.Int64
	empty      atomic.Bool // n == 0: nothing to hand out without asking
	// back: tokens refused before the reserve script used them (unused), to give back with
	// the next block, by expiry; seen: their nonces, so one token is given back once
	back map[time.Time]int
	seen map[string]time.Time
}

// maxSeen bounds a block's memory of the tokens it gave back: past it, a token refused is
// not given back (it counts until it expires).
const maxSeen = 1 << 14

// unused gives back, with the shard's next block, a token a sold-out flag refused before the
// reserve script could use it: its holder's place is free, as a used token's is. Once per token
// (by its nonce); a token used before (on another item) and refused now is given back too, a
// place too many at most once per token.
func (b *tokenBlocks) unused(saleID int64, exp time.Time, nonce string) {
	if !b.now().Before(exp) {
		return
	}
	blk := b.block(saleID)
	blk.mu.Lock()
	defer blk.mu.Unlock()
	if _, dup := blk.seen[nonce]; dup || len(blk.seen) >= maxSeen {
		return
	}
	if blk.seen == nil {
		blk.seen = map[string]time.Time{}
	}
	if blk.back == nil {
		blk.back = map[time.Time]int{}
	}
	blk.seen[nonce] = exp
	blk.back[exp]++
	blk.spentUntil.Store(0) // a place may be free: the next request asks
}

// handBack empties the block for the next grant and returns what goes back with it: the tokens
// of the block not handed out and those refused before they were used (unused), by expiry.
// Whether the grant then succeeds or not, none of them is handed out again (a grant that
// failed leaves them counted until they expire); the memory of the refused ones' nonces keeps
// only those not expired at now.
func (blk *tokenBlock) handBack(now time.Time) map[time.Time]int {
	back := blk.back
	if blk.n > 0 {
		if back == nil {
			back = map[time.Time]int{}
		}
		back[blk.exp] += blk.n
	}
	blk.n, blk.back = 0, nil
	blk.empty.Store(true)
	for nonce, exp := range blk.seen {
		if !now.Before(exp) {
			delete(blk.seen, nonce)
		}
	}
	return back
}

// spent reports whether the sale's budget was found spent a moment ago: the token gate refuses
// the crowd then, before authenticating it.
func (b *tokenBlocks) spent(saleID int64) bool {
	v, ok := b.blocks.Load(saleID)
	if !ok {
		return false
	}
	blk := v.(*tokenBlock)
	return blk.empty.Load() && b.now().UnixNano() < blk.spentUntil.Load()
}

// block returns the sale's block.
func (b *tokenBlocks) block(saleID int64) *tokenBlock {
	v, ok := b.blocks.Load(saleID)
	if !ok {
		v, _ = b.blocks.LoadOrStore(saleID, new(tokenBlock))
	}
	return v.(*tokenBlock)
}

// forget drops what this instance holds of the sale's budget: Redis answered that the sale was
// rebuilt or lost (tokens granted before a rebuild are void), so the next token asks afresh.
func (b *tokenBlocks) forget(saleID int64) {
	b.blocks.Delete(saleID)
}

func newTokenBlocks(budget TokenBudget, ttl time.Duration, log *slog.Logger, now func() time.Time) *tokenBlocks {
	return &tokenBlocks{budget: budget, ttl: ttl, now: now, log: log}
}

// take hands the shopper a token's expiry from the sale's budget, or refuses with ErrSpokenFor
// (units left, all spoken for) or shop.ErrSoldOut (no unit left: drained is called with the
// sale's items). In a fair start's draw window (and a second after it) every shopper gets a
// token. A budget that cannot be asked (Redis refused, the sale not loaded there) judges
// nothing: the token is handed out with its full lifetime, as without a budget, and the
// purchase asks Redis itself.
func (b *tokenBlocks) take(ctx context.Context, sale shop.Sale, userID int64, drained func(item int64)) (time.Time, error) {
	if sale.FairStartMillis > 0 && b.now().Before(sale.DrawWindowEnd().Add(time.Second)) {
		// a fair start: every shopper of the draw window gets a token, so the draw, not who
		// came first, decides (an entry takes no unit; it uses its token, as a purchase does)
		return b.now().Add(b.ttl), nil
	}
	k, err := b.budget.Shards(ctx, sale.ID)
	if err != nil {
		return b.unjudged(sale.ID, err), nil
	}
	if k > 1 {
		return b.now().Add(b.ttl), nil
	}
	blk := b.block(sale.ID)
	blk.mu.Lock()
	defer blk.mu.Unlock()
	now := b.now()
	if blk.n > 0 && now.Before(blk.until) {
		blk.n--
		blk.empty.Store(blk.n == 0)
		return blk.exp, nil
	}
	if now.UnixNano() < blk.spentUntil.Load() {
		return time.Time{}, ErrSpokenFor
	}
	items := make([]int64, len(sale.Items))
	for i, it := range sale.Items {
		items[i] = it.ID
	}
	g, err := b.budget.GrantTokens(ctx, store.TokenGrant{SaleID: sale.ID, UserID: userID, Items: items, Want: tokenBlockSize,
		TTL: b.ttl, SlackPercent: tokenSlackPercent, GiveBack: blk.handBack(now)})
	switch {
	case err != nil:
		return b.unjudged(sale.ID, err), nil
	case g.Unjudged:
		return now.Add(b.ttl), nil
	case g.N == 0 && g.Left == 0:
		for _, it := range items {
			drained(it)
		}
		return time.Time{}, shop.ErrSoldOut
	case g.N == 0:
		blk.spentUntil.Store(now.Add(tokenBudgetSpent).UnixNano())
		return time.Time{}, ErrSpokenFor
	}
	// handed out for a second at most, and while at least half the lifetime is left
	blk.exp, blk.n, blk.until = g.Expires, g.N-1, minTime(now.Add(tokenBlockLife), g.Expires.Add(-b.ttl/2))
	blk.empty.Store(blk.n == 0)
	return blk.exp, nil
}

// unjudged logs a budget that could not be asked and returns a full lifetime.
func (b *tokenBlocks) unjudged(saleID int64, err error) time.Time {
	now := b.now()
	if b.warns.allow(now, 10*time.Second) {
		b.log.Warn("token budget not asked; tokens are handed out without it (said at most every 10 s)", "sale", saleID, "err", err)
	}
	return now.Add(b.ttl)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
