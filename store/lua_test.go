package store_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// newStock starts a real redis-server for the test and returns a Stock and a raw client on it.
func newStock(t testing.TB) (*store.Stock, redis.UniversalClient) {
	t.Helper()
	s, rdb, _ := newStockServer(t)
	return s, rdb
}

// newStockServer is newStock that also hands back the server, to crash or restore it.
func newStockServer(t testing.TB) (*store.Stock, redis.UniversalClient, *testenv.RedisServer) {
	t.Helper()
	rs := testenv.Redis(t)
	rdb, err := store.OpenRedis(context.Background(), rs.URL(), 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return store.NewStock(rdb), rdb, rs
}

// tokenKey is the used-token marker the reserve script sets (KEYS[5] in reserve.lua).
func tokenKey(sale int64, nonce string) string {
	return "{sale:" + strconv.FormatInt(sale, 10) + "}:tok:" + nonce
}

// redisNow reads Redis's clock, the one the scripts judge tokens and the sale window by.
func redisNow(t testing.TB, s *store.Stock) time.Time {
	t.Helper()
	now, err := s.Now(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return now
}

// snapshot is a sale open from an hour ago to an hour from now (Redis's clock), epoch 1, with the
// items in the order given: item, left, item, left...
func snapshot(t testing.TB, s *store.Stock, sale int64, limit string, itemLeft ...int64) store.Snapshot {
	t.Helper()
	now := redisNow(t, s)
	snap := store.Snapshot{
		SaleID:   sale,
		Epoch:    1,
		Limit:    limit,
		StartsAt: now.Add(-time.Hour),
		EndsAt:   now.Add(time.Hour),
		Left:     map[int64]int64{},
		Buyers:   map[string]string{},
	}
	for i := 0; i+1 < len(itemLeft); i += 2 {
		snap.Items = append(snap.Items, itemLeft[i])
		snap.Left[itemLeft[i]] = itemLeft[i+1]
	}
	return snap
}

func mustLoad(t testing.TB, s *store.Stock, snap store.Snapshot, void time.Duration) {
	t.Helper()
	ok, err := s.Load(context.Background(), snap, void)
	if err != nil || !ok {
		t.Fatalf("load(sale %d, epoch %d) = %v, %v; want loaded", snap.SaleID, snap.Epoch, ok, err)
	}
}

// attempt is a purchase attempt whose token expires a minute from now (Redis's clock).
func attempt(t testing.TB, s *store.Stock, sale, item, user int64, order, nonce string) store.Attempt {
	t.Helper()
	return store.Attempt{SaleID: sale, ItemID: item, UserID: user, OrderID: order, Nonce: nonce, TokenExpires: redisNow(t, s).Add(time.Minute)}
}

func mustReserve(t testing.TB, s *store.Stock, a store.Attempt) store.Reservation {
	t.Helper()
	r, err := s.Reserve(context.Background(), a)
	if err != nil {
		t.Fatalf("reserve(sale %d, item %d, user %d, order %s) = %+v, %v; want a reservation", a.SaleID, a.ItemID, a.UserID, a.OrderID, r, err)
	}
	return r
}

func stockOf(t *testing.T, rdb redis.UniversalClient, sale, item int64) int64 {
	t.Helper()
	n, err := rdb.Get(context.Background(), store.StockKey(sale, item)).Int64()
	if err != nil {
		t.Fatalf("stock of sale %d item %d: %v", sale, item, err)
	}
	return n
}

func stateOf(t *testing.T, s *store.Stock, sale int64) store.SaleState {
	t.Helper()
	st, err := s.State(context.Background(), sale)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func buyersOf(t *testing.T, s *store.Stock, sale int64) map[string]string {
	t.Helper()
	m, err := s.Buyers(context.Background(), sale)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func inFlightRaw(t *testing.T, rdb redis.UniversalClient, sale int64) map[string]string {
	t.Helper()
	m, err := rdb.HGetAll(context.Background(), store.InFlightKey(sale)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func isGone(t *testing.T, s *store.Stock, sale int64, order string) bool {
	t.Helper()
	g, err := s.AreGone(context.Background(), sale, []string{order})
	if err != nil {
		t.Fatal(err)
	}
	return g[0]
}

func exists(t *testing.T, rdb redis.UniversalClient, key string) bool {
	t.Helper()
	n, err := rdb.Exists(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func allKeys(t *testing.T, rdb redis.UniversalClient) []string {
	t.Helper()
	keys, err := rdb.Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

func metaField(t *testing.T, rdb redis.UniversalClient, sale int64, field string) string {
	t.Helper()
	v, err := rdb.HGet(context.Background(), store.MetaKey(sale), field).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return v
}

func release(t *testing.T, s *store.Stock, o shop.OrderRef, op shop.ReleaseOp) store.ReleaseOutcome {
	t.Helper()
	out, err := s.Release(context.Background(), o, op)
	if err != nil {
		t.Fatalf("release %s of %s: %v", op, o.OrderID, err)
	}
	return out
}

func claim(t testing.TB, s *store.Stock, sale int64, orders ...store.ClaimItem) []int {
	t.Helper()
	got, err := s.Claim(context.Background(), sale, orders)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// --- reserve ---

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

// Redis comes back from its disk without its last writes (a crash under appendfsync everysec):
// an instance that saw a later seq detects it at its next reserve, the sale fails closed, and
// the rebuild from Postgres moves the counter past every seq issued before.
func TestReserveAfterRedisLostWrites(t *testing.T) {
	t.Parallel()
	s, rdb, rs := newStockServer(t)
	ctx := context.Background()
	const sale, item = 17, 170
	snap := snapshot(t, s, sale, shop.LimitPerSale, item, 5)
	mustLoad(t, s, snap, 0)
	r1 := mustReserve(t, s, attempt(t, s, sale, item, 1, "o1", "n1"))
	// Under appendfsync everysec Redis may postpone writing acknowledged writes to the file (while
	// a background fsync runs): a rewrite puts everything so far on disk before the copy.
	rewriteAOF(t, rdb)
	saved := rs.CopyData(t)
	r2 := mustReserve(t, s, attempt(t, s, sale, item, 2, "o2", "n2"))
	rs.Restore(t, saved)

	if st := stateOf(t, s, sale); st.Seq != r1.Seq || st.Lost {
		t.Fatalf("state after the restore = %+v; want seq %d (o2 lost), not marked", st, r1.Seq)
	}
	if got := stockOf(t, rdb, sale, item); got != 4 {
		t.Fatalf("stock after the restore = %d, want 4", got)
	}
	// The instance that reserved o2 saw seq r2.Seq: its next attempt finds the counter behind.
	a := attempt(t, s, sale, item, 3, "o3", "n3")
	a.Floor = r2.Seq
	if _, err := s.Reserve(ctx, a); !errors.Is(err, store.ErrRedisWentBack) {
		t.Fatalf("reserve with a floor above the restored counter: %v, want ErrRedisWentBack", err)
	}
	if !stateOf(t, s, sale).Lost {
		t.Errorf("the sale is not marked lost")
	}
	// The token of o2 is gone with the lost writes; the rebuild voids tokens issued before it.
	snap.Epoch, snap.MaxSeq = 2, r2.Seq
	snap.Left = map[int64]int64{item: 3}
	snap.Buyers = map[string]string{"1": "o1", "2": "o2"}
	mustLoad(t, s, snap, 2*time.Minute)
	if _, err := s.Reserve(ctx, attempt(t, s, sale, item, 4, "o4", "n2")); !errors.Is(err, store.ErrTokenAlreadyUsed) {
		t.Errorf("a token issued before the rebuild: %v, want ErrTokenAlreadyUsed", err)
	}
	b := attempt(t, s, sale, item, 4, "o4", "n4")
	b.TokenExpires = redisNow(t, s).Add(3 * time.Minute)
	b.Floor = r2.Seq
	if r := mustReserve(t, s, b); r.Seq <= r2.Seq || r.Left != 2 {
		t.Errorf("reservation after the rebuild = %+v; want a seq above %d, 2 left", r, r2.Seq)
	}
}

// rewriteAOF runs BGREWRITEAOF and waits for it to finish: the data set as of now is on disk.
func rewriteAOF(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	if err := rdb.BgRewriteAOF(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		info, err := rdb.Info(ctx, "persistence").Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "aof_rewrite_in_progress:0") && strings.Contains(info, "aof_rewrite_scheduled:0") {
			if !strings.Contains(info, "aof_last_bgrewrite_status:ok") {
				t.Fatalf("aof rewrite failed:\n%s", info)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("aof rewrite not done after 10s:\n%s", info)
		}
	}
}

// A retry after a lost reply sends the same attempt again: it gets the same answer, and takes no
// second unit.
func TestReserveIdempotentRetry(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item, last = 14, 140, 141
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, 5, last, 1), 0)

	a := attempt(t, s, sale, item, 1, "o1", "n1")
	r1 := mustReserve(t, s, a)
	seq := stateOf(t, s, sale).Seq
	time.Sleep(3 * time.Millisecond) // a retry later in time still answers the first reply's time
	mustReserve(t, s, attempt(t, s, sale, item, 2, "o2", "n2"))
	r2, err := s.Reserve(ctx, a)
	want := r1
	want.Left, want.Again = 0, true // a retried reservation answers it was made before, and no units
	if err != nil || r2 != want {
		t.Errorf("retry of a success = %+v, %v; want %+v", r2, err, want)
	}
	if got := stockOf(t, rdb, sale, item); got != 3 {
		t.Errorf("stock = %d, want 3 (one unit per attempt)", got)
	}
	if got := stateOf(t, s, sale).Seq; got != seq+1 {
		t.Errorf("counter = %d, want %d", got, seq+1)
	}
	if n := len(inFlightRaw(t, rdb, sale)); n != 2 {
		t.Errorf("in flight = %d, want 2", n)
	}

	// A refusal too: already a buyer.
	b := attempt(t, s, sale, item, 1, "o3", "n3")
	rb1, err := s.Reserve(ctx, b)
	if !errors.Is(err, store.ErrAlreadyBuyer) || rb1.HeldOrder != "o1" {
		t.Fatalf("already a buyer = %+v, %v", rb1, err)
	}
	rb2, err := s.Reserve(ctx, b)
	if !errors.Is(err, store.ErrAlreadyBuyer) || rb2 != rb1 {
		t.Errorf("retry of an already-buyer refusal = %+v, %v; want %+v", rb2, err, rb1)
	}

	// Sold out, and still sold out on retry even after a unit came back: the same answer.
	mustReserve(t, s, attempt(t, s, sale, last, 3, "o4", "n4"))
	c := attempt(t, s, sale, last, 4, "o5", "n5")
	rc1, err := s.Reserve(ctx, c)
	if !errors.Is(err, store.ErrSoldOut) {
		t.Fatalf("sold out: %+v, %v", rc1, err)
	}
	if out := release(t, s, shop.OrderRef{SaleID: sale, ItemID: last, UserID: 3, OrderID: "o4"}, shop.ReleaseUnsold); out != store.Released {
		t.Fatalf("release o4 = %v", out)
	}
	rc2, err := s.Reserve(ctx, c)
	if !errors.Is(err, store.ErrSoldOut) || rc2 != rc1 {
		t.Errorf("retry of a sold-out refusal = %+v, %v; want %+v, ErrSoldOut", rc2, err, rc1)
	}
	if got := stockOf(t, rdb, sale, last); got != 1 {
		t.Errorf("stock after the retry = %d, want 1", got)
	}
	// The same token with another order id is not a retry.
	c.OrderID = "o6"
	if _, err := s.Reserve(ctx, c); !errors.Is(err, store.ErrTokenAlreadyUsed) {
		t.Errorf("same token, other order: %v, want ErrTokenAlreadyUsed", err)
	}
}

// Many shoppers at once against few units: exactly the units are sold, each once, and the stock
// never goes below zero.
func TestReserveConcurrent(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item, units, shoppers = 15, 150, 50, 400
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, units), 0)
	seq0 := stateOf(t, s, sale).Seq
	exp := redisNow(t, s).Add(time.Minute)

	var minSeen atomic.Int64
	minSeen.Store(units)
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() { // watches the stock while the shoppers run
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n, err := rdb.Get(ctx, store.StockKey(sale, item)).Int64(); err == nil && n < minSeen.Load() {
				minSeen.Store(n)
			}
		}
	}()
	var wg sync.WaitGroup
	var ok, soldOut, other atomic.Int64
	seqs := make([]int64, shoppers)
	for i := range shoppers {
		wg.Go(func() {
			r, err := s.Reserve(ctx, store.Attempt{SaleID: sale, ItemID: item, UserID: int64(1000 + i), OrderID: fmt.Sprintf("o%d", i), Nonce: fmt.Sprintf("n%d", i), TokenExpires: exp})
			switch {
			case err == nil:
				ok.Add(1)
				seqs[i] = r.Seq
			case errors.Is(err, store.ErrSoldOut):
				soldOut.Add(1)
			default:
				other.Add(1)
				t.Errorf("shopper %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-watched
	if ok.Load() != units || soldOut.Load() != shoppers-units || other.Load() != 0 {
		t.Errorf("reservations %d, sold out %d, other %d; want %d, %d, 0", ok.Load(), soldOut.Load(), other.Load(), units, shoppers-units)
	}
	if got := stockOf(t, rdb, sale, item); got != 0 {
		t.Errorf("stock = %d, want 0", got)
	}
	if m := minSeen.Load(); m < 0 {
		t.Errorf("stock went down to %d", m)
	}
	if got := stateOf(t, s, sale).Seq; got != seq0+units {
		t.Errorf("counter = %d, want %d", got, seq0+units)
	}
	// Every reservation has its own seq, in flight and as a buyer.
	var got []int64
	for _, q := range seqs {
		if q != 0 {
			got = append(got, q)
		}
	}
	slices.Sort(got)
	for i, q := range got {
		if q != seq0+int64(i)+1 {
			t.Fatalf("seqs = %v, want %d..%d", got, seq0+1, seq0+units)
		}
	}
	if n, b := len(inFlightRaw(t, rdb, sale)), len(buyersOf(t, s, sale)); n != units || b != units {
		t.Errorf("in flight %d, buyers %d; want %d each", n, b, units)
	}
}

// Under the per-sale limit, a shopper racing on every item of the sale gets one unit.
func TestReserveConcurrentPerSaleLimit(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, shoppers = 16, 100
	items := []int64{160, 161, 162}
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, 160, 1000, 161, 1000, 162, 1000), 0)
	exp := redisNow(t, s).Add(time.Minute)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := map[int64]int{}
	for u := range shoppers {
		for _, it := range items {
			wg.Go(func() {
				user := int64(u + 1)
				_, err := s.Reserve(ctx, store.Attempt{SaleID: sale, ItemID: it, UserID: user, OrderID: fmt.Sprintf("o%d-%d", user, it), Nonce: fmt.Sprintf("n%d-%d", user, it), TokenExpires: exp})
				if err != nil && !errors.Is(err, store.ErrAlreadyBuyer) {
					t.Errorf("user %d item %d: %v", user, it, err)
				}
				if err == nil {
					mu.Lock()
					wins[user]++
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(wins) != shoppers {
		t.Errorf("%d shoppers got a unit, want %d", len(wins), shoppers)
	}
	for u, n := range wins {
		if n != 1 {
			t.Errorf("user %d got %d units, want 1", u, n)
		}
	}
	var left int64
	for _, it := range items {
		left += stockOf(t, rdb, sale, it)
	}
	if left != 3000-shoppers {
		t.Errorf("stock = %d in all, want %d", left, 3000-shoppers)
	}
	if n := len(buyersOf(t, s, sale)); n != shoppers {
		t.Errorf("buyers = %d, want %d", n, shoppers)
	}
}

// --- release ---

func TestReleaseUnsold(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item = 20, 200
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, 3), 0)
	mustReserve(t, s, attempt(t, s, sale, item, 1, "o1", "n1"))
	mustReserve(t, s, attempt(t, s, sale, item, 2, "o2", "n2"))

	o1 := shop.OrderRef{SaleID: sale, ItemID: item, UserID: 1, OrderID: "o1"}
	if out := release(t, s, o1, shop.ReleaseUnsold); out != store.Released {
		t.Fatalf("release unsold = %v, want Released", out)
	}
	if got := stockOf(t, rdb, sale, item); got != 2 {
		t.Errorf("stock = %d, want 2", got)
	}
	if _, ok := buyersOf(t, s, sale)["1"]; ok {
		t.Errorf("the shopper is still a buyer")
	}
	if _, ok := inFlightRaw(t, rdb, sale)["o1"]; ok {
		t.Errorf("o1 still in flight")
	}
	if !isGone(t, s, sale, "o1") {
		t.Errorf("no tombstone for o1")
	}
	pttl, err := rdb.PTTL(ctx, store.GoneKey(sale)).Result()
	if err != nil || pttl < 29*24*time.Hour || pttl > 30*24*time.Hour {
		t.Errorf("tombstones ttl = %v (%v), want 30 days", pttl, err)
	}
	if out := release(t, s, o1, shop.ReleaseUnsold); out != store.NotInFlight {
		t.Errorf("second release = %v, want NotInFlight", out)
	}
	if got := stockOf(t, rdb, sale, item); got != 2 {
		t.Errorf("stock after the second release = %d, want 2", got)
	}
	// The shopper may buy again.
	mustReserve(t, s, attempt(t, s, sale, item, 1, "o1b", "n1b"))

	// Claimed by the writer: it will be written, not released.
	if got := claim(t, s, sale, store.ClaimItem{OrderID: "o2", Seq: 1}); !slices.Equal(got, []int{store.ClaimClaimed}) {
		t.Fatalf("claim o2 = %v", got)
	}
	o2 := shop.OrderRef{SaleID: sale, ItemID: item, UserID: 2, OrderID: "o2"}
	if out := release(t, s, o2, shop.ReleaseUnsold); out != store.Claimed {
		t.Errorf("release unsold of a claimed order = %v, want Claimed", out)
	}
	if got := stockOf(t, rdb, sale, item); got != 1 {
		t.Errorf("stock = %d, want 1", got)
	}
	if buyersOf(t, s, sale)["2"] != "o2" {
		t.Errorf("the claimed order's buyer was freed")
	}
	if e, ok, _ := s.InFlightOrder(ctx, sale, "o2"); !ok || !e.Claimed {
		t.Errorf("claimed order in flight = %+v, %v; want claimed", e, ok)
	}
	if isGone(t, s, sale, "o2") {
		t.Errorf("a refused release left a tombstone")
	}
}

func TestReleaseOps(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	const sale, item = 21, 210
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, 10), 0)
	cases := []struct {
		op        shop.ReleaseOp
		unitBack  bool
		buyerKept bool
		tombstone bool
	}{
		{shop.ReleaseRefused, true, false, true},
		{shop.ReleaseNoRoom, false, false, false},
		{shop.ReleaseDuplicate, true, true, true},
	}
	for i, c := range cases {
		user := int64(i + 1)
		order := "o-" + string(c.op)
		mustReserve(t, s, attempt(t, s, sale, item, user, order, "n-"+string(c.op)))
		claim(t, s, sale, store.ClaimItem{OrderID: order, Seq: 1}) // the writer releases claimed orders
		before := stockOf(t, rdb, sale, item)
		o := shop.OrderRef{SaleID: sale, ItemID: item, UserID: user, OrderID: order}
		if out := release(t, s, o, c.op); out != store.Released {
			t.Errorf("%s: release = %v, want Released", c.op, out)
		}
		want := before
		if c.unitBack {
			want++
		}
		if got := stockOf(t, rdb, sale, item); got != want {
			t.Errorf("%s: stock = %d, want %d", c.op, got, want)
		}
		if got := buyersOf(t, s, sale)[strconv.FormatInt(user, 10)] == order; got != c.buyerKept {
			t.Errorf("%s: buyer kept = %v, want %v", c.op, got, c.buyerKept)
		}
		if got := isGone(t, s, sale, order); got != c.tombstone {
			t.Errorf("%s: tombstone = %v, want %v", c.op, got, c.tombstone)
		}
		if _, ok := inFlightRaw(t, rdb, sale)[order]; ok {
			t.Errorf("%s: still in flight", c.op)
		}
		// Once only.
		if out := release(t, s, o, c.op); out != store.NotInFlight {
			t.Errorf("%s: second release = %v, want NotInFlight", c.op, out)
		}
		if got := stockOf(t, rdb, sale, item); got != want {
			t.Errorf("%s: stock after the second release = %d, want %d", c.op, got, want)
		}
		// A late unsold release (say, the orphan sweep) cannot give it back again.
		if out := release(t, s, o, shop.ReleaseUnsold); out != store.NotInFlight {
			t.Errorf("%s: unsold after it = %v, want NotInFlight", c.op, out)
		}
		if got := stockOf(t, rdb, sale, item); got != want {
			t.Errorf("%s: stock after a late unsold = %d, want %d", c.op, got, want)
		}
	}
	// Releasing what was never reserved changes nothing.
	before := allKeys(t, rdb)
	for _, op := range []shop.ReleaseOp{shop.ReleaseUnsold, shop.ReleaseRefused, shop.ReleaseNoRoom, shop.ReleaseDuplicate} {
		if out := release(t, s, shop.OrderRef{SaleID: sale, ItemID: item, UserID: 99, OrderID: "never"}, op); out != store.NotInFlight {
			t.Errorf("%s of an unknown order = %v, want NotInFlight", op, out)
		}
	}
	if got := stockOf(t, rdb, sale, item); got != 9 {
		t.Errorf("stock = %d, want 9", got)
	}
	if isGone(t, s, sale, "never") || !slices.Equal(allKeys(t, rdb), before) {
		t.Errorf("releases of an unknown order changed the keys")
	}
}

// An order Postgres expired or cancelled is no longer in flight: its unit goes back once.
func TestReleaseReturned(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item = 22, 220
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerItem, item, 3), 0)
	r := mustReserve(t, s, attempt(t, s, sale, item, 1, "o1", "n1"))
	claim(t, s, sale, store.ClaimItem{OrderID: "o1", Seq: r.Seq})
	if err := s.Settle(ctx, map[int64][]string{sale: {"o1"}, 999: nil}); err != nil {
		t.Fatal(err)
	}
	if n := len(inFlightRaw(t, rdb, sale)); n != 0 {
		t.Fatalf("in flight after settle = %d, want 0", n)
	}
	if got := stockOf(t, rdb, sale, item); got != 2 {
		t.Fatalf("stock after settle = %d, want 2 (settling sells)", got)
	}

	o := shop.OrderRef{SaleID: sale, ItemID: item, UserID: 1, OrderID: "o1"}
	if out := release(t, s, o, shop.ReturnUnit); out != store.Released {
		t.Fatalf("returned = %v, want Released", out)
	}
	if got := stockOf(t, rdb, sale, item); got != 3 {
		t.Errorf("stock = %d, want 3", got)
	}
	if n := len(buyersOf(t, s, sale)); n != 0 {
		t.Errorf("buyers = %v, want none (per-item member freed)", buyersOf(t, s, sale))
	}
	if !isGone(t, s, sale, "o1") {
		t.Errorf("no tombstone")
	}
	if out := release(t, s, o, shop.ReturnUnit); out != store.NotInFlight {
		t.Errorf("second return = %v, want NotInFlight", out)
	}
	if got := stockOf(t, rdb, sale, item); got != 3 {
		t.Errorf("stock after the second return = %d, want 3", got)
	}

	// On a sale Redis does not hold: nothing done, retry after the rebuild (which counts the
	// unit and takes the return as a tombstone), and nothing is created.
	const absent = 23
	if out := release(t, s, shop.OrderRef{SaleID: absent, ItemID: item, UserID: 1, OrderID: "x"}, shop.ReturnUnit); out != store.RetryLater {
		t.Errorf("returned on a sale not loaded = %v, want RetryLater", out)
	}
	for _, k := range allKeys(t, rdb) {
		if strings.Contains(k, "{sale:23}") {
			t.Errorf("a return on a sale not loaded created %s", k)
		}
	}
}

// A release frees the shopper only if the buyer entry names the released order: the shopper may
// hold another, live order.
func TestReleaseKeepsAnotherOrdersBuyer(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item = 24, 240
	snap := snapshot(t, s, sale, shop.LimitPerSale, item, 5)
	snap.Buyers = map[string]string{"5": "live"}
	mustLoad(t, s, snap, 0)

	// An old order of the shopper expires in Postgres; their live order stays.
	if out := release(t, s, shop.OrderRef{SaleID: sale, ItemID: item, UserID: 5, OrderID: "old"}, shop.ReturnUnit); out != store.Released {
		t.Fatalf("returned = %v", out)
	}
	if got := buyersOf(t, s, sale)["5"]; got != "live" {
		t.Errorf("buyer after returning another order = %q, want live", got)
	}
	if got := stockOf(t, rdb, sale, item); got != 6 {
		t.Errorf("stock = %d, want 6", got)
	}

	// A reservation whose buyer entry names another order (a rebuild put the live one there).
	mustReserve(t, s, attempt(t, s, sale, item, 6, "o6", "n6"))
	if err := rdb.HSet(ctx, store.BuyersKey(sale), "6", "other").Err(); err != nil {
		t.Fatal(err)
	}
	for _, op := range []shop.ReleaseOp{shop.ReleaseUnsold} {
		if out := release(t, s, shop.OrderRef{SaleID: sale, ItemID: item, UserID: 6, OrderID: "o6"}, op); out != store.Released {
			t.Fatalf("%s = %v", op, out)
		}
	}
	if got := buyersOf(t, s, sale)["6"]; got != "other" {
		t.Errorf("buyer after an unsold release of another order = %q, want other", got)
	}
	mustReserve(t, s, attempt(t, s, sale, item, 7, "o7", "n7"))
	if err := rdb.HSet(ctx, store.BuyersKey(sale), "7", "other7").Err(); err != nil {
		t.Fatal(err)
	}
	if out := release(t, s, shop.OrderRef{SaleID: sale, ItemID: item, UserID: 7, OrderID: "o7"}, shop.ReleaseRefused); out != store.Released {
		t.Fatalf("refused = %v", out)
	}
	if got := buyersOf(t, s, sale)["7"]; got != "other7" {
		t.Errorf("buyer after a refused release of another order = %q, want other7", got)
	}
}

// A release never invents a missing stock key (it would reopen selling at one unit).
func TestReleaseStockKeyMissing(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item = 25, 250
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, 1), 0)
	mustReserve(t, s, attempt(t, s, sale, item, 1, "o1", "n1"))
	if err := rdb.Del(ctx, store.StockKey(sale, item)).Err(); err != nil {
		t.Fatal(err)
	}
	if out := release(t, s, shop.OrderRef{SaleID: sale, ItemID: item, UserID: 1, OrderID: "o1"}, shop.ReleaseUnsold); out != store.Released {
		t.Errorf("release = %v, want Released", out)
	}
	if exists(t, rdb, store.StockKey(sale, item)) {
		t.Errorf("release created the missing stock key")
	}
	if out := release(t, s, shop.OrderRef{SaleID: sale, ItemID: item, UserID: 2, OrderID: "o2"}, shop.ReturnUnit); out != store.Released {
		t.Errorf("returned = %v, want Released", out)
	}
	if exists(t, rdb, store.StockKey(sale, item)) {
		t.Errorf("a return created the missing stock key")
	}
}

// --- claim ---

func TestClaim(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item = 30, 300
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, 5), 0)
	seqs := map[string]int64{}
	for i, o := range []string{"a", "b", "c"} {
		seqs[o] = mustReserve(t, s, attempt(t, s, sale, item, int64(i+1), o, "n"+o)).Seq
	}
	release(t, s, shop.OrderRef{SaleID: sale, ItemID: item, UserID: 2, OrderID: "b"}, shop.ReleaseUnsold)
	raw := inFlightRaw(t, rdb, sale)

	got := claim(t, s, sale,
		store.ClaimItem{OrderID: "a", Seq: seqs["a"]},
		store.ClaimItem{OrderID: "b", Seq: seqs["b"]},
		store.ClaimItem{OrderID: "never", Seq: 1},
		store.ClaimItem{OrderID: "c", Seq: seqs["c"]})
	if want := []int{store.ClaimClaimed, store.ClaimGone, store.ClaimUnknown, store.ClaimClaimed}; !slices.Equal(got, want) {
		t.Errorf("claim = %v, want %v", got, want)
	}
	after := inFlightRaw(t, rdb, sale)
	if want := map[string]string{"a": raw["a"] + ":c", "c": raw["c"] + ":c"}; !maps.Equal(after, want) {
		t.Errorf("in flight after claim = %v, want %v", after, want)
	}
	// Claiming twice is harmless and does not stack the mark.
	if got := claim(t, s, sale, store.ClaimItem{OrderID: "a", Seq: seqs["a"]}); !slices.Equal(got, []int{store.ClaimClaimed}) {
		t.Errorf("second claim = %v", got)
	}
	if v := inFlightRaw(t, rdb, sale)["a"]; v != raw["a"]+":c" {
		t.Errorf("in-flight value after a second claim = %q", v)
	}
	list, err := s.InFlight(ctx, sale)
	if err != nil || len(list) != 2 {
		t.Fatalf("InFlight = %v, %v", list, err)
	}
	for _, e := range list {
		if !e.Claimed || e.Seq != seqs[e.OrderID] || e.ItemID != item {
			t.Errorf("in flight %+v: want claimed, seq %d", e, seqs[e.OrderID])
		}
	}
	if got := claim(t, s, sale); len(got) != 0 {
		t.Errorf("claim of nothing = %v", got)
	}
	if st := stateOf(t, s, sale); st.Lost {
		t.Errorf("claims at or below the counter marked the sale lost")
	}
	if got := stockOf(t, rdb, sale, item); got != 3 {
		t.Errorf("stock = %d, want 3", got)
	}
}

func TestClaimSeqAboveCounter(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	const sale, item = 31, 310
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, 5), 0)
	r := mustReserve(t, s, attempt(t, s, sale, item, 1, "a", "na"))
	// A batch that holds an order Redis forgot, with a seq it never reached.
	got := claim(t, s, sale, store.ClaimItem{OrderID: "a", Seq: r.Seq}, store.ClaimItem{OrderID: "ghost", Seq: r.Seq + 1})
	if want := []int{store.ClaimClaimed, store.ClaimUnknown}; !slices.Equal(got, want) {
		t.Errorf("claim = %v, want %v", got, want)
	}
	if st := stateOf(t, s, sale); !st.Lost || st.Seq != r.Seq {
		t.Errorf("state = %+v; want lost at seq %d", st, r.Seq)
	}
	if _, err := s.Reserve(context.Background(), attempt(t, s, sale, item, 2, "b", "nb")); !errors.Is(err, store.ErrStockUnknown) {
		t.Errorf("reserve after the claim found a loss: %v, want ErrStockUnknown", err)
	}
	if got := stockOf(t, rdb, sale, item); got != 4 {
		t.Errorf("stock = %d, want 4", got)
	}
}

func TestClaimNotLoaded(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	got := claim(t, s, 32, store.ClaimItem{OrderID: "x", Seq: 5}, store.ClaimItem{OrderID: "y", Seq: 1 << 40})
	if want := []int{store.ClaimUnknown, store.ClaimUnknown}; !slices.Equal(got, want) {
		t.Errorf("claim on a sale not loaded = %v, want %v", got, want)
	}
	if keys := allKeys(t, rdb); len(keys) != 0 {
		t.Errorf("claim on a sale not loaded created %v", keys)
	}
}

// --- load ---

func TestLoad(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, a, b = 40, 400, 401
	// Leftovers of a lost sale are replaced, not merged.
	if err := rdb.HSet(ctx, store.BuyersKey(sale), "999", "stale").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, store.InFlightKey(sale), "stale", "400:999:1:1").Err(); err != nil {
		t.Fatal(err)
	}
	snap := snapshot(t, s, sale, shop.LimitPerItem, a, 7, b, 0)
	snap.Epoch, snap.MaxSeq = 3, 42
	snap.Buyers = map[string]string{"400:1": "p1", "400:2": "p2"}
	snap.Gone = []string{"g1", "g2"}
	before := redisNow(t, s).Truncate(time.Millisecond)
	mustLoad(t, s, snap, 0)
	after := redisNow(t, s)

	st := stateOf(t, s, sale)
	if !st.Loaded || st.Lost || st.Epoch != 3 || st.Limit != shop.LimitPerItem || st.Seq <= 42 {
		t.Errorf("state = %+v; want loaded, healthy, epoch 3, per-item, seq above 42", st)
	}
	if st.LoadedAt.Before(before) || st.LoadedAt.After(after) {
		t.Errorf("loaded at %v, want Redis's clock in [%v, %v]", st.LoadedAt, before, after)
	}
	for f, want := range map[string]string{
		"starts":   strconv.FormatInt(snap.StartsAt.UnixMilli(), 10),
		"ends":     strconv.FormatInt(snap.EndsAt.UnixMilli(), 10),
		"tokfloor": "0",
		"fence":    "0",
		"lost":     "",
	} {
		if got := metaField(t, rdb, sale, f); got != want {
			t.Errorf("meta %s = %q, want %q", f, got, want)
		}
	}
	levels, err := s.Levels(ctx, sale, []int64{a, b, 402})
	if want := []int64{7, 0, -1}; err != nil || !slices.Equal(levels, want) {
		t.Errorf("levels = %v, %v; want %v", levels, err, want)
	}
	if got := buyersOf(t, s, sale); !maps.Equal(got, snap.Buyers) {
		t.Errorf("buyers = %v, want %v", got, snap.Buyers)
	}
	gone, err := s.AreGone(ctx, sale, []string{"g1", "g2", "g3"})
	if err != nil || !slices.Equal(gone, []bool{true, true, false}) {
		t.Errorf("gone = %v, %v", gone, err)
	}
	if pttl, _ := rdb.PTTL(ctx, store.GoneKey(sale)).Result(); pttl < 29*24*time.Hour {
		t.Errorf("tombstones ttl = %v, want 30 days", pttl)
	}
	if exists(t, rdb, store.InFlightKey(sale)) {
		t.Errorf("stale in-flight entries survived the load")
	}
	if got, err := s.AreGone(ctx, sale, nil); err != nil || len(got) != 0 {
		t.Errorf("AreGone(nil) = %v, %v", got, err)
	}
	if got, err := s.Levels(ctx, sale, nil); err != nil || got != nil {
		t.Errorf("Levels(nil) = %v, %v", got, err)
	}

	// The loaded buyers hold their units, per item.
	if r, err := s.Reserve(ctx, attempt(t, s, sale, a, 1, "o", "n1")); !errors.Is(err, store.ErrAlreadyBuyer) || r.HeldOrder != "p1" {
		t.Errorf("a loaded buyer reserves again: %+v, %v", r, err)
	}
	mustReserve(t, s, attempt(t, s, sale, a, 3, "o3", "n3"))

	// Loaded and healthy: a load (another instance, or a newer epoch) changes nothing.
	seq := stateOf(t, s, sale).Seq
	for _, epoch := range []int64{3, 4} {
		other := snapshot(t, s, sale, shop.LimitPerSale, a, 100)
		other.Epoch, other.MaxSeq = epoch, 1<<40
		if ok, err := s.Load(ctx, other, time.Minute); err != nil || ok {
			t.Errorf("load of a healthy sale (epoch %d) = %v, %v; want nothing done", epoch, ok, err)
		}
	}
	if got := stockOf(t, rdb, sale, a); got != 6 {
		t.Errorf("stock after the refused loads = %d, want 6", got)
	}
	if st := stateOf(t, s, sale); st.Seq != seq || st.Epoch != 3 || st.Limit != shop.LimitPerItem {
		t.Errorf("state after the refused loads = %+v", st)
	}
	if n := len(inFlightRaw(t, rdb, sale)); n != 1 {
		t.Errorf("in flight after the refused loads = %d, want 1", n)
	}
}

// After a loss, only a newer epoch rebuilds; the counter jumps past anything issued, in-flight is
// cleared, and the reconciliation's fence survives.
func TestLoadAfterLost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		maxSeq int64
	}{
		{"postgres behind redis", 0},
		{"postgres ahead of redis", 5_000_000_000},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, rdb := newStock(t)
			ctx := context.Background()
			const sale, item = 41, 410
			snap := snapshot(t, s, sale, shop.LimitPerSale, item, 5)
			snap.Epoch = 3
			mustLoad(t, s, snap, 0)
			mustReserve(t, s, attempt(t, s, sale, item, 1, "o1", "n1"))
			r := mustReserve(t, s, attempt(t, s, sale, item, 2, "o2", "n2"))
			if ok, err := s.MarkLost(ctx, sale, 7, ""); !ok || err != nil {
				t.Fatalf("mark lost = %v, %v", ok, err)
			}
			old := stateOf(t, s, sale)

			for _, epoch := range []int64{2, 3} {
				stale := snap
				stale.Epoch = epoch
				if ok, err := s.Load(ctx, stale, 0); err != nil || ok {
					t.Errorf("load of epoch %d over a lost epoch 3 = %v, %v; want nothing done", epoch, ok, err)
				}
			}
			if st := stateOf(t, s, sale); !st.Lost || st.Epoch != 3 {
				t.Errorf("state after the refused loads = %+v; want lost, epoch 3", st)
			}

			snap.Epoch, snap.MaxSeq = 4, c.maxSeq
			snap.Left = map[int64]int64{item: 4}
			snap.Buyers = map[string]string{"1": "o1"}
			snap.Gone = []string{"o2"}
			mustLoad(t, s, snap, 0)
			st := stateOf(t, s, sale)
			if !st.Loaded || st.Lost || st.Epoch != 4 {
				t.Errorf("state after the rebuild = %+v; want loaded, healthy, epoch 4", st)
			}
			if st.Seq <= max(old.Seq, c.maxSeq) {
				t.Errorf("counter after the rebuild = %d, want above %d", st.Seq, max(old.Seq, c.maxSeq))
			}
			if n := len(inFlightRaw(t, rdb, sale)); n != 0 {
				t.Errorf("in flight after the rebuild = %d, want 0", n)
			}
			if got := metaField(t, rdb, sale, "fence"); got != "7" {
				t.Errorf("fence after the rebuild = %q, want 7", got)
			}
			if ok, err := s.MarkLost(ctx, sale, 6, ""); ok || err != nil {
				t.Errorf("mark lost with an older fence after the rebuild = %v, %v; want refused", ok, err)
			}
			if got := stockOf(t, rdb, sale, item); got != 4 {
				t.Errorf("stock = %d, want 4", got)
			}
			// No instance takes the rebuild for a loss: floors from before it (or from Postgres) pass.
			a := attempt(t, s, sale, item, 3, "o3", "n3")
			a.Floor = max(r.Seq, c.maxSeq)
			if r3 := mustReserve(t, s, a); r3.Seq != st.Seq+1 {
				t.Errorf("seq after the rebuild = %d, want %d", r3.Seq, st.Seq+1)
			}
			// The order whose unit Postgres gave back is tombstoned: a late claim does not write it.
			if got := claim(t, s, sale, store.ClaimItem{OrderID: "o2", Seq: r.Seq}); !slices.Equal(got, []int{store.ClaimGone}) {
				t.Errorf("claim of a returned order after the rebuild = %v, want gone", got)
			}
			if st := stateOf(t, s, sale); st.Lost {
				t.Errorf("a claim of an old seq marked the rebuilt sale lost")
			}
		})
	}
}

// A sale whose keys are gone (Redis wiped) loads whatever the epoch.
func TestLoadAfterWipe(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item = 42, 420
	snap := snapshot(t, s, sale, shop.LimitPerSale, item, 5)
	snap.Epoch = 5
	mustLoad(t, s, snap, 0)
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	snap.Epoch, snap.MaxSeq = 1, 77
	mustLoad(t, s, snap, 0)
	if st := stateOf(t, s, sale); st.Epoch != 1 || st.Seq <= 77 || st.Lost {
		t.Errorf("state = %+v; want epoch 1, seq above 77", st)
	}
}

// Large buyer and tombstone lists go in chunks (Lua's unpack returns fewer than 8000 values, the
// C stack limit of Redis's Lua 5.1): every one must land. A chunk of 8000 values (or even 7998:
// the stack holds the call's other arguments too) fails with "too many results to unpack", so a
// sale with that many buyers could never be loaded or rebuilt.
func TestLoadLarge(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	for i, n := range []int{3998, 3999, 4000, 4001, 5000, 12345} {
		sale := int64(100 + i)
		snap := snapshot(t, s, sale, shop.LimitPerSale, 1, 3)
		for u := 1; u <= n; u++ {
			snap.Buyers[strconv.Itoa(u)] = fmt.Sprintf("o%d", u)
			snap.Gone = append(snap.Gone, fmt.Sprintf("g%d", u))
		}
		ok, err := s.Load(ctx, snap, 0)
		if err != nil || !ok {
			t.Errorf("load of %d buyers and tombstones = %v, %v; want loaded", n, ok, err)
			continue
		}
		if got, _ := rdb.HLen(ctx, store.BuyersKey(sale)).Result(); got != int64(n) {
			t.Errorf("%d buyers loaded as %d", n, got)
		}
		if got, _ := rdb.SCard(ctx, store.GoneKey(sale)).Result(); got != int64(n) {
			t.Errorf("%d tombstones loaded as %d", n, got)
		}
		r, err := s.Reserve(ctx, attempt(t, s, sale, 1, int64(n), "x", "nx"))
		if !errors.Is(err, store.ErrAlreadyBuyer) || r.HeldOrder != fmt.Sprintf("o%d", n) {
			t.Errorf("%d buyers: the last buyer reserves again: %+v, %v", n, r, err)
		}
	}
}

// --- marklost ---

func TestMarkLost(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	mark := func(sale, fence int64, atSeq string) bool {
		t.Helper()
		ok, err := s.MarkLost(ctx, sale, fence, atSeq)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	// Not loaded: nothing to mark, nothing created.
	if mark(50, 0, "") || mark(50, 3, "") {
		t.Errorf("mark lost of a sale not loaded = true")
	}
	if keys := allKeys(t, rdb); len(keys) != 0 {
		t.Errorf("mark lost of a sale not loaded created %v", keys)
	}

	// Fences: a newer lease holder's mark wins; an older one is refused.
	const sale, item = 51, 510
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, 5), 0)
	if !mark(sale, 5, "") {
		t.Fatalf("mark with fence 5 refused")
	}
	if !stateOf(t, s, sale).Lost {
		t.Errorf("not lost after the mark")
	}
	if mark(sale, 3, "") {
		t.Errorf("mark with fence 3 after fence 5 = true, want refused")
	}
	if got := metaField(t, rdb, sale, "fence"); got != "5" {
		t.Errorf("fence = %q, want 5", got)
	}
	if !mark(sale, 5, "") {
		t.Errorf("the same holder marks again: refused")
	}
	if !mark(sale, 0, "") {
		t.Errorf("a mark outside the lease (fence 0) refused")
	}
	if got := metaField(t, rdb, sale, "fence"); got != "5" {
		t.Errorf("fence after a mark outside the lease = %q, want 5", got)
	}
	if !mark(sale, 9, "") || metaField(t, rdb, sale, "fence") != "9" {
		t.Errorf("mark with a newer fence: refused or not recorded")
	}

	// atSeq: a sale that moved on since the decision is left alone.
	const moving = 52
	mustLoad(t, s, snapshot(t, s, moving, shop.LimitPerSale, item, 5), 0)
	st := stateOf(t, s, moving)
	mustReserve(t, s, attempt(t, s, moving, item, 1, "o1", "n1"))
	if mark(moving, 0, st.SeqRaw) {
		t.Errorf("mark at a seq the sale moved on from = true")
	}
	if stateOf(t, s, moving).Lost {
		t.Errorf("the sale was marked lost at a stale seq")
	}
	if !mark(moving, 0, stateOf(t, s, moving).SeqRaw) {
		t.Errorf("mark at the current seq refused")
	}
	if !stateOf(t, s, moving).Lost {
		t.Errorf("not lost after the mark at the current seq")
	}
}

// --- reads ---

func TestView(t *testing.T) {
	t.Parallel()
	s, _ := newStock(t)
	ctx := context.Background()
	const sale, a, b = 60, 600, 601
	snap := snapshot(t, s, sale, shop.LimitPerSale, a, 3, b, 1)
	snap.Epoch = 2
	snap.Buyers = map[string]string{"9": "p9"}
	snap.Gone = []string{"g0"}
	mustLoad(t, s, snap, 0)
	r1 := mustReserve(t, s, attempt(t, s, sale, a, 1, "o1", "n1"))
	mustReserve(t, s, attempt(t, s, sale, b, 2, "o2", "n2"))
	release(t, s, shop.OrderRef{SaleID: sale, ItemID: b, UserID: 2, OrderID: "o2"}, shop.ReleaseUnsold)
	claim(t, s, sale, store.ClaimItem{OrderID: "o1", Seq: r1.Seq})

	before := redisNow(t, s)
	v, err := s.View(ctx, sale, []int64{a, b, 602}, []string{"o1", "o2", "g0"})
	if err != nil {
		t.Fatal(err)
	}
	after := redisNow(t, s)
	st := stateOf(t, s, sale)
	if v.State != st || !v.State.Loaded || v.State.Epoch != 2 || v.State.Seq != r1.Seq+1 {
		t.Errorf("view state = %+v, want %+v", v.State, st)
	}
	if want := map[int64]int64{a: 2, b: 1, 602: -1}; !maps.Equal(v.Levels, want) {
		t.Errorf("view levels = %v, want %v", v.Levels, want)
	}
	if v.Buyers != 2 { // p9 loaded, o1 reserved; o2's shopper was freed
		t.Errorf("view buyers = %d, want 2", v.Buyers)
	}
	if want := []store.InFlightEntry{{OrderID: "o1", ItemID: a, UserID: 1, ReservedAt: r1.ReservedAt, Seq: r1.Seq, Claimed: true}}; !slices.Equal(v.InFlight, want) {
		t.Errorf("view in flight = %+v, want %+v", v.InFlight, want)
	}
	if want := map[string]bool{"o1": false, "o2": true, "g0": true}; !maps.Equal(v.Gone, want) {
		t.Errorf("view gone = %v, want %v", v.Gone, want)
	}
	if v.Now.Before(before) || v.Now.After(after) {
		t.Errorf("view time %v, want Redis's clock in [%v, %v]", v.Now, before, after)
	}

	// A sale Redis does not hold reads as not loaded, every level missing.
	v, err = s.View(ctx, 61, []int64{a}, nil)
	if err != nil || v.State.Loaded || v.Levels[a] != -1 || v.Buyers != 0 || len(v.InFlight) != 0 || len(v.Gone) != 0 {
		t.Errorf("view of a sale not loaded = %+v, %v", v, err)
	}
	if st := stateOf(t, s, 61); st != (store.SaleState{}) {
		t.Errorf("state of a sale not loaded = %+v", st)
	}
}

func TestLevels(t *testing.T) {
	t.Parallel()
	s, _ := newStock(t)
	ctx := context.Background()
	const sale = 62
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, 1, 7, 2, 0), 0)
	levels, err := s.Levels(ctx, sale, []int64{3, 1, 2, 4})
	if want := []int64{-1, 7, 0, -1}; err != nil || !slices.Equal(levels, want) {
		t.Errorf("levels = %v, %v; want %v", levels, err, want)
	}
	// Another sale's item of the same id is another key.
	levels, err = s.Levels(ctx, sale+1, []int64{1})
	if want := []int64{-1}; err != nil || !slices.Equal(levels, want) {
		t.Errorf("levels of another sale = %v, %v; want %v", levels, err, want)
	}
}

// The scripts run by EVALSHA; after SCRIPT FLUSH (a restarted or failed-over Redis) they must
// fall back to EVAL and keep working.
func TestScriptsSurviveScriptFlush(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item = 63, 630
	flush := func() {
		t.Helper()
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	snap := snapshot(t, s, sale, shop.LimitPerSale, item, 3)
	flush()
	mustLoad(t, s, snap, 0)
	flush()
	r := mustReserve(t, s, attempt(t, s, sale, item, 1, "o1", "n1"))
	flush()
	if got := claim(t, s, sale, store.ClaimItem{OrderID: "o1", Seq: r.Seq}); !slices.Equal(got, []int{1}) {
		t.Errorf("claim after SCRIPT FLUSH = %v", got)
	}
	flush()
	if out := release(t, s, shop.OrderRef{SaleID: sale, ItemID: item, UserID: 1, OrderID: "o1"}, shop.ReleaseRefused); out != store.Released {
		t.Errorf("release after SCRIPT FLUSH = %v", out)
	}
	flush()
	if ok, err := s.MarkLost(ctx, sale, 0, ""); !ok || err != nil {
		t.Errorf("mark lost after SCRIPT FLUSH = %v, %v", ok, err)
	}
	if got := stockOf(t, rdb, sale, item); got != 3 {
		t.Errorf("stock = %d, want 3", got)
	}
}

// --- Redis Cluster slots ---

// Every key a script touches for one sale hashes to one cluster slot, so the scripts run on
// Redis Cluster; and every key the scripts create carries the sale's tag.
func TestKeysShareOneSlot(t *testing.T) {
	t.Parallel()
	if got, want := testenv.KeySlot("123456789"), 0x31C3%16384; got != want {
		t.Fatalf("slot of the crc16 check value = %d, want %d", got, want) // from the Redis Cluster spec
	}
	if got, want := testenv.KeySlot("{user1000}.following"), testenv.KeySlot("user1000"); got != want {
		t.Fatalf("hash tag slot = %d, want %d", got, want)
	}
	slots := map[int]bool{}
	for _, sale := range []int64{1, 7, 42, 1000, 65535, 4294967295} {
		tag := "{sale:" + strconv.FormatInt(sale, 10) + "}"
		want := testenv.KeySlot("sale:" + strconv.FormatInt(sale, 10))
		keys := []string{store.MetaKey(sale), store.BuyersKey(sale), store.InFlightKey(sale), store.GoneKey(sale), tokenKey(sale, "0123456789abcdef")}
		for _, item := range []int64{1, 99, 123456789} {
			keys = append(keys, store.StockKey(sale, item))
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, tag) {
				t.Errorf("key %q lacks the hash tag %s", k, tag)
			}
			if got := testenv.KeySlot(k); got != want {
				t.Errorf("key %q in slot %d, want %d", k, got, want)
			}
		}
		slots[want] = true
	}
	if len(slots) < 2 {
		t.Errorf("every sale hashes to the same slot %v: the tag does not spread sales", slots)
	}

	// Every key the scripts create lies in the sale's slot.
	s, rdb := newStock(t)
	ctx := context.Background()
	for _, sale := range []int64{70, 71} {
		snap := snapshot(t, s, sale, shop.LimitPerItem, 1, 5, 2, 5)
		snap.Buyers = map[string]string{"1:9": "p9"}
		snap.Gone = []string{"g"}
		mustLoad(t, s, snap, 0)
		r := mustReserve(t, s, attempt(t, s, sale, 1, 1, "o1", "n1"))
		mustReserve(t, s, attempt(t, s, sale, 2, 2, "o2", "n2"))
		if _, err := s.Reserve(ctx, attempt(t, s, sale, 1, 9, "o3", "n3")); !errors.Is(err, store.ErrAlreadyBuyer) {
			t.Fatal(err)
		}
		claim(t, s, sale, store.ClaimItem{OrderID: "o1", Seq: r.Seq})
		release(t, s, shop.OrderRef{SaleID: sale, ItemID: 2, UserID: 2, OrderID: "o2"}, shop.ReleaseUnsold)
		release(t, s, shop.OrderRef{SaleID: sale, ItemID: 1, UserID: 9, OrderID: "p9"}, shop.ReturnUnit)
		if ok, err := s.MarkLost(ctx, sale, 1, ""); !ok || err != nil {
			t.Fatal(ok, err)
		}
		snap.Epoch = 2
		mustLoad(t, s, snap, time.Minute)
	}
	keys := allKeys(t, rdb)
	want := []string{
		"{sale:70}:buyers", "{sale:70}:gone", "{sale:70}:meta", "{sale:70}:stock:1", "{sale:70}:stock:2",
		"{sale:70}:tok:n1", "{sale:70}:tok:n2", "{sale:70}:tok:n3",
		"{sale:71}:buyers", "{sale:71}:gone", "{sale:71}:meta", "{sale:71}:stock:1", "{sale:71}:stock:2",
		"{sale:71}:tok:n1", "{sale:71}:tok:n2", "{sale:71}:tok:n3",
	}
	if !slices.Equal(keys, want) {
		t.Errorf("keys = %v, want %v", keys, want)
	}
	for _, k := range keys {
		sale := k[len("{sale:"):strings.IndexByte(k, '}')]
		if got, want := testenv.KeySlot(k), testenv.KeySlot("sale:"+sale); got != want {
			t.Errorf("script created %q in slot %d, want the sale's slot %d", k, got, want)
		}
	}
}

// --- adjust (a merchant's edit) and pause ---

func TestAdjustStockMetaAndPause(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, a, b, added = 90, 1, 2, 3

	// Not loaded: nothing is done, nothing is created (the load reads Postgres).
	res, err := s.Adjust(ctx, store.Adjustment{SaleID: sale, Meta: map[string]string{"paused": "1"},
		Stock: []store.StockAdjust{{ItemID: a, Delta: 5}}})
	if err != nil || res.Applied {
		t.Fatalf("adjust of a sale not loaded = %+v, %v; want not applied", res, err)
	}
	if keys := allKeys(t, rdb); len(keys) != 0 {
		t.Fatalf("adjust of a sale not loaded created %v", keys)
	}

	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, a, 3, b, 2), 0)
	mustReserve(t, s, attempt(t, s, sale, a, 7, "o1", "n1")) // a: 2 left, one held in flight

	// A decrease past the units left (the held one included) changes nothing at all.
	n := int64(4)
	res, err = s.Adjust(ctx, store.Adjustment{SaleID: sale, Meta: map[string]string{"limit": shop.LimitPerItem},
		Stock: []store.StockAdjust{{ItemID: b, Delta: 1}, {ItemID: a, Delta: -3}, {ItemID: added, Initial: &n}}})
	if !errors.Is(err, store.ErrAdjustTooLow) || res.ItemID != a || res.Left != 2 {
		t.Fatalf("adjust below the units left = %+v, %v; want ErrAdjustTooLow for item %d with 2 left", res, err, a)
	}
	if got := stockOf(t, rdb, sale, b); got != 2 {
		t.Errorf("refused adjust moved item b to %d, want 2", got)
	}
	if v, _ := rdb.HGet(ctx, store.MetaKey(sale), "limit").Result(); v != shop.LimitPerSale {
		t.Errorf("refused adjust set limit %q", v)
	}
	if _, err := rdb.Get(ctx, store.StockKey(sale, added)).Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("refused adjust created the added item's stock: %v", err)
	}

	// Within what is left: every delta, the added item and the meta fields at once.
	ends := redisNow(t, s).Add(2 * time.Hour).UnixMilli()
	res, err = s.Adjust(ctx, store.Adjustment{SaleID: sale, Meta: map[string]string{"ends": strconv.FormatInt(ends, 10)},
		Stock: []store.StockAdjust{{ItemID: a, Delta: -2}, {ItemID: b, Delta: 10}, {ItemID: added, Initial: &n}}})
	if err != nil || !res.Applied {
		t.Fatalf("adjust = %+v, %v; want applied", res, err)
	}
	if ga, gb, gn := stockOf(t, rdb, sale, a), stockOf(t, rdb, sale, b), stockOf(t, rdb, sale, added); ga != 0 || gb != 12 || gn != 4 {
		t.Errorf("stock a, b, added = %d, %d, %d; want 0, 12, 4", ga, gb, gn)
	}
	if v, _ := rdb.HGet(ctx, store.MetaKey(sale), "ends").Int64(); v != ends {
		t.Errorf("meta ends = %d, want %d", v, ends)
	}

	// Paused: the reserve script refuses before the token is used; resumed: it reserves.
	if _, err := s.Adjust(ctx, store.Adjustment{SaleID: sale, Meta: map[string]string{"paused": "1"}}); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Paused(ctx, sale); err != nil || !p {
		t.Fatalf("Paused = %v, %v; want true", p, err)
	}
	at := attempt(t, s, sale, b, 8, "o2", "n2")
	if r, err := s.Reserve(ctx, at); !errors.Is(err, store.ErrPaused) {
		t.Fatalf("reserve while paused = %+v, %v; want ErrPaused", r, err)
	}
	if _, err := rdb.Get(ctx, tokenKey(sale, "n2")).Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("a paused refusal used the token: %v", err)
	}
	if _, err := s.Adjust(ctx, store.Adjustment{SaleID: sale, Meta: map[string]string{"paused": "0"}}); err != nil {
		t.Fatal(err)
	}
	if r := mustReserve(t, s, at); r.Left != 11 {
		t.Errorf("reserve after resume left %d, want 11", r.Left)
	}

	// A rebuild keeps the pause (the snapshot carries it from Postgres).
	snap := snapshot(t, s, sale+1, shop.LimitPerSale, a, 1)
	snap.Paused = true
	mustLoad(t, s, snap, 0)
	if _, err := s.Reserve(ctx, attempt(t, s, sale+1, a, 7, "o3", "n3")); !errors.Is(err, store.ErrPaused) {
		t.Errorf("reserve in a sale loaded paused: %v, want ErrPaused", err)
	}
}

// ReleaseMany returns many sold units in one pipeline with the outcomes Release gives one by
// one (idempotent the second time, RetryLater on a sale not held), and loads the script again
// where Redis lost it.
func TestReleaseManyPipelined(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item, n = 24, 240, 700 // more than one pipeline of 500
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, n), 0)
	var refs []shop.OrderRef
	var settled []string
	for u := int64(1); u <= n; u++ {
		id := "o" + strconv.FormatInt(u, 10)
		r := mustReserve(t, s, attempt(t, s, sale, item, u, id, "n"+id))
		claim(t, s, sale, store.ClaimItem{OrderID: id, Seq: r.Seq})
		refs = append(refs, shop.OrderRef{SaleID: sale, ItemID: item, UserID: u, OrderID: id})
		settled = append(settled, id)
	}
	if err := s.Settle(ctx, map[int64][]string{sale: settled}); err != nil {
		t.Fatal(err)
	}
	if got := stockOf(t, rdb, sale, item); got != 0 {
		t.Fatalf("stock after selling out = %d", got)
	}
	// Redis forgets its scripts (a restart, a failover): the pipeline's NOSCRIPT is retried
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	absent := shop.OrderRef{SaleID: 25, ItemID: item, UserID: 1, OrderID: "x"}
	outs, errs := s.ReleaseMany(ctx, append(refs[:n-1:n-1], absent, refs[n-1]), shop.ReturnUnit)
	if len(outs) != n+1 || len(errs) != n+1 {
		t.Fatalf("ReleaseMany: %d outcomes, %d errors", len(outs), len(errs))
	}
	for i, out := range outs {
		if errs[i] != nil {
			t.Fatalf("return %d: %v", i, errs[i])
		}
		want := store.Released
		if i == n-1 {
			want = store.RetryLater
		}
		if out != want {
			t.Fatalf("outcome %d = %v, want %v", i, out, want)
		}
	}
	if got := stockOf(t, rdb, sale, item); got != n {
		t.Errorf("stock after the returns = %d, want %d", got, n)
	}
	if b := buyersOf(t, s, sale); len(b) != 0 {
		t.Errorf("buyers left: %d", len(b))
	}
	outs, errs = s.ReleaseMany(ctx, refs, shop.ReturnUnit)
	if len(outs) != n {
		t.Fatalf("second ReleaseMany: %d outcomes", len(outs))
	}
	for i, out := range outs {
		if errs[i] != nil || out != store.NotInFlight {
			t.Fatalf("second return %d = %v, want NotInFlight", i, out)
		}
	}
	if got := stockOf(t, rdb, sale, item); got != n {
		t.Errorf("stock after the second returns = %d, want %d", got, n)
	}
}

// BenchmarkReturn500 returns 500 sold units, one Release each or one ReleaseMany (the keeper's
// expiry pass): go test -run XXX -bench Return500 ./store
func BenchmarkReturn500(b *testing.B) {
	for _, pipelined := range []bool{false, true} {
		name := map[bool]string{false: "one-by-one", true: "pipelined"}[pipelined]
		b.Run(name, func(b *testing.B) {
			s, _ := newStock(b)
			ctx := context.Background()
			const item, n = 10, 500
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				sale := int64(1000 + i)
				mustLoad(b, s, snapshot(b, s, sale, shop.LimitPerSale, item, n), 0)
				refs := make([]shop.OrderRef, n)
				ids := make([]string, n)
				for u := range refs {
					id := "o" + strconv.Itoa(u)
					r := mustReserve(b, s, attempt(b, s, sale, item, int64(u+1), id, "n"+id))
					claim(b, s, sale, store.ClaimItem{OrderID: id, Seq: r.Seq})
					refs[u], ids[u] = shop.OrderRef{SaleID: sale, ItemID: item, UserID: int64(u + 1), OrderID: id}, id
				}
				if err := s.Settle(ctx, map[int64][]string{sale: ids}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if pipelined {
					if _, errs := s.ReleaseMany(ctx, refs, shop.ReturnUnit); errs[0] != nil {
						b.Fatal(errs[0])
					}
				} else {
					for _, o := range refs {
						if _, err := s.Release(ctx, o, shop.ReturnUnit); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
		})
	}
}
