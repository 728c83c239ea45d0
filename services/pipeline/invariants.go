package pipeline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"
)

// Invariants checks ARCHITECTURE.md's invariants for a sale once traffic has stopped and the queue has
// drained, and returns every violation found (nil when all hold). It is the reconciliation that
// `flashsale reconcile` prints (pipeline.Reconciler), plus what only a client knows:
//
//  1. no oversell: live orders (PENDING + PAID) <= quantity, and sold equals them;
//  2. one per shopper: at most one live order per (item, user), and per (sale, user) under a
//     per-sale limit;
//  3. acknowledged means durable: every order id in acked is in Postgres;
//  4. conservation: Redis stock = quantity - live orders (nothing in flight, no return pending);
//  5. no lost unit: no reservation is left in flight, and Redis's buyers are exactly the holders
//     of live orders; Redis's reservation counter is not behind Postgres;
//
// and, of 3 for a fair start's draw, that the decided draw decided every entry: none is left
// ENTERED once the sale's draw closed.
//
// Tests, the benchmark tool and fault scenarios all end with it, on a store.Stock that knows the
// sales' shard counts.
func Invariants(ctx context.Context, db DB, stock Stock, saleID int64, acked []string) []error {
	var errs []error
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rep, err := NewReconciler(db, stock, nil, log, 45*time.Second).Thorough().Report(ctx, saleID)
	if err != nil {
		return []error{fmt.Errorf("reconcile sale %d: %w", saleID, err)}
	}
	if len(rep.Items) == 0 {
		return []error{fmt.Errorf("sale %d has no items", saleID)}
	}
	for _, c := range rep.Checks {
		if !c.OK {
			errs = append(errs, fmt.Errorf("sale %d: %s: %s", saleID, c.Name, c.Detail))
		}
	}
	for _, it := range rep.Items {
		for _, c := range it.Checks {
			if !c.OK {
				errs = append(errs, fmt.Errorf("item %d: %s: %s", it.ItemID, c.Name, c.Detail))
			}
		}
		if it.InFlight != 0 {
			errs = append(errs, fmt.Errorf("item %d: %d reservations still in flight after the queue drained", it.ItemID, it.InFlight))
		}
		if it.ReturnsPending != 0 {
			errs = append(errs, fmt.Errorf("item %d: %d units given back in Postgres are not back in Redis", it.ItemID, it.ReturnsPending))
		}
	}
	if n, err := db.UndecidedEntries(ctx, saleID); err != nil {
		errs = append(errs, err)
	} else if n > 0 {
		errs = append(errs, fmt.Errorf("sale %d: %d draw entries left undecided after the draw closed", saleID, n))
	}
	if len(acked) > 0 {
		// The same attempt sent again is answered 202 with the same order id: one order.
		acked = slices.Compact(slices.Sorted(slices.Values(acked)))
		have, err := db.ExistingOrders(ctx, acked)
		if err != nil {
			errs = append(errs, err)
		} else if len(have) != len(acked) {
			missing := 0
			for _, id := range acked {
				if _, ok := have[id]; !ok {
					missing++
				}
			}
			errs = append(errs, fmt.Errorf("acknowledged means durable: %d of %d acknowledged orders are not in postgres", missing, len(acked)))
		}
	}
	return errs
}
