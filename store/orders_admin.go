package store

import (
	"context"
	"fmt"

	"github.com/flashsale/flashsale/shop"
)

// SaleOrderFilter narrows the merchant's list of a sale's orders.
type SaleOrderFilter struct {
	Status   string // "" for every status
	UserID   int64  // 0 for every shopper
	Username string // "" for every shopper; else only the account of this name (any case)
}

// SaleOrder is one order of the merchant's list, with the shopper's username: "" when this
// shop has no account of that id (orders.user_id has no foreign key: the identity may be
// external).
type SaleOrder struct {
	shop.Order
	Username string
}

// OrdersOfSale lists a sale's orders newest first (by reservation time, then id), after cursor
// (nil: from the newest), at most limit; next is nil on the last page. Keyset paging: a page
// costs the same however deep it is. A username is matched as accounts are, case-insensitively
// (the unique index on lower(username)); one no account holds matches no order.
func (d *DB) OrdersOfSale(ctx context.Context, saleID int64, f SaleOrderFilter, after *shop.OrderCursor, limit int) ([]SaleOrder, *shop.OrderCursor, error) {
	q := `SELECT o.*, COALESCE(u.username, '') AS username FROM orders o LEFT JOIN users u ON u.id = o.user_id
		WHERE o.sale_id = ?`
	args := []any{saleID}
	if f.Status != "" {
		q += ` AND o.status = ?`
		args = append(args, f.Status)
	}
	if f.UserID > 0 {
		q += ` AND o.user_id = ?`
		args = append(args, f.UserID)
	}
	if f.Username != "" {
		q += ` AND o.user_id = (SELECT id FROM users WHERE lower(username) = lower(?))`
		args = append(args, f.Username)
	}
	if after != nil {
		q += ` AND (o.reserved_at, o.id) < (?, ?::uuid)`
		args = append(args, after.ReservedAt, after.ID)
	}
	q += ` ORDER BY o.reserved_at DESC, o.id DESC LIMIT ?`
	args = append(args, limit+1)
	var out []SaleOrder
	if err := d.g.WithContext(ctx).Raw(q, args...).Scan(&out).Error; err != nil {
		return nil, nil, fmt.Errorf("orders of sale %d: %w", saleID, err)
	}
	if len(out) <= limit {
		return out, nil, nil
	}
	out = out[:limit]
	last := out[limit-1]
	return out, &shop.OrderCursor{ReservedAt: last.ReservedAt, ID: last.ID}, nil
}

// ExportOrder is one row of a sale's order export.
type ExportOrder struct {
	shop.Order
	Username   string // "" when this shop has no account of the order's user id
	ItemName   string
	PriceCents int64
	Currency   string
}

// EachOrderOfSale calls fn with every order of a sale, oldest first, chunk rows at a time, read
// by keyset paging: one short query per chunk, so neither this process nor a Postgres
// transaction ever holds the whole sale. An error from fn stops it and is returned.
func (d *DB) EachOrderOfSale(ctx context.Context, saleID int64, chunk int, fn func([]ExportOrder) error) error {
	if chunk <= 0 {
		chunk = 1000
	}
	var after *shop.OrderCursor
	for {
		q := `SELECT o.*, i.name AS item_name, coalesce(o.unit_price_cents, i.price_cents) AS price_cents, s.currency, COALESCE(u.username, '') AS username
			FROM orders o JOIN items i ON i.id = o.item_id JOIN sales s ON s.id = o.sale_id
			LEFT JOIN users u ON u.id = o.user_id
			WHERE o.sale_id = ?`
		args := []any{saleID}
		if after != nil {
			q += ` AND (o.reserved_at, o.id) > (?, ?::uuid)`
			args = append(args, after.ReservedAt, after.ID)
		}
		q += ` ORDER BY o.reserved_at, o.id LIMIT ?`
		args = append(args, chunk)
		var rows []ExportOrder
		if err := d.g.WithContext(ctx).Raw(q, args...).Scan(&rows).Error; err != nil {
			return fmt.Errorf("export orders of sale %d: %w", saleID, err)
		}
		if len(rows) > 0 {
			if err := fn(rows); err != nil {
				return err
			}
		}
		if len(rows) < chunk {
			return nil
		}
		last := rows[len(rows)-1]
		after = &shop.OrderCursor{ReservedAt: last.ReservedAt, ID: last.ID}
	}
}
