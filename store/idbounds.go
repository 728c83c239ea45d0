package store

import (
	"context"
	"fmt"
)

// HighestIDs returns the highest sale id and the highest item id Postgres holds (0 where there is
// none), in one round trip of two index-only lookups. Ids are taken from sequences and only
// grow, so an id above them, as read by a query that started after a request arrived, was not a
// committed sale or item when it arrived (catalog.Sales answers it "not found" without a
// query of its own).
func (d *DB) HighestIDs(ctx context.Context) (sale, item int64, err error) {
	var r struct {
		Sale int64
		Item int64
	}
	err = d.g.WithContext(ctx).Raw(`SELECT (SELECT coalesce(max(id), 0) FROM sales) AS sale, (SELECT coalesce(max(id), 0) FROM items) AS item`).Scan(&r).Error
	if err != nil {
		return 0, 0, fmt.Errorf("highest ids: %w", err)
	}
	return r.Sale, r.Item, nil
}
