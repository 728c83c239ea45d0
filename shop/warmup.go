package shop

import "time"

// The warm-up: a sale's stock goes into Redis ahead of its start, so the first shopper's
// purchase finds it there. The keeper loads it then; the catalog loads it at once when a sale
// is created or edited that close to its start, and the merchant's live view says whether it
// is due.

// DefaultWarmAhead is how long before its start a sale's stock is loaded into Redis, unless told
// otherwise (FLASHSALE_WARM_AHEAD).
const DefaultWarmAhead = 10 * time.Minute

// DueForWarmUp reports whether a sale starting at startsAt must be held in Redis at now.
func DueForWarmUp(startsAt, now time.Time, ahead time.Duration) bool {
	return !now.Before(startsAt.Add(-ahead))
}
