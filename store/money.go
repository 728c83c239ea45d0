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
	Refunds        int64 // payments that came after their order had ended (payment_status 'refunded'), but refunds refused for good (MoneyIssues)
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
			count(o.id) FILTER (WHERE o.payment_status = 'refunded' AND o.refund_failure IS NULL) AS refunds,
			coalesce(sum(o.paid_cents) FILTER (WHERE o.payment_status = 'refunded' AND o.refund_failure IS NULL), 0) AS refunded_cents,
			count(o.id) FILTER (WHERE o.payment_status = 'refunded' AND o.refund_id IS NULL AND o.refund_failure IS NULL) AS refunds_pending
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

// LedgerBooks is a sale's money of one provider as our books have it: what the PAID orders took,
// the late payments refunded (or to be), the conflicts (payments that were not their order's own).
type LedgerBooks struct {
	Paid          int64
	PaidCents     int64
	Refunded      int64
	RefundedCents int64
	Conflicts     int64
	ConflictCents int64
	// Of Refunded and Conflicts, the refunds the provider refused for good: the money was taken
	// and is accounted for, but not given back; the merchant must settle it.
	Refused      int64
	RefusedCents int64
}

// LedgerBooks returns a sale's books of provider, in one query.
func (d *DB) LedgerBooks(ctx context.Context, saleID int64, provider string) (LedgerBooks, error) {
	var out LedgerBooks
	err := d.g.WithContext(ctx).Raw(`SELECT
			count(*) FILTER (WHERE o.status = 'PAID' AND o.payment_status = 'paid') AS paid,
			coalesce(sum(o.paid_cents) FILTER (WHERE o.status = 'PAID' AND o.payment_status = 'paid'), 0) AS paid_cents,
			count(*) FILTER (WHERE o.payment_status = 'refunded') AS refunded,
			coalesce(sum(o.paid_cents) FILTER (WHERE o.payment_status = 'refunded'), 0) AS refunded_cents,
			(SELECT count(*) FROM payment_conflicts WHERE sale_id = ? AND provider = ? AND state <> 'nothing_taken') AS conflicts,
			(SELECT coalesce(sum(amount_cents), 0) FROM payment_conflicts WHERE sale_id = ? AND provider = ? AND state <> 'nothing_taken') AS conflict_cents,
			count(*) FILTER (WHERE o.payment_status = 'refunded' AND o.refund_failure IS NOT NULL)
			+ (SELECT count(*) FROM payment_conflicts WHERE sale_id = ? AND provider = ? AND state = 'refund_failed') AS refused,
			coalesce(sum(o.paid_cents) FILTER (WHERE o.payment_status = 'refunded' AND o.refund_failure IS NOT NULL), 0)
			+ (SELECT coalesce(sum(amount_cents), 0) FROM payment_conflicts WHERE sale_id = ? AND provider = ? AND state = 'refund_failed') AS refused_cents
		FROM orders o WHERE o.sale_id = ? AND o.payment_provider = ?`,
		saleID, provider, saleID, provider, saleID, provider, saleID, provider, saleID, provider).Scan(&out).Error
	if err != nil {
		return LedgerBooks{}, fmt.Errorf("books of sale %d: %w", saleID, err)
	}
	return out, nil
}

// LedgerSessions lists the provider's sessions that took, or may have taken, money for a sale's
// orders: every checkout recorded for them (open ones too: a payment may not have reached us)
// and every conflict that named one, each once.
func (d *DB) LedgerSessions(ctx context.Context, saleID int64, provider string) ([]string, error) {
	var out []string
	err := d.g.WithContext(ctx).Raw(`SELECT c.session_id FROM checkouts c JOIN orders o ON o.id = c.order_id
			WHERE o.sale_id = ? AND c.provider = ?
		UNION
		SELECT session_id FROM payment_conflicts WHERE sale_id = ? AND provider = ? AND session_id NOT LIKE 'event:%'
		ORDER BY 1`, saleID, provider, saleID, provider).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("sessions of sale %d: %w", saleID, err)
	}
	return out, nil
}
