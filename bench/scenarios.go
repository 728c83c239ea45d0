package main

import (
	"context"
	"fmt"
	"math"
	"time"
)

// rush: N distinct shoppers arrive within the window from the sale's start, for Units units;
// each fetches a purchase token, then buys; some double-click. Then the same schedule against
// the bare-Gin reference, to divide by.
func (r *Runner) rush(ctx context.Context, res *RunResult) error {
	o := r.o
	r.prog.note("bench: rush: minting %d shopper tokens", o.N)
	users := r.users(o.N)
	offsets := schedule(o.N, o.Window, o.Arrivals, o.Seed)
	pool, err := r.newPool(o.URL, o.Workers)
	if err != nil {
		return err
	}
	defer pool.close()

	starts := time.Now().Add(o.Lead).Round(time.Millisecond)
	sale, err := r.api.createSale(ctx, fmt.Sprintf("bench rush %s", starts.Format(time.RFC3339)), starts, o.Window+o.MaxWait+10*time.Minute, o.Units)
	if err != nil {
		return err
	}
	r.sales = append(r.sales, sale)
	base := time.Now().Add(time.Until(starts)) // the start as a monotonic reading
	// open the connections just before the start: the server drops a new connection that sends
	// nothing for 5 s (the second connections of double-clickers are opened on first use)
	time.Sleep(time.Until(base.Add(-time.Second)))
	if err := pool.warm(false); err != nil {
		return fmt.Errorf("open connections: %w", err)
	}
	if time.Until(base) < 100*time.Millisecond {
		return fmt.Errorf("the sale started before the generator was ready: raise -lead (now %v)", o.Lead)
	}
	pattern := make([]uint8, o.N)
	ph := &Phase{Name: "rush", Base: base, Offsets: offsets, Deadline: o.Window + o.MaxWait,
		Do: shopperFlow(users, tokenPath(sale.SaleID), purchasePath(sale.ItemIDs[0]), o.DoubleClick, pattern, nil)}
	r.prog.note("bench: rush: sale %d starts at %s: %d shoppers within %v for %d units, %d workers",
		sale.SaleID, starts.Format("15:04:05.000"), o.N, o.Window, o.Units, o.Workers)

	var st *Stats
	var watch *persistWatch
	if r.be != nil {
		// the watcher starts before the phase; it reads the phase's 202 count as it goes
		var stp *Stats
		ready := make(chan struct{})
		watch = watchPersistence(ctx, r.be, r.api, sale, base, func() int64 {
			select {
			case <-ready:
				return stp.accepted.Load()
			default:
				return 0
			}
		}, o.DrainTimeout)
		ph.onStats = func(s *Stats) { stp = s; close(ready) }
	}
	rep, st := r.measure(ctx, pool, ph, tFlashsale, r.procs, float64(o.N)/o.Window.Seconds(), o.Window)
	sale.Acked = append(sale.Acked, pool.collectAcked()...)
	rr := &RushReport{SaleID: sale.SaleID, Shoppers: o.N, Units: o.Units, Window: o.Window.Seconds(), DoubleClick: o.DoubleClick,
		Accepted: st.accepted.Load(), SoldOutAt: rep.FirstSoldOut, Last202At: rep.Last202, AllAnsweredAt: rep.Elapsed,
		PersistedAllAt: -1, PersistAfterSellout: -1, ServerRSSPeak: rep.Procs["server"].RSSPeak}
	if watch != nil {
		r.prog.note("bench: rush: waiting for every accepted order to reach Postgres")
		watch.finish()
		watch.mu.Lock()
		rr.BacklogPeak, rr.GaugePeak, rr.Unaccounted = watch.peak, watch.gaugePeak, watch.unaccounted
		if watch.err != nil {
			res.Notes = append(res.Notes, "persistence watch: "+watch.err.Error())
		}
		if watch.allAt >= 0 {
			rr.PersistedAllAt = watch.allAt.Seconds()
			ref := rr.SoldOutAt
			if ref < 0 {
				ref = rr.Last202At
			}
			rr.PersistAfterSellout = max(0, rr.PersistedAllAt-ref)
			if span := watch.allAt - max(watch.firstAt, 0); span > 0 && rr.Accepted > 0 {
				rr.PersistRate = float64(rr.Accepted) / span.Seconds()
			}
		}
		watch.mu.Unlock()
	}
	res.Phases = append(res.Phases, rep)
	res.Rush = rr

	if !o.NoRef {
		err := r.refRun(ctx, res, tRefGin, func(pool *Pool, procs []watched) error {
			if err := pool.warm(false); err != nil {
				return err
			}
			// the same shoppers at the same times, each sending the requests it sent to flashsale
			ph := &Phase{Name: "rush", Base: time.Now().Add(500 * time.Millisecond), Offsets: offsets,
				Deadline: o.Window + o.MaxWait, Do: shopperFlow(users, tokenPath(sale.SaleID), purchasePath(sale.ItemIDs[0]), o.DoubleClick, nil, pattern)}
			refRep, _ := r.measure(ctx, pool, ph, tRefGin, procs, float64(o.N)/o.Window.Seconds(), o.Window)
			res.Phases = append(res.Phases, refRep)
			rr.RefAllAnsweredAt = refRep.Elapsed
			if refRep.Elapsed > 0 {
				rr.AnsweredRatio = rr.AllAnsweredAt / refRep.Elapsed
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("ref-gin: %w", err)
		}
	}
	return nil
}

// stepFunc runs one constant-rate step of a ladder and reports it.
type stepFunc func(rate float64) (PhaseReport, error)

// ladder steps the arrival rate up (×Step) until a step is unstable (errors plus dropped
// arrivals above ErrorLimit), then bisects between the last stable and the first unstable rate
// Refine times. The stable rate is the highest step that passed.
func (r *Runner) ladder(ctx context.Context, target, flow string, step stepFunc) (*LadderReport, []PhaseReport, error) {
	o := r.o
	lr := &LadderReport{Target: target, Flow: flow}
	var phases []PhaseReport
	run := func(rate float64) (bool, error) {
		for attempt := 1; ; attempt++ {
			rep, err := step(rate)
			if err != nil {
				return false, err
			}
			phases = append(phases, rep)
			lr.Steps = append(lr.Steps, stepSummary(rep))
			forked := ""
			if rep.RedisForks > 0 {
				forked = "  (Redis forked during the step)"
			}
			r.prog.note("bench: %s %s ladder: %7.0f/s  %s  errors+dropped %.2f%%  p99 %.1f ms  server %.2f cores%s",
				target, flow, rate, map[bool]string{true: "stable  ", false: "UNSTABLE"}[rep.Stable], 100*rep.ErrorRate,
				rep.arrivalLat().P99, rep.Procs["server"].Cores, forked)
			if rep.Stable {
				lr.Stable = max(lr.Stable, rate)
				return true, nil
			}
			// An AOF rewrite (a forked child taking a core for a second or so) can stall Redis
			// for hundreds of milliseconds: such a step gets one more try.
			if rep.RedisForks == 0 || attempt == 2 {
				return false, nil
			}
		}
	}
	good, bad := 0.0, 0.0
	rate := o.StartRate
	for i := 0; i < o.MaxSteps && rate <= o.MaxRate; i++ {
		ok, err := run(rate)
		if err != nil {
			return lr, phases, err
		}
		if !ok {
			bad = rate
			break
		}
		good = rate
		rate *= o.Step
	}
	for i := 0; i < o.Refine && bad > 0; i++ {
		mid := bad / 2
		if good > 0 {
			mid = math.Sqrt(good * bad)
		}
		ok, err := run(mid)
		if err != nil {
			return lr, phases, err
		}
		if ok {
			good = mid
		} else {
			bad = mid
		}
	}
	if bad == 0 {
		lr.Capped = true // never unstable up to -max-rate or -max-steps
	}
	return lr, phases, nil
}

// stepSetup prepares one purchase-only step of n arrivals: the sale and item to buy, one
// shopper token per arrival and one purchase token per arrival.
type stepSetup func(n int) (sale *saleRecord, users, toks *arena, err error)

// purchaseStep returns a ladder step (or a constant run) of purchase-only arrivals against a
// target: each arrival sends one purchase with a purchase token fetched before the clock
// starts, so the step measures the purchase alone.
func (r *Runner) purchaseStep(ctx context.Context, pool *Pool, target string, procs []watched, name string, setup stepSetup) stepFunc {
	return func(rate float64) (PhaseReport, error) {
		o := r.o
		n := max(1, int(math.Round(rate*o.Duration.Seconds())))
		if target == tFlashsale && r.be != nil && o.Settle > 0 {
			if _, err := r.be.waitDrained(ctx, r.sales, o.Settle); err != nil { // start every step from a drained queue
				r.prog.note("bench: %s %.0f/s starts with orders still being written: %v", name, rate, err)
			}
		}
		s, users, toks, err := setup(n)
		if err != nil {
			return PhaseReport{}, err
		}
		ph := &Phase{Name: fmt.Sprintf("%s %.0f/s", name, rate), Base: time.Now().Add(200 * time.Millisecond),
			Offsets: schedule(n, o.Duration, o.Arrivals, o.Seed), DropLate: true, Deadline: o.Duration + o.Timeout,
			Do: purchaseOnly(users, toks, purchasePath(s.ItemIDs[0]))}
		rep, _ := r.measure(ctx, pool, ph, target, procs, rate, o.Duration)
		acked := pool.collectAcked()
		if target == tFlashsale {
			s.Acked = append(s.Acked, acked...)
		}
		return rep, ctx.Err()
	}
}

// tokensFor mints n fresh shoppers and fetches a purchase token for each in sale s; the tokens
// must outlive the step.
func (r *Runner) tokensFor(ctx context.Context, pool *Pool, s *saleRecord, n int) (users, toks *arena, err error) {
	users = r.users(n)
	toks, err = r.prefetchTokens(ctx, pool, users, s.SaleID, r.o.Duration+r.o.Timeout+2*time.Second)
	return users, toks, err
}

// refSetup is every reference step: a dummy path, reused shopper JWTs, the constant token.
func (r *Runner) refSetup(n int) (*saleRecord, *arena, *arena, error) {
	return &saleRecord{SaleID: 1, ItemIDs: []int64{1}}, r.refUsers(), r.refDummy, nil
}

// flowStep is a ladder step of whole shopper visits (token, then purchase), as in seed 003's
// capacity test: every arrival is a new shopper.
func (r *Runner) flowStep(ctx context.Context, pool *Pool, target string, procs []watched, sale func(n int) (*saleRecord, error)) stepFunc {
	return func(rate float64) (PhaseReport, error) {
		o := r.o
		n := max(1, int(math.Round(rate*o.Duration.Seconds())))
		s, err := sale(n)
		if err != nil {
			return PhaseReport{}, err
		}
		var users *arena
		if target == tFlashsale {
			if r.be != nil && o.Settle > 0 {
				if _, err := r.be.waitDrained(ctx, r.sales, o.Settle); err != nil {
					r.prog.note("bench: ladder %.0f/s starts with orders still being written: %v", rate, err)
				}
			}
			users = r.users(n)
		} else {
			users = r.refUsers()
		}
		ph := &Phase{Name: fmt.Sprintf("ladder %.0f/s", rate), Base: time.Now().Add(200 * time.Millisecond),
			Offsets: schedule(n, o.Duration, o.Arrivals, o.Seed), DropLate: true, Deadline: o.Duration + 2*o.Timeout,
			Do: shopperFlow(users, tokenPath(s.SaleID), purchasePath(s.ItemIDs[0]), 0, nil, nil)}
		rep, _ := r.measure(ctx, pool, ph, target, procs, rate, o.Duration)
		if target == tFlashsale {
			s.Acked = append(s.Acked, pool.collectAcked()...)
		} else {
			pool.collectAcked()
		}
		return rep, ctx.Err()
	}
}

// refUsers are the shopper tokens sent to the reference servers: real JWTs (so the requests
// are the same size), reused, since the references do not read them.
func (r *Runner) refUsers() *arena {
	if r.refJWTs == nil {
		r.refJWTs = r.users(10_000)
	}
	return r.refJWTs
}

// bigSale returns a sale with at least n units left, creating one (with the most units the
// server allows) when the current one runs low: the winning path must never run out.
func (r *Runner) bigSale(ctx context.Context, name string) func(n int) (*saleRecord, error) {
	var cur *saleRecord
	return func(n int) (*saleRecord, error) {
		if cur != nil && cur.Quantity-len(cur.Acked) > n+n/5+100 {
			return cur, nil
		}
		s, err := r.api.createSale(ctx, name, time.Now().Add(-time.Second), 30*time.Minute, 1_000_000)
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

// soldout measures the refusal path alone: purchases of an item that is already sold out, by
// shoppers holding valid purchase tokens (fetched before the last unit went: a shopper arriving
// later is refused at the token already, which the rush measures), stepped up to the highest
// stable rate, then a latency run at -load of it; the same against ref-gin. Each step has its
// own one-unit sale, sold before the step starts.
func (r *Runner) soldout(ctx context.Context, res *RunResult) error {
	setup := func(pool *Pool) stepSetup {
		return func(n int) (*saleRecord, *arena, *arena, error) {
			s, err := r.api.createSale(ctx, "bench soldout", time.Now().Add(-time.Second), 10*time.Minute, 1)
			if err != nil {
				return nil, nil, nil, err
			}
			r.sales = append(r.sales, s)
			users, toks, err := r.tokensFor(ctx, pool, s, n)
			if err != nil {
				return nil, nil, nil, err
			}
			order, err := r.api.buy(ctx, string(r.users(1).get(0)), s.SaleID, s.ItemIDs[0])
			if err != nil {
				return nil, nil, nil, fmt.Errorf("buying the only unit: %w", err)
			}
			s.Acked = append(s.Acked, order)
			if r.be != nil {
				if _, err := r.be.waitDrained(ctx, []*saleRecord{s}, r.o.DrainTimeout); err != nil {
					return nil, nil, nil, err
				}
			}
			return s, users, toks, nil
		}
	}
	return r.pathScenario(ctx, res, "soldout", tRefGin, setup)
}

// reserve measures the winning path alone: purchases by distinct shoppers of an item with more
// units than the run can sell; the same against ref-redis.
func (r *Runner) reserve(ctx context.Context, res *RunResult) error {
	sale := r.bigSale(ctx, "bench reserve")
	setup := func(pool *Pool) stepSetup {
		return func(n int) (*saleRecord, *arena, *arena, error) {
			s, err := sale(n)
			if err != nil {
				return nil, nil, nil, err
			}
			users, toks, err := r.tokensFor(ctx, pool, s, n)
			return s, users, toks, err
		}
	}
	return r.pathScenario(ctx, res, "reserve", tRefRedis, setup)
}

// pathScenario is soldout and reserve: a ladder (or one run at -rate) on flashsale, a latency
// run at -load of the stable rate, then both again on the reference.
func (r *Runner) pathScenario(ctx context.Context, res *RunResult, name, ref string, setup func(*Pool) stepSetup) error {
	o := r.o
	pool, err := r.newPool(o.URL, o.Workers)
	if err != nil {
		return err
	}
	defer pool.close()
	if err := pool.warm(false); err != nil {
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
	return r.refRun(ctx, res, ref, func(pool *Pool, procs []watched) error {
		if err := pool.warm(false); err != nil {
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
	return func(rate float64) (PhaseReport, error) {
		rep, err := step(rate)
		rep.Name = name
		return rep, err
	}
}

// ladderScenario is seed 003's capacity test: whole shopper visits (token, then purchase, each a
// new shopper, stock never running out) at constant rates stepped up until errors or dropped
// arrivals pass 1%; the same flow against ref-gin and ref-redis.
func (r *Runner) ladderScenario(ctx context.Context, res *RunResult) error {
	o := r.o
	pool, err := r.newPool(o.URL, o.Workers)
	if err != nil {
		return err
	}
	defer pool.close()
	if err := pool.warm(false); err != nil {
		return err
	}
	step := r.flowStep(ctx, pool, tFlashsale, r.procs, r.bigSale(ctx, "bench ladder"))
	if o.Rate > 0 {
		rep, err := r.withName(step, "ladder constant")(o.Rate)
		if err != nil {
			return err
		}
		res.Phases = append(res.Phases, rep)
	} else {
		lr, phases, err := r.ladder(ctx, tFlashsale, "visit", step)
		res.Ladders = append(res.Ladders, lr)
		res.Steps = append(res.Steps, phases...)
		if err != nil {
			return err
		}
	}
	if o.NoRef {
		return nil
	}
	dummy := &saleRecord{SaleID: 1, ItemIDs: []int64{1}}
	for _, ref := range []string{tRefGin, tRefRedis} {
		err := r.refRun(ctx, res, ref, func(pool *Pool, procs []watched) error {
			if err := pool.warm(false); err != nil {
				return err
			}
			step := r.flowStep(ctx, pool, ref, procs, func(int) (*saleRecord, error) { return dummy, nil })
			if o.Rate > 0 {
				rep, err := r.withName(step, "ladder constant")(o.Rate)
				if err != nil {
					return err
				}
				res.Phases = append(res.Phases, rep)
				return nil
			}
			lr, phases, err := r.ladder(ctx, ref, "visit", step)
			res.Ladders = append(res.Ladders, lr)
			res.Steps = append(res.Steps, phases...)
			return err
		})
		if err != nil {
			return fmt.Errorf("%s: %w", ref, err)
		}
	}
	return nil
}
