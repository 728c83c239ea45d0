package catalog

import (
	"context"
	"time"

	"github.com/flashsale/flashsale/services/pipeline"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// DB is what the catalog reads and writes in Postgres (store.DB).
type DB interface {
	CreateSale(ctx context.Context, sale shop.Sale) (shop.Sale, error)
	EachOrderOfSale(ctx context.Context, saleID int64, chunk int, fn func([]store.ExportOrder) error) error
	EditSale(ctx context.Context, saleID int64, edit func(cur shop.Sale) (shop.Sale, error), before func(old, next shop.Sale) error) (shop.Sale, error)
	HighestIDs(ctx context.Context) (sale, item int64, err error)
	ItemByID(ctx context.Context, id int64) (shop.Item, error)
	DrawOf(ctx context.Context, saleID int64) (shop.Draw, error)
	DrawRecord(ctx context.Context, saleID int64, cursor string, limit int) ([]shop.DrawEntry, string, error)
	OrdersOfSale(ctx context.Context, saleID int64, f store.SaleOrderFilter, after *shop.OrderCursor, limit int) ([]store.SaleOrder, *shop.OrderCursor, error)
	SaleByID(ctx context.Context, id int64) (shop.Sale, error)
	SaleMoney(ctx context.Context, saleID int64) ([]store.ItemMoney, error)
	SaleMoneyIssues(ctx context.Context, saleID int64) (store.MoneyIssues, error)
	SalesByMerchant(ctx context.Context, merchantID int64, limit int) ([]shop.Sale, error)
	SalesEndingAfter(ctx context.Context, t time.Time, after *shop.SaleCursor, limit int) ([]shop.Sale, *shop.SaleCursor, error)
	SalesEndedBy(ctx context.Context, t time.Time, after *shop.SaleCursor, limit int) ([]shop.Sale, *shop.SaleCursor, error)
}

// Stock is what the catalog reads and changes of the sales' state in Redis (store.Stock).
type Stock interface {
	Adjust(ctx context.Context, a store.Adjustment) (store.AdjustResult, error)
	Funnel(ctx context.Context, saleID int64, since int64) (store.FunnelCounts, []store.SeriesPoint, error)
	Levels(ctx context.Context, saleID int64, itemIDs []int64) ([]int64, error)
	MarkLost(ctx context.Context, saleID int64, fence int64, atSeq string) (bool, error)
	Paused(ctx context.Context, saleID int64) (bool, error)
	RememberShards(saleID int64, k int)
	DrawShards(ctx context.Context, saleID int64) ([]store.DrawShard, error)
	Remind(ctx context.Context, saleID int64, reminderID string, expireAt time.Time) error
	Reminders(ctx context.Context, saleID int64) (int64, error)
}

// Loader loads a sale's stock into Redis (pipeline.Loader): the first time, and after a loss only
// under the keeper's rule; and clears a sold-out flag when an edit raised an item's stock.
type Loader interface {
	LoadFirst(ctx context.Context, saleID int64) (bool, error)
	Rebuild(ctx context.Context, saleID int64, q pipeline.Backlogger) error
	Returned(itemID int64)
}

// Reconciler compares a sale's Redis with its Postgres for the live view (pipeline.Reconciler).
type Reconciler interface {
	Report(ctx context.Context, saleID int64) (pipeline.SaleReport, error)
}
