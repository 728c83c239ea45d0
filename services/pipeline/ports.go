package pipeline

import (
	"context"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// DB is what this package reads and writes in Postgres (store.DB).
type DB interface {
	DeleteReturns(ctx context.Context, orderIDs []string) error
	EachSaleEndingAfter(ctx context.Context, t time.Time, fn func([]shop.Sale) error) error
	EditedSince(ctx context.Context, snap store.Snapshot) (bool, error)
	ExistingOrders(ctx context.Context, ids []string) (map[string]string, error)
	ExpireDue(ctx context.Context, limit int) ([]store.StockReturn, error)
	HeldOrder(ctx context.Context, saleID, itemID, userID int64) (string, error)
	InsertFailedOrder(ctx context.Context, o store.NewOrder, reason string) (bool, error)
	InsertOrders(ctx context.Context, orders []store.NewOrder) ([]string, error)
	InsertEntries(ctx context.Context, entries []store.NewEntry) (int, error)
	UndecidedEntries(ctx context.Context, saleID int64) (int, error)
	LiveOrders(ctx context.Context, saleID int64) ([]store.LiveOrder, error)
	MaxSeqOfSale(ctx context.Context, saleID int64) (int64, error)
	MaxSeqOfShards(ctx context.Context, saleID int64, k int) ([]int64, error)
	OrderByID(ctx context.Context, id string) (shop.Order, error)
	PendingReturns(ctx context.Context, limit int) ([]store.StockReturn, error)
	RebuildSnapshot(ctx context.Context, saleID int64) (store.Snapshot, error)
	SaleFacts(ctx context.Context, saleID int64) (store.SaleFacts, error)
}

// Stock is what this package reads and changes of the sales' state in Redis (store.Stock).
type Stock interface {
	AreGone(ctx context.Context, saleID int64, ids []string) ([]bool, error)
	Buyers(ctx context.Context, saleID int64) (map[string]string, error)
	Claim(ctx context.Context, saleID int64, orders []store.ClaimItem) ([]int, error)
	CompleteTransfers(ctx context.Context, saleID int64) (int, error)
	InFlightOlder(ctx context.Context, saleID int64, age time.Duration) ([]store.InFlightEntry, error)
	Load(ctx context.Context, snap store.Snapshot, voidTokens time.Duration) (bool, error)
	MarkLost(ctx context.Context, saleID int64, fence int64, atSeq string) (bool, error)
	ReconcileLease(ctx context.Context, owner string, ttl time.Duration) (*store.Lease, error)
	Release(ctx context.Context, o shop.OrderRef, op shop.ReleaseOp) (store.ReleaseOutcome, error)
	ReleaseMany(ctx context.Context, refs []shop.OrderRef, op shop.ReleaseOp) ([]store.ReleaseOutcome, []error)
	RememberShards(saleID int64, k int)
	Settle(ctx context.Context, bySale map[int64][]string) error
	State(ctx context.Context, saleID int64) (store.SaleState, error)
	TransferSeqLoss(ctx context.Context, saleID int64, k int) (store.SeqLoss, bool, error)
	View(ctx context.Context, saleID int64, items []int64, gone []string) (store.RedisView, error)
}
