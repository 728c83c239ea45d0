package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/flashsale/flashsale/shop"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
)

// ErrAdjustTooLow means Redis holds fewer units of an item than an edit's decrease asks: they are
// sold or held by reservations in flight. Nothing was changed.
var ErrAdjustTooLow = errors.New("fewer units left in redis than the decrease")

// Adjustment is a merchant's edit of a loaded sale as Redis applies it (lua/adjust.lua).
type Adjustment struct {
	SaleID int64
	// ID names the edit (Adjust draws one when empty): each shard marks the steps of the edit it
	// applied ({sale:S}:adj:ID), so a step sent again after its reply was lost is not applied twice.
	ID    string
	Meta  map[string]string // meta fields to set: starts, ends (unix ms), limit, paused ("1"/"0")
	Stock []StockAdjust
}

// StockAdjust moves one item's stock by Delta, or creates it with Initial units (an added item).
type StockAdjust struct {
	ItemID  int64
	Delta   int64
	Initial *int64
}

// AdjustResult tells what Adjust did.
type AdjustResult struct {
	Applied bool  // false: the sale is not loaded or marked lost (the next load reads Postgres)
	ItemID  int64 // with ErrAdjustTooLow: the item short of units
	Left    int64 // with ErrAdjustTooLow: its units left in Redis
}

// AdjMarkKeyOf is the mark of one applied step of an edit in one shard (kept 15 minutes).
func AdjMarkKeyOf(saleID int64, shard int, step string) string {
	return shardTag(saleID, shard) + ":adj:" + step
}

// Adjust applies an edit to a sale's Redis state atomically: every stock delta and meta field,
// or nothing (ErrAdjustTooLow when a decrease would take an item's stock below zero).
//
// Each step is applied at most once (its mark, AdjMarkKeyOf), however often go-redis sends it.
// Any other error means a step's outcome is unknown (Redis may have applied it and the reply was
// lost): the sale is then marked lost (fail closed) before Adjust returns, so that whatever
// Redis took is replaced by a rebuild from Postgres, where the edit's transaction rolls back.
//
// A sharded sale takes the edit shard by shard (store/shardedit.go, adjustSharded).
func (s *Stock) Adjust(ctx context.Context, a Adjustment) (AdjustResult, error) {
	if a.ID == "" {
		a.ID = newTransferID()
	}
	k, err := s.shards.get(ctx, a.SaleID)
	if err != nil {
		return AdjustResult{}, fmt.Errorf("adjust(sale %d): %w", a.SaleID, err)
	}
	if k > 1 {
		return s.adjustSharded(ctx, a, k)
	}
	r, err := s.adjustShard(ctx, a, 0, a.ID)
	if err != nil && !errors.Is(err, ErrAdjustTooLow) {
		return s.failAdjust(ctx, a.SaleID, err)
	}
	return r, err
}

// failAdjust fails a sale closed after an edit step whose outcome is unknown, or one that left
// the shards of a sharded sale holding different parts of the edit.
func (s *Stock) failAdjust(ctx context.Context, saleID int64, err error) (AdjustResult, error) {
	if _, lerr := s.MarkLost(context.WithoutCancel(ctx), saleID, 0, ""); lerr != nil {
		return AdjustResult{}, errors.Join(err, fmt.Errorf("and marking the sale lost failed: %w", lerr))
	}
	return AdjustResult{}, fmt.Errorf("%w (the sale is marked lost: it is rebuilt from postgres)", err)
}

// adjustShard runs adjust.lua on one shard, as the edit's step named step.
func (s *Stock) adjustShard(ctx context.Context, a Adjustment, sh int, step string) (AdjustResult, error) {
	keys := []string{MetaKeyOf(a.SaleID, sh), AdjMarkKeyOf(a.SaleID, sh, step)}
	args := []any{len(a.Meta)}
	for k, v := range a.Meta {
		args = append(args, k, v)
	}
	for _, st := range a.Stock {
		keys = append(keys, StockKeyOf(a.SaleID, sh, st.ItemID))
		init := ""
		if st.Initial != nil {
			init = fmt.Sprint(*st.Initial)
		}
		args = append(args, st.Delta, init)
	}
	v, err := s.adjust.Run(ctx, s.rdb, keys, args...).Int64Slice()
	if err != nil {
		return AdjustResult{}, fmt.Errorf("adjust(sale %d, shard %d): %w", a.SaleID, sh, err)
	}
	switch {
	case len(v) == 1 && (v[0] == 1 || v[0] == 2):
		return AdjustResult{Applied: true}, nil
	case len(v) == 1 && v[0] == 0:
		return AdjustResult{}, nil
	case len(v) == 3 && v[0] == -1 && v[1] >= 1 && int(v[1]) <= len(a.Stock):
		return AdjustResult{ItemID: a.Stock[v[1]-1].ItemID, Left: v[2]}, ErrAdjustTooLow
	}
	return AdjustResult{}, fmt.Errorf("adjust(sale %d, shard %d): unexpected reply %v", a.SaleID, sh, v)
}

// EditSale changes a sale in one transaction: it locks the sale's row and its items' rows, hands
// the current sale (items in position order, with Sold) to edit, which returns the sale as it must
// be (items with ID 0 are added), writes the difference, runs before (the Redis step; an error
// rolls everything back) and commits. It returns the sale as stored.
func (d *DB) EditSale(ctx context.Context, saleID int64, edit func(cur shop.Sale) (shop.Sale, error), before func(old, next shop.Sale) error) (shop.Sale, error) {
	var out shop.Sale
	err := d.g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var cur saleRow
		if err := tx.Raw(`SELECT * FROM sales WHERE id = ? FOR NO KEY UPDATE`, saleID).Scan(&cur).Error; err != nil {
			return err
		}
		if cur.ID == 0 {
			return ErrNotFound
		}
		if err := tx.Raw(`SELECT * FROM items WHERE sale_id = ? ORDER BY id FOR UPDATE`, saleID).Scan(&cur.Items).Error; err != nil {
			return err
		}
		sortItemsByPosition(cur.Items)
		old := cur.business()
		edited, err := edit(old)
		if err != nil {
			return err
		}
		next := saleRowOf(edited)
		// a pause while the draw is undecided is counted: the draw's record shows it
		if err := tx.Raw(`UPDATE sales SET name = ?, description = ?, starts_at = ?, ends_at = ?, payment_window_seconds = ?,
				purchase_limit = ?, currency = ?, paused = ?, fair_start_millis = ?,
				draw_pauses = draw_pauses + CASE WHEN ? AND NOT paused AND fair_start_millis > 0 AND draw_closed_at IS NULL
					AND starts_at <= now() THEN 1 ELSE 0 END
			WHERE id = ? RETURNING draw_pauses`,
			next.Name, next.Description, next.StartsAt, next.EndsAt, next.PaymentWindowSeconds, next.PurchaseLimit, next.Currency,
			next.Paused, next.FairStartMillis, next.Paused, saleID).Scan(&next.DrawPauses).Error; err != nil {
			return err
		}
		pos := len(cur.Items)
		for i := range next.Items {
			it := &next.Items[i]
			if it.ID == 0 {
				it.SaleID, it.Position = saleID, pos
				pos++
				if err := tx.Create(it).Error; err != nil {
					return err
				}
				continue
			}
			if err := tx.Exec(`UPDATE items SET name = ?, price_cents = ?, quantity = ?, image_url = ? WHERE id = ? AND sale_id = ?`,
				it.Name, it.PriceCents, it.Quantity, it.ImageURL, it.ID, saleID).Error; err != nil {
				return err
			}
		}
		out = next.business()
		if before != nil {
			if err := before(old, out); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return shop.Sale{}, err
	}
	return out, nil
}

func sortItemsByPosition(items []itemRow) {
	for i := 1; i < len(items); i++ {
		for j := i; j > 0 && items[j].Position < items[j-1].Position; j-- {
			items[j], items[j-1] = items[j-1], items[j]
		}
	}
}

// Paused reads the paused field of a sale's meta (false when the sale is not loaded).
func (s *Stock) Paused(ctx context.Context, saleID int64) (bool, error) {
	v, err := s.rdb.HGet(ctx, MetaKey(saleID), "paused").Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("paused(sale %d): %w", saleID, err)
	}
	return v == "1", nil
}
