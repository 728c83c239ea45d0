// Package purchase is the shopper's path: the captcha and the purchase token, the rate limits, the
// local sold-out flags, the reserve in Redis and the durable hand-off to the queue, and the
// shopper's own orders (pay, cancel, list). It declares what it needs of the catalog, the unit
// returns and the funnel as the small interfaces below.
package purchase

import (
	"context"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// Catalog is what the purchase path reads of the sales (catalog.Sales), from its in-process cache.
type Catalog interface {
	// CachedRow returns a sale with its items, a few seconds old at most.
	CachedRow(ctx context.Context, saleID int64) (shop.Sale, error)
	// CheckPaused answers PAUSED while the merchant has the sale paused.
	CheckPaused(ctx context.Context, sale shop.Sale) error
	// Item returns what the purchase path needs to know of an item.
	Item(ctx context.Context, itemID int64) (shop.ItemInfo, error)
	// Describe fills in the sale's and the item's names and price of an order.
	Describe(ctx context.Context, v *shop.OrderView)
	// HighestSaleID is the highest sale id this instance has seen (0: none yet).
	HighestSaleID() int64
}

// Returner gives back in Redis the units Postgres released (pipeline.Returns).
type Returner interface {
	Apply(ctx context.Context, rets []store.StockReturn) int
}

// FunnelCounter counts the outcome of a purchase-path request for the merchant's live view
// (catalog.Funnel), in memory.
type FunnelCounter interface {
	Record(saleID int64, err error)
}

// NoFunnel counts nothing.
type NoFunnel struct{}

// Record does nothing.
func (NoFunnel) Record(int64, error) {}
