package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// The token budget's script (lua/tokens.lua): blocks are granted while the tokens out stay under
// the units left plus the slack, a quarter of what is left at most; a token used by the reserve
// script (whatever its outcome) frees its place, one kept for a retry does not; a block given
// back frees what it did not hand out; expired blocks count no more; a rebuild starts afresh;
// a sale not loaded is not judged.
func TestTokenBudgetScript(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item, other = 40, 400, 401
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, 15, other, 5), 0)
	grant := func(want int, ttl time.Duration, back time.Time, backN int) store.TokenBlock {
		t.Helper()
		b, err := s.GrantTokens(ctx, store.TokenGrant{SaleID: sale, UserID: 1, Items: []int64{item, other}, Want: want, TTL: ttl,
			SlackPercent: 10, GiveBack: map[time.Time]int{back: backN}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	// 20 units: 22 tokens at most; each block a quarter of what is still allowed, at least one.
	var sizes []int
	var blocks []store.TokenBlock
	for {
		b := grant(100, time.Minute, time.Time{}, 0)
		if b.N == 0 {
			if b.Left != 20 || b.Outstanding != 22 || b.Unjudged {
				t.Errorf("spent budget = %+v, want 20 left, 22 out", b)
			}
			break
		}
		sizes = append(sizes, b.N)
		blocks = append(blocks, b)
	}
	total := 0
	for _, n := range sizes {
		total += n
	}
	if total != 22 || sizes[0] != 5 || sizes[len(sizes)-1] != 1 {
		t.Fatalf("blocks %v (total %d), want 22 in shrinking blocks, the first 5 (22/4), the last 1", sizes, total)
	}
	exp := blocks[0].Expires

	// A token of the first block used: its place is free only as far as 19 units allow (20 + 2
	// was the cap, 19 + 2 is now: 21 out, nothing granted); a second used, a block of one.
	mustReserve(t, s, store.Attempt{SaleID: sale, ItemID: item, UserID: 7, OrderID: "o1", Nonce: "n1", TokenExpires: exp})
	if b := grant(100, time.Minute, time.Time{}, 0); b.N != 0 || b.Outstanding != 21 || b.Left != 19 {
		t.Errorf("after one used = %+v, want nothing granted, 21 out, 19 left", b)
	}
	// a refusal uses its token too: the same shopper again
	if _, err := s.Reserve(ctx, store.Attempt{SaleID: sale, ItemID: other, UserID: 7, OrderID: "o2", Nonce: "n2", TokenExpires: exp}); err != store.ErrAlreadyBuyer {
		t.Fatalf("second purchase of a shopper: %v, want ErrAlreadyBuyer", err)
	}
	if b := grant(100, time.Minute, time.Time{}, 0); b.N != 1 || b.Outstanding != 21 {
		t.Errorf("after a refusal used its token = %+v, want a block of 1, 21 out", b)
	}

	// Giving back 2 tokens of the first block not handed out: 19 out, 2 more allowed, one
	// granted (a quarter of 2, at least one).
	if b := grant(100, time.Minute, exp, 2); b.N != 1 || b.Outstanding != 20 {
		t.Errorf("after 2 given back = %+v, want a block of 1, 20 out", b)
	}

	// Blocks that expired count no more; fields of a used-up block go.
	if err := rdb.HSet(ctx, store.TokensKeyOf(sale, 0), "1000", 50).Err(); err != nil { // a block that expired in 1970
		t.Fatal(err)
	}
	if b := grant(1, time.Minute, time.Time{}, 0); b.N != 1 || b.Outstanding != 21 {
		t.Errorf("with an expired block = %+v, want a block of 1, 21 out (the expired one not counted)", b)
	}
	if ok, _ := rdb.HExists(ctx, store.TokensKeyOf(sale, 0), "1000").Result(); ok {
		t.Errorf("an expired block's field kept")
	}

	// A rebuild (a newer epoch) starts the count afresh.
	if err := rdb.HSet(ctx, store.MetaKeyOf(sale, 0), "lost", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if b := grant(1, time.Minute, time.Time{}, 0); !b.Unjudged {
		t.Errorf("a sale marked lost = %+v, want unjudged", b)
	}
	snap := snapshot(t, s, sale, shop.LimitPerSale, item, 19, other, 5)
	snap.Epoch = 2
	snap.Buyers["7"] = "o1"
	mustLoad(t, s, snap, 0)
	if b := grant(100, time.Minute, time.Time{}, 0); b.N != 6 || b.Outstanding != 6 || b.Left != 24 {
		t.Errorf("after a rebuild = %+v, want a block of 6 (27/4), 6 out, 24 left", b)
	}

	// A sale Redis does not hold is not judged.
	b, err := s.GrantTokens(ctx, store.TokenGrant{SaleID: 41, UserID: 1, Items: []int64{410}, Want: 10, TTL: time.Minute, SlackPercent: 10})
	if err != nil || !b.Unjudged {
		t.Errorf("a sale not loaded = %+v, %v; want unjudged", b, err)
	}
}
