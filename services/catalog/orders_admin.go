package catalog

import (
	"context"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// SaleOrdersPage is how many orders one page of a sale's order list holds.
const SaleOrdersPage = 50

// ExportChunk is how many orders the CSV export reads from Postgres (and writes out) at a time.
const ExportChunk = 1000

// AdminOrder is one order of a sale as its merchant sees it.
type AdminOrder struct {
	OrderID    string
	ItemID     int64
	ItemName   string
	UserID     int64
	Username   string // "" when this shop has no account of UserID (the identity may be external)
	Status     string
	PriceCents int64
	Currency   string
	CreatedAt  time.Time
	PayBy      *time.Time // nil for a FAILED order, which never had a payment window
	PaidAt     *time.Time

	PaymentStatus string  // shop.PaymentNone, PaymentAwaiting, PaymentPaid or PaymentRefunded
	PaidCents     *int64  // what the provider took (a refunded order's: what goes back); nil: nothing
	PaymentID     *string // the provider's payment
	RefundID      *string // the provider's refund of a payment that came too late; nil until it is made
	RefundFailure *string // why the provider refused that refund for good; nil: not refused
}

// Refunded says whether the refund of a payment that came too late has been made (the provider
// accepted it); a refunded order without one is still being refunded.
func (a AdminOrder) Refunded() bool {
	return a.PaymentStatus == shop.PaymentRefunded && a.RefundID != nil && a.RefundFailure == nil
}

var orderStatuses = map[string]bool{
	shop.StatusPending: true, shop.StatusPaid: true, shop.StatusExpired: true,
	shop.StatusCancelled: true, shop.StatusFailed: true, shop.StatusEntered: true, shop.StatusNotSelected: true,
}

func adminOrder(o shop.Order) AdminOrder {
	a := AdminOrder{OrderID: o.ID, ItemID: o.ItemID, UserID: o.UserID, Status: o.Status, CreatedAt: o.CreatedAt.UTC(),
		PaymentStatus: o.PaymentStatus, PaidCents: o.PaidCents, PaymentID: nonEmpty(o.PaymentID), RefundID: nonEmpty(o.RefundID),
		RefundFailure: nonEmpty(o.RefundFailure)}
	if a.PaymentStatus == "" {
		a.PaymentStatus = shop.PaymentNone
	}
	if o.Status != shop.StatusFailed && o.Status != shop.StatusEntered && o.Status != shop.StatusNotSelected && !o.PayBy.IsZero() {
		t := o.PayBy.UTC()
		a.PayBy = &t
	}
	if o.PaidAt != nil {
		t := o.PaidAt.UTC()
		a.PaidAt = &t
	}
	return a
}

// nonEmpty is s, or nil when it is nil or empty.
func nonEmpty(s *string) *string {
	if s == nil || *s == "" {
		return nil
	}
	return s
}

// ownSale returns the sale if merchantID owns it; another merchant's sale (or a fire drill's
// scratch copy) is NOT_FOUND, as if it did not exist.
func (s *Sales) ownSale(ctx context.Context, merchantID, saleID int64) (shop.Sale, error) {
	sale, err := s.getRow(ctx, saleID)
	if err != nil {
		return shop.Sale{}, err
	}
	if !sale.OwnedBy(merchantID) {
		return shop.Sale{}, shop.Errorf(shop.CodeNotFound, "no sale %d", saleID)
	}
	return sale, nil
}

// SaleOrderFilter narrows a sale's orders list: a status, a shopper by user id, a shopper by
// username (case-insensitively); zero values take every order.
type SaleOrderFilter struct {
	Status   string
	UserID   int64
	Username string
}

// SaleOrders lists the orders Postgres holds for a merchant's sale, newest first, 50 a page,
// optionally only those of one status and/or one shopper (by user id, by username or both).
// next is "" on the last page; a cursor pages on under the same filter.
func (s *Sales) SaleOrders(ctx context.Context, merchantID, saleID int64, f SaleOrderFilter, cursor string) ([]AdminOrder, string, error) {
	status, userID := f.Status, f.UserID
	if status != "" && !orderStatuses[status] {
		return nil, "", shop.Errorf(shop.CodeInvalidInput, "status must be one of PENDING, PAID, EXPIRED, CANCELLED, FAILED, ENTERED, NOT_SELECTED")
	}
	if userID < 0 {
		return nil, "", shop.Errorf(shop.CodeInvalidInput, "userId must be a user id (a positive integer)")
	}
	if f.Username != "" {
		if err := shop.CheckUsername(f.Username); err != nil {
			return nil, "", err
		}
	}
	after, err := s.cursors.ParseOrder(cursor)
	if err != nil {
		return nil, "", err
	}
	if _, err := s.ownSale(ctx, merchantID, saleID); err != nil {
		return nil, "", err
	}
	rows, next, err := s.db.OrdersOfSale(ctx, saleID, store.SaleOrderFilter{Status: status, UserID: userID, Username: f.Username}, after, SaleOrdersPage)
	if err != nil {
		return nil, "", shop.Unavailable(err)
	}
	out := make([]AdminOrder, len(rows))
	for i, o := range rows {
		out[i] = adminOrder(o.Order)
		out[i].Username = o.Username
	}
	if next == nil {
		return out, "", nil
	}
	return out, s.cursors.Order(*next), nil
}

// CheckSaleOwner answers NOT_FOUND unless merchantID owns saleID (the export checks it before
// it starts its answer).
func (s *Sales) CheckSaleOwner(ctx context.Context, merchantID, saleID int64) error {
	_, err := s.ownSale(ctx, merchantID, saleID)
	return err
}

// ExportOrders calls fn with every order of the sale, oldest first, ExportChunk at a time, read
// from Postgres chunk by chunk (keyset paging): the sale's orders are never all in memory. The
// caller checks the owner first (CheckSaleOwner). An error of fn is returned as it is.
func (s *Sales) ExportOrders(ctx context.Context, saleID int64, fn func([]AdminOrder) error) error {
	buf := make([]AdminOrder, 0, ExportChunk)
	var fnErr error
	err := s.db.EachOrderOfSale(ctx, saleID, ExportChunk, func(rows []store.ExportOrder) error {
		buf = buf[:0]
		for _, r := range rows {
			a := adminOrder(r.Order)
			a.Username, a.ItemName, a.PriceCents, a.Currency = r.Username, r.ItemName, r.PriceCents, r.Currency
			buf = append(buf, a)
		}
		fnErr = fn(buf)
		return fnErr
	})
	if err != nil && fnErr == nil {
		return shop.Unavailable(err)
	}
	return err
}
