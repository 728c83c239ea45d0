package purchase

import (
	"context"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// DB is what this package reads and writes in Postgres (store.DB).
type DB interface {
	CancelOrder(ctx context.Context, o shop.Order, userID int64) ([]store.StockReturn, error)
	ExistingOrders(ctx context.Context, ids []string) (map[string]string, error)
	ExpireOrder(ctx context.Context, o shop.Order) ([]store.StockReturn, error)
	MaxSeqOfSale(ctx context.Context, saleID int64) (int64, error)
	MaxSeqOfShards(ctx context.Context, saleID int64, k int) ([]int64, error)
	OrderDetailByID(ctx context.Context, id string) (store.OrderDetail, error)
	OrdersOfUser(ctx context.Context, userID, saleID int64, after *shop.OrderCursor, limit int) ([]store.OrderDetail, *shop.OrderCursor, error)
	PayOrder(ctx context.Context, id string, userID int64) (bool, error)
	SalesOpenSince(ctx context.Context, endedAfter, startsBefore time.Time) ([]shop.Sale, error)
}

// Stock is what this package reads and changes of the sales' state in Redis (store.Stock).
type Stock interface {
	Claim(ctx context.Context, saleID int64, orders []store.ClaimItem) ([]int, error)
	HeldInFlight(ctx context.Context, lookups []store.HeldLookup) (held [][]store.InFlightEntry, errs []error)
	InFlight(ctx context.Context, saleID int64) ([]store.InFlightEntry, error)
	InFlightOrder(ctx context.Context, saleID int64, orderID string) (store.InFlightEntry, bool, error)
	Levels(ctx context.Context, saleID int64, itemIDs []int64) ([]int64, error)
	Release(ctx context.Context, o shop.OrderRef, op shop.ReleaseOp) (store.ReleaseOutcome, error)
	Reserve(ctx context.Context, a store.Attempt) (store.Reservation, error)
	ReleaseEntry(ctx context.Context, limit string, o shop.OrderRef, nonce string) (bool, error)
	Entry(ctx context.Context, saleID, userID int64, orderID string) (time.Time, bool, error)
	Shards(ctx context.Context, saleID int64) (int, error)
	TokenBudget
}

// Draws closes a sale's fair-start draw once its window has passed (draw.Closer): a purchase
// after the window waits for it.
type Draws interface {
	// Close decides and applies the sale's draw if it can now; nil once it is applied.
	Close(ctx context.Context, saleID int64) error
}

// NoDraws closes nothing: a purchase after a draw window answers 503 until another instance's
// keeper closed it.
type NoDraws struct{}

// Close does nothing.
func (NoDraws) Close(context.Context, int64) error { return errDrawNotClosed }
