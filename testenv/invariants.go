package testenv

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/services/pipeline"
	"github.com/flashsale/flashsale/store"
)

// Invariants is pipeline.Invariants, kept here for the tests that call it by this name.
func Invariants(ctx context.Context, db *store.DB, rdb redis.UniversalClient, saleID int64, acked []string) []error {
	return pipeline.Invariants(ctx, db, rdb, saleID, acked)
}
