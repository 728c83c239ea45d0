package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// Every Stock operation on a Redis Cluster: sales spread over the masters, each script on its
// sale's slot, reads that span sales (pipelines) split by node, the MULTI reads on the sale's node;
// with one master dead, a funnel flush reports exactly that master's sales as not taken, and the
// other sales keep working.
func TestStockOnRedisCluster(t *testing.T) {
	ctx := context.Background()
	c := testenv.NewRedisCluster(t, 3, 0)
	rdb, err := store.OpenRedis(ctx, c.URL(), 8)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	s := store.NewStock(rdb, store.OneShard)

	sales, masterOf := oneSalePerMaster(t, c)
	for i, sale := range sales {
		scriptsRunOnTheSalesMaster(t, s, sale, i)
	}
	pipelinesSpanTheMasters(t, s, sales)
	later := sellOneMoreEach(t, s, sales) // given back below once a master is dead
	fs := store.FunnelStore{Keep: time.Minute, TTL: time.Hour}
	if err := s.FlushFunnel(ctx, funnelDeltas(sales), fs); err != nil {
		t.Fatal(err)
	}

	// A master dies (no replica: its slots stay down).
	dead := sales[1]
	c.MustKill(t, masterOf[dead])
	onlyTheDeadMastersSalesFail(t, s, sales, dead, later, fs)
	// A call to the dead master fails fast (one dial per try), not after seconds of redials.
	start := time.Now()
	_, err = s.State(ctx, dead)
	if err == nil || time.Since(start) > time.Second {
		t.Errorf("sale %d on the dead master: %v after %v; want an error within a second", dead, err, time.Since(start))
	}
}

// oneSalePerMaster picks three sales, one on each master of c.
func oneSalePerMaster(t *testing.T, c *testenv.RedisCluster) ([]int64, map[int64]*testenv.RedisClusterNode) {
	t.Helper()
	bySale := map[int64]*testenv.RedisClusterNode{}
	seen := map[*testenv.RedisClusterNode]bool{}
	var sales []int64
	for sale := int64(1); len(sales) < 3; sale++ {
		m := c.MustMasterOf(t, store.MetaKey(sale))
		if !seen[m] {
			seen[m] = true
			bySale[sale] = m
			sales = append(sales, sale)
		}
	}
	return sales, bySale
}

// scriptsRunOnTheSalesMaster loads sale (the i-th, of 2 units of item 100+sale), reserves one as
// shopper 7 (order-i), is refused a second, claims it and reads it back (the MULTI reads run on
// the sale's master, with its clock).
func scriptsRunOnTheSalesMaster(t *testing.T, s *store.Stock, sale int64, i int) {
	t.Helper()
	ctx := context.Background()
	item := 100 + sale
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, 2), 0)
	a := attempt(t, s, sale, item, 7, fmt.Sprintf("order-%d", i), "n1")
	a.Floor = 0
	r := mustReserve(t, s, a)
	if r.Left != 1 {
		t.Fatalf("sale %d: left %d after one reservation, want 1", sale, r.Left)
	}
	// The per-sale limit: the same shopper again, another token.
	if _, err := s.Reserve(ctx, attempt(t, s, sale, item, 7, fmt.Sprintf("order-%d-b", i), "n2")); !errors.Is(err, store.ErrAlreadyBuyer) {
		t.Errorf("sale %d: a second unit for the same shopper: %v, want ErrAlreadyBuyer", sale, err)
	}
	if v := claim(t, s, sale, store.ClaimItem{OrderID: a.OrderID, Seq: r.Seq}); v[0] != store.ClaimClaimed {
		t.Errorf("sale %d: claim = %v", sale, v)
	}
	if flight, err := s.InFlightOlder(ctx, sale, -time.Minute); err != nil || len(flight) != 1 || !flight[0].Claimed {
		t.Errorf("sale %d: InFlightOlder(-1m) = %+v, %v; want the claimed reservation", sale, flight, err)
	}
	if flight, err := s.InFlightOlder(ctx, sale, time.Minute); err != nil || len(flight) != 0 {
		t.Errorf("sale %d: InFlightOlder(1m) = %+v, %v; want none that old", sale, flight, err)
	}
	v, err := s.View(ctx, sale, []int64{item}, []string{a.OrderID})
	if err != nil || !v.State.Loaded || v.Levels[item] != 1 || v.Buyers != 1 || len(v.InFlight) != 1 || v.Now.IsZero() {
		t.Errorf("sale %d: View = %+v, %v", sale, v, err)
	}
}

// pipelinesSpanTheMasters settles the three sales' orders in one pipeline and returns their
// units in one ReleaseMany, each split over the three masters.
func pipelinesSpanTheMasters(t *testing.T, s *store.Stock, sales []int64) {
	t.Helper()
	ctx := context.Background()
	settle := map[int64][]string{}
	for i, sale := range sales {
		settle[sale] = []string{fmt.Sprintf("order-%d", i)}
	}
	if err := s.Settle(ctx, settle); err != nil {
		t.Fatal(err)
	}
	for _, sale := range sales {
		if flight, err := s.InFlight(ctx, sale); err != nil || len(flight) != 0 {
			t.Errorf("sale %d: in flight after the settle: %+v, %v", sale, flight, err)
		}
	}
	var refs []shop.OrderRef
	for i, sale := range sales {
		refs = append(refs, shop.OrderRef{SaleID: sale, ItemID: 100 + sale, UserID: 7, OrderID: fmt.Sprintf("order-%d", i)})
	}
	if outs, errs := s.ReleaseMany(ctx, refs, shop.ReturnUnit); errors.Join(errs...) != nil || len(outs) != 3 || outs[0] != store.Released || outs[1] != store.Released || outs[2] != store.Released {
		t.Errorf("ReleaseMany over three masters = %v, %v; want three Released", outs, errs)
	}
	for _, sale := range sales {
		if lv, err := s.Levels(ctx, sale, []int64{100 + sale}); err != nil || len(lv) != 1 || lv[0] != 2 {
			t.Errorf("sale %d: stock after the return %v, %v; want 2", sale, lv, err)
		}
	}
}

// sellOneMoreEach sells, claims and settles a second unit per sale (shopper 8) and returns the
// orders.
func sellOneMoreEach(t *testing.T, s *store.Stock, sales []int64) []shop.OrderRef {
	t.Helper()
	var later []shop.OrderRef
	for i, sale := range sales {
		item := 100 + sale
		a := attempt(t, s, sale, item, 8, fmt.Sprintf("order-%d-later", i), "n3")
		a.Floor = 0
		r := mustReserve(t, s, a)
		claim(t, s, sale, store.ClaimItem{OrderID: a.OrderID, Seq: r.Seq})
		if err := s.Settle(context.Background(), map[int64][]string{sale: {a.OrderID}}); err != nil {
			t.Fatal(err)
		}
		later = append(later, shop.OrderRef{SaleID: sale, ItemID: item, UserID: 8, OrderID: a.OrderID})
	}
	return later
}

// funnelDeltas is one accepted purchase per sale, now.
func funnelDeltas(sales []int64) []store.FunnelDelta {
	var ds []store.FunnelDelta
	for _, sale := range sales {
		ds = append(ds, store.FunnelDelta{SaleID: sale, At: time.Now().Unix(), Accepted: 1})
	}
	return ds
}

// onlyTheDeadMastersSalesFail: with dead's master down, a funnel flush adds what the others took
// and names only dead as not taken; the returns of later fail on dead only; the other sales keep
// working.
func onlyTheDeadMastersSalesFail(t *testing.T, s *store.Stock, sales []int64, dead int64, later []shop.OrderRef, fs store.FunnelStore) {
	t.Helper()
	ctx := context.Background()
	err := s.FlushFunnel(ctx, funnelDeltas(sales), fs)
	var part *store.FunnelNotTaken
	if !errors.As(err, &part) || len(part.NotTaken) != 1 || part.NotTaken[0].SaleID != dead {
		t.Fatalf("flush with sale %d's master down = %v; want only that sale not taken", dead, err)
	}
	outs, errs := s.ReleaseMany(ctx, later, shop.ReturnUnit)
	for i, sale := range sales {
		if sale == dead {
			if errs[i] == nil {
				t.Errorf("return on sale %d with its master dead: %v, want an error", sale, outs[i])
			}
		} else if errs[i] != nil || outs[i] != store.Released {
			t.Errorf("return on sale %d with another master dead: %v, %v; want Released", sale, outs[i], errs[i])
		}
	}
	for _, sale := range sales {
		if sale == dead {
			continue
		}
		counts, _, err := s.Funnel(ctx, sale, 0)
		if err != nil || counts.Accepted != 2 {
			t.Errorf("sale %d: funnel accepted %d (%v) after two flushes, want 2 (each once)", sale, counts.Accepted, err)
		}
		if _, err := s.Levels(ctx, sale, []int64{100 + sale}); err != nil {
			t.Errorf("sale %d on a live master: %v", sale, err)
		}
	}
}
