package testenv

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/services"
	"github.com/flashsale/flashsale/store"
)

// Invariants is services.Invariants, kept here for the tests that call it by this name.
func Invariants(ctx context.Context, db *store.DB, rdb redis.UniversalClient, saleID int64, acked []string) []error {
	return services.Invariants(ctx, db, rdb, saleID, acked)
}
