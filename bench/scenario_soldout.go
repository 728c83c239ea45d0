package main

import (
	"context"
	"fmt"
	"time"

	"github.com/flashsale/flashsale/bench/internal/refs"
	"github.com/flashsale/flashsale/bench/internal/target"
	"github.com/flashsale/flashsale/loadgen"
	"github.com/flashsale/flashsale/loadgen/tokens"
)

// soldout measures the refusal path alone: purchases of an item that is already sold out, by
// shoppers holding valid purchase tokens (fetched before the last unit went: a shopper arriving
// later is refused at the token already, which the rush measures), stepped up to the highest
// stable rate, then a latency run at -load of it; the same against ref-gin. Each step has its
// own sale of two items, the first of one unit, sold before the step starts, the purchases all
// of it; the second item's units (as many as the step's shoppers) give the sale's token budget
// room for every prefetched token (it hands out tokens within the units left plus 10%).
type soldout struct{ stepScenario }

func (soldout) Name() string { return "soldout" }

func (soldout) Usage() []string {
	return []string{
		"the refusal path alone: purchases of an already sold-out item, laddered to the highest",
		"stable rate, then a latency run at -load (0.8) of it; the same against bare Gin",
	}
}

func (soldout) Run(ctx context.Context, r *Runner, res *RunResult) error {
	setup := func(pool *loadgen.Pool) stepSetup {
		return func(n int) (*target.Sale, *tokens.Arena, *tokens.Arena, error) {
			s, err := r.api.CreateSaleItems(ctx, "bench soldout", time.Now().Add(-time.Second), 10*time.Minute, []int{1, n})
			if err != nil {
				return nil, nil, nil, err
			}
			r.sales = append(r.sales, s)
			users, toks, err := r.tokensFor(ctx, pool, s, n)
			if err != nil {
				return nil, nil, nil, err
			}
			order, err := r.api.Buy(ctx, string(r.users(1).Get(0)), s.SaleID, s.ItemIDs[0])
			if err != nil {
				return nil, nil, nil, fmt.Errorf("buying the only unit: %w", err)
			}
			s.Acked = append(s.Acked, order)
			if r.be != nil {
				if _, err := r.be.WaitDrained(ctx, []*target.Sale{s}, r.o.DrainTimeout); err != nil {
					return nil, nil, nil, err
				}
			}
			return s, users, toks, nil
		}
	}
	return r.pathScenario(ctx, res, "soldout", refs.Gin, setup)
}

// Check: the stable rate at least 70% of bare Gin's.
func (soldout) Check(o Options, res *RunResult) {
	checkPath(o, res, refs.Gin, "bare Gin", 0.70)
}
