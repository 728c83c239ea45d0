package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

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
	return d.endOrdersThen(ctx, status, items, nil, where, args...)
}

// endOrdersThen is endOrders with then run in the same transaction after the orders ended (nil:
// nothing more).
func (d *DB) endOrdersThen(ctx context.Context, status string, items []int64, then func(tx *gorm.DB) error, where string, args ...any) ([]StockReturn, error) {
	var out []StockReturn
	err := d.g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := lockItems(tx, items); err != nil {
			return err
		}
		all := append([]any{status}, args...)
		all = append(all, status)
		if err := tx.Raw(`WITH ended AS (
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
			SELECT id::text AS order_id, sale_id, item_id, user_id FROM ended`, all...).Scan(&out).Error; err != nil || then == nil {
			return err
		}
		return then(tx)
	})
	if err != nil {
		return nil, fmt.Errorf("%s orders: %w", strings.ToLower(status), err)
	}
	for i := range out {
		out[i].Reason = status
	}
	return out, nil
}

// CheckoutCloseGrace is how long past its deadline an order with an open checkout at a payment
// provider waits for the provider to close that checkout first (payments: the session is
// expired at the provider, and only a session closed unpaid lets the order expire, so that a
// payment in the last second pays its order instead of being taken and refunded). After it, a
// provider that has not answered is not waited for: the order expires anyway, and a payment that
// comes later is refunded.
const CheckoutCloseGrace = 2 * time.Minute

// waitsForProvider is the condition, on orders o, of an order whose deadline's expiry waits for
// its provider to close its open checkout (CheckoutCloseGrace). The simulated provider confirms
// in the same transaction that checks the order is PENDING: nothing to wait for.
var waitsForProvider = `EXISTS (SELECT 1 FROM checkouts c WHERE c.order_id = o.id AND c.state = 'open' AND c.provider <> 'simulated')
	AND o.pay_by > now() - make_interval(secs => ` + strconv.Itoa(int(CheckoutCloseGrace/time.Second)) + `)`

// ExpireDue expires up to limit PENDING orders whose payment deadline has passed (by Postgres's
// clock), but those whose checkout its provider must close first (waitsForProvider). Each order
// changes once, whatever number of instances run this at once.
func (d *DB) ExpireDue(ctx context.Context, limit int) ([]StockReturn, error) {
	var items []int64
	err := d.g.WithContext(ctx).Raw(`SELECT DISTINCT item_id FROM (SELECT item_id FROM orders o
		WHERE status = 'PENDING' AND pay_by <= now() AND NOT (`+waitsForProvider+`) ORDER BY pay_by LIMIT ?) d`, limit).Scan(&items).Error
	if err != nil {
		return nil, fmt.Errorf("expire orders: %w", err)
	}
	if len(items) == 0 {
		return nil, nil
	}
	return d.endOrders(ctx, shop.StatusExpired, items, `SELECT id FROM orders o WHERE status = 'PENDING' AND pay_by <= now()
		AND NOT (`+waitsForProvider+`) AND item_id = ANY(?::bigint[]) ORDER BY pay_by LIMIT ? FOR UPDATE SKIP LOCKED`, int64Array(items), limit)
}

// ExpireOrder expires one PENDING order if its deadline has passed (a shopper paying too late
// sees the state the answer names), unless its provider must close its checkout first.
func (d *DB) ExpireOrder(ctx context.Context, o shop.Order) ([]StockReturn, error) {
	return d.endOrders(ctx, shop.StatusExpired, []int64{o.ItemID}, `SELECT id FROM orders o WHERE id = ?::uuid AND status = 'PENDING'
		AND pay_by <= now() AND NOT (`+waitsForProvider+`) FOR UPDATE`, o.ID)
}

// ExpireClosed expires one PENDING order past its deadline whose open checkout is sessionID,
// which the provider has closed unpaid, and records the checkout closed, in one transaction.
func (d *DB) ExpireClosed(ctx context.Context, o shop.Order, sessionID string) ([]StockReturn, error) {
	return d.endOrdersThen(ctx, shop.StatusExpired, []int64{o.ItemID}, func(tx *gorm.DB) error {
		_, err := closeSession(tx, o.ID, sessionID, CheckoutExpired)
		return err
	}, `SELECT id FROM orders o WHERE id = ?::uuid AND status = 'PENDING' AND pay_by <= now()
		AND EXISTS (SELECT 1 FROM checkouts c WHERE c.order_id = o.id AND c.session_id = ? AND c.state = 'open') FOR UPDATE`, o.ID, sessionID)
}

// CheckoutDue is a PENDING order past its deadline whose checkout is still open at its provider.
type CheckoutDue struct {
	OrderID   string
	ItemID    int64
	SessionID string
}

// CheckoutsDue lists up to limit PENDING orders of provider past their deadline whose checkout
// is still open, but those of skip (waiting to be tried again): the provider closes each
// session first, then the order expires (or is paid, if the session was).
func (d *DB) CheckoutsDue(ctx context.Context, provider string, skip []string, limit int) ([]CheckoutDue, error) {
	var out []CheckoutDue
	err := d.g.WithContext(ctx).Raw(`SELECT o.id::text AS order_id, o.item_id, c.session_id
		FROM orders o JOIN checkouts c ON c.order_id = o.id
		WHERE o.status = 'PENDING' AND o.pay_by <= now() AND c.state = 'open' AND c.provider = ?
			AND NOT (o.id = ANY(?::uuid[]))
		ORDER BY o.pay_by LIMIT ?`, provider, pgArray(skip).literal(), limit).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("checkouts due: %w", err)
	}
	return out, nil
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
