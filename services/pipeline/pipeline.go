// Package pipeline carries a reservation from the queue into Postgres and keeps Redis and Postgres
// agreeing: the writer, the unit returns, the loader that (re)builds a sale's Redis state, the
// keeper's periodic jobs (warm-up, expiry, orphan recovery, transfers) and the reconciliation.
package pipeline

import "context"

// SoldOutFlags are this instance's local sold-out flags (purchase.SoldOut): a unit that went back
// clears its item's flag.
type SoldOutFlags interface {
	Returned(itemID int64)
}

// Backlogger tells how many messages the writer has not acknowledged yet (store.Queue).
type Backlogger interface {
	Backlog(ctx context.Context) (uint64, error)
}
