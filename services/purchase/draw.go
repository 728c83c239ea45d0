package purchase

import (
	"context"
	"errors"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// mayEnter tells whether an attempt at now may fall in the item's sale's draw window, by this
// instance's clock with a second's slack either way (Redis's clock decides; a rank sent that is
// not needed costs nothing).
func mayEnter(info shop.ItemInfo, now time.Time) bool {
	if info.FairStartMillis <= 0 {
		return false
	}
	return now.After(info.StartsAt.Add(-time.Second)) && now.Before(info.DrawWindowEnd().Add(time.Second))
}

var errDrawNotClosed = errors.New("the draw of the sale's first moments is not decided yet")

// errDrawClosing answers a purchase after the draw window while the draw is being decided.
var errDrawClosing = &shop.Error{Code: shop.CodeUnavailable, RetryAfter: time.Second,
	Message: "the draw of this sale's first moments is being decided; purchases open again in a moment, try again in a second"}

// drawWait bounds how long a purchase after the window waits for the draw to close.
const drawWait = 1500 * time.Millisecond

// closeDraw asks for the sale's draw to be closed, waiting drawWait at most.
func (p *Purchases) closeDraw(ctx context.Context, saleID int64) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drawWait)
	defer cancel()
	return p.draws.Close(cctx, saleID)
}

// enter hands a draw entry over to the queue durably, with the rank its attempt was sent with, and answers once it is acknowledged (202
// with draw: true). An entry whose publish failed is taken back in Redis (the draw does not wait
// for it, and its token answers as used) and answered 503; if its message did reach the queue
// after all, it is written and decided like any entry, and the shopper finds its outcome in
// their orders.
func (p *Purchases) enter(ctx context.Context, info shop.ItemInfo, userID int64, orderID, nonce string, res store.Reservation) (string, error) {
	q := store.QueuedOrder{OrderID: orderID, SaleID: info.SaleID, ItemID: info.ItemID, UserID: userID, Seq: res.Seq, ReservedAt: res.ReservedAt.UnixMilli(),
		Draw: true}
	perr := p.pub.Publish(context.WithoutCancel(ctx), q)
	if perr == nil {
		p.metrics.DrawEntries.Inc()
		return orderID, nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	ref := shop.OrderRef{SaleID: info.SaleID, ItemID: info.ItemID, UserID: userID, OrderID: orderID}
	if _, err := p.stock.ReleaseEntry(rctx, info.Limit, ref, nonce); err != nil {
		p.log.Warn("draw entry: publish failed and its release failed; the draw waits for a drained queue", "order", orderID, "publish_err", perr, "err", err)
	}
	return "", shop.Unavailable(perr)
}
