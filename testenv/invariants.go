package testenv

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/store"
)

// Invariants checks DESIGN.md's invariants for every item of a sale once traffic has stopped and
// the queue has drained, and returns every violation found (nil when all hold):
//
//  1. no oversell: live orders (PENDING + PAID) <= quantity, and sold equals them;
//  2. one per shopper: at most one live order per (item, user);
//  3. acknowledged means durable: every order id in acked is in Postgres;
//  4. conservation: Redis stock = quantity - live orders;
//  5. no lost unit: no reservation is left in flight, and Redis's buyers are exactly the
//     holders of live orders.
//
// Tests, the benchmark tool and fault scenarios all end with it.
func Invariants(ctx context.Context, db *store.DB, rdb redis.UniversalClient, saleID int64, acked []string) []error {
	var errs []error
	g := db.Gorm().WithContext(ctx)
	type row struct {
		ID       int64
		Quantity int
		Sold     int
		Live     int
	}
	var items []row
	err := g.Raw(`SELECT i.id, i.quantity, i.sold,
			(SELECT count(*) FROM orders o WHERE o.item_id = i.id AND o.status IN ('PENDING','PAID')) AS live
		FROM items i WHERE i.sale_id = ? ORDER BY i.position`, saleID).Scan(&items).Error
	if err != nil {
		return []error{fmt.Errorf("read items: %w", err)}
	}
	if len(items) == 0 {
		return []error{fmt.Errorf("sale %d has no items", saleID)}
	}
	for _, it := range items {
		if it.Live > it.Quantity {
			errs = append(errs, fmt.Errorf("item %d: oversold: %d live orders for %d units", it.ID, it.Live, it.Quantity))
		}
		if it.Sold != it.Live {
			errs = append(errs, fmt.Errorf("item %d: sold = %d but %d live orders", it.ID, it.Sold, it.Live))
		}
		var dups int64
		if err := g.Raw(`SELECT count(*) FROM (SELECT user_id FROM orders WHERE item_id = ? AND status IN ('PENDING','PAID')
				GROUP BY user_id HAVING count(*) > 1) d`, it.ID).Scan(&dups).Error; err != nil {
			errs = append(errs, err)
		} else if dups > 0 {
			errs = append(errs, fmt.Errorf("item %d: %d shoppers hold more than one live order", it.ID, dups))
		}
		stock, err := rdb.Get(ctx, store.StockKey(it.ID)).Int64()
		if err != nil {
			errs = append(errs, fmt.Errorf("item %d: redis stock: %w", it.ID, err))
		} else if want := int64(it.Quantity - it.Live); stock != want {
			errs = append(errs, fmt.Errorf("item %d: conservation: redis stock %d, want quantity %d - live %d = %d", it.ID, stock, it.Quantity, it.Live, want))
		}
		flight, err := rdb.HLen(ctx, store.InFlightKey(it.ID)).Result()
		if err != nil {
			errs = append(errs, fmt.Errorf("item %d: in flight: %w", it.ID, err))
		} else if flight != 0 {
			errs = append(errs, fmt.Errorf("item %d: %d reservations still in flight after the queue drained", it.ID, flight))
		}
		var holders []int64
		if err := g.Raw(`SELECT user_id FROM orders WHERE item_id = ? AND status IN ('PENDING','PAID')`, it.ID).Scan(&holders).Error; err != nil {
			errs = append(errs, err)
			continue
		}
		buyers, err := rdb.SMembers(ctx, store.BuyersKey(it.ID)).Result()
		if err != nil {
			errs = append(errs, fmt.Errorf("item %d: buyers: %w", it.ID, err))
			continue
		}
		want := map[string]bool{}
		for _, h := range holders {
			want[strconv.FormatInt(h, 10)] = true
		}
		if len(buyers) != len(want) {
			errs = append(errs, fmt.Errorf("item %d: redis has %d buyers, postgres %d live holders", it.ID, len(buyers), len(want)))
		} else {
			for _, b := range buyers {
				if !want[b] {
					errs = append(errs, fmt.Errorf("item %d: redis buyer %s holds no live order", it.ID, b))
					break
				}
			}
		}
	}
	if len(acked) > 0 {
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
