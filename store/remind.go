package store

import (
	"context"
	"fmt"
	"time"
)

// RemindersKey is the HyperLogLog of a sale's reminders: the signed-in shoppers who pressed
// "Remind me" on the sale page before the start, by their user id (handlers.Remind), counted once
// each however often and from however many browsers (an estimate, about 0.81% off; an undone
// reminder stays counted). It expires a day after the sale's end.
func RemindersKey(saleID int64) string { return saleTag(saleID) + ":reminders" }

// Remind adds one reminder id to the sale's HyperLogLog and (re)sets its expiry to expireAt, in
// one round trip on the sale's slot. Adding an id already counted changes nothing.
func (s *Stock) Remind(ctx context.Context, saleID int64, reminderID string, expireAt time.Time) error {
	key := RemindersKey(saleID)
	pipe := s.rdb.TxPipeline()
	pipe.PFAdd(ctx, key, reminderID)
	pipe.ExpireAt(ctx, key, expireAt)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("remind(sale %d): %w", saleID, err)
	}
	return nil
}

// Reminders is the estimated number of distinct reminders of a sale (0: none, or expired).
func (s *Stock) Reminders(ctx context.Context, saleID int64) (int64, error) {
	n, err := s.rdb.PFCount(ctx, RemindersKey(saleID)).Result()
	if err != nil {
		return 0, fmt.Errorf("reminders(sale %d): %w", saleID, err)
	}
	return n, nil
}
