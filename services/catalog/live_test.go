package catalog

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/pipeline"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

func TestLiveStatus(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_800_000_000, 0)
	end := start.Add(time.Hour)
	cases := []struct {
		at     time.Time
		paused bool
		want   string
	}{
		{start.Add(-time.Second), false, LiveScheduled},
		{start, false, LiveRunning},
		{start.Add(time.Minute), true, LivePaused},
		{start.Add(-time.Minute), true, LivePaused},
		{end, false, LiveEnded},
		{end, true, LiveEnded},
	}
	for _, c := range cases {
		if got := liveStatus(start, end, c.paused, c.at); got != c.want {
			t.Errorf("at %v paused %v: %s, want %s", c.at.Sub(start), c.paused, got, c.want)
		}
	}
}

func TestDueForWarmUp(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_800_000_000, 0)
	if shop.DueForWarmUp(start, start.Add(-10*time.Minute-time.Second), 10*time.Minute) {
		t.Error("due 10m01s before the start")
	}
	if !shop.DueForWarmUp(start, start.Add(-10*time.Minute), 10*time.Minute) || !shop.DueForWarmUp(start, start.Add(time.Hour), 10*time.Minute) {
		t.Error("not due 10m before the start, or after it")
	}
}

func TestLiveReconciliationState(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	ok := pipeline.Check{Name: "no oversell", OK: true, Detail: "live orders 1, quantity 3"}
	pgBad := pipeline.Check{Name: "sold equals live orders", Detail: "sold 2, live orders 1"}
	redisBad := pipeline.Check{Name: "conservation", Redis: true, Detail: "redis stock 1, want 2"}
	report := func(loaded, lost bool, inFlight int64, item ...pipeline.Check) pipeline.SaleReport {
		return pipeline.SaleReport{Loaded: loaded, Lost: lost, Seq: 9, PGMaxSeq: 8,
			Items: []pipeline.ItemReport{{ItemID: 4, InFlight: inFlight, Checks: append([]pipeline.Check{ok}, item...)}}}
	}
	zero, three := uint64(0), uint64(3)
	cases := []struct {
		name  string
		rep   pipeline.SaleReport
		due   bool
		depth *uint64
		moved bool
		want  string
	}{
		{"all hold", report(true, false, 0), true, &zero, false, ReconcileOK},
		{"postgres violated", report(true, false, 2, pgBad), true, &three, true, ReconcileViolation},
		{"redis off while the queue drains", report(true, false, 0, redisBad), true, &three, false, ReconcileSettling},
		{"redis off with reservations in flight", report(true, false, 1, redisBad), true, &zero, false, ReconcileSettling},
		{"redis off while the counter moves", report(true, false, 0, redisBad), true, &zero, true, ReconcileSettling},
		{"redis off, queue depth unknown", report(true, false, 0, redisBad), true, nil, false, ReconcileSettling},
		{"redis off with nothing moving", report(true, false, 0, redisBad), true, &zero, false, ReconcileViolation},
		{"redis lost data", report(true, true, 0, redisBad), true, &three, true, ReconcileViolation},
		{"not loaded before the warm-up", report(false, false, 0, redisBad), false, &zero, false, ReconcileOK},
		{"not loaded, warm-up due", report(false, false, 0, redisBad), true, &zero, false, ReconcileSettling},
	}
	for _, c := range cases {
		got := liveReconciliation(c.rep, now, c.due, c.depth, c.moved)
		if got.State != c.want {
			t.Errorf("%s: %s, want %s", c.name, got.State, c.want)
		}
		if len(got.Checks) != len(c.rep.Items[0].Checks) || got.Checks[0].ItemID != 4 || got.RedisCounter != 9 || got.PostgresMaxSeq != 8 {
			t.Errorf("%s: checks %+v, counters %d/%d", c.name, got.Checks, got.RedisCounter, got.PostgresMaxSeq)
		}
	}
}

func TestLiveFunnelAddsPostgresSide(t *testing.T) {
	t.Parallel()
	c := store.FunnelCounts{Accepted: 5, Refused: map[string]int64{RefusedSoldOut: 7, RefusedCaptcha: 1, "unknown": 100}}
	rep := pipeline.SaleReport{Items: []pipeline.ItemReport{
		{Pending: 1, Paid: 2, Expired: 1, Cancelled: 0, Failed: 3},
		{Pending: 0, Paid: 1, Expired: 0, Cancelled: 1},
	}}
	f := liveFunnel(c, rep)
	if f.Requests != 13 || f.Accepted != 5 || f.Written != 6 || f.Paid != 3 || f.Expired != 1 || f.Cancelled != 1 {
		t.Errorf("funnel %+v", f)
	}
	if len(f.Refused) != len(RefusalReasons) || f.Refused[RefusedSoldOut] != 7 || f.Refused[RefusedDuplicate] != 0 {
		t.Errorf("refused %v: want every reason, zero included, and no unknown one", f.Refused)
	}
}

// The live view's memory of each sale's counter is kept while merchants watch and forgotten ten
// minutes after the last look, so an instance serving many sales over weeks does not grow.
func TestLiveSeenForgetsUnwatchedSales(t *testing.T) {
	var l liveState
	l.counter = map[int64]string{}
	t0 := time.Unix(1_800_000_000, 0)
	if _, seen := l.see(1, "5", t0); seen {
		t.Error("a first look reported a counter seen before")
	}
	l.see(2, "9", t0.Add(time.Minute))
	if prev, seen := l.see(1, "6", t0.Add(2*time.Minute)); !seen || prev != "5" {
		t.Errorf("second look at sale 1: %q %v, want 5 seen", prev, seen)
	}
	// Sale 2 is not looked at again: eleven minutes later it is gone, sale 1 (watched) stays.
	l.see(1, "7", t0.Add(12*time.Minute))
	if _, ok := l.counter[2]; ok || len(l.seenAt) != 1 {
		t.Errorf("after 11 unwatched minutes: counters %v, seen %v; want only sale 1", l.counter, l.seenAt)
	}
	if prev, seen := l.see(1, "7", t0.Add(13*time.Minute)); !seen || prev != "7" {
		t.Errorf("sale 1 while watched: %q %v", prev, seen)
	}
}

// The live view's money: each item's as Postgres summed it, the sale's the sum of its items', in
// the sale's currency; an item without orders is zeros. Another merchant's sale shows none.
func TestLiveMoney(t *testing.T) {
	t.Parallel()
	now := time.Date(2031, 5, 1, 12, 0, 0, 0, time.UTC)
	s, db, _, _ := fakeSales(t, now)
	db.sale.Currency = "USD"
	db.money = []store.ItemMoney{
		{ItemID: 70, PaidCents: 300, Awaiting: 2, AwaitingCents: 200, Refunds: 2, RefundedCents: 200, RefundsPending: 1},
		{ItemID: 71, PaidCents: 400, Awaiting: 1, AwaitingCents: 200},
	}
	v, err := s.Live(context.Background(), 3, 7)
	if err != nil {
		t.Fatal(err)
	}
	want := LiveMoney{PaidCents: 700, Awaiting: 3, AwaitingCents: 400, Refunds: 2, RefundedCents: 200, RefundsPending: 1}
	if v.Money.Currency != "USD" || v.Money.LiveMoney != want {
		t.Errorf("the sale's money = %+v, want USD %+v", v.Money, want)
	}
	if got := v.Money.Items[71]; got != (LiveMoney{PaidCents: 400, Awaiting: 1, AwaitingCents: 200}) {
		t.Errorf("the cup's money = %+v", got)
	}
	if got := v.Money.Items[70]; got.RefundsPending != 1 || got.PaidCents != 300 {
		t.Errorf("the tea's money = %+v", got)
	}
	if _, err := s.Live(context.Background(), 4, 7); shop.ErrorCode(err) != shop.CodeNotFound {
		t.Errorf("another merchant's live view: %v, want NOT_FOUND", err)
	}
}
