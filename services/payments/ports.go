package payments

import (
	"context"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// DB is what payments read and write in Postgres (store.DB).
type DB interface {
	OrderDetailByID(ctx context.Context, id string) (store.OrderDetail, error)
	ExpireOrder(ctx context.Context, o shop.Order) ([]store.StockReturn, error)
	ExpireClosed(ctx context.Context, o shop.Order, sessionID string) ([]store.StockReturn, error)
	CheckoutsDue(ctx context.Context, provider string, skip []string, limit int) ([]store.CheckoutDue, error)
	CheckoutOf(ctx context.Context, orderID string) (store.Checkout, error)
	RecordCheckout(ctx context.Context, c store.Checkout) (store.Checkout, error)
	ApplyPaymentEvent(ctx context.Context, e store.PaymentEvent) (store.PaymentOutcome, error)
	CheckoutsToExpire(ctx context.Context, provider string, skip []string, limit int) ([]store.CheckoutToExpire, error)
	CloseCheckout(ctx context.Context, orderID, state string) error
	RefundsDue(ctx context.Context, provider string, skip []string, limit int) ([]store.RefundDue, error)
	RecordRefund(ctx context.Context, r store.RefundDue, refundID string) error
	RecordRefundFailure(ctx context.Context, r store.RefundDue, reason string) error
	CheckoutsToVerify(ctx context.Context, provider string, after time.Duration, limit int) ([]store.CheckoutToExpire, error)
	MarkVerified(ctx context.Context, orderID, sessionID string) error
	RefundsToConfirm(ctx context.Context, provider string, limit int) ([]store.RefundDue, error)
	ConfirmRefund(ctx context.Context, r store.RefundDue, failed bool, reason string) error
	UnheardSessions(ctx context.Context, provider string, sessionIDs []string) (map[string]bool, error)
}

// Returner gives a unit Postgres released back to Redis (pipeline.Returns).
type Returner interface {
	Apply(ctx context.Context, rets []store.StockReturn) int
}

// EventParser verifies a provider's webhook and reads it (stripepay.Provider). A payload that
// fails verification answers an error wrapping ErrBadSignature.
type EventParser interface {
	ParseEvent(payload []byte, signature string) (Event, error)
}
