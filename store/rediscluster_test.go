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
	s := store.NewStock(rdb)

	// One sale per master.
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
	for i, sale := range sales {
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
		// The MULTI reads run on the sale's master, with its clock.
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
	// A pipeline over the three sales (three nodes).
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
	// The returns of the three sales in one ReleaseMany: a pipeline split over the three masters.
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
	// A second sold unit per sale, given back below once a master is dead.
	var later []shop.OrderRef
	for i, sale := range sales {
		item := 100 + sale
		a := attempt(t, s, sale, item, 8, fmt.Sprintf("order-%d-later", i), "n3")
		a.Floor = 0
		r := mustReserve(t, s, a)
		claim(t, s, sale, store.ClaimItem{OrderID: a.OrderID, Seq: r.Seq})
		if err := s.Settle(ctx, map[int64][]string{sale: {a.OrderID}}); err != nil {
			t.Fatal(err)
		}
		later = append(later, shop.OrderRef{SaleID: sale, ItemID: item, UserID: 8, OrderID: a.OrderID})
	}
	fs := store.FunnelStore{Keep: time.Minute, TTL: time.Hour}
	deltas := func() []store.FunnelDelta {
		var ds []store.FunnelDelta
		for _, sale := range sales {
			ds = append(ds, store.FunnelDelta{SaleID: sale, At: time.Now().Unix(), Accepted: 1})
		}
		return ds
	}
	if err := s.FlushFunnel(ctx, deltas(), fs); err != nil {
		t.Fatal(err)
	}

	// A master dies (no replica: its slots stay down). The flush adds what the others took and
	// names only the dead master's sale as not taken.
	dead := sales[1]
	c.MustKill(t, bySale[dead])
	err = s.FlushFunnel(ctx, deltas(), fs)
	var part *store.FunnelNotTaken
	if !errors.As(err, &part) || len(part.NotTaken) != 1 || part.NotTaken[0].SaleID != dead {
		t.Fatalf("flush with sale %d's master down = %v; want only that sale not taken", dead, err)
	}
	// The returns of the three sales with one master dead: that sale's return fails, the other
	// two masters' are made and reported.
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
	// A call to the dead master fails fast (one dial per try), not after seconds of redials.
	start := time.Now()
	_, err = s.State(ctx, dead)
	if err == nil || time.Since(start) > time.Second {
		t.Errorf("sale %d on the dead master: %v after %v; want an error within a second", dead, err, time.Since(start))
	}
}
