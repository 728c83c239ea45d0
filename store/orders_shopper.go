package store

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/flashsale/flashsale/shop"
)

// OrderByID loads one order.
func (d *DB) OrderByID(ctx context.Context, id string) (shop.Order, error) {
	var o shop.Order
	err := d.g.WithContext(ctx).Raw(`SELECT * FROM orders WHERE id = ?::uuid`, id).Scan(&o).Error
	if err != nil {
		return shop.Order{}, fmt.Errorf("order %s: %w", id, err)
	}
	if o.ID == "" {
		return shop.Order{}, ErrNotFound
	}
	return o, nil
}

// OrderDetail is an order with what its shopper needs to recognise it.
type OrderDetail struct {
	shop.Order
	ItemName   string
	PriceCents int64
	Currency   string
	SaleName   string
}

const orderDetailSelect = `SELECT o.*, i.name AS item_name, coalesce(o.unit_price_cents, i.price_cents) AS price_cents, s.currency, s.name AS sale_name
	FROM orders o JOIN items i ON i.id = o.item_id JOIN sales s ON s.id = o.sale_id`

// OrderDetailByID loads one order with its item and sale.
func (d *DB) OrderDetailByID(ctx context.Context, id string) (OrderDetail, error) {
	var o OrderDetail
	err := d.g.WithContext(ctx).Raw(orderDetailSelect+` WHERE o.id = ?::uuid`, id).Scan(&o).Error
	if err != nil {
		return OrderDetail{}, fmt.Errorf("order %s: %w", id, err)
	}
	if o.ID == "" {
		return OrderDetail{}, ErrNotFound
	}
	return o, nil
}

// OrdersOfUser lists a shopper's orders (of one sale if saleID > 0) newest first (by reservation time), after cursor (nil: from the newest), at most
// limit; next is nil on the last page.
func (d *DB) OrdersOfUser(ctx context.Context, userID, saleID int64, after *shop.OrderCursor, limit int) ([]OrderDetail, *shop.OrderCursor, error) {
	q := orderDetailSelect + ` WHERE o.user_id = ?`
	args := []any{userID}
	if saleID > 0 {
		q += ` AND o.sale_id = ?`
		args = append(args, saleID)
	}
	if after != nil {
		q += ` AND (o.reserved_at, o.id) < (?, ?::uuid)`
		args = append(args, after.ReservedAt, after.ID)
	}
	q += ` ORDER BY o.reserved_at DESC, o.id DESC LIMIT ?`
	args = append(args, limit+1)
	var out []OrderDetail
	if err := d.g.WithContext(ctx).Raw(q, args...).Scan(&out).Error; err != nil {
		return nil, nil, fmt.Errorf("orders of user %d: %w", userID, err)
	}
	if len(out) <= limit {
		return out, nil, nil
	}
	out = out[:limit]
	last := out[limit-1]
	return out, &shop.OrderCursor{ReservedAt: last.ReservedAt, ID: last.ID}, nil
}

// PayOrder marks a PENDING order of userID as PAID through the simulated provider (the API's
// direct pay, kept for API clients and tests where no real provider is set up) if its payment window is still open by
// Postgres's clock (the clock expiry uses, so pay and expire agree). It reports whether this call
// changed it; the caller reads the order to tell why not.
func (d *DB) PayOrder(ctx context.Context, id string, userID int64) (bool, error) {
	var paid bool
	err := d.g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Exec(`UPDATE orders SET status = 'PAID', paid_at = now(), payment_status = 'paid',
				payment_provider = 'simulated', payment_id = 'sim_pi_' || id::text,
				paid_cents = coalesce(unit_price_cents, (SELECT price_cents FROM items i WHERE i.id = orders.item_id))
			WHERE id = ?::uuid AND user_id = ? AND status = 'PENDING' AND pay_by > now()`, id, userID)
		if res.Error != nil {
			return res.Error
		}
		paid = res.RowsAffected == 1
		if !paid {
			return nil
		}
		return closeCheckout(tx, id, CheckoutComplete) // an open checkout of the order can no longer be paid
	})
	if err != nil {
		return false, fmt.Errorf("pay order %s: %w", id, err)
	}
	return paid, nil
}
