package drill

import (
	"context"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// DB is what the drill reads and writes in Postgres (store.DB).
type DB interface {
	SaleByID(ctx context.Context, id int64) (shop.Sale, error)
	SalesLiveOrStarting(ctx context.Context, now time.Time, within time.Duration, limit int) ([]shop.Sale, error)
	InsertDrill(ctx context.Context, r store.DrillRecord) (store.DrillRecord, error)
	Drill(ctx context.Context, id int64) (store.DrillRecord, error)
	LatestDrill(ctx context.Context, saleID int64) (store.DrillRecord, error)
	RunningDrills(ctx context.Context) ([]store.DrillRecord, error)
	LastDrillEnd(ctx context.Context, merchantID int64) (store.DrillEnd, error)
	DrillProgress(ctx context.Context, id int64, phase string, sent, answered int) error
	SetDrillCopy(ctx context.Context, id, copySaleID int64) error
	FinishDrill(ctx context.Context, id int64, phase string, result []byte, failure string) (bool, error)
	AbandonDrills(ctx context.Context, silent time.Duration, reason string) ([]store.DrillRecord, error)
	DrillCopies(ctx context.Context) ([]int64, error)
	CreateDrillCopy(ctx context.Context, copy shop.Sale) (shop.Sale, error)
	OrdersOfSaleCount(ctx context.Context, saleID int64) (int64, error)
	DeleteDrillCopy(ctx context.Context, saleID int64) error
}

// Stock is what the drill reads and removes of a sale's state in Redis (store.Stock).
type Stock interface {
	InFlightCount(ctx context.Context, saleID int64, k int) (int64, error)
	DeleteSaleKeys(ctx context.Context, saleID int64) (int, error)
	Reminders(ctx context.Context, saleID int64) (int64, error)
}

// Loader loads the copy's stock into Redis (pipeline.Loader).
type Loader interface {
	LoadFirst(ctx context.Context, saleID int64) (bool, error)
}
