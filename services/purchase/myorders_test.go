package purchase

import (
	"slices"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// withQueued merges the QUEUED orders into Postgres's page by reservation time (then id, both
// newest first, as Postgres orders them), and an order in both is listed once, as Postgres has it.
func TestWithQueuedMergesByReservationAndDedupes(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	row := func(id string, at time.Duration) store.OrderDetail {
		return store.OrderDetail{Order: shop.Order{ID: id, Status: shop.StatusPending, ReservedAt: t0.Add(at), PayBy: t0.Add(time.Hour)}}
	}
	queued := func(id string, at time.Duration) queuedOrder {
		return queuedOrder{v: shop.OrderView{OrderID: id, Status: shop.StatusQueued}, at: t0.Add(at)}
	}
	rows := []store.OrderDetail{row("p5", 5*time.Second), row("b", 3*time.Second), row("a", 3*time.Second), row("p1", time.Second)}
	q := []queuedOrder{
		queued("q9", 9*time.Second),
		queued("p5", 5*time.Second), // written meanwhile: Postgres's entry
		queued("c", 3*time.Second),  // same millisecond as b and a: by id, descending
		queued("aa", 3*time.Second),
		queued("q0", 0),
	}
	got := withQueued(rows, q)
	var ids, statuses []string
	for _, v := range got {
		ids = append(ids, v.OrderID)
		statuses = append(statuses, v.Status)
	}
	wantIDs := []string{"q9", "p5", "c", "b", "aa", "a", "p1", "q0"}
	wantStatuses := []string{"QUEUED", "PENDING", "QUEUED", "PENDING", "QUEUED", "PENDING", "PENDING", "QUEUED"}
	if !slices.Equal(ids, wantIDs) || !slices.Equal(statuses, wantStatuses) {
		t.Errorf("merged %v %v, want %v %v", ids, statuses, wantIDs, wantStatuses)
	}
	if got := withQueued(rows, nil); len(got) != len(rows) || got[0].OrderID != "p5" || got[0].PayBy == nil {
		t.Errorf("no queued orders: %+v, want Postgres's page as it is", got)
	}
}
