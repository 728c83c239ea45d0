//go:build linux

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/faults"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
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
	if err := c.db.Gorm().Raw(`SELECT draw_closed_at IS NOT NULL FROM sales WHERE id = ?`, s.id).Scan(&closed).Error; err != nil || !closed {
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
