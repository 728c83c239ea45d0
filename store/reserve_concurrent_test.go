package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// Many shoppers at once against few units: exactly the units are sold, each once, and the stock
// never goes below zero.
func TestReserveConcurrent(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	const sale, item, units, shoppers = 15, 150, 50, 400
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, units), 0)
	seq0 := stateOf(t, s, sale).Seq

	lowest := watchLowestStock(rdb, sale, item, units)
	seqs, ok, soldOut, other := reserveAtOnce(t, s, sale, item, shoppers)
	if m := lowest(); m < 0 {
		t.Errorf("stock went down to %d", m)
	}
	if ok != units || soldOut != shoppers-units || other != 0 {
		t.Errorf("reservations %d, sold out %d, other %d; want %d, %d, 0", ok, soldOut, other, units, shoppers-units)
	}
	if got := stockOf(t, rdb, sale, item); got != 0 {
		t.Errorf("stock = %d, want 0", got)
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

// watchLowestStock watches an item's stock (units at first) until the function it returns is
// called, which answers the lowest level seen.
func watchLowestStock(rdb redis.UniversalClient, sale, item, units int64) (stop func() int64) {
	ctx := context.Background()
	var minSeen atomic.Int64
	minSeen.Store(units)
	stopped := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stopped:
				return
			default:
			}
			if n, err := rdb.Get(ctx, store.StockKey(sale, item)).Int64(); err == nil && n < minSeen.Load() {
				minSeen.Store(n)
			}
		}
	}()
	return func() int64 {
		close(stopped)
		<-watched
		return minSeen.Load()
	}
}

// reserveAtOnce has shoppers (users 1000 on) reserve an item all at once, and counts the
// reservations, the sold-out refusals and any other outcome; seqs[i] is shopper i's seq (0:
// none).
func reserveAtOnce(t *testing.T, s *store.Stock, sale, item int64, shoppers int) (seqs []int64, ok, soldOut, other int64) {
	t.Helper()
	ctx := context.Background()
	exp := redisNow(t, s).Add(time.Minute)
	var wg sync.WaitGroup
	var nOK, nSoldOut, nOther atomic.Int64
	seqs = make([]int64, shoppers)
	for i := range shoppers {
		wg.Go(func() {
			r, err := s.Reserve(ctx, store.Attempt{SaleID: sale, ItemID: item, UserID: int64(1000 + i), OrderID: fmt.Sprintf("o%d", i), Nonce: fmt.Sprintf("n%d", i), TokenExpires: exp})
			switch {
			case err == nil:
				nOK.Add(1)
				seqs[i] = r.Seq
			case errors.Is(err, store.ErrSoldOut):
				nSoldOut.Add(1)
			default:
				nOther.Add(1)
				t.Errorf("shopper %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	return seqs, nOK.Load(), nSoldOut.Load(), nOther.Load()
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
