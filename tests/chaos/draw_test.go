//go:build linux

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/faults"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// scenarioDrawKill: a sale with a fair start (a 4 s draw window) and two items, 100 and 400 units;
// 300 shoppers enter the draw over all three instances. Instance 0 (the only keeper running often:
// the others' keepers are slowed to 30 s, so it is the one that closes the draw) is SIGKILLed the
// moment the draw is decided in Postgres, before any Redis shard applied it. The survivors apply
// it when the next shoppers, after the window, ask to buy: every entrant ends with exactly one
// outcome (PENDING or NOT_SELECTED, none left ENTERED), no unit is given twice (the winners and
// the first-come buyers of the leftovers together never exceed an item's units), and the usual
// invariants and ledger hold.
func scenarioDrawKill(t *testing.T, r *result) {
	fault := faults.DrawDecided + ":kill"
	slow := map[string]string{"FLASHSALE_KEEPER_INTERVAL": "30s"}
	c := newCluster(t, clusterOpts{faults: map[int]string{0: fault}, instEnv: []map[string]string{nil, slow, slow}})
	starts := time.Now().Add(2 * time.Second)
	s := c.createSaleWith(starts, map[string]any{"fairStartMillis": 4000}, 100, 400)
	r.Faults = "SIGKILL instance 0 at " + fault
	l := newLedger()
	time.Sleep(time.Until(starts) + 50*time.Millisecond)
	c.run(l, s, shoppersFor(s, 1, 300), loadOpts{perSecond: 600})
	entered := len(l.ackedIDs())
	if !c.waitExit(0, 30*time.Second) {
		t.Fatalf("instance 0 did not reach %s", fault)
	}
	if !c.inst[0].proc.killedBy(syscall.SIGKILL) {
		t.Fatalf("instance 0 exited without SIGKILL: %v", c.inst[0].proc.state)
	}
	ctx := context.Background()
	var closed bool
	if err := c.sql.Raw(`SELECT draw_closed_at IS NOT NULL FROM sales WHERE id = ?`, s.id).Scan(&closed).Error; err != nil || !closed {
		t.Fatalf("after the kill the draw is not decided in postgres (%v): the kill did not land between the decision and the apply", err)
	}
	if drawn := c.rdb.HGet(ctx, store.MetaKey(s.id), "drawn").Val(); drawn == "1" {
		t.Fatalf("a shard applied the draw before the kill: the scenario did not test the crash it names")
	}
	// The next shoppers, after the window, on the survivors: their purchases apply the draw.
	late := shoppersFor(s, 10_000, 200)
	for i := range late {
		late[i].pick = func(a int) int { return 1 + a%2 }
	}
	c.run(l, s, late, loadOpts{})
	orders, err := c.orders(ctx, s.id)
	if err != nil {
		t.Fatal(err)
	}
	outcome := map[string]int{}
	for _, o := range orders {
		outcome[o.status]++
	}
	if outcome[shop.StatusEntered] > 0 {
		r.Violations++
		t.Errorf("%d entries left undecided", outcome[shop.StatusEntered])
	}
	r.Note = fmt.Sprintf("%d entries acknowledged in the window; outcomes %v", entered, outcome)
	if l.status[http.StatusAccepted] == 0 {
		t.Errorf("no purchase accepted")
	}
	c.finish(t, r, l, s)
}

// scenarioDrawFailover: Redis goes back in time during a fair start's window while the entries it
// lost are still in the queue. A sale with a 6 s draw window and one item of 60 units;
// shoppers enter over all three instances. Before they start, a test transaction locks the items
// table, so the writers cannot write any entry: every entry answered 202 waits in the queue.
// 1.5 s into the window Redis restarts from an append-only file missing its last second (on
// the cluster: the sale's master fails over to a replica behind), so Redis forgets entries it had
// answered for; 240 shoppers arrive over 4.8 s, 1.5 s of them in the second Redis forgets. The lock is released after the window. The draw must be decided among every entry
// answered 202 in the window, whatever Redis kept: each entrant ends with exactly one outcome,
// none of them "reached the database after the draw had closed", at most 60 won, and the usual
// invariants and ledger hold.
func scenarioDrawFailover(t *testing.T, r *result) {
	c := newCluster(t, clusterOpts{})
	const window = 6000
	starts := time.Now().Add(3 * time.Second)
	s := c.createSaleWith(starts, map[string]any{"fairStartMillis": window}, 60)
	ctx := context.Background()
	tx := c.sql.WithContext(ctx).Begin()
	if err := tx.Exec(`LOCK TABLE items IN EXCLUSIVE MODE`).Error; err != nil {
		t.Fatalf("lock the items: %v", err)
	}
	locked := true
	unlock := func() {
		if locked {
			tx.Rollback()
			locked = false
		}
	}
	defer unlock()
	l := newLedger()
	time.Sleep(time.Until(starts) + 50*time.Millisecond)
	done := c.goRun(l, s, shoppersFor(s, 1, 240), loadOpts{perSecond: 50, attempts: 30, retryPause: 300 * time.Millisecond})
	time.Sleep(time.Until(starts.Add(1500 * time.Millisecond)))
	// Redis as it is now comes back a second and a half later: the entries answered in between
	// are in the queue only
	r.Faults = c.redis.rewind(t, s.id, 1500*time.Millisecond)
	before := len(l.ackedIDs())
	kept := c.rdb.HLen(ctx, store.DrawKeyOf(s.id, 0)).Val()
	r.Faults += fmt.Sprintf("; %d entries answered by then, Redis kept %d; the writers held off (items locked) until the window's end", before, kept)
	if kept >= int64(before) {
		t.Fatalf("the rewind lost no entry (%d answered, %d kept): the scenario did not test what it names", before, kept)
	}
	time.Sleep(time.Until(starts.Add(window*time.Millisecond + time.Second)))
	var written int64
	if err := c.sql.Raw(`SELECT count(*) FROM orders WHERE sale_id = ?`, s.id).Scan(&written).Error; err != nil || written != 0 {
		t.Errorf("%d entries written while the items were locked (%v): the scenario did not keep them in the queue", written, err)
	}
	unlock()
	<-done
	acked := l.ackedIDs()
	if len(acked) < 100 {
		t.Fatalf("only %d entries answered 202: too few to test the draw", len(acked))
	}
	byID := map[string]string{}
	testenv.Eventually(t, 90*time.Second, "every entry answered 202 decided in postgres", func() error {
		var rows []struct {
			ID, Status string
			Failure    *string
		}
		if err := c.sql.Raw(`SELECT id::text, status, failure FROM orders WHERE sale_id = ?`, s.id).Scan(&rows).Error; err != nil {
			return err
		}
		for _, o := range rows {
			byID[o.ID] = o.Status
			if o.Failure != nil && strings.Contains(*o.Failure, "after it had closed") {
				byID[o.ID] = "LATE"
			}
		}
		for _, id := range acked {
			if st := byID[id]; st == "" || st == shop.StatusEntered {
				return fmt.Errorf("entry %s: %q", id, st)
			}
		}
		return nil
	})
	outcome := map[string]int{}
	for _, id := range acked {
		outcome[byID[id]]++
	}
	if outcome["LATE"] > 0 {
		r.Violations += outcome["LATE"]
		t.Errorf("%d entries answered 202 in the window were left out of the draw (written after it closed)", outcome["LATE"])
	}
	won := len(acked) - outcome[shop.StatusNotSelected] - outcome["LATE"]
	if won > 60 || (len(acked) >= 60 && won != 60) {
		r.Violations++
		t.Errorf("%d of %d entries won 60 units: %v", won, len(acked), outcome)
	}
	r.Note = fmt.Sprintf("%d entries answered 202 (%d before the rewind); outcomes %v", len(acked), before, outcome)
	c.finish(t, r, l, s)
}
