package store_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

func TestReserveSuccess(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item = 1, 10
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, 3), 0)
	seq0 := stateOf(t, s, sale).Seq

	before := redisNow(t, s).Truncate(time.Millisecond)
	a := attempt(t, s, sale, item, 7, "o1", "n1")
	r := mustReserve(t, s, a)
	after := redisNow(t, s)
	if r.Left != 2 || r.Seq != seq0+1 || r.HeldOrder != "" {
		t.Errorf("reservation = %+v; want 2 left, seq %d", r, seq0+1)
	}
	if r.ReservedAt.Before(before) || r.ReservedAt.After(after) {
		t.Errorf("reserved at %v, want Redis's clock, between %v and %v", r.ReservedAt, before, after)
	}
	if got := stockOf(t, rdb, sale, item); got != 2 {
		t.Errorf("stock = %d, want 2", got)
	}
	if got := stateOf(t, s, sale).Seq; got != seq0+1 {
		t.Errorf("counter = %d, want %d", got, seq0+1)
	}
	if got, want := buyersOf(t, s, sale), map[string]string{"7": "o1"}; !maps.Equal(got, want) {
		t.Errorf("buyers = %v, want %v", got, want)
	}
	e, ok, err := s.InFlightOrder(ctx, sale, "o1")
	if err != nil || !ok {
		t.Fatalf("InFlightOrder(o1) = %v, %v; want in flight", ok, err)
	}
	if want := (store.InFlightEntry{OrderID: "o1", ItemID: item, UserID: 7, ReservedAt: r.ReservedAt, Seq: r.Seq}); e != want {
		t.Errorf("in flight = %+v, want %+v", e, want)
	}
	if raw, want := inFlightRaw(t, rdb, sale)["o1"], fmt.Sprintf("%d:7:%d:%d", item, r.ReservedAt.UnixMilli(), r.Seq); raw != want {
		t.Errorf("in-flight value = %q, want %q", raw, want)
	}
	// The token's use mark lives until the token expires, and a second more.
	pttl, err := rdb.PTTL(ctx, tokenKey(sale, "n1")).Result()
	if err != nil || pttl <= 59*time.Second || pttl > 61*time.Second {
		t.Errorf("token mark ttl = %v (%v), want about 61s", pttl, err)
	}

	// The next shopper gets the next seq.
	r2 := mustReserve(t, s, attempt(t, s, sale, item, 8, "o2", "n2"))
	if r2.Left != 1 || r2.Seq != seq0+2 {
		t.Errorf("second reservation = %+v; want 1 left, seq %d", r2, seq0+2)
	}
	if _, ok, _ := s.InFlightOrder(ctx, sale, "nope"); ok {
		t.Errorf("InFlightOrder of an unknown order: found")
	}
	list, err := s.InFlight(ctx, sale)
	if err != nil || len(list) != 2 {
		t.Errorf("InFlight = %v, %v; want 2 entries", list, err)
	}
}

func TestReserveSoldOut(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item, empty = 2, 20, 21
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerItem, item, 1, empty, 0), 0)
	mustReserve(t, s, attempt(t, s, sale, item, 1, "o1", "n1"))
	seq := stateOf(t, s, sale).Seq
	for i := range 3 {
		user := int64(10 + i)
		_, err := s.Reserve(ctx, attempt(t, s, sale, item, user, fmt.Sprintf("x%d", i), fmt.Sprintf("nx%d", i)))
		if !errors.Is(err, store.ErrSoldOut) {
			t.Errorf("reserve on a sold-out item: %v, want ErrSoldOut", err)
		}
	}
	// Zero units left is a known, sold-out item, not a missing one.
	if _, err := s.Reserve(ctx, attempt(t, s, sale, empty, 1, "z", "nz")); !errors.Is(err, store.ErrSoldOut) {
		t.Errorf("reserve on an item loaded with 0 left: %v, want ErrSoldOut", err)
	}
	if got := stockOf(t, rdb, sale, item); got != 0 {
		t.Errorf("stock = %d, want 0", got)
	}
	if got := stockOf(t, rdb, sale, empty); got != 0 {
		t.Errorf("stock of the empty item = %d, want 0", got)
	}
	if got := stateOf(t, s, sale).Seq; got != seq {
		t.Errorf("counter moved on refusals: %d, want %d", got, seq)
	}
	if got, want := buyersOf(t, s, sale), map[string]string{store.BuyerMember(shop.LimitPerItem, item, 1): "o1"}; !maps.Equal(got, want) {
		t.Errorf("buyers = %v, want %v", got, want)
	}
	if n := len(inFlightRaw(t, rdb, sale)); n != 1 {
		t.Errorf("in flight = %d entries, want 1", n)
	}
}

func TestReserveAlreadyBuyerPerSale(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, a, b = 3, 30, 31
	snap := snapshot(t, s, sale, shop.LimitPerSale, a, 5, b, 5)
	snap.Buyers = map[string]string{"9": "pg-9"} // holds a live order Postgres knows
	mustLoad(t, s, snap, 0)
	mustReserve(t, s, attempt(t, s, sale, a, 5, "oA", "n1"))

	cases := []struct {
		name       string
		item, user int64
		held       string
	}{
		{"same item again", a, 5, "oA"},
		{"another item of the same sale", b, 5, "oA"},
		{"a buyer loaded from postgres", a, 9, "pg-9"},
		{"a buyer loaded from postgres, other item", b, 9, "pg-9"},
	}
	for i, c := range cases {
		r, err := s.Reserve(ctx, attempt(t, s, sale, c.item, c.user, fmt.Sprintf("x%d", i), fmt.Sprintf("nx%d", i)))
		if !errors.Is(err, store.ErrAlreadyBuyer) || r.HeldOrder != c.held {
			t.Errorf("%s: reserve = %+v, %v; want ErrAlreadyBuyer holding %s", c.name, r, err, c.held)
		}
	}
	if got := stockOf(t, rdb, sale, a); got != 4 {
		t.Errorf("stock of a = %d, want 4", got)
	}
	if got := stockOf(t, rdb, sale, b); got != 5 {
		t.Errorf("stock of b = %d, want 5", got)
	}
	if got, want := buyersOf(t, s, sale), map[string]string{"5": "oA", "9": "pg-9"}; !maps.Equal(got, want) {
		t.Errorf("buyers = %v, want %v", got, want)
	}
	// Another shopper is not affected.
	mustReserve(t, s, attempt(t, s, sale, b, 6, "oB", "n2"))
}

func TestReserveAlreadyBuyerPerItem(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, a, b = 4, 40, 41
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerItem, a, 5, b, 5), 0)
	mustReserve(t, s, attempt(t, s, sale, a, 5, "oA", "n1"))
	mustReserve(t, s, attempt(t, s, sale, b, 5, "oB", "n2")) // another item: allowed
	for i, c := range []struct {
		item int64
		held string
	}{{a, "oA"}, {b, "oB"}} {
		r, err := s.Reserve(ctx, attempt(t, s, sale, c.item, 5, fmt.Sprintf("x%d", i), fmt.Sprintf("nx%d", i)))
		if !errors.Is(err, store.ErrAlreadyBuyer) || r.HeldOrder != c.held {
			t.Errorf("item %d again: reserve = %+v, %v; want ErrAlreadyBuyer holding %s", c.item, r, err, c.held)
		}
	}
	want := map[string]string{
		store.BuyerMember(shop.LimitPerItem, a, 5): "oA",
		store.BuyerMember(shop.LimitPerItem, b, 5): "oB",
	}
	if got := buyersOf(t, s, sale); !maps.Equal(got, want) {
		t.Errorf("buyers = %v, want %v", got, want)
	}
	if _, ok := want[strconv.Itoa(a)+":5"]; !ok {
		t.Errorf("BuyerMember(per-item) = %v, want item:user", want)
	}
	if got := stockOf(t, rdb, sale, a) + stockOf(t, rdb, sale, b); got != 8 {
		t.Errorf("stock = %d in all, want 8", got)
	}
}

func TestReserveNotLoaded(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item, other = 5, 50, 51
	a := attempt(t, s, sale, item, 1, "o1", "n1")
	if _, err := s.Reserve(ctx, a); !errors.Is(err, store.ErrStockUnknown) {
		t.Fatalf("reserve on a sale not loaded: %v, want ErrStockUnknown", err)
	}
	if keys := allKeys(t, rdb); len(keys) != 0 {
		t.Errorf("a refused reserve on a sale not loaded created %v", keys)
	}
	// The token was not consumed: it works once the sale is loaded.
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, 2), 0)
	a.OrderID = "o1-retry"
	mustReserve(t, s, a)

	// An item the loaded sale does not know fails closed too, and keeps the token.
	b := attempt(t, s, sale, other, 2, "o2", "n2")
	if _, err := s.Reserve(ctx, b); !errors.Is(err, store.ErrStockUnknown) {
		t.Errorf("reserve of an item without a stock key: %v, want ErrStockUnknown", err)
	}
	if exists(t, rdb, tokenKey(sale, "n2")) || exists(t, rdb, store.StockKey(sale, other)) {
		t.Errorf("a refusal for an unknown item consumed the token or created the stock key")
	}
	if _, ok := buyersOf(t, s, sale)["2"]; ok {
		t.Errorf("a refusal for an unknown item made the shopper a buyer")
	}
	b.ItemID = item
	mustReserve(t, s, b)
}

func TestReserveMarkedLost(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item = 6, 60
	snap := snapshot(t, s, sale, shop.LimitPerSale, item, 2)
	mustLoad(t, s, snap, 0)
	if ok, err := s.MarkLost(ctx, sale, 0, ""); err != nil || !ok {
		t.Fatalf("mark lost = %v, %v", ok, err)
	}
	a := attempt(t, s, sale, item, 1, "o1", "n1")
	if _, err := s.Reserve(ctx, a); !errors.Is(err, store.ErrStockUnknown) {
		t.Errorf("reserve on a lost sale: %v, want ErrStockUnknown", err)
	}
	if got := stockOf(t, rdb, sale, item); got != 2 {
		t.Errorf("stock = %d, want 2", got)
	}
	if exists(t, rdb, tokenKey(sale, "n1")) || exists(t, rdb, store.BuyersKey(sale)) {
		t.Errorf("a refusal on a lost sale consumed the token or added a buyer")
	}
	// Rebuilt (not voiding tokens): the same attempt goes through.
	snap.Epoch = 2
	mustLoad(t, s, snap, 0)
	mustReserve(t, s, a)
}

func TestReserveTokenUsed(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, a, b = 7, 70, 71
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerItem, a, 5, b, 5), 0)
	mustReserve(t, s, attempt(t, s, sale, a, 1, "o1", "tok"))

	// The token names one attempt: any other order id is refused, on any item of the sale.
	for _, c := range []struct {
		item, user int64
	}{{a, 2}, {b, 2}, {b, 1}} {
		_, err := s.Reserve(ctx, attempt(t, s, sale, c.item, c.user, fmt.Sprintf("x%d-%d", c.item, c.user), "tok"))
		if !errors.Is(err, store.ErrTokenAlreadyUsed) {
			t.Errorf("token reused on item %d by user %d: %v, want ErrTokenAlreadyUsed", c.item, c.user, err)
		}
	}
	// A token is used by a refusal too (already a buyer, sold out).
	if _, err := s.Reserve(ctx, attempt(t, s, sale, a, 1, "o2", "tok2")); !errors.Is(err, store.ErrAlreadyBuyer) {
		t.Fatalf("already a buyer: %v", err)
	}
	if _, err := s.Reserve(ctx, attempt(t, s, sale, b, 3, "o3", "tok2")); !errors.Is(err, store.ErrTokenAlreadyUsed) {
		t.Errorf("token used by a refusal, reused: %v, want ErrTokenAlreadyUsed", err)
	}
	if got := stockOf(t, rdb, sale, a) + stockOf(t, rdb, sale, b); got != 9 {
		t.Errorf("stock = %d in all, want 9", got)
	}
	if n := len(buyersOf(t, s, sale)); n != 1 {
		t.Errorf("buyers = %d, want 1", n)
	}
	// A token of another sale with the same nonce is another token.
	const sale2 = 8
	mustLoad(t, s, snapshot(t, s, sale2, shop.LimitPerItem, a, 1), 0)
	mustReserve(t, s, attempt(t, s, sale2, a, 2, "o4", "tok"))
}

func TestReserveTokenExpired(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item = 9, 90
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, 2), 0)
	a := attempt(t, s, sale, item, 1, "o1", "n1")
	a.TokenExpires = redisNow(t, s).Add(-time.Millisecond)
	if _, err := s.Reserve(ctx, a); !errors.Is(err, store.ErrTokenAlreadyUsed) {
		t.Errorf("expired token: %v, want ErrTokenAlreadyUsed", err)
	}
	// The host's clock does not matter: a token valid by the host but expired by Redis is refused.
	a.Nonce, a.TokenExpires = "n2", redisNow(t, s).Add(-time.Second)
	if _, err := s.Reserve(ctx, a); !errors.Is(err, store.ErrTokenAlreadyUsed) {
		t.Errorf("expired token: %v, want ErrTokenAlreadyUsed", err)
	}
	if got := stockOf(t, rdb, sale, item); got != 2 {
		t.Errorf("stock = %d, want 2", got)
	}
	if n := len(buyersOf(t, s, sale)); n != 0 {
		t.Errorf("an expired token made a buyer")
	}
	a.Nonce, a.TokenExpires = "n3", redisNow(t, s).Add(time.Second)
	mustReserve(t, s, a)
}

// A rebuild after data loss voids the tokens issued before it: their use marks may be gone.
func TestReserveTokensVoidedByRebuild(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item = 10, 100
	snap := snapshot(t, s, sale, shop.LimitPerSale, item, 5)
	mustLoad(t, s, snap, 0)
	if ok, err := s.MarkLost(ctx, sale, 0, ""); !ok || err != nil {
		t.Fatalf("mark lost = %v, %v", ok, err)
	}
	snap.Epoch = 2
	const ttl = 2 * time.Minute
	before := redisNow(t, s)
	mustLoad(t, s, snap, ttl)
	after := redisNow(t, s)
	floor, _ := strconv.ParseInt(metaField(t, rdb, sale, "tokfloor"), 10, 64)
	if lo, hi := before.Add(ttl).UnixMilli(), after.Add(ttl).UnixMilli(); floor < lo || floor > hi {
		t.Errorf("tokfloor = %d, want now+ttl in [%d, %d]", floor, lo, hi)
	}

	// Issued before the rebuild (expires before now+ttl): void.
	old := attempt(t, s, sale, item, 1, "o1", "n1")
	old.TokenExpires = before.Add(ttl - time.Second)
	if _, err := s.Reserve(ctx, old); !errors.Is(err, store.ErrTokenAlreadyUsed) {
		t.Errorf("token issued before the rebuild: %v, want ErrTokenAlreadyUsed", err)
	}
	old.Nonce, old.TokenExpires = "n1b", time.UnixMilli(floor-1) // a millisecond before the floor: void
	if _, err := s.Reserve(ctx, old); !errors.Is(err, store.ErrTokenAlreadyUsed) {
		t.Errorf("token expiring just before the floor: %v, want ErrTokenAlreadyUsed", err)
	}
	// Issued in the rebuild's millisecond or after it: accepted.
	fresh := attempt(t, s, sale, item, 2, "o2", "n2")
	fresh.TokenExpires = time.UnixMilli(floor)
	mustReserve(t, s, fresh)
	if got := stockOf(t, rdb, sale, item); got != 4 {
		t.Errorf("stock = %d, want 4", got)
	}
}

func TestReserveSaleWindow(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	now := redisNow(t, s)
	const early, late, item = 11, 12, 110
	snap := snapshot(t, s, early, shop.LimitPerSale, item, 3)
	snap.StartsAt, snap.EndsAt = now.Add(time.Hour), now.Add(2*time.Hour)
	mustLoad(t, s, snap, 0)
	a := attempt(t, s, early, item, 1, "o1", "n1")
	if _, err := s.Reserve(ctx, a); !errors.Is(err, store.ErrNotStarted) {
		t.Errorf("before the start: %v, want ErrNotStarted", err)
	}
	if got := stockOf(t, rdb, early, item); got != 3 {
		t.Errorf("stock = %d, want 3", got)
	}
	if exists(t, rdb, tokenKey(early, "n1")) || exists(t, rdb, store.BuyersKey(early)) {
		t.Errorf("a refusal before the start consumed the token or added a buyer")
	}
	// Once the sale opens (by Redis's clock) the same token goes through.
	if err := rdb.HSet(ctx, store.MetaKey(early), "starts", now.Add(-time.Second).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	mustReserve(t, s, a)

	snap = snapshot(t, s, late, shop.LimitPerSale, item, 3)
	snap.StartsAt, snap.EndsAt = now.Add(-2*time.Hour), now.Add(-time.Millisecond)
	mustLoad(t, s, snap, 0)
	if _, err := s.Reserve(ctx, attempt(t, s, late, item, 1, "o2", "n2")); !errors.Is(err, store.ErrEnded) {
		t.Errorf("after the end: %v, want ErrEnded", err)
	}
	if got := stockOf(t, rdb, late, item); got != 3 {
		t.Errorf("stock = %d, want 3", got)
	}
	if n := len(buyersOf(t, s, late)); n != 0 {
		t.Errorf("a refusal after the end added a buyer")
	}
}

// An instance that saw a seq above Redis's counter proves Redis lost writes: fail closed.
func TestReserveRedisWentBack(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item = 13, 130
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, 5), 0)
	r := mustReserve(t, s, attempt(t, s, sale, item, 1, "o1", "n1"))
	// Floor equal to the counter: fine.
	a := attempt(t, s, sale, item, 2, "o2", "n2")
	a.Floor = r.Seq
	r2 := mustReserve(t, s, a)

	b := attempt(t, s, sale, item, 3, "o3", "n3")
	b.Floor = r2.Seq + 1
	if _, err := s.Reserve(ctx, b); !errors.Is(err, store.ErrRedisWentBack) {
		t.Fatalf("floor above the counter: %v, want ErrRedisWentBack", err)
	}
	if st := stateOf(t, s, sale); !st.Loaded || !st.Lost || st.Seq != r2.Seq {
		t.Errorf("state after the counter went back = %+v; want loaded, lost, seq %d", st, r2.Seq)
	}
	if got := stockOf(t, rdb, sale, item); got != 3 {
		t.Errorf("stock = %d, want 3", got)
	}
	if exists(t, rdb, tokenKey(sale, "n3")) {
		t.Errorf("the refusal consumed the token")
	}
	// Every reserve now fails closed, whatever its floor.
	if _, err := s.Reserve(ctx, attempt(t, s, sale, item, 4, "o4", "n4")); !errors.Is(err, store.ErrStockUnknown) {
		t.Errorf("reserve on the lost sale: %v, want ErrStockUnknown", err)
	}
}
