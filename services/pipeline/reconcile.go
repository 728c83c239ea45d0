package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale/services/metrics"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// Check is one invariant of ARCHITECTURE.md checked on one item or sale.
type Check struct {
	Name   string
	OK     bool
	Detail string // the numbers it was judged on
	Redis  bool   // a Redis-side check: a rebuild from Postgres repairs it
}

// ItemReport is the reconciliation of one item: Postgres's counts, Redis's, and the checks.
type ItemReport struct {
	ItemID         int64
	Name           string
	Quantity       int64
	Sold           int64
	Live           int64 // PENDING + PAID
	Pending        int64
	Paid           int64
	Expired        int64
	Cancelled      int64
	Failed         int64
	RedisStock     int64 // -1: Redis does not hold it; a sharded sale's: every shard's and InTransit
	InTransit      int64 // a sharded sale's units moving between shards (taken from one, not yet added to the other)
	InFlight       int64 // reserved in Redis, not yet in Postgres
	ReturnsPending int64 // units Postgres gave back that Redis has not taken yet
	Checks         []Check
}

// OK reports whether every check of the item holds.
func (r ItemReport) OK() bool { return AllOK(r.Checks) }

// Violations lists the failed checks with their numbers ("" when none).
func (r ItemReport) Violations() string { return Violations(r.Checks) }

// SaleReport is the reconciliation of a sale.
type SaleReport struct {
	SaleID   int64
	Limit    string
	Loaded   bool
	Lost     bool
	LoadedAt time.Time
	Seq      int64 // Redis's reservation counter
	SeqRaw   string
	PGMaxSeq int64 // the highest reservation counter Postgres holds
	Checks   []Check
	Items    []ItemReport
	// OldestInFlight is when the oldest reservation not yet in Postgres was made (zero: none), and
	// RedisNow Redis's clock at the reading, so their difference is the writer's lag. In a sharded
	// sale each reservation's age is taken by its own shard's clock, and OldestInFlight is RedisNow
	// less the greatest age.
	OldestInFlight time.Time
	RedisNow       time.Time
}

// OK reports whether every check of the sale and its items holds.
func (r SaleReport) OK() bool {
	if !AllOK(r.Checks) {
		return false
	}
	for _, it := range r.Items {
		if !it.OK() {
			return false
		}
	}
	return true
}

// redisOnly reports whether every failed check is one a rebuild of Redis from Postgres repairs.
func (r SaleReport) redisOnly() bool {
	all := append([]Check(nil), r.Checks...)
	for _, it := range r.Items {
		all = append(all, it.Checks...)
	}
	for _, c := range all {
		if !c.OK && !c.Redis {
			return false
		}
	}
	return true
}

// signature names the report's failures and the counter they were seen at: the same signature in
// two passes means the mismatch persisted with nothing sold in between.
func (r SaleReport) signature() string {
	var b strings.Builder
	b.WriteString(r.SeqRaw)
	b.WriteString(Violations(r.Checks))
	for _, it := range r.Items {
		b.WriteString(strconv.FormatInt(it.ItemID, 10))
		b.WriteString(it.Violations())
	}
	return b.String()
}

func AllOK(cs []Check) bool {
	for _, c := range cs {
		if !c.OK {
			return false
		}
	}
	return true
}

func Violations(cs []Check) string {
	var out []string
	for _, c := range cs {
		if !c.OK {
			out = append(out, c.Name+": "+c.Detail)
		}
	}
	return strings.Join(out, "; ")
}

// Write prints the report for people: per item, each invariant ok or VIOLATED with its numbers.
func (r SaleReport) Write(w io.Writer) {
	state := "loaded"
	switch {
	case !r.Loaded:
		state = "NOT LOADED"
	case r.Lost:
		state = "LOST (failing closed until rebuilt)"
	}
	fmt.Fprintf(w, "sale %d (%s): redis %s, reservation counter %d, postgres knows up to %d\n", r.SaleID, r.Limit, state, r.Seq, r.PGMaxSeq)
	line := func(c Check) {
		verdict := "ok"
		if !c.OK {
			verdict = "VIOLATED"
		}
		fmt.Fprintf(w, "    %-8s %-28s %s\n", verdict, c.Name, c.Detail)
	}
	for _, c := range r.Checks {
		line(c)
	}
	for _, it := range r.Items {
		fmt.Fprintf(w, "  item %d %q: quantity %d, sold %d, pending %d, paid %d, expired %d, cancelled %d, failed %d, in flight %d, redis stock %d, returns pending %d\n",
			it.ItemID, it.Name, it.Quantity, it.Sold, it.Pending, it.Paid, it.Expired, it.Cancelled, it.Failed, it.InFlight, it.RedisStock, it.ReturnsPending)
		for _, c := range it.Checks {
			line(c)
		}
	}
	if r.OK() {
		fmt.Fprintf(w, "  sale %d: every invariant holds\n", r.SaleID)
	} else {
		fmt.Fprintf(w, "  sale %d: VIOLATIONS\n", r.SaleID)
	}
}

// Reconciler compares, per sale and item, Redis (stock, buyers, in flight) with Postgres (live
// orders, paid, returns) and judges ARCHITECTURE.md's invariants. Its job runs on one instance at a time
// under a lease with a fencing token; a mismatch is a metric, a log line with the numbers and a
// red mark on the merchant's stock view, and one that persists with the queue drained is repaired
// by rebuilding the sale's Redis state from Postgres.
type Reconciler struct {
	db        DB
	stock     Stock
	metrics   *metrics.Metrics
	log       *slog.Logger
	orphanAge time.Duration
	thorough  bool // compare the buyers member by member even when the counts agree

	mu    sync.Mutex
	seen  map[int64]string // sale -> signature of the mismatch seen at the last pass
	quiet map[int64]string // sale -> its reservation counter at the last pass
}

// NewReconciler returns a Reconciler; a reservation in flight for longer than orphanAge plus a
// margin counts as stranded.
func NewReconciler(db DB, stock Stock, m *metrics.Metrics, log *slog.Logger, orphanAge time.Duration) *Reconciler {
	return &Reconciler{db: db, stock: stock, metrics: metrics.Or(m), log: log, orphanAge: orphanAge, seen: map[int64]string{}, quiet: map[int64]string{}}
}

// Thorough makes every report compare Redis's buyers with Postgres member by member, not only by
// count (the command and the tests; the background job compares counts and names members only
// when they differ).
func (r *Reconciler) Thorough() *Reconciler {
	r.thorough = true
	return r
}

// Report reconciles one sale now. With traffic running the two sides are read moments apart, so
// a mismatch may be transient; once traffic stops and the queue drains it is exact.
func (r *Reconciler) Report(ctx context.Context, saleID int64) (SaleReport, error) {
	sd, err := r.read(ctx, saleID)
	if err != nil {
		return SaleReport{}, err
	}
	p := r.pending(sd)
	view := sd.view
	rep := SaleReport{SaleID: saleID, Limit: sd.facts.PurchaseLimit, Loaded: view.State.Loaded, Lost: view.State.Lost,
		LoadedAt: view.State.LoadedAt, Seq: view.State.Seq, SeqRaw: view.State.SeqRaw, OldestInFlight: p.oldest, RedisNow: view.Now}
	for _, f := range sd.facts.Items {
		rep.PGMaxSeq = max(rep.PGMaxSeq, f.MaxSeq)
		rep.Items = append(rep.Items, r.itemReport(f, sd, p))
	}
	if sd.facts.PurchaseLimit == shop.LimitPerSale {
		rep.Checks = append(rep.Checks, Check{Name: "one per shopper (sale)", OK: sd.facts.SaleDupHolders == 0,
			Detail: fmt.Sprintf("%d shoppers hold live orders of more than one item", sd.facts.SaleDupHolders)})
	}
	if ok, _ := sd.redisHealthy(); ok {
		buyers := Check{Name: "buyers", Redis: true, OK: view.Buyers == p.buyerCount,
			Detail: fmt.Sprintf("redis %d buyers, postgres and flight %d", view.Buyers, p.buyerCount)}
		if !buyers.OK || r.thorough {
			diff, clean, err := r.buyerDiff(ctx, saleID, sd.facts.PurchaseLimit, p.buyers)
			if err != nil {
				return SaleReport{}, err
			}
			buyers.OK = buyers.OK && clean
			buyers.Detail += diff
		}
		counter := Check{Name: "redis counter not behind", Redis: true, OK: view.State.Seq >= rep.PGMaxSeq,
			Detail: fmt.Sprintf("redis %d, postgres %d", view.State.Seq, rep.PGMaxSeq)}
		if view.State.Shards > 1 {
			// each shard has its own counter, checked against that shard's highest seq
			pgs, err := r.db.MaxSeqOfShards(ctx, saleID, view.State.Shards)
			if err != nil {
				return SaleReport{}, err
			}
			seqs := view.State.ShardSeqs()
			counter.OK, counter.Detail = true, fmt.Sprintf("%d shards:", len(pgs))
			for sh, pg := range pgs {
				if sh >= len(seqs) || seqs[sh] < pg {
					counter.OK = false
				}
				if sh < len(seqs) {
					counter.Detail += fmt.Sprintf(" %d: redis %d, postgres %d;", sh, seqs[sh], pg)
				}
			}
		}
		rep.Checks = append(rep.Checks, buyers, counter)
	}
	return rep, nil
}

// sides is one reading of a sale: Postgres's facts, Redis's view, and which of the reservations
// Redis has in flight Postgres already holds.
type sides struct {
	facts   store.SaleFacts
	view    store.RedisView
	written map[string]string
}

// redisHealthy tells whether Redis holds the sale healthy, and if not, why (in words).
func (sd sides) redisHealthy() (bool, string) {
	switch {
	case !sd.view.State.Loaded:
		return false, "redis does not hold the sale (purchases fail closed until it is loaded)"
	case sd.view.State.Lost:
		return false, "redis lost data for the sale (purchases fail closed until it is rebuilt)"
	}
	return true, ""
}

// read takes Postgres's side in one snapshot, then Redis's in one MULTI, then checks the
// reservations in flight against Postgres.
func (r *Reconciler) read(ctx context.Context, saleID int64) (sides, error) {
	facts, err := r.db.SaleFacts(ctx, saleID)
	if errors.Is(err, store.ErrNotFound) {
		return sides{}, shop.Errorf(shop.CodeNotFound, "no sale %d", saleID)
	}
	if err != nil {
		return sides{}, err
	}
	items := make([]int64, len(facts.Items))
	for i, it := range facts.Items {
		items[i] = it.ItemID
	}
	retIDs := make([]string, len(facts.Returns))
	for i, ret := range facts.Returns {
		retIDs[i] = ret.OrderID
	}
	view, err := r.stock.View(ctx, saleID, items, retIDs)
	if err != nil {
		return sides{}, err
	}
	flightIDs := make([]string, len(view.InFlight))
	for i, e := range view.InFlight {
		flightIDs[i] = e.OrderID
	}
	written, err := r.db.ExistingOrders(ctx, flightIDs)
	if err != nil {
		return sides{}, err
	}
	return sides{facts: facts, view: view, written: written}, nil
}

// pendingUnits is what is on its way between the two sides, per item: reservations not written
// yet (and those stranded), returns Redis has not taken yet, and the buyers they account for.
type pendingUnits struct {
	notWritten, stranded, returns map[int64]int64
	buyers                        map[string]bool // members of the in-flight reservations and returns
	buyerCount                    int64           // the buyers Redis should have: live orders' members and these
	oldest                        time.Time       // the oldest reservation not written (zero: none), by view.Now's clock
	oldestAge                     time.Duration
}

// pending counts the units in flight between the sides. Buyers are compared by count first
// (cheap on a sale of 100,000 orders); the members are read one by one only when the counts
// differ, to name them.
func (r *Reconciler) pending(sd sides) pendingUnits {
	p := pendingUnits{notWritten: map[int64]int64{}, stranded: map[int64]int64{}, returns: map[int64]int64{},
		buyers: map[string]bool{}, buyerCount: sd.facts.LiveMembers}
	limit := sd.facts.PurchaseLimit
	for _, e := range sd.view.InFlight {
		if _, ok := sd.written[e.OrderID]; ok {
			continue // written, its settle in Redis not done yet
		}
		p.notWritten[e.ItemID]++
		// Ages by the clock of the node holding the reservation's shard: on a Redis Cluster the
		// shards' nodes' clocks differ, and shard 0's would misjudge the other shards'.
		age := sd.view.Age(e)
		if p.oldest.IsZero() || age > p.oldestAge {
			p.oldest, p.oldestAge = sd.view.Now.Add(-age), age
		}
		p.buyers[store.BuyerMember(limit, e.ItemID, e.UserID)] = true
		p.buyerCount++
		if age > r.orphanAge+15*time.Second {
			p.stranded[e.ItemID]++
		}
	}
	for _, ret := range sd.facts.Returns {
		if !sd.view.Gone[ret.OrderID] {
			p.returns[ret.ItemID]++
			p.buyers[store.BuyerMember(limit, ret.ItemID, ret.UserID)] = true
			p.buyerCount++
		}
	}
	return p
}

// itemReport judges one item's invariants.
func (r *Reconciler) itemReport(f store.ItemFacts, sd sides, p pendingUnits) ItemReport {
	it := ItemReport{ItemID: f.ItemID, Name: f.Name, Quantity: f.Quantity, Sold: f.Sold, Live: f.Pending + f.Paid,
		Pending: f.Pending, Paid: f.Paid, Expired: f.Expired, Cancelled: f.Cancelled, Failed: f.Failed,
		RedisStock: sd.view.Levels[f.ItemID], InTransit: sd.view.InTransit[f.ItemID], InFlight: p.notWritten[f.ItemID], ReturnsPending: p.returns[f.ItemID]}
	it.Checks = append(it.Checks,
		Check{Name: "no oversell", OK: it.Live <= it.Quantity, Detail: fmt.Sprintf("live orders %d, quantity %d", it.Live, it.Quantity)},
		Check{Name: "sold equals live orders", OK: it.Sold == it.Live, Detail: fmt.Sprintf("sold %d, live orders %d", it.Sold, it.Live)},
		Check{Name: "one per shopper (item)", OK: f.DupHolders == 0, Detail: fmt.Sprintf("%d shoppers hold more than one live order", f.DupHolders)},
	)
	want := it.Quantity - it.Live - it.InFlight - it.ReturnsPending
	if ok, why := sd.redisHealthy(); !ok {
		it.Checks = append(it.Checks, Check{Name: "conservation", Redis: true, Detail: why})
	} else {
		it.Checks = append(it.Checks, Check{Name: "conservation", Redis: true, OK: it.RedisStock == want,
			Detail: fmt.Sprintf("redis stock %d, want quantity %d - live %d - in flight %d - returns pending %d = %d",
				it.RedisStock, it.Quantity, it.Live, it.InFlight, it.ReturnsPending, want)})
	}
	it.Checks = append(it.Checks, Check{Name: "no stranded reservation", Redis: true, OK: p.stranded[f.ItemID] == 0,
		Detail: fmt.Sprintf("%d reservations in flight for over %s", p.stranded[f.ItemID], r.orphanAge+15*time.Second)})
	return it
}

// buyerDiff names the members missing from Redis's buyers hash and the extra ones, given the
// members of reservations and returns in flight (the live orders' are read now).
func (r *Reconciler) buyerDiff(ctx context.Context, saleID int64, limit string, want map[string]bool) (string, bool, error) {
	live, err := r.db.LiveOrders(ctx, saleID)
	if err != nil {
		return "", false, err
	}
	have, err := r.stock.Buyers(ctx, saleID)
	if err != nil {
		return "", false, err
	}
	facts := want
	for _, o := range live {
		facts[store.BuyerMember(limit, o.ItemID, o.UserID)] = true
	}
	var missing, extra []string
	for m := range facts {
		if _, ok := have[m]; !ok {
			missing = append(missing, m)
		}
	}
	for m := range have {
		if !facts[m] {
			extra = append(extra, m)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	return fmt.Sprintf("; missing %s, extra %s", firstFew(missing), firstFew(extra)), len(missing) == 0 && len(extra) == 0, nil
}

func firstFew(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	if len(s) > 5 {
		return strings.Join(s[:5], ",") + fmt.Sprintf(" and %d more", len(s)-5)
	}
	return strings.Join(s, ",")
}

// Pass reconciles the sales once, as the lease holder with fencing token fence. backlogDrained
// tells whether the queue was empty before the pass: only then is a persisting Redis-side
// mismatch repaired (the sale fails closed and is rebuilt from Postgres).
func (r *Reconciler) Pass(ctx context.Context, sales []int64, fence int64, backlogDrained bool) {
	for _, sale := range sales {
		rep, ok := r.quietReport(ctx, sale, backlogDrained)
		if !ok {
			continue
		}
		bad := 0
		for _, it := range rep.Items {
			if !it.OK() {
				bad++
			}
		}
		if !AllOK(rep.Checks) && bad == 0 {
			bad = 1
		}
		r.metrics.Mismatches.WithLabelValues(strconv.FormatInt(sale, 10)).Set(float64(bad))
		r.mu.Lock()
		prev := r.seen[sale]
		if bad == 0 {
			delete(r.seen, sale)
		} else {
			r.seen[sale] = rep.signature()
		}
		r.mu.Unlock()
		if bad > 0 {
			r.repair(ctx, sale, fence, rep, prev)
		}
	}
}

// quietReport compares a quiet sale's two sides. Only a quiet sale is compared: while shoppers
// buy, both sides move between the reads and the comparison would cost a rush its Postgres time
// for nothing. Quiet: the queue drained and the reservation counter unchanged since the previous
// pass. A sale Redis does not hold (or lost) is the keeper's to warm or rebuild: not compared.
func (r *Reconciler) quietReport(ctx context.Context, sale int64, backlogDrained bool) (SaleReport, bool) {
	st, err := r.stock.State(ctx, sale)
	if err != nil {
		r.log.Warn("reconcile: sale not checked", "sale", sale, "err", err)
		return SaleReport{}, false
	}
	r.mu.Lock()
	prevSeq, seenBefore := r.quiet[sale]
	r.quiet[sale] = st.SeqRaw
	r.mu.Unlock()
	if !backlogDrained || !seenBefore || prevSeq != st.SeqRaw {
		return SaleReport{}, false
	}
	rep, err := r.Report(ctx, sale)
	if err != nil {
		r.log.Warn("reconcile: sale not checked", "sale", sale, "err", err)
		return SaleReport{}, false
	}
	return rep, rep.Loaded && !rep.Lost
}

// repair acts on a mismatch: the first time it is only logged (re-checked next pass); the same
// one again, on the Redis side only, makes the sale fail closed to be rebuilt from Postgres. A
// violation in Postgres itself is never repaired automatically.
func (r *Reconciler) repair(ctx context.Context, sale, fence int64, rep SaleReport, prev string) {
	var b strings.Builder
	rep.Write(&b)
	if prev != rep.signature() {
		r.log.Warn("reconcile: redis and postgres disagree (re-checked next pass)", "sale", sale, "report", b.String())
		return
	}
	if !rep.redisOnly() {
		r.log.Error("reconcile: postgres itself violates an invariant; no automatic repair", "sale", sale, "report", b.String())
		return
	}
	marked, err := r.stock.MarkLost(ctx, sale, fence, rep.SeqRaw)
	if err != nil || !marked {
		r.log.Warn("reconcile: repair not started (the sale moved on, or a newer lease holder acted)", "sale", sale, "err", err)
		return
	}
	r.metrics.Repairs.Inc()
	r.log.Error("reconcile: mismatch persisted with the queue drained; rebuilding the sale's redis state from postgres", "sale", sale, "report", b.String())
}
