package pipeline

import (
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// A sharded sale's reservations are judged by the clock of the node holding their shard: on a
// Redis Cluster shard 1's node may run a minute behind shard 0's (or ahead). Judged by shard 0's
// clock a fresh reservation of shard 1 would count as stranded (a false repair), or a stranded
// one as fresh (a missed one).
func TestPendingAgesByTheShardsOwnClock(t *testing.T) {
	r := &Reconciler{orphanAge: 30 * time.Second} // stranded after 45 s
	t0 := time.UnixMilli(1_800_000_000_000)
	for _, c := range []struct {
		name      string
		skew      time.Duration // shard 1's clock minus shard 0's
		age       time.Duration // the reservation's age by shard 1's clock
		stranded  int64
		oldestAge time.Duration
	}{
		{"shard 1 behind, fresh", -time.Minute, 10 * time.Second, 0, 10 * time.Second},
		{"shard 1 ahead, stranded", time.Minute, 50 * time.Second, 1, 50 * time.Second},
		{"shard 1 behind, stranded", -time.Minute, 50 * time.Second, 1, 50 * time.Second},
		{"same clock, fresh", 0, 10 * time.Second, 0, 10 * time.Second},
	} {
		now1 := t0.Add(c.skew)
		e := store.InFlightEntry{OrderID: "o1", ItemID: 7, UserID: 3, ReservedAt: now1.Add(-c.age), Seq: 1, Shard: 1}
		sd := sides{
			facts: store.SaleFacts{PurchaseLimit: shop.LimitPerSale},
			view:  store.RedisView{Now: t0, ShardNow: []time.Time{t0, now1}, InFlight: []store.InFlightEntry{e}},
		}
		p := r.pending(sd)
		if got := p.stranded[7]; got != c.stranded {
			t.Errorf("%s: stranded = %d, want %d", c.name, got, c.stranded)
		}
		if got := t0.Sub(p.oldest); got != c.oldestAge {
			t.Errorf("%s: writer's lag (RedisNow - OldestInFlight) = %v, want %v", c.name, got, c.oldestAge)
		}
	}
}
