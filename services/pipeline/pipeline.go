// Package pipeline carries a reservation from the queue into Postgres and keeps Redis and Postgres
// agreeing: the writer, the unit returns, the loader that (re)builds a sale's Redis state, the
// keeper's periodic jobs (warm-up, expiry, orphan recovery, transfers) and the reconciliation.
package pipeline

import (
	"context"
	"errors"
)

// SoldOutFlags are this instance's local sold-out flags (purchase.SoldOut): a unit that went back
// clears its item's flag.
type SoldOutFlags interface {
	Returned(itemID int64)
}

// noFlags are the flags of a writer given none.
type noFlags struct{}

func (noFlags) Returned(int64) {}

// Backlogger tells how many messages the writer has not acknowledged yet (store.Queue).
type Backlogger interface {
	Backlog(ctx context.Context) (uint64, error)
}

// NoQueue is the queue of a service given none (tests, tools): its depth is never known, so
// nothing that waits for the queue to drain goes ahead.
type NoQueue struct{}

// Backlog answers that there is no queue to judge by.
func (NoQueue) Backlog(context.Context) (uint64, error) {
	return 0, errors.New("no queue to judge the rebuild by")
}
