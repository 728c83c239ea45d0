package catalog

import (
	"context"
	"time"

	"github.com/flashsale/flashsale/shop"
)

// Reminders: before a sale, a signed-in shopper can press "Remind me" on the sale page. The page
// notifies them at the start and the shop counts the shopper once here, by user id, in a
// HyperLogLog per sale in Redis (store.Stock.Remind): a count nobody can inflate without accounts. The merchant's live view shows the
// count, an early estimate of the crowd. Nothing of it is on the purchase path.

// Reminder ids: what a browser makes (a UUID, or any random string of the same letters).
const (
	ReminderIDMin = 16
	ReminderIDMax = 64
)

// RemindersKeep is how long after a sale's end its reminders are kept in Redis.
const RemindersKeep = 24 * time.Hour

// ValidReminderID reports whether id is a reminder id: 16 to 64 of [A-Za-z0-9-].
func ValidReminderID(id string) bool {
	if len(id) < ReminderIDMin || len(id) > ReminderIDMax {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// Remind counts a shopper's reminder of a sale once per reminder id: INVALID_INPUT for an id that
// is not one (checked before any lookup), NOT_FOUND for an unknown sale, SALE_STARTED once the sale
// has started (by this instance's clock: the count is an estimate, the page stops offering it at
// the start by the shop's clock).
func (s *Sales) Remind(ctx context.Context, saleID int64, reminderID string) error {
	if !ValidReminderID(reminderID) {
		return shop.Errorf(shop.CodeInvalidInput, "reminderId must be %d to %d letters, digits or hyphens", ReminderIDMin, ReminderIDMax)
	}
	sale, err := s.Cached(ctx, saleID) // a fire drill's copy is not found
	if err != nil {
		return err
	}
	if now := s.now(); !now.Before(sale.StartsAt) || !now.Before(sale.EndsAt) {
		return shop.Errorf(shop.CodeSaleStarted, "the sale has started: reminders are for before the start")
	}
	if err := s.stock.Remind(ctx, saleID, reminderID, sale.EndsAt.Add(RemindersKeep)); err != nil {
		return shop.Unavailable(err)
	}
	return nil
}
