package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Checkout is an order's hosted checkout as recorded: at most one per order.
type Checkout struct {
	OrderID   string
	Provider  string
	SessionID string
	URL       string
	State     string // open, expired, complete
	ExpiresAt time.Time
	Attempt   int // 0, then one more for each checkout that closed unpaid while the order stayed PENDING

	OrderStatus string `gorm:"->"` // the order's status when the checkout was recorded (RecordCheckout)
}

// The states of a checkout.
const (
	CheckoutOpen     = "open"
	CheckoutExpired  = "expired"
	CheckoutComplete = "complete"
)

// CheckoutOf returns the order's checkout; ErrNotFound if it has none.
func (d *DB) CheckoutOf(ctx context.Context, orderID string) (Checkout, error) {
	var c Checkout
	err := d.g.WithContext(ctx).Raw(`SELECT order_id::text AS order_id, provider, session_id, url, state, expires_at, attempt
		FROM checkouts WHERE order_id = ?::uuid`, orderID).Scan(&c).Error
	if err != nil {
		return Checkout{}, fmt.Errorf("checkout of %s: %w", orderID, err)
	}
	if c.OrderID == "" {
		return Checkout{}, ErrNotFound
	}
	return c, nil
}

// RecordCheckout keeps the order's checkout unless it has one already (two instances opening one
// at once: the provider's idempotency gave both the same session) that is open or paid: one that
// closed unpaid is replaced by a later attempt. It marks the order's payment as awaiting while it
// is PENDING, and returns the checkout the order holds.
func (d *DB) RecordCheckout(ctx context.Context, c Checkout) (Checkout, error) {
	var held Checkout
	err := d.g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(`INSERT INTO checkouts (order_id, provider, session_id, url, expires_at, attempt)
			VALUES (?::uuid, ?, ?, ?, ?, ?) ON CONFLICT (order_id) DO UPDATE
			SET provider = excluded.provider, session_id = excluded.session_id, url = excluded.url, expires_at = excluded.expires_at,
				attempt = excluded.attempt, state = 'open', created_at = now(), closed_at = NULL
			WHERE checkouts.state = 'expired' AND checkouts.attempt < excluded.attempt`,
			c.OrderID, c.Provider, c.SessionID, c.URL, c.ExpiresAt, c.Attempt).Error; err != nil {
			return err
		}
		if err := tx.Exec(`UPDATE orders SET payment_status = 'awaiting'
			WHERE id = ?::uuid AND status = 'PENDING' AND payment_status = 'none'
			AND EXISTS (SELECT 1 FROM checkouts WHERE order_id = ?::uuid AND state = 'open')`, c.OrderID, c.OrderID).Error; err != nil {
			return err
		}
		return tx.Raw(`SELECT c.order_id::text AS order_id, c.provider, c.session_id, c.url, c.state, c.expires_at, c.attempt,
				o.status AS order_status
			FROM checkouts c JOIN orders o ON o.id = c.order_id WHERE c.order_id = ?::uuid`, c.OrderID).Scan(&held).Error
	})
	if err != nil {
		return Checkout{}, fmt.Errorf("record checkout of %s: %w", c.OrderID, err)
	}
	return held, nil
}

// PaymentEvent is a provider's verified notification about one order's checkout.
type PaymentEvent struct {
	Provider    string
	EventID     string
	Kind        string // PaymentPaid or PaymentExpired
	OrderID     string
	SessionID   string
	PaymentID   string
	AmountCents int64
}

// The kinds of payment event the store applies.
const (
	PaymentPaid    = "paid"
	PaymentExpired = "expired"
)

// PaymentOutcome is what applying a payment event did.
type PaymentOutcome string

// The outcomes of a payment event.
const (
	OutcomeDuplicate PaymentOutcome = "duplicate"  // the event was applied before: nothing changed
	OutcomePaid      PaymentOutcome = "paid"       // a PENDING order became PAID
	OutcomeRefund    PaymentOutcome = "refund_due" // the order was no longer PENDING: its payment goes back
	OutcomeAlready   PaymentOutcome = "already"    // the order already holds this payment (paid or being refunded)
	OutcomeConflict  PaymentOutcome = "conflict"   // a second, different payment for an order that holds one
	OutcomeUnknown   PaymentOutcome = "unknown"    // no such order
	OutcomeClosed    PaymentOutcome = "closed"     // a checkout closed with nothing paid
)

// ApplyPaymentEvent applies a provider's event once (by its id), in one transaction:
//   - paid, order PENDING: PAID, whatever its deadline (a payment confirmed before the expiry
//     committed wins: both are conditional updates of the PENDING row, so exactly one happens);
//   - paid, order no longer PENDING (expired, cancelled, failed) and no payment recorded: the payment
//     is recorded as refunded (refund_id empty until the provider accepts the refund);
//   - expired: the checkout is closed; a PENDING order's payment goes back to none.
func (d *DB) ApplyPaymentEvent(ctx context.Context, e PaymentEvent) (PaymentOutcome, error) {
	var out PaymentOutcome
	err := d.g.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		out = ""
		var orderID any
		if e.OrderID != "" {
			orderID = e.OrderID
		}
		ins := tx.Exec(`INSERT INTO payment_events (provider, event_id, order_id, kind, outcome)
			VALUES (?, ?, ?::uuid, ?, '') ON CONFLICT DO NOTHING`, e.Provider, e.EventID, orderID, e.Kind)
		if ins.Error != nil {
			return ins.Error
		}
		if ins.RowsAffected == 0 {
			out = OutcomeDuplicate
			return nil
		}
		var err error
		switch e.Kind {
		case PaymentPaid:
			out, err = applyPaid(tx, e)
		case PaymentExpired:
			out, err = applyExpired(tx, e)
		default:
			return fmt.Errorf("unknown payment event kind %q", e.Kind)
		}
		if err != nil {
			return err
		}
		return tx.Exec(`UPDATE payment_events SET outcome = ? WHERE provider = ? AND event_id = ?`, string(out), e.Provider, e.EventID).Error
	})
	if err != nil {
		return "", fmt.Errorf("payment event %s %s: %w", e.Provider, e.EventID, err)
	}
	return out, nil
}

func applyPaid(tx *gorm.DB, e PaymentEvent) (PaymentOutcome, error) {
	if e.OrderID == "" {
		return OutcomeUnknown, nil
	}
	paid := tx.Exec(`UPDATE orders SET status = 'PAID', paid_at = now(), payment_status = 'paid',
			payment_provider = ?, payment_id = ?, paid_cents = ?
		WHERE id = ?::uuid AND status = 'PENDING'`, e.Provider, e.PaymentID, e.AmountCents, e.OrderID)
	if paid.Error != nil {
		return "", paid.Error
	}
	if paid.RowsAffected == 1 {
		return OutcomePaid, closeCheckout(tx, e.OrderID, CheckoutComplete)
	}
	// Too late: the order expired, was cancelled or failed. Its unit may be someone else's now;
	// the money goes back.
	refund := tx.Exec(`UPDATE orders SET payment_status = 'refunded', payment_provider = ?, payment_id = ?, paid_cents = ?
		WHERE id = ?::uuid AND status <> 'PAID' AND status <> 'PENDING' AND payment_status IN ('none', 'awaiting')`,
		e.Provider, e.PaymentID, e.AmountCents, e.OrderID)
	if refund.Error != nil {
		return "", refund.Error
	}
	if refund.RowsAffected == 1 {
		return OutcomeRefund, closeCheckout(tx, e.OrderID, CheckoutComplete)
	}
	var held struct {
		Status    string
		PaymentID *string
	}
	if err := tx.Raw(`SELECT status, payment_id FROM orders WHERE id = ?::uuid`, e.OrderID).Scan(&held).Error; err != nil {
		return "", err
	}
	switch {
	case held.Status == "":
		return OutcomeUnknown, nil
	case held.PaymentID != nil && *held.PaymentID == e.PaymentID:
		return OutcomeAlready, nil // the same payment told twice (a completed and an async-succeeded event)
	default:
		// A second, different payment for an order that holds one. A checkout is paid once and an
		// order has one checkout, so this is the provider's oddity: recorded, for the operator.
		return OutcomeConflict, nil
	}
}

func applyExpired(tx *gorm.DB, e PaymentEvent) (PaymentOutcome, error) {
	if e.OrderID == "" {
		return OutcomeUnknown, nil
	}
	// Only the checkout the event is about: a late or replayed event of an earlier attempt must
	// not close the one open now (which would then be left payable at the provider).
	closed, err := closeSession(tx, e.OrderID, e.SessionID, CheckoutExpired)
	if err != nil {
		return "", err
	}
	if !closed {
		return OutcomeAlready, nil
	}
	if err := tx.Exec(`UPDATE orders SET payment_status = 'none' WHERE id = ?::uuid AND payment_status = 'awaiting'`, e.OrderID).Error; err != nil {
		return "", err
	}
	return OutcomeClosed, nil
}

// closeCheckout closes the order's open checkout, whichever session it is.
func closeCheckout(tx *gorm.DB, orderID, state string) error {
	_, err := closeSession(tx, orderID, "", state)
	return err
}

// closeSession closes the order's open checkout if it is sessionID's ("": whichever it is), and
// tells whether it did.
func closeSession(tx *gorm.DB, orderID, sessionID, state string) (bool, error) {
	res := tx.Exec(`UPDATE checkouts SET state = ?, closed_at = now()
		WHERE order_id = ?::uuid AND state = 'open' AND (? = '' OR session_id = ?)`, state, orderID, sessionID, sessionID)
	return res.RowsAffected > 0, res.Error
}

// CheckoutToExpire is an open checkout of an order that can no longer be paid.
type CheckoutToExpire struct {
	OrderID   string
	Provider  string
	SessionID string
}

// CheckoutsToExpire lists up to limit open checkouts of provider whose order is no longer PENDING
// (expired, cancelled), but those of skip (waiting to be tried again): each must be closed at the
// provider so that it cannot be paid.
func (d *DB) CheckoutsToExpire(ctx context.Context, provider string, skip []string, limit int) ([]CheckoutToExpire, error) {
	var out []CheckoutToExpire
	err := d.g.WithContext(ctx).Raw(`SELECT c.order_id::text AS order_id, c.provider, c.session_id
		FROM checkouts c JOIN orders o ON o.id = c.order_id
		WHERE c.state = 'open' AND c.provider = ? AND o.status NOT IN ('PENDING', 'PAID') AND NOT (c.order_id = ANY(?::uuid[]))
		ORDER BY c.created_at LIMIT ?`, provider, pgArray(skip).literal(), limit).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("checkouts to expire: %w", err)
	}
	return out, nil
}

// CloseCheckout records that the provider closed the order's checkout (expired or complete).
func (d *DB) CloseCheckout(ctx context.Context, orderID, state string) error {
	if state != CheckoutExpired && state != CheckoutComplete {
		return fmt.Errorf("close checkout: state %q", state)
	}
	if err := closeCheckout(d.g.WithContext(ctx), orderID, state); err != nil {
		return fmt.Errorf("close checkout of %s: %w", orderID, err)
	}
	return nil
}

// RefundDue is a payment that must go back.
type RefundDue struct {
	OrderID   string
	Provider  string
	PaymentID string
}

// RefundsDue lists up to limit payments of provider recorded as refunded that it has not refunded
// yet, but those of skip (waiting to be tried again).
func (d *DB) RefundsDue(ctx context.Context, provider string, skip []string, limit int) ([]RefundDue, error) {
	var out []RefundDue
	err := d.g.WithContext(ctx).Raw(`SELECT id::text AS order_id, payment_provider AS provider, payment_id
		FROM orders WHERE payment_status = 'refunded' AND refund_id IS NULL AND payment_provider = ? AND NOT (id = ANY(?::uuid[]))
		ORDER BY created_at LIMIT ?`, provider, pgArray(skip).literal(), limit).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("refunds due: %w", err)
	}
	return out, nil
}

// RecordRefund keeps the provider's refund id of an order's payment (once: a second call changes nothing).
func (d *DB) RecordRefund(ctx context.Context, orderID, refundID string) error {
	if refundID == "" {
		return errors.New("record refund: empty refund id")
	}
	err := d.g.WithContext(ctx).Exec(`UPDATE orders SET refund_id = ?, refunded_at = now()
		WHERE id = ?::uuid AND payment_status = 'refunded' AND refund_id IS NULL`, refundID, orderID).Error
	if err != nil {
		return fmt.Errorf("record refund of %s: %w", orderID, err)
	}
	return nil
}
