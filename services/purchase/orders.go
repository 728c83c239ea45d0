package purchase

import (
	"context"
	"errors"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// written reports whether Postgres holds orderID as a live order.
func (p *Purchases) written(ctx context.Context, orderID string) bool {
	have, err := p.db.ExistingOrders(ctx, []string{orderID})
	st, ok := have[orderID]
	return err == nil && ok && st != shop.StatusFailed
}

func orderView(o store.OrderDetail) shop.OrderView {
	v := shop.OrderView{OrderID: o.ID, ItemID: o.ItemID, SaleID: o.SaleID, Status: o.Status, ItemName: o.ItemName,
		PriceCents: o.PriceCents, Currency: o.Currency, SaleName: o.SaleName, CreatedAt: o.CreatedAt,
		PaymentStatus: o.PaymentStatus, Refunded: o.RefundID != nil && o.RefundFailure == nil}
	if v.PaymentStatus == "" {
		v.PaymentStatus = shop.PaymentNone
	}
	if o.Status == shop.StatusPending || o.Status == shop.StatusPaid {
		payBy := o.PayBy.UTC()
		v.PayBy = &payBy
	}
	if o.Failure != nil {
		v.Failure = *o.Failure
	}
	if o.DrawRank != nil {
		v.Draw = true
		if o.Status == shop.StatusEntered {
			v.Status = shop.StatusQueued // written, waiting for the draw: QUEUED as the contract says
		}
	}
	return v
}

// Order returns a shopper's order; another shopper's order is NOT_FOUND.
func (p *Purchases) Order(ctx context.Context, userID int64, orderID string) (shop.OrderView, error) {
	itemID, id, ok := ItemOfOrderID(orderID)
	if !ok {
		return shop.OrderView{}, shop.Errorf(shop.CodeNotFound, "no order %q", orderID)
	}
	info, err := p.sales.Item(ctx, itemID)
	if err != nil {
		return shop.OrderView{}, err
	}
	if !info.Found {
		return shop.OrderView{}, shop.Errorf(shop.CodeNotFound, "no order %q", orderID)
	}
	// Redis first: once the writer settles an order it leaves flight after it is in Postgres,
	// so checking in this order never misses one in between.
	r, inFlight, rerr := p.stock.InFlightOrder(ctx, info.SaleID, id)
	if inFlight && r.UserID == userID && r.Claimed {
		// The writer holds it: it may be written already (its settle in Redis comes after the
		// commit, or failed): Postgres says, so a pay or cancel answer matches what it did.
		if o, err := p.db.OrderDetailByID(ctx, id); err == nil && o.UserID == userID {
			return orderView(o), nil
		}
	}
	if inFlight && r.UserID == userID {
		v := shop.OrderView{OrderID: id, ItemID: itemID, SaleID: info.SaleID, Status: shop.StatusQueued, CreatedAt: r.ReservedAt,
			PaymentStatus: shop.PaymentNone}
		p.sales.Describe(ctx, &v)
		p.queueEstimate(ctx, &v, r)
		return v, nil
	}
	o, err := p.db.OrderDetailByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) && rerr == nil && info.FairStartMillis > 0 {
		// a draw entry on its way to Postgres
		at, entered, eerr := p.stock.Entry(ctx, info.SaleID, userID, id)
		if entered {
			v := shop.OrderView{OrderID: id, ItemID: itemID, SaleID: info.SaleID, Status: shop.StatusQueued, CreatedAt: at,
				PaymentStatus: shop.PaymentNone, Draw: true}
			p.sales.Describe(ctx, &v)
			return v, nil
		}
		rerr = eerr
	}
	if errors.Is(err, store.ErrNotFound) && rerr != nil {
		return shop.OrderView{}, shop.Unavailable(rerr) // it may be queued; Redis cannot say now
	}
	if errors.Is(err, store.ErrNotFound) || (err == nil && o.UserID != userID) {
		return shop.OrderView{}, shop.Errorf(shop.CodeNotFound, "no order %q", orderID)
	}
	if err != nil {
		return shop.OrderView{}, shop.Unavailable(err)
	}
	if o.Status == shop.StatusEntered && !p.now().Before(info.DrawWindowEnd()) {
		// an entrant asking after the window: the draw is decided now rather than at the next
		// keeper pass (in the background; concurrent askers share one close)
		go func() { _ = p.closeDraw(context.Background(), info.SaleID) }()
	}
	return orderView(o), nil
}

// Pay simulates the payment of a PENDING order within its window (by Postgres's clock, the one
// expiry uses: pay and expire racing on one order, exactly one wins). Paying a PAID order again
// succeeds (idempotent). Paying too late expires the order there and then, so the answer and the
// state agree.
func (p *Purchases) Pay(ctx context.Context, userID int64, orderID string) (shop.OrderView, error) {
	_, id, ok := ItemOfOrderID(orderID)
	if !ok {
		return shop.OrderView{}, shop.Errorf(shop.CodeNotFound, "no order %q", orderID)
	}
	if _, err := p.db.PayOrder(ctx, id, userID); err != nil {
		return shop.OrderView{}, shop.Unavailable(err)
	}
	v, err := p.Order(ctx, userID, id)
	if err != nil {
		return shop.OrderView{}, err
	}
	if v.Status == shop.StatusPending {
		// Not paid, still PENDING: its window has closed. Expire it now.
		rets, err := p.db.ExpireOrder(ctx, shop.Order{ID: id, ItemID: v.ItemID})
		if err != nil {
			return shop.OrderView{}, shop.Unavailable(err)
		}
		if len(rets) > 0 {
			p.metrics.Expired.Inc()
			p.returns.Apply(ctx, rets)
		}
		if v, err = p.Order(ctx, userID, id); err != nil {
			return shop.OrderView{}, err
		}
	}
	return v, shop.PaidAnswer(v.Status)
}

// Cancel gives up a PENDING order of its shopper: it becomes CANCELLED and its unit goes back on
// sale, once. Any other state answers NOT_CANCELLABLE naming it.
func (p *Purchases) Cancel(ctx context.Context, userID int64, orderID string) (shop.OrderView, error) {
	v, err := p.Order(ctx, userID, orderID)
	if err != nil {
		return shop.OrderView{}, err
	}
	if err := shop.Cancellable(v.Status); err != nil {
		return v, err
	}
	rets, err := p.db.CancelOrder(ctx, shop.Order{ID: v.OrderID, ItemID: v.ItemID}, userID)
	if err != nil {
		return shop.OrderView{}, shop.Unavailable(err)
	}
	if len(rets) > 0 {
		p.metrics.Cancelled.Inc()
		p.returns.Apply(ctx, rets)
	}
	if v, err = p.Order(ctx, userID, orderID); err != nil {
		return shop.OrderView{}, err
	}
	if v.Status != shop.StatusCancelled {
		return v, shop.Errorf(shop.CodeNotCancellable, "the order is %s and cannot be cancelled", v.Status) // paid or expired meanwhile
	}
	return v, nil
}

// MyOrdersPage is how many orders one page of "my orders" holds.
const MyOrdersPage = 20

// MyOrders lists a shopper's orders (of one sale when saleID > 0), newest first by reservation
// time, a page after cursor ("" for the first); next is "" on the last page. The first page also
// lists the shopper's acknowledged orders the writer has not written yet, as QUEUED, from Redis
// (services/purchase/myorders.go): one pipelined round trip, and no Postgres query per request beyond the
// page (the sales that can hold one are read once a second).
func (p *Purchases) MyOrders(ctx context.Context, userID, saleID int64, cursor string) ([]shop.OrderView, string, error) {
	after, err := p.cursors.ParseOrder(cursor)
	if err != nil {
		return nil, "", err
	}
	var queued []queuedOrder
	if after == nil {
		// Redis first, as Order does: the writer settles an order in Redis only after writing
		// it, so one that leaves flight meanwhile is in the page read next.
		queued = p.queuedOrders(ctx, userID, saleID)
	}
	rows, next, err := p.db.OrdersOfUser(ctx, userID, saleID, after, MyOrdersPage)
	if err != nil {
		return nil, "", shop.Unavailable(err)
	}
	out := withQueued(rows, queued)
	if next == nil {
		return out, "", nil
	}
	return out, p.cursors.Order(*next), nil
}

// queueEstimate fills in a QUEUED order's place in the queue; without Redis's answer it
// leaves the fields out rather than guess.
func (p *Purchases) queueEstimate(ctx context.Context, v *shop.OrderView, e store.InFlightEntry) {
	est, err := p.queueWait.Estimate(ctx, v.SaleID, e.Seq)
	if err != nil {
		p.log.Warn("queue position unknown", "order", v.OrderID, "err", err)
		return
	}
	v.Queue = &est
}
