//go:build linux

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/faults"
	"github.com/flashsale/flashsale/services/pipeline"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// result is one row of the suite's table.
type result struct {
	Scenario   string  `json:"scenario"`
	Faults     string  `json:"faults"`     // what was injected, and how often
	Accepted   int     `json:"accepted"`   // purchases answered 202
	Orders     int     `json:"orders"`     // live orders (PENDING + PAID) in Postgres at the end
	Returned   int     `json:"returned"`   // reservations that did not end as a live order: their units went back
	Violations int     `json:"violations"` // failed checks at the end (reconcile, invariants, ledger)
	Durable    string  `json:"durableIn"`  // kill scenarios: how long until every order acknowledged before the kill was in Postgres
	Seconds    float64 `json:"seconds"`    // the scenario's wall time
	Passed     bool    `json:"passed"`     // the subtest passed
	// NotApplicable is why the scenario has no counterpart on the clustered setup (cluster mode
	// only; not run, not counted as passed).
	NotApplicable string `json:"notApplicable,omitempty"`
	Note          string `json:"note,omitempty"`

	redelivered int
}

var results struct {
	sync.Mutex
	rows []*result
}

// scenario is one named subtest of TestChaos.
type scenario struct {
	id   string
	name string
	fast bool // part of the subset that runs without FLASHSALE_CHAOS (make test)
	run  func(t *testing.T, r *result)
	// clusterNA: why the scenario has no meaningful counterpart on the clustered setup
	// (FLASHSALE_CHAOS_CLUSTER=1); "" where it has one
	clusterNA string
}

var scenarios = []scenario{
	{"01", "kill -9 after the reserve, before the publish", true, scenarioKillAt(faults.AfterReserve, 40), ""},
	{"02", "kill -9 after the PubAck, before the 202", false, scenarioKillAt(faults.AfterPubAck, 40), ""},
	{"03a", "kill -9 the writer after the commit, before the ack", true, scenarioKillAt(faults.WriterAfterCommit, 3), ""},
	{"03b", "kill -9 the writer before the commit", false, scenarioKillAt(faults.WriterBeforeCommit, 3), ""},
	{"12", "scarce stock: 410 shoppers, 41 units, three instances", true, scenarioScarce, ""},
	{"13", "one shopper's double clicks across all three instances", false, scenarioDoubleClicks, ""},
	{"05", "Redis restarted with its AOF during the rush", false, scenarioRedis("restart"), ""},
	{"06", "Redis restarted from an AOF missing its last second", false, scenarioRedis("truncate"), ""},
	{"07", "Redis restarted empty during the rush", false, scenarioRedis("empty"), ""},
	{"08", "NATS server killed and restarted during the rush", false, scenarioNATSRestart, ""},
	{"08b", "NATS server paused (SIGSTOP) 3 s during the rush", false, scenarioNATSPause, ""},
	{"04", "SIGSTOP the lease holder longer than the lease, then SIGCONT", false, scenarioLeaseStop, ""},
	{"10", "payment racing expiry on 1,000 orders, 2 s window", false, scenarioPayVsExpiry, ""},
	{"11", "duplicate deliveries: 1 s ack wait, a writer stopped holding a batch", false, scenarioDuplicates, ""},
	{"14", "bot burst: one user, one IP, thousands of requests, rate limits on", false, scenarioBot, ""},
	{"15", "clock skew: one instance 2 s ahead", false, scenarioSkew, ""},
	{"09", "Postgres crashed and restarted during the rush", false, scenarioPostgresRestart, ""},
	{"09b", "Postgres connections cut during the rush", false, scenarioPostgresCut, ""},
	{"16", "the disk under NATS full during the rush", false, scenarioNATSFull, ""},
	{"17", "partition: one instance cut off from Redis", false, scenarioPartition, ""},
	{"18", "all three instances kill -9'd mid-rush, each at another step", false, scenarioAllKilled, ""},
	{"19a", "Redis out of memory (noeviction) for 4 s during the rush", false, scenarioRefusal(testenv.RefuseOOM), ""},
	{"19b", "Redis unable to persist (MISCONF) for 4 s during the rush", false, scenarioRefusal(testenv.RefuseMISCONF), ""},
	{"19c", "Redis read-only for 4 s during the rush", false, scenarioRefusal(testenv.RefuseReadOnly), ""},
	{"19d", "Warm and a quantity cut on a lost sale while its queue holds orders", false, scenarioWarmLost, ""},
	{"20a", "Redis restored a second behind, one instance restarted: its floors from Postgres", false, scenarioRewindRestart, ""},
	{"20b", "an instance with the embedded NATS stopped past its registration while another starts", false, scenarioEmbeddedPause, ""},
	{"21", "an instance killed while the draw closes (fair start)", false, scenarioDrawKill, ""},
	{"21b", "Redis back in time during a fair start's window, its entries still queued", false, scenarioDrawFailover, ""},
	{"22", "Stripe misbehaving: 500s, unanswered refunds, dropped, doubled, late and reordered webhooks", false, scenarioStripeFaults, ""},
}

// selected reads FLASHSALE_CHAOS: "all", a comma-separated list of scenario ids, or unset (the
// fast subset).
func selected(sc scenario) bool {
	v := os.Getenv("FLASHSALE_CHAOS")
	switch v {
	case "":
		return sc.fast
	case "all":
		return true
	}
	return slices.Contains(strings.Split(v, ","), sc.id)
}

func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault suite starts real processes")
	}
	buildBinaries(t, t.TempDir())
	for _, sc := range scenarios {
		if !selected(sc) {
			continue
		}
		r := &result{Scenario: sc.id + " " + sc.name}
		if clusterMode() && sc.clusterNA != "" {
			r.NotApplicable = sc.clusterNA
			t.Run(sc.id, func(t *testing.T) { t.Skip("n/a on the cluster: " + sc.clusterNA) })
			results.Lock()
			results.rows = append(results.rows, r)
			results.Unlock()
			continue
		}
		t.Run(sc.id, func(t *testing.T) {
			start := time.Now()
			defer func() {
				r.Seconds = time.Since(start).Seconds()
				r.Passed = !t.Failed()
			}()
			sc.run(t, r)
		})
		results.Lock()
		results.rows = append(results.rows, r)
		results.Unlock()
	}
	writeTable(t)
}

// writeTable prints the table and writes it to out/ as JSON and Markdown.
func writeTable(t *testing.T) {
	results.Lock()
	defer results.Unlock()
	if len(results.rows) == 0 {
		return
	}
	var md strings.Builder
	md.WriteString("| scenario | faults injected | 202s | orders in Postgres | units returned | violations | durable after kill | seconds | result |\n")
	md.WriteString("|---|---|---:|---:|---:|---:|---|---:|---|\n")
	for _, r := range results.rows {
		verdict := "pass"
		switch {
		case r.NotApplicable != "":
			verdict = "n/a on the cluster: " + r.NotApplicable
		case !r.Passed:
			verdict = "**FAIL**"
		}
		d := r.Durable
		if d == "" {
			d = "–"
		}
		if r.NotApplicable != "" {
			fmt.Fprintf(&md, "| %s | not run | – | – | – | – | – | – | %s |\n", r.Scenario, verdict)
			continue
		}
		fmt.Fprintf(&md, "| %s | %s | %d | %d | %d | %d | %s | %.1f | %s |\n",
			r.Scenario, r.Faults, r.Accepted, r.Orders, r.Returned, r.Violations, d, r.Seconds, verdict)
	}
	t.Log("\n" + md.String())
	fmt.Println(md.String())
	if err := os.MkdirAll("out", 0o755); err != nil {
		t.Errorf("out: %v", err)
		return
	}
	// the subset of `make test` does not overwrite the table of `make chaos`, nor the cluster's
	// table (FLASHSALE_CHAOS_CLUSTER=1) the single server's
	name := "latest"
	if os.Getenv("FLASHSALE_CHAOS") == "" {
		name = "subset"
	}
	if clusterMode() {
		name += "-cluster"
	}
	b, _ := json.MarshalIndent(results.rows, "", "  ")
	if err := os.WriteFile(filepath.Join("out", name+".json"), append(b, '\n'), 0o644); err != nil {
		t.Errorf("out: %v", err)
	}
	if err := os.WriteFile(filepath.Join("out", name+".md"), []byte(md.String()), 0o644); err != nil {
		t.Errorf("out: %v", err)
	}
}

// finish is the end of every scenario: restart whatever is down, wait for the reservations in
// flight to settle, run `flashsale reconcile`, the invariants and the ledger check.
func (c *cluster) finish(t *testing.T, r *result, l *ledger, s sale) {
	t.Helper()
	ctx := context.Background()
	c.restartDown()
	violation := func(format string, args ...any) {
		r.Violations++
		t.Errorf(format, args...)
	}
	if err := c.waitSettled(s.id, 60*time.Second); err != nil {
		violation("settle: %v", err)
	}
	out, err := c.tool("reconcile", "-wait", "30s", strconv.FormatInt(s.id, 10))
	if err != nil || !strings.Contains(out, "every invariant holds") {
		violation("flashsale reconcile: %v\n%s", err, out)
	}
	acked := l.ackedIDs()
	for _, e := range pipeline.Invariants(ctx, c.db, store.NewStock(c.rdb, c.db.StockShardsCached), s.id, acked) {
		violation("invariant: %v", e)
	}
	orders, err := c.orders(ctx, s.id)
	if err != nil {
		t.Fatalf("orders: %v", err)
	}
	byID := indexOrders(orders, r, violation)
	l.mu.Lock()
	defer l.mu.Unlock()
	r.Accepted = len(l.acked)
	checkLedger(l, orders, byID, violation)
	// An order whose 202 never arrived must be findable by its shopper: in "my orders".
	unacked := c.checkUnackedFindable(s, l, orders, violation)
	r.redelivered = c.redelivered()
	if r.Note == "" {
		r.Note = fmt.Sprintf("purchase answers %v, %d without an answer", l.status, l.transport)
	}
	failed := 0
	for _, o := range orders {
		if o.status == shop.StatusFailed {
			failed++
		}
	}
	r.Note += fmt.Sprintf("; writers found %d orders already written (redelivered); %d orders never acknowledged, each in its shopper's orders; %d FAILED records (released before written)", r.redelivered, unacked, failed)
	// every unit given back leaves a tombstone (lua/release.lua)
	if n, err := c.rdb.SCard(ctx, store.GoneKey(s.id)).Result(); err == nil {
		r.Returned = int(n)
	}
}

// indexOrders indexes the orders by id, a violation for an id twice, and counts the live ones.
func indexOrders(orders []pgOrder, r *result, violation func(format string, args ...any)) map[string]pgOrder {
	byID := map[string]pgOrder{}
	for _, o := range orders {
		if _, dup := byID[o.id]; dup {
			violation("order %s is in postgres twice", o.id)
		}
		byID[o.id] = o
		if live(o.status) {
			r.Orders++
		}
	}
	return byID
}

// checkLedger checks every 202 against Postgres (there, for its shopper, not FAILED) and every
// order in Postgres against the answers (a 202, a 409 naming it, or an unanswered request), with
// the ledger locked by the caller.
func checkLedger(l *ledger, orders []pgOrder, byID map[string]pgOrder, violation func(format string, args ...any)) {
	for id, user := range l.acked {
		o, ok := byID[id]
		switch {
		case !ok:
			violation("order %s was answered 202 but is not in postgres", id)
		case o.user != user:
			violation("order %s was answered 202 to shopper %d but postgres has it for %d", id, user, o.user)
		case o.status == shop.StatusFailed:
			violation("order %s was answered 202 but postgres has it FAILED", id)
		}
	}
	for _, o := range orders {
		if o.status == shop.StatusFailed {
			continue // a record that a reservation was released unwritten: no unit
		}
		if _, ok := l.acked[o.id]; ok || l.named[o.id] || l.noAnswer[o.user] {
			continue
		}
		violation("order %s (%s, shopper %d) was neither answered 202, named in a 409, nor the outcome of an unanswered request", o.id, o.status, o.user)
	}
	for _, odd := range l.odd {
		violation("answer: %s", odd)
	}
}

// checkUnackedFindable checks that every live order whose 202 never arrived is in its shopper's
// "my orders", and returns how many there are (the ledger locked by the caller).
func (c *cluster) checkUnackedFindable(s sale, l *ledger, orders []pgOrder, violation func(format string, args ...any)) int {
	unacked := 0
	for _, o := range orders {
		if _, ok := l.acked[o.id]; ok || !live(o.status) {
			continue
		}
		unacked++
		ans, err := c.do(unacked%len(c.inst), "GET", fmt.Sprintf("/api/flash-sales/orders?saleId=%d", s.id), bearerOf(o.user), nil)
		found := false
		if err == nil {
			list, _ := ans.body["orders"].([]any)
			for _, v := range list {
				if m, _ := v.(map[string]any); m["orderId"] == o.id {
					found = true
				}
			}
		}
		if !found {
			violation("order %s, never acknowledged to shopper %d, is not in their orders (%v %d %s)", o.id, o.user, err, ans.status, ans.raw)
		}
	}
	return unacked
}

// goRun runs the load in the background; the returned channel closes when it is done.
func (c *cluster) goRun(l *ledger, s sale, shoppers []shopper, o loadOpts) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.run(l, s, shoppers, o)
	}()
	return done
}
