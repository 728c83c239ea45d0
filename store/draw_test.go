package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// The draw's scripts on a real Redis: entries inside the window take no unit and move the seq,
// one per shopper; after the window nothing is attempted until the shard applied the draw; the
// apply sets the stock and the winners once; a returned unit and a transfer out wait for it; an
// entry taken back leaves its token used.
func TestDrawScripts(t *testing.T) {
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item = 9100, 9101
	snap := snapshot(t, s, sale, shop.LimitPerSale, item, 3)
	now := redisNow(t, s)
	snap.StartsAt, snap.DrawEnds = now.Add(-time.Second), now.Add(time.Hour)
	mustLoad(t, s, snap, 0)

	a := attempt(t, s, sale, item, 1, "00000000-0000-0000-0000-000000000001", "n1")
	if _, err := s.Reserve(ctx, a); !errors.Is(err, store.ErrRankNeeded) {
		t.Fatalf("an attempt in the window not sent as an entry: %v, want ErrRankNeeded", err)
	}
	a.Entry = true
	r := mustReserve(t, s, a)
	if !r.Entered || r.Seq == 0 {
		t.Fatalf("an attempt in the window: %+v, want entered with a seq", r)
	}
	if got := stockOf(t, rdb, sale, item); got != 3 {
		t.Errorf("stock after an entry: %d, want 3 (no unit taken)", got)
	}
	again := a
	again.Nonce, again.OrderID = "n1b", "00000000-0000-0000-0000-000000000011"
	if r, err := s.Reserve(ctx, again); !errors.Is(err, store.ErrAlreadyBuyer) || r.HeldOrder != a.OrderID {
		t.Errorf("a second entry of the shopper: %+v %v, want ErrAlreadyBuyer naming the first", r, err)
	}
	if r, err := s.Reserve(ctx, a); err != nil || !r.Entered {
		t.Errorf("the same attempt sent again: %+v %v, want entered", r, err)
	}
	// An entry whose publish failed is taken back: the draw no longer holds it, its token is used.
	b := attempt(t, s, sale, item, 2, "00000000-0000-0000-0000-000000000002", "n2")
	b.Entry = true
	mustReserve(t, s, b)
	ref := shop.OrderRef{SaleID: sale, ItemID: item, UserID: 2, OrderID: b.OrderID}
	if ok, err := s.ReleaseEntry(ctx, shop.LimitPerSale, ref, "n2"); err != nil || !ok {
		t.Fatalf("release entry: %v %v", ok, err)
	}
	if _, err := s.Reserve(ctx, b); !errors.Is(err, store.ErrTokenAlreadyUsed) {
		t.Errorf("the taken-back entry's attempt sent again: %v, want ErrTokenAlreadyUsed", err)
	}
	shards, err := s.DrawShards(ctx, sale)
	if err != nil || len(shards) != 1 || len(shards[0].Entries) != 1 || shards[0].Entries[0] != a.OrderID || shards[0].Drawn {
		t.Fatalf("draw state: %+v %v, want one undecided entry (%s)", shards, err, a.OrderID)
	}

	// The window closes: nothing is attempted, a return and a transfer out wait for the apply.
	if err := rdb.HSet(ctx, store.MetaKey(sale), "fair", redisNow(t, s).Add(-time.Millisecond).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	c := attempt(t, s, sale, item, 3, "00000000-0000-0000-0000-000000000003", "n3")
	if _, err := s.Reserve(ctx, c); !errors.Is(err, store.ErrDrawClosing) {
		t.Errorf("an attempt after the window, before the apply: %v, want ErrDrawClosing", err)
	}
	if out, err := s.Release(ctx, shop.OrderRef{SaleID: sale, ItemID: item, UserID: 1, OrderID: a.OrderID}, shop.ReturnUnit); err != nil || out != store.RetryLater {
		t.Errorf("a winner's return before the apply: %v %v, want RetryLater", out, err)
	}
	dec := store.Decision{Left: map[int64]int64{item: 2}, Items: []int64{item}, Limit: shop.LimitPerSale,
		Winners: []store.DrawWinner{{OrderID: a.OrderID, ItemID: item, UserID: 1}}}
	if n, unheld, err := s.ApplyDraw(ctx, sale, dec); err != nil || n != 1 || unheld != 0 {
		t.Fatalf("apply: %d %d %v, want applied to 1 shard", n, unheld, err)
	}
	if n, _, err := s.ApplyDraw(ctx, sale, store.Decision{Left: map[int64]int64{item: 0}, Items: []int64{item}, Limit: shop.LimitPerSale}); err != nil || n != 0 {
		t.Errorf("a second apply: %d %v, want nothing applied", n, err)
	}
	if got := stockOf(t, rdb, sale, item); got != 2 {
		t.Errorf("stock after the apply: %d, want 2 (a second apply changes nothing)", got)
	}
	if _, err := s.Reserve(ctx, again); !errors.Is(err, store.ErrAlreadyBuyer) {
		t.Errorf("the winner buying again after the apply: %v, want ErrAlreadyBuyer", err)
	}
	if r := mustReserve(t, s, c); r.Entered || r.Left != 1 {
		t.Errorf("a purchase after the apply: %+v, want a reservation (1 left)", r)
	}
	if out, err := s.Release(ctx, shop.OrderRef{SaleID: sale, ItemID: item, UserID: 1, OrderID: a.OrderID}, shop.ReturnUnit); err != nil || out != store.Released {
		t.Errorf("a winner's return after the apply: %v %v, want Released", out, err)
	}
	if got := stockOf(t, rdb, sale, item); got != 2 {
		t.Errorf("stock after a purchase and a winner's return: %d, want 2", got)
	}
}
