package store

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"
)

// ItemFacts are Postgres's counts of one item, for reconciliation and the merchant's view.
type ItemFacts struct {
	ItemID     int64
	Name       string
	Quantity   int64
	Sold       int64
	Pending    int64
	Paid       int64
	Expired    int64
	Cancelled  int64
	Failed     int64
	DupHolders int64 // shoppers holding more than one live order of the item
	MaxSeq     int64
}

// SaleFacts is Postgres's side of a sale's reconciliation.
type SaleFacts struct {
	SaleID        int64
	PurchaseLimit string
	Items         []ItemFacts
	// shoppers holding live orders of more than one item (a violation under a per-sale limit)
	SaleDupHolders int64
	LiveMembers    int64         // distinct buyers-hash members the live orders name
	Returns        []StockReturn // not yet confirmed by Redis
}

// LiveOrder is a PENDING or PAID order.
type LiveOrder struct {
	ID     string
	ItemID int64
	UserID int64
}

// LiveOrders lists a sale's PENDING and PAID orders.
func (d *DB) LiveOrders(ctx context.Context, saleID int64) ([]LiveOrder, error) {
	var out []LiveOrder
	err := d.g.WithContext(ctx).Raw(`SELECT id::text AS id, item_id, user_id FROM orders WHERE sale_id = ? AND status IN ('PENDING','PAID')`, saleID).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("live orders(sale %d): %w", saleID, err)
	}
	return out, nil
}

// SaleFacts reads a sale's counts in one repeatable-read snapshot.
func (d *DB) SaleFacts(ctx context.Context, saleID int64) (SaleFacts, error) {
	f := SaleFacts{SaleID: saleID}
	err := d.g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Raw(`SELECT purchase_limit FROM sales WHERE id = ?`, saleID).Scan(&f.PurchaseLimit).Error; err != nil {
			return err
		}
		if f.PurchaseLimit == "" {
			return ErrNotFound
		}
		if err := tx.Raw(`SELECT i.id AS item_id, i.name, i.quantity, i.sold, i.max_seq,
				count(o.id) FILTER (WHERE o.status = 'PENDING') AS pending,
				count(o.id) FILTER (WHERE o.status = 'PAID') AS paid,
				count(o.id) FILTER (WHERE o.status = 'EXPIRED') AS expired,
				count(o.id) FILTER (WHERE o.status = 'CANCELLED') AS cancelled,
				count(o.id) FILTER (WHERE o.status = 'FAILED') AS failed,
				(SELECT count(*) FROM (SELECT user_id FROM orders d WHERE d.item_id = i.id AND d.status IN ('PENDING','PAID')
					GROUP BY user_id HAVING count(*) > 1) x) AS dup_holders
			FROM items i LEFT JOIN orders o ON o.item_id = i.id
			WHERE i.sale_id = ? GROUP BY i.id ORDER BY i.position`, saleID).Scan(&f.Items).Error; err != nil {
			return err
		}
		if err := tx.Raw(`SELECT count(*) FROM (SELECT user_id FROM orders WHERE sale_id = ? AND status IN ('PENDING','PAID')
				GROUP BY user_id HAVING count(*) > 1) x`, saleID).Scan(&f.SaleDupHolders).Error; err != nil {
			return err
		}
		if err := tx.Raw(`SELECT count(DISTINCT CASE WHEN ? = 'per-item' THEN item_id::text || ':' || user_id::text ELSE user_id::text END)
			FROM orders WHERE sale_id = ? AND status IN ('PENDING','PAID')`, f.PurchaseLimit, saleID).Scan(&f.LiveMembers).Error; err != nil {
			return err
		}
		return tx.Raw(`SELECT order_id::text AS order_id, sale_id, item_id, user_id, reason FROM stock_returns WHERE sale_id = ?`, saleID).Scan(&f.Returns).Error
	}, repeatableRead)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return SaleFacts{}, ErrNotFound
		}
		return SaleFacts{}, fmt.Errorf("sale facts %d: %w", saleID, err)
	}
	return f, nil
}

// SoldOfSale is how many units of a sale's items Postgres counts as sold (live orders).
func (d *DB) SoldOfSale(ctx context.Context, saleID int64) (int64, error) {
	var sold int64
	err := d.g.WithContext(ctx).Raw(`SELECT COALESCE(sum(sold), 0) FROM items WHERE sale_id = ?`, saleID).Scan(&sold).Error
	if err != nil {
		return 0, fmt.Errorf("sold of sale %d: %w", saleID, err)
	}
	return sold, nil
}
