package testenv

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/services/pipeline"
	"github.com/flashsale/flashsale/store"
)

// Invariants checks the invariants of a sale on db and the Redis rdb once traffic has stopped and
// the queue has drained (pipeline.Invariants): every test, fault scenario and benchmark run ends
// with it.
func Invariants(ctx context.Context, db *store.DB, rdb redis.UniversalClient, saleID int64, acked []string) []error {
	stock := store.NewStock(rdb)
	stock.SetShardCounter(db.StockShardsCached)
	return pipeline.Invariants(ctx, db, stock, saleID, acked)
}
