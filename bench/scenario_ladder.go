package main

import (
	"context"
	"fmt"

	"github.com/flashsale/flashsale/bench/internal/proc"
	"github.com/flashsale/flashsale/bench/internal/refs"
	"github.com/flashsale/flashsale/bench/internal/report"
	"github.com/flashsale/flashsale/bench/internal/target"
	"github.com/flashsale/flashsale/loadgen"
)

// ladderScenario is seed 003's capacity test: whole shopper visits (token, then purchase, each a
// new shopper, stock never running out) at constant rates stepped up until errors or dropped
// arrivals pass 1%; the same flow against ref-gin and ref-redis.
type ladderScenario struct{ stepScenario }

func (ladderScenario) Name() string { return "ladder" }

func (ladderScenario) Usage() []string {
	return []string{
		"whole shopper visits (token, then purchase) at constant rates stepped up until errors",
		"or dropped arrivals pass 1%; the same against both references",
	}
}

func (ladderScenario) Run(ctx context.Context, r *Runner, res *RunResult) error {
	o := r.o
	pool, err := r.newPool(o.URL, o.Workers)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := pool.Warm(false); err != nil {
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
	dummy := &target.Sale{SaleID: 1, ItemIDs: []int64{1}}
	for _, ref := range []string{refs.Gin, refs.Redis} {
		err := r.refRun(ctx, res, ref, func(pool *loadgen.Pool, procs []proc.Watched) error {
			if err := pool.Warm(false); err != nil {
				return err
			}
			step := r.flowStep(ctx, pool, ref, procs, func(int) (*target.Sale, error) { return dummy, nil })
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

// Check: the stable rate as a fraction of each reference's.
func (ladderScenario) Check(o Options, res *RunResult) {
	fl := res.ladder(tFlashsale)
	if fl == nil {
		return
	}
	for _, ref := range []string{refs.Gin, refs.Redis} {
		if rl := res.ladder(ref); rl != nil {
			res.ratio("ratio.ladder_rate_vs_"+report.Slug(ref), fl.Stable, rl.Stable)
		}
	}
}
