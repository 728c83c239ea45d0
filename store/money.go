package store

import (
	"context"
	"fmt"
)

// ItemMoney is the money of one item of a sale, in the sale's currency's minor units.
type ItemMoney struct {
	ItemID         int64
	PaidCents      int64 // what the PAID orders took
	Awaiting       int64 // PENDING orders with a checkout open (payment_status 'awaiting')
	AwaitingCents  int64 // their price: the one each was bought at (older orders: the item's)
	Refunds        int64 // payments that came after their order had ended (payment_status 'refunded')
	RefundedCents  int64 // what those payments took, given back
	RefundsPending int64 // of those, the refunds the provider has not accepted yet (refund_id NULL)
}

// SaleMoney returns the money of each item of a sale, in position order, in one query (items
// without orders have zeros). A sale without items, or no such sale, is an empty list.
func (d *DB) SaleMoney(ctx context.Context, saleID int64) ([]ItemMoney, error) {
	var out []ItemMoney
	err := d.g.WithContext(ctx).Raw(`SELECT i.id AS item_id,
			coalesce(sum(o.paid_cents) FILTER (WHERE o.status = 'PAID'), 0) AS paid_cents,
			count(o.id) FILTER (WHERE o.status = 'PENDING' AND o.payment_status = 'awaiting') AS awaiting,
			coalesce(sum(coalesce(o.unit_price_cents, i.price_cents)) FILTER (WHERE o.status = 'PENDING' AND o.payment_status = 'awaiting'), 0) AS awaiting_cents,
			count(o.id) FILTER (WHERE o.payment_status = 'refunded') AS refunds,
			coalesce(sum(o.paid_cents) FILTER (WHERE o.payment_status = 'refunded'), 0) AS refunded_cents,
			count(o.id) FILTER (WHERE o.payment_status = 'refunded' AND o.refund_id IS NULL) AS refunds_pending
		FROM items i LEFT JOIN orders o ON o.item_id = i.id
		WHERE i.sale_id = ? GROUP BY i.id ORDER BY i.position`, saleID).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("money of sale %d: %w", saleID, err)
	}
	return out, nil
}

// MoneyIssues is what a sale's money view shows beside its items' money: the payments that named
// one of its orders without being its own (conflicts: refunded, or to be), and the refunds the
// provider refused for good (of late payments and of conflicts).
type MoneyIssues struct {
	Conflicts     int64
	ConflictCents int64 // what the conflicts took (nothing for one that took nothing)
	RefundsFailed int64
}

// SaleMoneyIssues returns a sale's conflicts and refused refunds, in one query.
func (d *DB) SaleMoneyIssues(ctx context.Context, saleID int64) (MoneyIssues, error) {
	var out MoneyIssues
	err := d.g.WithContext(ctx).Raw(`SELECT
			(SELECT count(*) FROM payment_conflicts WHERE sale_id = ?) AS conflicts,
			(SELECT coalesce(sum(amount_cents), 0) FROM payment_conflicts WHERE sale_id = ?) AS conflict_cents,
			(SELECT count(*) FROM payment_conflicts WHERE sale_id = ? AND state = 'refund_failed')
			+ (SELECT count(*) FROM orders WHERE sale_id = ? AND refund_failure IS NOT NULL) AS refunds_failed`,
		saleID, saleID, saleID, saleID).Scan(&out).Error
	if err != nil {
		return MoneyIssues{}, fmt.Errorf("money issues of sale %d: %w", saleID, err)
	}
	return out, nil
}
