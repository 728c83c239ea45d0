package main

import (
	"context"
	"fmt"

	"github.com/flashsale/flashsale/bench/internal/refs"
	"github.com/flashsale/flashsale/bench/internal/target"
	"github.com/flashsale/flashsale/loadgen"
	"github.com/flashsale/flashsale/loadgen/tokens"
)

// reserve measures the winning path alone: purchases by distinct shoppers of an item with more
// units than the run can sell; the same against ref-redis.
type reserve struct{ stepScenario }

func (reserve) Name() string { return "reserve" }

func (reserve) Usage() []string {
	return []string{
		"the winning path alone: purchases of an item that never runs out, same ladder and",
		"latency run; the same against Gin + one EVALSHA of the reserve script",
	}
}

func (reserve) Run(ctx context.Context, r *Runner, res *RunResult) error {
	sale := r.bigSale(ctx, "bench reserve")
	setup := func(pool *loadgen.Pool) stepSetup {
		return func(n int) (*target.Sale, *tokens.Arena, *tokens.Arena, error) {
			s, err := sale(n)
			if err != nil {
				return nil, nil, nil, err
			}
			users, toks, err := r.tokensFor(ctx, pool, s, n)
			return s, users, toks, err
		}
	}
	return r.pathScenario(ctx, res, "reserve", refs.Redis, setup)
}

// Check: the stable rate at least 40% of Gin+EVALSHA's, and the p99 of the latency run.
func (reserve) Check(o Options, res *RunResult) {
	checkPath(o, res, refs.Redis, "Gin+EVALSHA", 0.40)
	if p := res.phase("reserve load", tFlashsale); p != nil {
		l := p.ArrivalLat()
		res.check(fmt.Sprintf("reserve p99 at %.0f%% of the stable rate", 100*o.LoadFactor), "≤ 25 ms",
			fmt.Sprintf("%.1f ms at %.0f/s", l.P99, p.Rate), l.P99 <= 25 && p.Stable)
	}
}
