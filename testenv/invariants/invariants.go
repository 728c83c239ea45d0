// Package invariants checks a sale's invariants on real engines once traffic has stopped: every
// test, fault scenario and benchmark run ends with Check. It is apart from testenv so that the
// rule packages' own tests can use testenv (this package imports the pipeline's reconciliation).
package invariants

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/services/pipeline"
	"github.com/flashsale/flashsale/store"
)

// Check checks the invariants of a sale on db and the Redis rdb once traffic has stopped and the
// queue has drained (pipeline.Invariants), and returns every violation (nil when all hold).
func Check(ctx context.Context, db *store.DB, rdb redis.UniversalClient, saleID int64, acked []string) []error {
	stock := store.NewStock(rdb)
	stock.SetShardCounter(db.StockShardsCached)
	return pipeline.Invariants(ctx, db, stock, saleID, acked)
}
