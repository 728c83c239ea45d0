package shop

import "time"

// Order statuses stored in Postgres (QUEUED lives only in Redis and the queue).
const (
	StatusPending   = "PENDING"
	StatusPaid      = "PAID"
	StatusExpired   = "EXPIRED"
	StatusCancelled = "CANCELLED"
	StatusFailed    = "FAILED"
	// StatusEntered is an entry of a fair start's draw, written and waiting for the draw to
	// close (clients see QUEUED with draw: true); it holds no unit.
	StatusEntered = "ENTERED"
	// StatusNotSelected is the final status of an entry the draw did not pick.
	StatusNotSelected = "NOT_SELECTED"
)

// Order statuses as clients see them; QUEUED is a reservation not yet in Postgres.
const (
	StatusQueued = "QUEUED"
)

// OrderView is one order as its shopper sees it.
type OrderView struct {
	OrderID    string
	ItemID     int64
	SaleID     int64
	Status     string
	PayBy      *time.Time
	ItemName   string
	PriceCents int64
	Currency   string
	SaleName   string
	Failure    string
	CreatedAt  time.Time
	Queue      *QueueEstimate // QUEUED only: its place in the queue (services/purchase/queue_wait.go)
	Draw       bool           // an entry of the sale's fair-start draw (QUEUED until it closes, then PENDING or NOT_SELECTED)

	PaymentStatus string // PaymentNone … (none while QUEUED)
	Refunded      bool   // the provider accepted the refund of a payment that came too late
}

// ReleaseOp names why a unit goes back (see release.lua).
type ReleaseOp string

// The release operations.
const (
	// ReleaseUnsold gives back a reservation that never became an order (publish failed, orphan,
	// unknown reserve outcome); it is refused once the writer has claimed the order.
	ReleaseUnsold ReleaseOp = "unsold"
	// ReleaseRefused is the writer's release of an order Postgres refused.
	ReleaseRefused ReleaseOp = "refused"
	// ReleaseNoRoom drops a reservation Postgres had no unit for (no unit goes back).
	ReleaseNoRoom ReleaseOp = "noroom"
	// ReleaseDuplicate gives the unit back and keeps the shopper a buyer (they hold another order).
	ReleaseDuplicate ReleaseOp = "duplicate"
	// ReturnUnit gives back the unit of an order Postgres expired or cancelled.
	ReturnUnit ReleaseOp = "returned"
)

// OrderRef names one order and where its unit lives.
type OrderRef struct {
	SaleID, ItemID, UserID int64
	OrderID                string
	HeldBy                 string // ReleaseDuplicate: the live order the shopper holds ("" if unknown)
}

// QueueEstimate is a QUEUED order's place in the queue.
type QueueEstimate struct {
	Position    int64         // in-flight reservations of the sale made before it (0: next)
	WaitSeconds int64         // the estimated wait until it is written
	RetryAfter  time.Duration // when to ask again: 1 s near the front, up to 5 s far back
	Measured    bool          // false: no recent writer throughput, DefaultWriterRate assumed
}

// An order's life: QUEUED (reserved in Redis, on its way through the queue) → PENDING (in
// Postgres, awaiting payment) → PAID; or EXPIRED (its payment window closed first) or CANCELLED
// (by its shopper), both giving the unit back; FAILED: the database refused it and its unit went
// back. Only a PENDING order can be paid or cancelled; the answers below are the contract's.

// PaidAnswer is the answer to "pay" for an order found in status after the payment was tried:
// nil when it is paid.
func PaidAnswer(status string) error {
	switch status {
	case StatusPaid:
		return nil
	case StatusExpired:
		return Errorf(CodeExpired, "the payment window of this order has closed; its unit went back on sale")
	case StatusQueued, StatusEntered:
		return Errorf(CodeNotPayable, "the order is still queued; pay once it is PENDING")
	case StatusNotSelected:
		return Errorf(CodeNotPayable, "this entry was not drawn: there is nothing to pay")
	}
	return Errorf(CodeNotPayable, "the order is %s and cannot be paid", status)
}

// Cancellable answers whether an order in status may be cancelled now: nil for PENDING only.
func Cancellable(status string) error {
	switch status {
	case StatusPending:
		return nil
	case StatusQueued:
		return Errorf(CodeNotCancellable, "the order is still QUEUED; it can be cancelled in a moment, once it is PENDING")
	case StatusEntered:
		return Errorf(CodeNotCancellable, "the order is an entry of the sale's draw, decided in a moment; if it is drawn it can be cancelled then")
	}
	return Errorf(CodeNotCancellable, "the order is %s and cannot be cancelled", status)
}

// Order is one unit bought: reserved at ReservedAt, in Postgres from CreatedAt, to be paid by
// PayBy; PaidAt once paid, Failure when the database refused it.
type Order struct {
	ID         string
	ItemID     int64
	SaleID     int64
	UserID     int64
	Seq        int64
	PerSale    bool
	Status     string
	ReservedAt time.Time
	CreatedAt  time.Time
	PayBy      time.Time
	PaidAt     *time.Time
	Failure    *string

	UnitPriceCents *int64 // the item's price when the order was written (older orders: none)
	DrawRank       *int64 // an entry of a fair start's draw: its rank (nil: bought first come, first served)

	PaymentStatus string  // none, awaiting, paid, refunded, free (PaymentNone …)
	PaymentID     *string // the provider's payment, once one arrived
	PaidCents     *int64  // what that payment took
	RefundID      *string // the provider's refund of a payment that came too late
	RefundFailure *string // why the provider refused that refund for good (the merchant settles it)
}

// Payment statuses of an order: none taken; a checkout open (awaiting the provider's
// confirmation); paid; refunded (a payment that arrived after the order had expired or been
// cancelled goes back: its unit may be someone else's).
const (
	PaymentNone     = "none"
	PaymentAwaiting = "awaiting"
	PaymentPaid     = "paid"
	PaymentRefunded = "refunded"
	PaymentFree     = "free" // a free item (price 0): confirmed PAID with no provider
)

// RefundMessage is what an order whose payment came too late tells its shopper.
func RefundMessage(done bool) string {
	if done {
		return "Your payment arrived after this order had ended (its payment window closed, or it was cancelled) and its unit had gone back on sale, so it has been refunded in full."
	}
	return "Your payment arrived after this order had ended (its payment window closed, or it was cancelled) and its unit had gone back on sale; it is being refunded in full."
}

// IsOrderID tells whether s has the form of an order id (a UUID in text).
func IsOrderID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
		default:
			return false
		}
	}
	return true
}
