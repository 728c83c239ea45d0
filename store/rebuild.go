package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
)

// ErrRebuildBusy means another instance is rebuilding the same sale right now.
var ErrRebuildBusy = errors.New("another instance is rebuilding the sale")

// RebuildSnapshot bumps the sale's Redis epoch and reads, in the same repeatable-read snapshot,
// what Redis must hold for it: units left per item, the buyers, and the orders whose unit
// Postgres gave back but whose return Redis has not confirmed (they become tombstones, so the
// return is not applied on top of a rebuilt count). Two rebuilds of one sale never overlap: the
// second waits for the first's row lock and fails (retried on the next pass).
func (d *DB) RebuildSnapshot(ctx context.Context, saleID int64) (Snapshot, error) {
	snap := Snapshot{SaleID: saleID, Left: map[int64]int64{}, Quantity: map[int64]int64{}, Buyers: map[string]string{}}
	err := d.g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := snapshotSale(tx, &snap); err != nil {
			return err
		}
		if err := snapshotItems(tx, &snap); err != nil {
			return err
		}
		if err := snapshotBuyers(tx, &snap); err != nil {
			return err
		}
		return tx.Raw(`SELECT order_id::text FROM stock_returns WHERE sale_id = ?`, saleID).Scan(&snap.Gone).Error
	}, repeatableRead)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "40001" {
		return Snapshot{}, ErrRebuildBusy
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("rebuild snapshot(sale %d): %w", saleID, err)
	}
	return snap, nil
}

// snapshotSale bumps the sale's epoch and reads its terms, shards and draw into snap.
func snapshotSale(tx *gorm.DB, snap *Snapshot) error {
	var sale struct {
		RedisEpoch    int64
		PurchaseLimit string
		StartsAt      time.Time
		EndsAt        time.Time
		Paused        bool
		StockShards   int
		FairStart     int
		DrawClosedAt  *time.Time
	}
	if err := tx.Raw(`UPDATE sales SET redis_epoch = redis_epoch + 1 WHERE id = ?
		RETURNING redis_epoch, purchase_limit, starts_at, ends_at, paused, stock_shards, fair_start_millis AS fair_start, draw_closed_at`,
		snap.SaleID).Scan(&sale).Error; err != nil {
		return err
	}
	if sale.RedisEpoch == 0 {
		return ErrNotFound
	}
	snap.Epoch, snap.Limit, snap.StartsAt, snap.EndsAt, snap.Paused = sale.RedisEpoch, sale.PurchaseLimit, sale.StartsAt, sale.EndsAt, sale.Paused
	snap.Shards = sale.StockShards
	snap.DrawEnds = drawEnds(sale.StartsAt, sale.FairStart)
	snap.Drawn = sale.FairStart > 0 && sale.DrawClosedAt != nil
	return nil
}

// snapshotItems reads each item's quantity, units left (quantity less live orders) and highest
// reservation seq into snap.
func snapshotItems(tx *gorm.DB, snap *Snapshot) error {
	var items []struct {
		ID       int64
		Quantity int64
		MaxSeq   int64
		Live     int64
	}
	if err := tx.Raw(`SELECT i.id, i.quantity, i.max_seq,
			(SELECT count(*) FROM orders o WHERE o.item_id = i.id AND o.status IN ('PENDING','PAID')) AS live
		FROM items i WHERE i.sale_id = ? ORDER BY i.position`, snap.SaleID).Scan(&items).Error; err != nil {
		return err
	}
	for _, it := range items {
		snap.Items = append(snap.Items, it.ID)
		snap.Left[it.ID] = it.Quantity - it.Live
		snap.Quantity[it.ID] = it.Quantity
		snap.MaxSeq = max(snap.MaxSeq, it.MaxSeq)
	}
	return nil
}

// snapshotBuyers reads the live orders (PENDING, PAID) as Redis's buyer members.
func snapshotBuyers(tx *gorm.DB, snap *Snapshot) error {
	var live []struct {
		ID     string
		ItemID int64
		UserID int64
	}
	if err := tx.Raw(`SELECT id::text AS id, item_id, user_id FROM orders WHERE sale_id = ? AND status IN ('PENDING','PAID')`,
		snap.SaleID).Scan(&live).Error; err != nil {
		return err
	}
	for _, o := range live {
		snap.Buyers[BuyerMember(snap.Limit, o.ItemID, o.UserID)] = o.ID
	}
	return nil
}

// MaxSeqOfSale returns the highest reservation seq Postgres holds for a sale.
func (d *DB) MaxSeqOfSale(ctx context.Context, saleID int64) (int64, error) {
	var n int64
	err := d.g.WithContext(ctx).Raw(`SELECT coalesce(max(max_seq), 0) FROM items WHERE sale_id = ?`, saleID).Scan(&n).Error
	if err != nil {
		return 0, fmt.Errorf("max seq(sale %d): %w", saleID, err)
	}
	return n, nil
}

// EditedSince reports whether the sale's fields Redis holds (start, end, limit, pause, the items
// and their quantities) differ now from what snap read: an edit committed after the snapshot.
func (d *DB) EditedSince(ctx context.Context, snap Snapshot) (bool, error) {
	var sale struct {
		PurchaseLimit string
		StartsAt      time.Time
		EndsAt        time.Time
		Paused        bool
		FairStart     int
		Drawn         bool
	}
	if err := d.g.WithContext(ctx).Raw(`SELECT purchase_limit, starts_at, ends_at, paused, fair_start_millis AS fair_start,
			draw_closed_at IS NOT NULL AS drawn FROM sales WHERE id = ?`, snap.SaleID).
		Scan(&sale).Error; err != nil {
		return false, err
	}
	var items []struct {
		ID       int64
		Quantity int64
	}
	if err := d.g.WithContext(ctx).Raw(`SELECT id, quantity FROM items WHERE sale_id = ?`, snap.SaleID).Scan(&items).Error; err != nil {
		return false, err
	}
	if sale.PurchaseLimit != snap.Limit || !sale.StartsAt.Equal(snap.StartsAt) || !sale.EndsAt.Equal(snap.EndsAt) ||
		sale.Paused != snap.Paused || len(items) != len(snap.Quantity) || (sale.FairStart > 0 && sale.Drawn != snap.Drawn) ||
		!drawEnds(sale.StartsAt, sale.FairStart).Equal(snap.DrawEnds) {
		return true, nil
	}
	for _, it := range items {
		if q, ok := snap.Quantity[it.ID]; !ok || q != it.Quantity {
			return true, nil
		}
	}
	return false, nil
}

// drawEnds is the end of a sale's draw window (zero: it has none).
func drawEnds(startsAt time.Time, fairStartMillis int) time.Time {
	if fairStartMillis <= 0 {
		return time.Time{}
	}
	return startsAt.Add(time.Duration(fairStartMillis) * time.Millisecond)
}
