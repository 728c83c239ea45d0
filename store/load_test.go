package store_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

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

	loadedMetaIsTheSnapshots(t, s, rdb, snap, before, after)
	loadedKeysAreTheSnapshots(t, s, rdb, snap, a, b)

	// The loaded buyers hold their units, per item.
	if r, err := s.Reserve(ctx, attempt(t, s, sale, a, 1, "o", "n1")); !errors.Is(err, store.ErrAlreadyBuyer) || r.HeldOrder != "p1" {
		t.Errorf("a loaded buyer reserves again: %+v, %v", r, err)
	}
	mustReserve(t, s, attempt(t, s, sale, a, 3, "o3", "n3"))
	loadOfAHealthySaleChangesNothing(t, s, rdb, sale, a)
}

// loadedMetaIsTheSnapshots checks a loaded sale's meta: healthy, at the snapshot's epoch, limit
// and window, its counter past the snapshot's, loaded between before and after by Redis's clock.
func loadedMetaIsTheSnapshots(t *testing.T, s *store.Stock, rdb redis.UniversalClient, snap store.Snapshot, before, after time.Time) {
	t.Helper()
	sale := snap.SaleID
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
}

// loadedKeysAreTheSnapshots checks a loaded sale's stock, buyers and tombstones (items a and b),
// and that the stale in-flight entries are gone.
func loadedKeysAreTheSnapshots(t *testing.T, s *store.Stock, rdb redis.UniversalClient, snap store.Snapshot, a, b int64) {
	t.Helper()
	ctx := context.Background()
	sale := snap.SaleID
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
}

// loadOfAHealthySaleChangesNothing: loaded and healthy, a load (another instance, or a newer
// epoch) changes nothing.
func loadOfAHealthySaleChangesNothing(t *testing.T, s *store.Stock, rdb redis.UniversalClient, sale, a int64) {
	t.Helper()
	ctx := context.Background()
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
			loadAfterLost(t, c.maxSeq)
		})
	}
}

// loadAfterLost is TestLoadAfterLost with Postgres's highest seq at maxSeq.
func loadAfterLost(t *testing.T, maxSeq int64) {
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
	lostSaleRefusesOlderEpochs(t, s, snap)

	snap.Epoch, snap.MaxSeq = 4, maxSeq
	snap.Left = map[int64]int64{item: 4}
	snap.Buyers = map[string]string{"1": "o1"}
	snap.Gone = []string{"o2"}
	mustLoad(t, s, snap, 0)
	st := rebuildIsFresh(t, s, rdb, sale, item, max(old.Seq, maxSeq))

	// No instance takes the rebuild for a loss: floors from before it (or from Postgres) pass.
	a := attempt(t, s, sale, item, 3, "o3", "n3")
	a.Floor = max(r.Seq, maxSeq)
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
}

// lostSaleRefusesOlderEpochs: a sale lost at snap's epoch (3) is not rebuilt by a load of that
// epoch or an older one.
func lostSaleRefusesOlderEpochs(t *testing.T, s *store.Stock, snap store.Snapshot) {
	t.Helper()
	for _, epoch := range []int64{2, 3} {
		stale := snap
		stale.Epoch = epoch
		if ok, err := s.Load(context.Background(), stale, 0); err != nil || ok {
			t.Errorf("load of epoch %d over a lost epoch 3 = %v, %v; want nothing done", epoch, ok, err)
		}
	}
	if st := stateOf(t, s, snap.SaleID); !st.Lost || st.Epoch != 3 {
		t.Errorf("state after the refused loads = %+v; want lost, epoch 3", st)
	}
}

// rebuildIsFresh checks a sale rebuilt at epoch 4 after a loss: healthy, its counter above
// past, nothing in flight, the fence (7) kept, the snapshot's stock (4). It returns the state.
func rebuildIsFresh(t *testing.T, s *store.Stock, rdb redis.UniversalClient, sale, item, past int64) store.SaleState {
	t.Helper()
	st := stateOf(t, s, sale)
	if !st.Loaded || st.Lost || st.Epoch != 4 {
		t.Errorf("state after the rebuild = %+v; want loaded, healthy, epoch 4", st)
	}
	if st.Seq <= past {
		t.Errorf("counter after the rebuild = %d, want above %d", st.Seq, past)
	}
	if n := len(inFlightRaw(t, rdb, sale)); n != 0 {
		t.Errorf("in flight after the rebuild = %d, want 0", n)
	}
	if got := metaField(t, rdb, sale, "fence"); got != "7" {
		t.Errorf("fence after the rebuild = %q, want 7", got)
	}
	if ok, err := s.MarkLost(context.Background(), sale, 6, ""); ok || err != nil {
		t.Errorf("mark lost with an older fence after the rebuild = %v, %v; want refused", ok, err)
	}
	if got := stockOf(t, rdb, sale, item); got != 4 {
		t.Errorf("stock = %d, want 4", got)
	}
	return st
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

func TestMarkLost(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	mark := marker(t, s)

	// Not loaded: nothing to mark, nothing created.
	if mark(50, 0, "") || mark(50, 3, "") {
		t.Errorf("mark lost of a sale not loaded = true")
	}
	if keys := allKeys(t, rdb); len(keys) != 0 {
		t.Errorf("mark lost of a sale not loaded created %v", keys)
	}
	const item = 510
	markLostByFence(t, s, rdb, 51, item)
	markLostAtSeq(t, s, 52, item)
}

// marker marks a sale lost and reports whether it marked (a failure fails the test).
func marker(t *testing.T, s *store.Stock) func(sale, fence int64, atSeq string) bool {
	return func(sale, fence int64, atSeq string) bool {
		t.Helper()
		ok, err := s.MarkLost(context.Background(), sale, fence, atSeq)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
}

// markLostByFence: a newer lease holder's mark wins; an older one is refused.
func markLostByFence(t *testing.T, s *store.Stock, rdb redis.UniversalClient, sale, item int64) {
	t.Helper()
	mark := marker(t, s)
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
}

// markLostAtSeq: a sale that moved on since the decision (atSeq) is left alone.
func markLostAtSeq(t *testing.T, s *store.Stock, moving, item int64) {
	t.Helper()
	mark := marker(t, s)
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
