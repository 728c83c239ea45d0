package store_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

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
	cases := []releaseOpCase{
		{shop.ReleaseRefused, true, false, true},
		{shop.ReleaseNoRoom, false, false, false},
		{shop.ReleaseDuplicate, true, true, true},
	}
	for i, c := range cases {
		releaseClaimedOnce(t, s, rdb, sale, item, int64(i+1), c)
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

// releaseOpCase is what a release of a claimed order by op leaves.
type releaseOpCase struct {
	op        shop.ReleaseOp
	unitBack  bool
	buyerKept bool
	tombstone bool
}

// releaseClaimedOnce reserves a unit for user, claims it as the writer does, releases it by c.op
// and checks what that leaves (c), and that a second release or a late unsold one does nothing.
func releaseClaimedOnce(t *testing.T, s *store.Stock, rdb redis.UniversalClient, sale, item, user int64, c releaseOpCase) {
	t.Helper()
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

// ReleaseMany returns many sold units in one pipeline with the outcomes Release gives one by
// one (idempotent the second time, RetryLater on a sale not held), and loads the script again
// where Redis lost it.
func TestReleaseManyPipelined(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const sale, item, n = 24, 240, 700 // more than one pipeline of 500
	refs := sellOutWritten(t, s, rdb, sale, item, n)
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

// sellOutWritten loads a sale of n units of item, sells them to users 1..n, claims and settles
// every order (written by the writer), and returns the orders.
func sellOutWritten(t *testing.T, s *store.Stock, rdb redis.UniversalClient, sale, item int64, n int) []shop.OrderRef {
	t.Helper()
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, int64(n)), 0)
	var refs []shop.OrderRef
	var settled []string
	for u := int64(1); u <= int64(n); u++ {
		id := "o" + strconv.FormatInt(u, 10)
		r := mustReserve(t, s, attempt(t, s, sale, item, u, id, "n"+id))
		claim(t, s, sale, store.ClaimItem{OrderID: id, Seq: r.Seq})
		refs = append(refs, shop.OrderRef{SaleID: sale, ItemID: item, UserID: u, OrderID: id})
		settled = append(settled, id)
	}
	if err := s.Settle(context.Background(), map[int64][]string{sale: settled}); err != nil {
		t.Fatal(err)
	}
	if got := stockOf(t, rdb, sale, item); got != 0 {
		t.Fatalf("stock after selling out = %d", got)
	}
	return refs
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
