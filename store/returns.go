package store

import (
	"context"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/flashsale/flashsale/shop"
)

// StockReturn is a unit Postgres gave back (an order EXPIRED or CANCELLED) that Redis must get
// back too; the row lives until it has.
type StockReturn struct {
	OrderID  string
	SaleID   int64
	ItemID   int64
	UserID   int64
	Reason   string
	SaleOver bool `gorm:"->"` // the sale ended over an hour ago (PendingReturns only)
}

// endOrders moves the PENDING orders that where selects (a subquery of order ids, locked) to
// status, gives their units back (sold - n) and records a stock return for each, in one
// transaction with the items locked first in id order.
func (d *DB) endOrders(ctx context.Context, status string, items []int64, where string, args ...any) ([]StockReturn, error) {
	var out []StockReturn
	err := d.g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := lockItems(tx, items); err != nil {
			return err
		}
		all := append([]any{status}, args...)
		all = append(all, status)
		return tx.Raw(`WITH ended AS (
				UPDATE orders SET status = ?, payment_status = CASE WHEN payment_status = 'awaiting' THEN 'none' ELSE payment_status END
				WHERE id IN (`+where+`) AND status = 'PENDING'
				RETURNING id, sale_id, item_id, user_id
			), ret AS (
				INSERT INTO stock_returns (order_id, sale_id, item_id, user_id, reason)
				SELECT id, sale_id, item_id, user_id, ? FROM ended
			), upd AS (
				UPDATE items SET sold = items.sold - c.n
				FROM (SELECT item_id, count(*) AS n FROM ended GROUP BY item_id) c WHERE items.id = c.item_id
			)
			SELECT id::text AS order_id, sale_id, item_id, user_id FROM ended`, all...).Scan(&out).Error
	})
	if err != nil {
		return nil, fmt.Errorf("%s orders: %w", strings.ToLower(status), err)
	}
	for i := range out {
		out[i].Reason = status
	}
	return out, nil
}

// ExpireDue expires up to limit PENDING orders whose payment deadline has passed (by Postgres's
// clock). Each order changes once, whatever number of instances run this at once.
func (d *DB) ExpireDue(ctx context.Context, limit int) ([]StockReturn, error) {
	var items []int64
	err := d.g.WithContext(ctx).Raw(`SELECT DISTINCT item_id FROM (SELECT item_id FROM orders
		WHERE status = 'PENDING' AND pay_by <= now() ORDER BY pay_by LIMIT ?) d`, limit).Scan(&items).Error
	if err != nil {
		return nil, fmt.Errorf("expire orders: %w", err)
	}
	if len(items) == 0 {
		return nil, nil
	}
	return d.endOrders(ctx, shop.StatusExpired, items, `SELECT id FROM orders WHERE status = 'PENDING' AND pay_by <= now()
		AND item_id = ANY(?::bigint[]) ORDER BY pay_by LIMIT ? FOR UPDATE SKIP LOCKED`, int64Array(items), limit)
}

// ExpireOrder expires one PENDING order if its deadline has passed (a shopper paying too late
// sees the state the answer names).
func (d *DB) ExpireOrder(ctx context.Context, o shop.Order) ([]StockReturn, error) {
	return d.endOrders(ctx, shop.StatusExpired, []int64{o.ItemID}, `SELECT id FROM orders WHERE id = ?::uuid AND status = 'PENDING' AND pay_by <= now() FOR UPDATE`, o.ID)
}

// CancelOrder cancels a PENDING order of userID; the result is empty if it was not PENDING.
func (d *DB) CancelOrder(ctx context.Context, o shop.Order, userID int64) ([]StockReturn, error) {
	return d.endOrders(ctx, shop.StatusCancelled, []int64{o.ItemID}, `SELECT id FROM orders WHERE id = ?::uuid AND user_id = ? AND status = 'PENDING' FOR UPDATE`, o.ID, userID)
}

// PendingReturns lists stock returns Redis has not confirmed yet, oldest first.
func (d *DB) PendingReturns(ctx context.Context, limit int) ([]StockReturn, error) {
	var out []StockReturn
	err := d.g.WithContext(ctx).Raw(`SELECT r.order_id::text AS order_id, r.sale_id, r.item_id, r.user_id, r.reason,
			s.ends_at < now() - interval '1 hour' AS sale_over
		FROM stock_returns r JOIN sales s ON s.id = r.sale_id
		ORDER BY r.created_at LIMIT ?`, limit).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("stock returns: %w", err)
	}
	return out, nil
}

// DeleteReturns forgets stock returns Redis has applied.
func (d *DB) DeleteReturns(ctx context.Context, orderIDs []string) error {
	if len(orderIDs) == 0 {
		return nil
	}
	err := d.g.WithContext(ctx).Exec(`DELETE FROM stock_returns WHERE order_id = ANY(?::uuid[])`, pgArray(orderIDs).literal()).Error
	if err != nil {
		return fmt.Errorf("delete stock returns: %w", err)
	}
	return nil
}
