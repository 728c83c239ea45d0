package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/flashsale/flashsale/bench/internal/proc"
	"github.com/flashsale/flashsale/bench/internal/refs"
	"github.com/flashsale/flashsale/bench/internal/report"
	"github.com/flashsale/flashsale/bench/internal/target"
	"github.com/flashsale/flashsale/loadgen"
	"github.com/flashsale/flashsale/loadgen/tokens"
)

// rush: N distinct shoppers arrive within the window from the sale's start, for Units units
// (spread over Items items, the shoppers spread evenly over them); each fetches a purchase
// token, then buys; some double-click. Then the same schedule against
// the bare-Gin reference, to divide by.
type rush struct{}

func (rush) Name() string { return "rush" }

func (rush) Usage() []string {
	return []string{
		"N shoppers (-n 100000) arrive within -window (2s) of the sale's start for -units (10000);",
		"each fetches a purchase token, then buys; -double-click (0.05) of them click twice;",
		"-items (1) spreads the units and the shoppers over that many items",
	}
}

func (rush) Flags(fs *flag.FlagSet, o *Options) {
	fs.IntVar(&o.N, "n", 100_000, "rush: distinct shoppers")
	fs.DurationVar(&o.Window, "window", 2*time.Second, "rush: all shoppers arrive within this of the start")
	fs.IntVar(&o.Units, "units", 10_000, "rush: units for sale")
	fs.IntVar(&o.Items, "items", 1, "rush: items the units are spread over (1 to 50), shopper i buying item i mod items")
	fs.Float64Var(&o.DoubleClick, "double-click", 0.05, "rush: fraction of shoppers who send the purchase twice at once")
	fs.DurationVar(&o.Lead, "lead", 3*time.Second, "rush: the sale starts this long after it is created")
}

func (rush) Validate(o *Options) []error {
	var errs []error
	if o.N < 1 || o.Units < 1 || o.Window <= 0 {
		errs = append(errs, errors.New("-n, -units and -window must be positive"))
	}
	if o.Items < 1 || o.Items > maxItems || o.Items > o.Units {
		errs = append(errs, fmt.Errorf("-items %d: 1 to %d, and at most -units", o.Items, maxItems))
	}
	if o.DoubleClick < 0 || o.DoubleClick > 1 {
		errs = append(errs, errors.New("-double-click is a fraction between 0 and 1"))
	}
	return errs // -lead: with the timeouts in Options.validate
}

// maxItems is the most items a sale may have (the server's limit).
const maxItems = 50

// splitUnits spreads units over items as evenly as they go, the first ones one more.
func splitUnits(units, items int) []int {
	q := make([]int, items)
	for i := range q {
		q[i] = units / items
		if i < units%items {
			q[i]++
		}
	}
	return q
}

// RushReport is the rush scenario's own figures (seconds are after the sale's start).
type RushReport struct {
	SaleID              int64   `json:"sale_id"`
	Shoppers            int     `json:"shoppers"`
	Units               int     `json:"units"`
	Items               int     `json:"items"`
	Window              float64 `json:"window_s"`
	DoubleClick         float64 `json:"double_click"`
	Accepted            int64   `json:"accepted"`
	SoldOutAt           float64 `json:"sold_out_s"` // first SOLD_OUT answer (several items: the last 202 once every unit went)
	Last202At           float64 `json:"last_202_s"`
	AllAnsweredAt       float64 `json:"all_answered_s"`
	PersistedAllAt      float64 `json:"all_persisted_s"`
	PersistAfterSellout float64 `json:"persisted_after_sellout_s"`
	PersistRate         float64 `json:"persist_rate"` // orders/s from the first to the last written
	BacklogPeak         int64   `json:"backlog_peak_orders"`
	GaugePeak           float64 `json:"backlog_gauge_peak_messages"`
	Unaccounted         int64   `json:"persisted_unanswered"`
	ServerRSSPeak       float64 `json:"server_rss_peak_mib"`
	RefAllAnsweredAt    float64 `json:"ref_gin_all_answered_s"`
	AnsweredRatio       float64 `json:"answered_ratio_vs_gin"`
}

func (rush) Run(ctx context.Context, r *Runner, res *RunResult) error {
	o := r.o
	r.prog.Note("bench: rush: minting %d shopper tokens", o.N)
	users := r.users(o.N)
	offsets := loadgen.Schedule(o.N, o.Window, o.Arrivals, o.Seed)
	pool, err := r.newPool(o.URL, o.Workers)
	if err != nil {
		return err
	}
	defer pool.Close()

	starts := time.Now().Add(o.Lead).Round(time.Millisecond)
	sale, err := r.api.CreateSaleItems(ctx, fmt.Sprintf("bench rush %s", starts.Format(time.RFC3339)), starts, o.Window+o.MaxWait+10*time.Minute, splitUnits(o.Units, max(o.Items, 1)))
	if err != nil {
		return err
	}
	r.sales = append(r.sales, sale)
	base := time.Now().Add(time.Until(starts)) // the start as a monotonic reading
	if err := warmBeforeStart(pool, base, o.Lead); err != nil {
		return err
	}
	pattern := make([]uint8, o.N)
	ph := &loadgen.Phase{Name: "rush", Base: base, Offsets: offsets, Deadline: o.Window + o.MaxWait,
		Do: loadgen.ShopperFlow(users, loadgen.TokenPath(sale.SaleID), loadgen.PurchasePaths(sale.ItemIDs), o.DoubleClick, pattern, nil)}
	r.prog.Note("bench: rush: sale %d starts at %s: %d shoppers within %v for %d units, %d workers",
		sale.SaleID, starts.Format("15:04:05.000"), o.N, o.Window, o.Units, o.Workers)

	watch := r.watchRush(ctx, sale, ph)
	rep, st := r.measure(ctx, pool, ph, tFlashsale, r.procs, float64(o.N)/o.Window.Seconds(), o.Window)
	sale.Acked = append(sale.Acked, pool.CollectAcked()...)
	rr := &RushReport{SaleID: sale.SaleID, Shoppers: o.N, Units: o.Units, Items: len(sale.ItemIDs), Window: o.Window.Seconds(), DoubleClick: o.DoubleClick,
		Accepted: st.Accepted(), SoldOutAt: soldOutAt(rep.FirstSoldOut, rep.Last202, len(sale.ItemIDs), st.Accepted(), o.Units), Last202At: rep.Last202, AllAnsweredAt: rep.Elapsed,
		PersistedAllAt: -1, PersistAfterSellout: -1, ServerRSSPeak: rep.Procs["server"].RSSPeak}
	if watch != nil {
		r.prog.Note("bench: rush: waiting for every accepted order to reach Postgres")
		rr.persisted(watch.Finish(), res)
	}
	res.Phases = append(res.Phases, rep)
	res.Rush = rr

	if !o.NoRef {
		if err := r.refRush(ctx, res, rr, users, offsets, sale, pattern); err != nil {
			return fmt.Errorf("ref-gin: %w", err)
		}
	}
	return nil
}

// warmBeforeStart opens the connections just before the start: the server drops a new
// connection that sends nothing for 5 s (the second connections of double-clickers are opened
// on first use).
func warmBeforeStart(pool *loadgen.Pool, base time.Time, lead time.Duration) error {
	time.Sleep(time.Until(base.Add(-time.Second)))
	if err := pool.Warm(false); err != nil {
		return fmt.Errorf("open connections: %w", err)
	}
	if time.Until(base) < 100*time.Millisecond {
		return fmt.Errorf("the sale started before the generator was ready: raise -lead (now %v)", lead)
	}
	return nil
}

// watchRush starts watching the sale's orders reach Postgres before the phase (nil without
// the backends); the watcher reads the phase's 202 count as it goes.
func (r *Runner) watchRush(ctx context.Context, sale *target.Sale, ph *loadgen.Phase) *target.PersistWatch {
	if r.be == nil {
		return nil
	}
	var stp *loadgen.Stats
	ready := make(chan struct{})
	watch := target.WatchPersistence(ctx, r.be, r.api, sale, ph.Base, func() int64 {
		select {
		case <-ready:
			return stp.Accepted()
		default:
			return 0
		}
	}, r.o.DrainTimeout)
	ph.OnStats = func(s *loadgen.Stats) { stp = s; close(ready) }
	return watch
}

// persisted fills in the report from the persistence watch: backlog, when every accepted order
// was written, and at what rate.
func (rr *RushReport) persisted(w target.Persistence, res *RunResult) {
	rr.BacklogPeak, rr.GaugePeak, rr.Unaccounted = w.BacklogPeak, w.GaugePeak, w.Unaccounted
	if w.Err != nil {
		res.Notes = append(res.Notes, "persistence watch: "+w.Err.Error())
	}
	if w.AllAt < 0 {
		return
	}
	rr.PersistedAllAt = w.AllAt.Seconds()
	ref := rr.SoldOutAt
	if ref < 0 {
		ref = rr.Last202At
	}
	rr.PersistAfterSellout = max(0, rr.PersistedAllAt-ref)
	if span := w.AllAt - max(w.FirstAt, 0); span > 0 && rr.Accepted > 0 {
		rr.PersistRate = float64(rr.Accepted) / span.Seconds()
	}
}

// refRush runs the same shoppers at the same times against bare Gin, each sending the
// requests it sent to flashsale (pattern), and divides flashsale's time by Gin's.
func (r *Runner) refRush(ctx context.Context, res *RunResult, rr *RushReport, users *tokens.Arena, offsets []time.Duration, sale *target.Sale, pattern []uint8) error {
	o := r.o
	return r.refRun(ctx, res, refs.Gin, func(pool *loadgen.Pool, procs []proc.Watched) error {
		if err := pool.Warm(false); err != nil {
			return err
		}
		ph := &loadgen.Phase{Name: "rush", Base: time.Now().Add(500 * time.Millisecond), Offsets: offsets,
			Deadline: o.Window + o.MaxWait, Do: loadgen.ShopperFlow(users, loadgen.TokenPath(sale.SaleID), loadgen.PurchasePaths(sale.ItemIDs), o.DoubleClick, nil, pattern)}
		refRep, _ := r.measure(ctx, pool, ph, refs.Gin, procs, float64(o.N)/o.Window.Seconds(), o.Window)
		res.Phases = append(res.Phases, refRep)
		rr.RefAllAnsweredAt = refRep.Elapsed
		if refRep.Elapsed > 0 {
			rr.AnsweredRatio = rr.AllAnsweredAt / refRep.Elapsed
		}
		return nil
	})
}

// soldOutAt is when the sale sold out, in seconds after its start (-1: it did not). One item:
// its first SOLD_OUT answer. Several: the first item to run dry answers SOLD_OUT while the others
// still sell, so the sale is sold out at the last 202, once every unit went.
func soldOutAt(firstSoldOut, last202 float64, items int, accepted int64, units int) float64 {
	if items <= 1 {
		return firstSoldOut
	}
	if accepted < int64(units) {
		return -1
	}
	return last202
}

// shopperCPU is the CPU seconds of everything a shopper costs but the load generator: the server
// (with its embedded NATS), Redis and Postgres, in µs.
func shopperCPU(p report.PhaseReport) float64 {
	return 1e6 * (p.Procs["server"].CPU + p.Procs["redis"].CPU + p.Procs["postgres"].CPU)
}

// Check: the sell-out, the answers against bare Gin's, persistence, errors and memory.
func (rush) Check(o Options, res *RunResult) {
	rr := res.Rush
	if rr == nil {
		return
	}
	res.put("rush.accepted", float64(rr.Accepted))
	res.put("rush.sold_out_s", rr.SoldOutAt)
	res.put("rush.last_202_s", rr.Last202At)
	res.put("rush.all_answered_s", rr.AllAnsweredAt)
	res.put("rush.persisted_after_sellout_s", rr.PersistAfterSellout)
	res.put("rush.persist_rate", rr.PersistRate)
	res.put("rush.backlog_peak_orders", float64(rr.BacklogPeak))
	res.put("rush.server_rss_peak_mib", rr.ServerRSSPeak)
	res.put("ref_gin.rush.all_answered_s", rr.RefAllAnsweredAt)
	res.put("ratio.rush_answered_vs_ref_gin", rr.AnsweredRatio)
	p := res.phase("rush", tFlashsale)
	if p == nil {
		return
	}
	tokens := p.Outcome("token", "200").Count
	res.put("rush.tokens_issued", float64(tokens))
	res.put("rush.tokens_per_unit", float64(tokens)/float64(max(rr.Units, 1)))
	if q := res.phase("rush", refs.Gin); q != nil {
		res.ratio("ratio.rush_server_cpu_per_request_vs_ref_gin", p.Procs["server"].CPUPerRq, q.Procs["server"].CPUPerRq)
		res.ratio("ratio.rush_cpu_per_shopper_vs_ref_gin", shopperCPU(*p)/float64(max(rr.Shoppers, 1)), shopperCPU(*q)/float64(max(q.Requests, 1)))
	}
	if rr.Shoppers > rr.Units {
		res.check("purchase tokens handed out within 1.1× the units", "≤ 1.10", fmt.Sprintf("%.3f (%d tokens)", float64(tokens)/float64(max(rr.Units, 1)), tokens),
			float64(tokens) <= 1.1*float64(rr.Units))
		res.check("sold out within 2 s of the start", "≤ 2.00 s", report.FmtSecs(rr.SoldOutAt), rr.SoldOutAt >= 0 && rr.SoldOutAt <= 2)
	}
	if rr.AnsweredRatio > 0 {
		res.check("every shopper answered within 2.5× bare Gin", "≤ 2.50×", fmt.Sprintf("%.2f× (%.2f s vs %.2f s)", rr.AnsweredRatio, rr.AllAnsweredAt, rr.RefAllAnsweredAt), rr.AnsweredRatio <= 2.5)
	}
	bad := p.Count("5xx") + p.Count("timeout") + p.Count("neterr")
	res.check("zero 5xx, zero timeouts", "0", fmt.Sprintf("%d 5xx, %d timeouts, %d network errors", p.Count("5xx"), p.Count("timeout"), p.Count("neterr")), bad == 0)
	res.check("every accepted order in Postgres within 3 s of the sell-out", "≤ 3.00 s", report.FmtSecs(rr.PersistAfterSellout), rr.PersistAfterSellout >= 0 && rr.PersistAfterSellout <= 3)
	if rr.Accepted >= 5000 { // below that, the arrivals, not the writer, set the pace
		res.check("orders persisted per second", "≥ 5,000/s", fmt.Sprintf("%.0f/s", rr.PersistRate), rr.PersistRate >= 5000)
	}
	if rr.ServerRSSPeak > 0 {
		res.check("server RSS under rush", "< 300 MiB", fmt.Sprintf("%.0f MiB", rr.ServerRSSPeak), rr.ServerRSSPeak < 300)
	}
}

func (rush) Print(w io.Writer, o Options, res *RunResult, title string) {
	fmt.Fprintf(w, "\n== rush%s: %d shoppers within %v for %d units (%d item(s)), %.0f%% double-click, %d workers, %s client ==\n",
		title, o.N, o.Window, o.Units, max(o.Items, 1), 100*o.DoubleClick, o.Workers, o.Client)
	printBody(w, res)
	if rr := res.Rush; rr != nil {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		how := "first SOLD_OUT"
		if rr.Items > 1 {
			how = "every unit of every item"
		}
		fmt.Fprintf(tw, "sold out (%s)\t%s after the start\t(last 202 at %s; %d accepted)\n", how, report.FmtSecs(rr.SoldOutAt), report.FmtSecs(rr.Last202At), rr.Accepted)
		line := fmt.Sprintf("every shopper answered\t%s after the start", report.FmtSecs(rr.AllAnsweredAt))
		if rr.RefAllAnsweredAt > 0 {
			line += fmt.Sprintf("\tbare Gin: %s → ratio %.2f×", report.FmtSecs(rr.RefAllAnsweredAt), rr.AnsweredRatio)
		}
		fmt.Fprintln(tw, line)
		fmt.Fprintf(tw, "every accepted order in Postgres\t%s after the sell-out\t(%.0f orders/s written; %d written that were never answered 202)\n", report.FmtSecs(rr.PersistAfterSellout), rr.PersistRate, rr.Unaccounted)
		fmt.Fprintf(tw, "queue backlog peak\t%d orders accepted, not yet written\t(/metrics gauge peak %.0f messages)\n", rr.BacklogPeak, rr.GaugePeak)
		tw.Flush()
	}
	printTail(w, res)
}
