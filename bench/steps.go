package main

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/flashsale/flashsale/bench/internal/proc"
	"github.com/flashsale/flashsale/bench/internal/report"
	"github.com/flashsale/flashsale/bench/internal/target"
	"github.com/flashsale/flashsale/loadgen"
	"github.com/flashsale/flashsale/loadgen/tokens"
)

// The ladder-based scenarios' shared machinery: the capacity search, the steps it runs
// (purchases alone, or whole visits) against flashsale or a reference, and soldout's and
// reserve's common shape.

// stepFunc runs one constant-rate step of a ladder and reports it.
type stepFunc func(rate float64) (report.PhaseReport, error)

// ladder steps the arrival rate up (×Step) until a step is unstable (errors plus dropped
// arrivals above ErrorLimit), then bisects between the last stable and the first unstable rate
// Refine times. The stable rate is the highest step that passed.
func (r *Runner) ladder(ctx context.Context, tgt, flow string, step stepFunc) (*report.LadderReport, []report.PhaseReport, error) {
	l := &ladderRun{r: r, tgt: tgt, flow: flow, step: step, lr: &report.LadderReport{Target: tgt, Flow: flow}}
	good, bad, err := l.climb()
	if err == nil {
		err = l.bisect(good, bad)
	}
	if err != nil {
		return l.lr, l.phases, err
	}
	if bad == 0 {
		l.lr.Capped = true // never unstable up to -max-rate or -max-steps
	}
	return l.lr, l.phases, nil
}

// ladderRun is one capacity search: the steps it ran and what it found.
type ladderRun struct {
	r         *Runner
	tgt, flow string
	step      stepFunc
	lr        *report.LadderReport
	phases    []report.PhaseReport
}

// climb multiplies the rate by Step from StartRate until a step is unstable (bad, 0 if none
// was within MaxSteps and MaxRate); good is the last stable rate.
func (l *ladderRun) climb() (good, bad float64, err error) {
	o := l.r.o
	rate := o.StartRate
	for i := 0; i < o.MaxSteps && rate <= o.MaxRate; i++ {
		ok, err := l.try(rate)
		if err != nil {
			return good, bad, err
		}
		if !ok {
			return good, rate, nil
		}
		good = rate
		rate *= o.Step
	}
	return good, bad, nil
}

// bisect narrows [good, bad] Refine times at the geometric middle (half of bad when nothing
// was stable).
func (l *ladderRun) bisect(good, bad float64) error {
	for i := 0; i < l.r.o.Refine && bad > 0; i++ {
		mid := bad / 2
		if good > 0 {
			mid = math.Sqrt(good * bad)
		}
		ok, err := l.try(mid)
		if err != nil {
			return err
		}
		if ok {
			good = mid
		} else {
			bad = mid
		}
	}
	return nil
}

// try runs one step at rate and tells whether it was stable. An AOF rewrite (a forked child
// taking a core for a second or so) can stall Redis for hundreds of milliseconds: such a step
// gets one more try.
func (l *ladderRun) try(rate float64) (bool, error) {
	for attempt := 1; ; attempt++ {
		rep, err := l.step(rate)
		if err != nil {
			return false, err
		}
		l.phases = append(l.phases, rep)
		l.lr.Steps = append(l.lr.Steps, report.Summarize(rep))
		l.note(rate, rep)
		if rep.Stable {
			l.lr.Stable = max(l.lr.Stable, rate)
			return true, nil
		}
		if rep.RedisForks == 0 || attempt == 2 {
			return false, nil
		}
	}
}

// note prints one step's line of the ladder.
func (l *ladderRun) note(rate float64, rep report.PhaseReport) {
	forked := ""
	if rep.RedisForks > 0 {
		forked = "  (Redis forked during the step)"
	}
	l.r.prog.Note("bench: %s %s ladder: %7.0f/s  %s  errors+dropped %.2f%%  p99 %.1f ms  server %.2f cores%s",
		l.tgt, l.flow, rate, map[bool]string{true: "stable  ", false: "UNSTABLE"}[rep.Stable], 100*rep.ErrorRate,
		rep.ArrivalLat().P99, rep.Procs["server"].Cores, forked)
}

// stepSetup prepares one purchase-only step of n arrivals: the sale and item to buy, one
// shopper token per arrival and one purchase token per arrival.
type stepSetup func(n int) (sale *target.Sale, users, toks *tokens.Arena, err error)

// purchaseStep returns a ladder step (or a constant run) of purchase-only arrivals against a
// target: each arrival sends one purchase with a purchase token fetched before the clock
// starts, so the step measures the purchase alone.
func (r *Runner) purchaseStep(ctx context.Context, pool *loadgen.Pool, tgt string, procs []proc.Watched, name string, setup stepSetup) stepFunc {
	return func(rate float64) (report.PhaseReport, error) {
		o := r.o
		n := max(1, int(math.Round(rate*o.Duration.Seconds())))
		if tgt == tFlashsale && r.be != nil && o.Settle > 0 {
			if _, err := r.be.WaitDrained(ctx, r.sales, o.Settle); err != nil { // start every step from a drained queue
				r.prog.Note("bench: %s %.0f/s starts with orders still being written: %v", name, rate, err)
			}
		}
		s, users, toks, err := setup(n)
		if err != nil {
			return report.PhaseReport{}, err
		}
		ph := &loadgen.Phase{Name: fmt.Sprintf("%s %.0f/s", name, rate), Base: time.Now().Add(200 * time.Millisecond),
			Offsets: loadgen.Schedule(n, o.Duration, o.Arrivals, o.Seed), DropLate: true, Deadline: o.Duration + o.Timeout,
			Do: loadgen.PurchaseOnly(users, toks, loadgen.PurchasePath(s.ItemIDs[0]))}
		rep, _ := r.measure(ctx, pool, ph, tgt, procs, rate, o.Duration)
		acked := pool.CollectAcked()
		if tgt == tFlashsale {
			s.Acked = append(s.Acked, acked...)
		}
		return rep, ctx.Err()
	}
}

// tokensFor mints n fresh shoppers and fetches a purchase token for each in sale s; the tokens
// must outlive the step.
func (r *Runner) tokensFor(ctx context.Context, pool *loadgen.Pool, s *target.Sale, n int) (users, toks *tokens.Arena, err error) {
	users = r.users(n)
	toks, err = r.prefetchTokens(ctx, pool, users, s.SaleID, r.o.Duration+r.o.Timeout+2*time.Second)
	return users, toks, err
}

// prefetchTokens fetches one purchase token per user before a purchase-only phase, and checks
// they will outlive it.
func (r *Runner) prefetchTokens(ctx context.Context, pool *loadgen.Pool, users *tokens.Arena, saleID int64, mustLast time.Duration) (*tokens.Arena, error) {
	start := time.Now()
	toks, earliest, err := loadgen.Prefetch(ctx, pool, users, saleID, r.o.MaxWait, r.prog)
	if err != nil {
		return nil, err
	}
	took := time.Since(start)
	if !earliest.IsZero() {
		if left := time.Until(earliest); left < mustLast {
			return nil, fmt.Errorf("prefetching %d purchase tokens took %v and the first expire in %v, before the phase ends (%v): "+
				"start the server with a longer FLASHSALE_PURCHASE_TOKEN_TTL (make bench uses 2m) or use a lower rate or -duration",
				users.Len(), took.Round(time.Millisecond), left.Round(time.Millisecond), mustLast)
		}
	}
	return toks, nil
}

// refSetup is every reference step: a dummy path, reused shopper JWTs, the constant token.
func (r *Runner) refSetup(n int) (*target.Sale, *tokens.Arena, *tokens.Arena, error) {
	return &target.Sale{SaleID: 1, ItemIDs: []int64{1}}, r.refUsers(), r.refDummy, nil
}

// flowStep is a ladder step of whole shopper visits (token, then purchase), as in seed 003's
// capacity test: every arrival is a new shopper.
func (r *Runner) flowStep(ctx context.Context, pool *loadgen.Pool, tgt string, procs []proc.Watched, sale func(n int) (*target.Sale, error)) stepFunc {
	return func(rate float64) (report.PhaseReport, error) {
		o := r.o
		n := max(1, int(math.Round(rate*o.Duration.Seconds())))
		s, err := sale(n)
		if err != nil {
			return report.PhaseReport{}, err
		}
		var users *tokens.Arena
		if tgt == tFlashsale {
			if r.be != nil && o.Settle > 0 {
				if _, err := r.be.WaitDrained(ctx, r.sales, o.Settle); err != nil {
					r.prog.Note("bench: ladder %.0f/s starts with orders still being written: %v", rate, err)
				}
			}
			users = r.users(n)
		} else {
			users = r.refUsers()
		}
		ph := &loadgen.Phase{Name: fmt.Sprintf("ladder %.0f/s", rate), Base: time.Now().Add(200 * time.Millisecond),
			Offsets: loadgen.Schedule(n, o.Duration, o.Arrivals, o.Seed), DropLate: true, Deadline: o.Duration + 2*o.Timeout,
			Do: loadgen.ShopperFlow(users, loadgen.TokenPath(s.SaleID), loadgen.PurchasePaths(s.ItemIDs[:1]), 0, nil, nil)}
		rep, _ := r.measure(ctx, pool, ph, tgt, procs, rate, o.Duration)
		if tgt == tFlashsale {
			s.Acked = append(s.Acked, pool.CollectAcked()...)
		} else {
			pool.CollectAcked()
		}
		return rep, ctx.Err()
	}
}

// refUsers are the shopper tokens sent to the reference servers: real JWTs (so the requests
// are the same size), reused, since the references do not read them.
func (r *Runner) refUsers() *tokens.Arena {
	if r.refJWTs == nil {
		r.refJWTs = r.users(10_000)
	}
	return r.refJWTs
}

// bigSale returns a sale with at least n units left, creating one (with the most units the
// server allows) when the current one runs low: the winning path must never run out.
func (r *Runner) bigSale(ctx context.Context, name string) func(n int) (*target.Sale, error) {
	var cur *target.Sale
	return func(n int) (*target.Sale, error) {
		if cur != nil && cur.Quantity-len(cur.Acked) > n+n/5+100 {
			return cur, nil
		}
		s, err := r.api.CreateSale(ctx, name, time.Now().Add(-time.Second), 30*time.Minute, 1_000_000)
		if err != nil {
			return nil, err
		}
		if n+n/5 > s.Quantity {
			return nil, fmt.Errorf("a step of %d arrivals needs more units than one sale holds (1,000,000): lower -duration or -max-rate", n)
		}
		r.sales = append(r.sales, s)
		cur = s
		return s, nil
	}
}

// pathScenario is soldout and reserve: a ladder (or one run at -rate) on flashsale, a latency
// run at -load of the stable rate, then both again on the reference.
func (r *Runner) pathScenario(ctx context.Context, res *RunResult, name, ref string, setup func(*loadgen.Pool) stepSetup) error {
	o := r.o
	pool, err := r.newPool(o.URL, o.Workers)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := pool.Warm(false); err != nil {
		return err
	}
	step := r.purchaseStep(ctx, pool, tFlashsale, r.procs, name, setup(pool))
	loadRate := o.Rate
	if o.Rate == 0 {
		lr, phases, err := r.ladder(ctx, tFlashsale, name, step)
		res.Ladders = append(res.Ladders, lr)
		res.Steps = append(res.Steps, phases...)
		if err != nil {
			return err
		}
		loadRate = lr.Stable * o.LoadFactor
		if loadRate == 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("%s: no stable rate down to %.0f/s: no latency run", name, lr.Steps[len(lr.Steps)-1].Rate))
		}
	}
	if loadRate > 0 {
		rep, err := r.withName(step, name+" load")(loadRate)
		if err != nil {
			return err
		}
		res.Phases = append(res.Phases, rep)
	}
	if o.NoRef {
		return nil
	}
	return r.refRun(ctx, res, ref, func(pool *loadgen.Pool, procs []proc.Watched) error {
		if err := pool.Warm(false); err != nil {
			return err
		}
		step := r.purchaseStep(ctx, pool, ref, procs, name, r.refSetup)
		if o.Rate == 0 {
			lr, phases, err := r.ladder(ctx, ref, name, step)
			res.Ladders = append(res.Ladders, lr)
			res.Steps = append(res.Steps, phases...)
			if err != nil {
				return err
			}
		}
		if loadRate > 0 {
			rep, err := r.withName(step, name+" load")(loadRate)
			if err != nil {
				return err
			}
			res.Phases = append(res.Phases, rep)
		}
		return nil
	})
}

// withName renames the phase a step reports.
func (r *Runner) withName(step stepFunc, name string) stepFunc {
	return func(rate float64) (report.PhaseReport, error) {
		rep, err := step(rate)
		rep.Name = name
		return rep, err
	}
}

// checkPath is soldout's and reserve's common judgement: flashsale's stable rate as a fraction
// of the reference's (at least want), and the latency run's p99 and server CPU as ratios.
func checkPath(o Options, res *RunResult, ref, refName string, want float64) {
	fl, rl := res.ladder(tFlashsale), res.ladder(ref)
	if fl != nil && rl != nil {
		res.ratio("ratio."+o.Scenario+"_rate_vs_"+report.Slug(ref), fl.Stable, rl.Stable)
		r := 0.0
		if rl.Stable > 0 {
			r = fl.Stable / rl.Stable
		}
		res.check(fmt.Sprintf("%s stable rate ≥ %.0f%% of %s", o.Scenario, 100*want, refName), fmt.Sprintf("≥ %.2f", want),
			fmt.Sprintf("%.2f (%.0f/s vs %.0f/s)", r, fl.Stable, rl.Stable), r >= want)
	}
	name := o.Scenario + " load"
	if p, q := res.phase(name, tFlashsale), res.phase(name, ref); p != nil && q != nil {
		res.ratio("ratio."+o.Scenario+"_load_p99_vs_"+report.Slug(ref), p.ArrivalLat().P99, q.ArrivalLat().P99)
		res.ratio("ratio."+o.Scenario+"_load_server_cpu_vs_"+report.Slug(ref), p.Procs["server"].CPUPerRq, q.Procs["server"].CPUPerRq)
	}
}
