package catalog

import (
	"context"
	"sync"
	"time"

	"github.com/flashsale/flashsale/services/internal/ttlcache"
	"github.com/flashsale/flashsale/services/pipeline"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// A sale's status in the merchant's live view.
const (
	LiveScheduled = "scheduled"
	LiveRunning   = "running"
	LivePaused    = "paused"
	LiveEnded     = "ended"
)

// The reconciliation's state in the merchant's live view.
const (
	ReconcileOK        = "ok"        // every check holds
	ReconcileSettling  = "settling"  // only Redis-side checks fail while units are on their way between the sides
	ReconcileViolation = "violation" // a check fails with nothing on its way (or Postgres itself, or Redis lost data)
)

// LiveSale is the sale in the merchant's live view.
type LiveSale struct {
	ID       int64
	Name     string
	Status   string // LiveScheduled, LiveRunning, LivePaused or LiveEnded
	StartsAt time.Time
	EndsAt   time.Time
	Paused   bool
	LoadedAt *time.Time // when Redis got the sale's stock; nil if not loaded
	// FairStartMillis is the sale's draw window after its start (0: none).
	FairStartMillis int
}

// LiveCheck is one invariant of the reconciliation with the numbers it was judged on.
type LiveCheck struct {
	Name   string
	ItemID int64 // 0: a check of the whole sale
	OK     bool
	Detail string
}

// LiveReconciliation is the reconciliation's verdict in the live view.
type LiveReconciliation struct {
	State          string // ReconcileOK, ReconcileSettling or ReconcileViolation
	AsOf           time.Time
	Loaded         bool  // Redis holds the sale
	Lost           bool  // Redis lost data for it: purchases fail closed until it is rebuilt
	RedisCounter   int64 // the sale's reservation counter in Redis
	PostgresMaxSeq int64 // the highest reservation counter Postgres holds
	Checks         []LiveCheck
	// RebuildWaitsFor: Redis lost the sale (marked lost, or no longer held though loaded before)
	// and its rebuild waits for the writer: this many queued messages are left (0: drained, the
	// keeper rebuilds it within a pass or two). nil: no rebuild pending, or the queue unknown.
	RebuildWaitsFor *uint64
}

// LiveFunnel is the sale's purchase funnel: requests (purchase attempts, and purchase-token
// requests refused) over every instance, each accepted or refused for one reason; and what became
// of the accepted ones, from Postgres.
type LiveFunnel struct {
	Requests  int64
	Accepted  int64
	Refused   map[string]int64 // every one of RefusalReasons, zero included
	Written   int64            // orders in Postgres: pending + paid + expired + cancelled
	Paid      int64
	Expired   int64
	Cancelled int64
}

// LiveWriter is how far the writer is behind.
type LiveWriter struct {
	LagSeconds float64 // age of the sale's oldest reservation not yet in Postgres (0: none)
	QueueDepth *uint64 // messages of every sale the writer has not written yet; nil if NATS did not answer
}

// LiveMoney is the money of a sale, or of one of its items, in minor units of the sale's currency.
type LiveMoney struct {
	PaidCents      int64 // taken by the PAID orders
	Awaiting       int64 // PENDING orders whose payment the provider has not confirmed yet (a checkout open)
	AwaitingCents  int64 // their price
	Refunds        int64 // payments that came after their order had expired or been cancelled: given back
	RefundedCents  int64 // what those payments took
	RefundsPending int64 // of those, the refunds the provider has not accepted yet
}

func (m *LiveMoney) add(o LiveMoney) {
	m.PaidCents += o.PaidCents
	m.Awaiting += o.Awaiting
	m.AwaitingCents += o.AwaitingCents
	m.Refunds += o.Refunds
	m.RefundedCents += o.RefundedCents
	m.RefundsPending += o.RefundsPending
}

// LiveSaleMoney is the sale's money: its total, and per item.
type LiveSaleMoney struct {
	Currency string // the sale's (ISO 4217)
	LiveMoney
	Items map[int64]LiveMoney // by item id; an item without any is missing (zeros)
	// Conflicts are payments that named one of the sale's orders but were not its own (another
	// session, a payment link, another amount): they paid nothing and are refunded.
	Conflicts     int64
	ConflictCents int64
	RefundsFailed int64 // refunds the provider refused for good: the merchant settles them
}

// liveMoney sums the items' money into the sale's.
func liveMoney(currency string, items []store.ItemMoney, issues store.MoneyIssues) LiveSaleMoney {
	out := LiveSaleMoney{Currency: currency, Items: make(map[int64]LiveMoney, len(items)),
		Conflicts: issues.Conflicts, ConflictCents: issues.ConflictCents, RefundsFailed: issues.RefundsFailed}
	for _, it := range items {
		m := LiveMoney{PaidCents: it.PaidCents, Awaiting: it.Awaiting, AwaitingCents: it.AwaitingCents,
			Refunds: it.Refunds, RefundedCents: it.RefundedCents, RefundsPending: it.RefundsPending}
		out.Items[it.ItemID] = m
		out.add(m)
	}
	return out
}

// LiveView is the merchant's live view of a sale, polled every second by the dashboard.
type LiveView struct {
	Sale           LiveSale
	Items          []AdminItemStock
	Money          LiveSaleMoney
	Reconciliation LiveReconciliation
	Funnel         LiveFunnel
	Series         []store.SeriesPoint // per second with a request, oldest first, the last FunnelKeep
	Writer         LiveWriter
	Reminders      int64 // shoppers who asked to be reminded of the start (an estimate: catalog.Remind)
	// Draw is the fair start's draw (window, entries, winners, when it closed); nil for a sale
	// without one. Its record is paged apart (Draw).
	Draw       *shop.Draw
	AsOf       time.Time
	merchantID int64
}

// liveTTL is how long an instance serves one computation of a sale's live view: the
// reconciliation report behind it reads both sides, so a polling page (or many) runs it at most
// once a second per sale and instance.
const liveTTL = time.Second

// liveState remembers, per sale, the reservation counter of the previous live view (a counter
// that moved means traffic: a Redis-side mismatch is then "settling").
type liveState struct {
	mu      sync.Mutex
	counter map[int64]string
	seenAt  map[int64]time.Time // when each sale's live view was last served here
}

// liveSeenKeep is how long an instance remembers the counter of a sale whose live view nobody
// watches: a merchant coming back later starts a fresh comparison (one "settling" refresh).
const liveSeenKeep = 10 * time.Minute

// see records the sale's counter as served at now, returns the one served before (seen: there
// was one), and forgets the sales not watched for liveSeenKeep.
func (l *liveState) see(saleID int64, counter string, now time.Time) (prev string, seen bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seenAt == nil {
		l.seenAt = map[int64]time.Time{}
	}
	prev, seen = l.counter[saleID]
	l.counter[saleID] = counter
	l.seenAt[saleID] = now
	for id, at := range l.seenAt {
		if now.Sub(at) > liveSeenKeep {
			delete(l.seenAt, id)
			delete(l.counter, id)
		}
	}
	return prev, seen
}

// Live returns the merchant's live view of their sale (another merchant's sale is NOT_FOUND). It
// is computed at most once a second per sale on this instance, and served to every poll meanwhile.
func (s *Sales) Live(ctx context.Context, merchantID, saleID int64) (LiveView, error) {
	// The owner first, from the catalog cache (a sale's merchant never changes): another
	// merchant's poll costs no report.
	row, err := s.CachedRow(ctx, saleID)
	if err != nil {
		return LiveView{}, err
	}
	if !row.OwnedBy(merchantID) {
		return LiveView{}, shop.Errorf(shop.CodeNotFound, "no sale %d", saleID)
	}
	v, err := s.liveCache.Get(ctx, saleID, func(ctx context.Context) (LiveView, error) {
		return s.live(ctx, saleID)
	})
	if err != nil {
		return LiveView{}, ttlcache.OrUnavailable(err)
	}
	if v.merchantID != merchantID {
		return LiveView{}, shop.Errorf(shop.CodeNotFound, "no sale %d", saleID)
	}
	return v, nil
}

// saleMoney reads a sale's money from Postgres: its items' and what stands beside them
// (conflicts, refused refunds).
func (s *Sales) saleMoney(ctx context.Context, saleID int64, currency string) (LiveSaleMoney, error) {
	items, err := s.db.SaleMoney(ctx, saleID)
	if err != nil {
		return LiveSaleMoney{}, shop.Unavailable(err)
	}
	issues, err := s.db.SaleMoneyIssues(ctx, saleID)
	if err != nil {
		return LiveSaleMoney{}, shop.Unavailable(err)
	}
	return liveMoney(currency, items, issues), nil
}

func (s *Sales) live(ctx context.Context, saleID int64) (LiveView, error) {
	now := s.now()
	row, err := s.getRow(ctx, saleID)
	if err != nil {
		return LiveView{}, err
	}
	rep, err := s.reconcile.Report(ctx, saleID)
	if err != nil {
		return LiveView{}, shop.Unavailable(err)
	}
	counts, series, err := s.stock.Funnel(ctx, saleID, now.Add(-FunnelKeep).Unix())
	if err != nil {
		return LiveView{}, shop.Unavailable(err)
	}
	money, err := s.saleMoney(ctx, saleID, row.Currency)
	if err != nil {
		return LiveView{}, err
	}
	reminders, err := s.stock.Reminders(ctx, saleID)
	if err != nil {
		return LiveView{}, shop.Unavailable(err)
	}
	v := LiveView{AsOf: now, merchantID: row.MerchantID, Items: adminItems(rep), Series: series, Reminders: reminders,
		Money: money,
		Sale: LiveSale{ID: row.ID, Name: row.Name, StartsAt: row.StartsAt, EndsAt: row.EndsAt, Paused: row.Paused,
			Status: liveStatus(row.StartsAt, row.EndsAt, row.Paused, now), FairStartMillis: row.FairStartMillis}}
	if row.FairStartMillis > 0 {
		d, err := s.db.DrawOf(ctx, saleID)
		if err != nil {
			return LiveView{}, shop.Unavailable(err)
		}
		v.Draw = &d
	}
	if rep.Loaded {
		t := rep.LoadedAt
		v.Sale.LoadedAt = &t
	}
	{
		if n, err := s.queue.Backlog(ctx); err == nil {
			v.Writer.QueueDepth = &n
		} else {
			s.log.Warn("live view: queue depth unknown", "err", err)
		}
	}
	if !rep.OldestInFlight.IsZero() {
		v.Writer.LagSeconds = max(0, rep.RedisNow.Sub(rep.OldestInFlight).Seconds())
	}
	v.Funnel = liveFunnel(counts, rep)
	prev, seen := s.liveSeen.see(saleID, rep.SeqRaw, now)
	moved := !seen || prev != rep.SeqRaw
	v.Reconciliation = liveReconciliation(rep, now, shop.DueForWarmUp(row.StartsAt, now, s.warmAhead), v.Writer.QueueDepth, moved)
	if (rep.Lost || (!rep.Loaded && row.Epoch != 0)) && v.Writer.QueueDepth != nil {
		n := *v.Writer.QueueDepth
		v.Reconciliation.RebuildWaitsFor = &n
	}
	return v, nil
}

// liveStatus names a sale's state at now for its merchant.
func liveStatus(startsAt, endsAt time.Time, paused bool, now time.Time) string {
	switch {
	case !now.Before(endsAt):
		return LiveEnded
	case paused:
		return LivePaused
	case now.Before(startsAt):
		return LiveScheduled
	}
	return LiveRunning
}

// liveFunnel adds Postgres's side to the counts every instance flushed to Redis.
func liveFunnel(c store.FunnelCounts, rep pipeline.SaleReport) LiveFunnel {
	f := LiveFunnel{Accepted: c.Accepted, Refused: map[string]int64{}}
	f.Requests = c.Accepted
	for _, r := range RefusalReasons {
		f.Refused[r] = c.Refused[r]
		f.Requests += c.Refused[r]
	}
	for _, it := range rep.Items {
		f.Paid += it.Paid
		f.Expired += it.Expired
		f.Cancelled += it.Cancelled
		f.Written += it.Pending + it.Paid + it.Expired + it.Cancelled
	}
	return f
}

// liveReconciliation judges a report for the merchant:
//   - a failed Postgres-side check is a violation (Postgres is read in one snapshot: it never
//     settles), and so is a Redis that lost data for the sale (purchases fail closed until the
//     keeper rebuilds it);
//   - a sale Redis does not hold yet is ok before its warm-up (there is nothing to compare) and
//     settling once it is due (the keeper loads it within a pass);
//   - failed Redis-side checks while units are on their way (the queue not drained, reservations
//     not written, returns not applied, or the counter moved since the previous view) are
//     settling: the two sides were read moments apart; with nothing moving, a violation.
func liveReconciliation(rep pipeline.SaleReport, now time.Time, due bool, queueDepth *uint64, moved bool) LiveReconciliation {
	out := LiveReconciliation{AsOf: now, Loaded: rep.Loaded, Lost: rep.Lost, RedisCounter: rep.Seq, PostgresMaxSeq: rep.PGMaxSeq}
	pgFailed, redisFailed := false, false
	add := func(item int64, cs []pipeline.Check) {
		for _, c := range cs {
			out.Checks = append(out.Checks, LiveCheck{Name: c.Name, ItemID: item, OK: c.OK, Detail: c.Detail})
			if !c.OK && c.Redis {
				redisFailed = true
			} else if !c.OK {
				pgFailed = true
			}
		}
	}
	add(0, rep.Checks)
	inFlight := false
	for _, it := range rep.Items {
		add(it.ItemID, it.Checks)
		inFlight = inFlight || it.InFlight > 0 || it.ReturnsPending > 0
	}
	switch {
	case pgFailed:
		out.State = ReconcileViolation
	case !redisFailed:
		out.State = ReconcileOK
	case !rep.Loaded && !due:
		out.State = ReconcileOK
	case !rep.Loaded:
		out.State = ReconcileSettling
	case rep.Lost:
		out.State = ReconcileViolation
	case inFlight || moved || queueDepth == nil || *queueDepth > 0:
		out.State = ReconcileSettling
	default:
		out.State = ReconcileViolation
	}
	return out
}
