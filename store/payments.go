package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
				attempt = excluded.attempt, state = 'open', created_at = now(), closed_at = NULL, checked_at = NULL, verified = false
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
	PaymentID   string // "" when no money was taken (a session that needed no payment)
	AmountCents int64
	Currency    string // ISO 4217, any case
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
	OutcomeConflict  PaymentOutcome = "conflict"   // a payment that is not the order's own: recorded, refunded
	OutcomeUnknown   PaymentOutcome = "unknown"    // no such order
	OutcomeClosed    PaymentOutcome = "closed"     // a checkout closed with nothing paid
)

// ApplyPaymentEvent applies a provider's event once (by its id), in one transaction. It is where
// the payment rules are decided (services/payments runs them and acts on the outcome): they must
// be atomic with the order row they change.
//
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

// payTarget is what a paid event is checked against: the order it names and its own checkout.
type payTarget struct {
	Status        string
	SaleID        int64
	PriceCents    int64
	Currency      string
	PaymentID     *string
	PaymentStatus string
	SessionID     *string // the order's recorded checkout; nil without one
	Provider      *string
}

// mismatch says why a paid event is not the named order's own payment ("" when it is): its
// session must be the order's recorded checkout of this provider, its amount and currency the
// order's, and money must have been taken.
func (t payTarget) mismatch(e PaymentEvent) string {
	switch {
	case t.SessionID == nil || t.Provider == nil || *t.Provider != e.Provider:
		return "the order has no checkout of this provider: the payment was made elsewhere (a payment link, another integration)"
	case *t.SessionID != e.SessionID:
		return fmt.Sprintf("session %s is not the order's checkout %s", e.SessionID, *t.SessionID)
	case e.PaymentID == "":
		return "no money was taken (the session needed no payment)"
	case e.AmountCents != t.PriceCents:
		return fmt.Sprintf("amount %d is not the order's price %d", e.AmountCents, t.PriceCents)
	case !strings.EqualFold(e.Currency, t.Currency):
		return fmt.Sprintf("currency %q is not the order's %q", e.Currency, t.Currency)
	}
	return ""
}

func applyPaid(tx *gorm.DB, e PaymentEvent) (PaymentOutcome, error) {
	if e.OrderID == "" {
		return OutcomeUnknown, nil
	}
	var t payTarget
	if err := tx.Raw(`SELECT o.status, o.sale_id, coalesce(o.unit_price_cents, i.price_cents) AS price_cents, s.currency,
			o.payment_id, o.payment_status, c.session_id, c.provider
		FROM orders o JOIN items i ON i.id = o.item_id JOIN sales s ON s.id = o.sale_id
		LEFT JOIN checkouts c ON c.order_id = o.id
		WHERE o.id = ?::uuid FOR UPDATE OF o`, e.OrderID).Scan(&t).Error; err != nil {
		return "", err
	}
	if t.Status == "" {
		if e.PaymentID != "" && e.AmountCents > 0 {
			// Money taken for an order that does not exist (a drill's scratch order deleted since,
			// a made-up reference): not a flash-sale order's payment, and not to be kept either.
			return recordConflict(tx, e, t, "no such order")
		}
		return OutcomeUnknown, nil
	}
	if why := t.mismatch(e); why != "" {
		return recordConflict(tx, e, t, why)
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
	if t.PaymentID != nil && *t.PaymentID == e.PaymentID {
		return OutcomeAlready, nil // the same payment told twice (a completed and an async-succeeded event)
	}
	// A second, different payment of the order's own checkout: the order holds one already.
	return recordConflict(tx, e, t, "a second payment: the order holds another")
}

// recordConflict records a payment that named an order but is not its own: it pays nothing and
// is refunded by the keeper (nothing to refund when no money was taken). Once per session.
func recordConflict(tx *gorm.DB, e PaymentEvent, t payTarget, why string) (PaymentOutcome, error) {
	state, payment := "refund_due", any(e.PaymentID)
	if e.PaymentID == "" || e.AmountCents == 0 {
		state = "nothing_taken"
	}
	if e.PaymentID == "" {
		payment = nil
	}
	session := e.SessionID
	if session == "" {
		session = "event:" + e.EventID
	}
	var sale any
	if t.SaleID != 0 {
		sale = t.SaleID
	}
	err := tx.Exec(`INSERT INTO payment_conflicts (provider, session_id, order_id, sale_id, payment_id, amount_cents, currency, reason, state)
		VALUES (?, ?, ?::uuid, ?, ?, ?, ?, ?, ?) ON CONFLICT (provider, session_id) DO NOTHING`,
		e.Provider, session, e.OrderID, sale, payment, max(e.AmountCents, 0), strings.ToUpper(e.Currency), why, state).Error
	if err != nil {
		return "", err
	}
	if t.SessionID != nil && *t.SessionID == e.SessionID && t.Status == "PENDING" {
		// The order's own session ended without paying it (another amount: a partial promotion
		// code): closed, so that the shopper can open a new checkout while the order is theirs.
		closed, err := closeSession(tx, e.OrderID, e.SessionID, CheckoutExpired)
		if err != nil {
			return "", err
		}
		if closed {
			if err := tx.Exec(`UPDATE orders SET payment_status = 'none' WHERE id = ?::uuid AND payment_status = 'awaiting'`, e.OrderID).Error; err != nil {
				return "", err
			}
		}
	}
	return OutcomeConflict, nil
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

// CheckoutsToVerify claims up to limit checkouts of provider whose outcome the provider should be
// asked about, for the period after (another instance skips them meanwhile): open for longer than
// after (a webhook's usual time), or closed without the provider's word applied (verified false)
// in the last three days while their order records no payment.
func (d *DB) CheckoutsToVerify(ctx context.Context, provider string, after time.Duration, limit int) ([]CheckoutToExpire, error) {
	var out []CheckoutToExpire
	secs := max(after.Seconds(), 0.001)
	err := d.g.WithContext(ctx).Raw(`UPDATE checkouts SET checked_at = now() WHERE order_id IN (
			SELECT c.order_id FROM checkouts c JOIN orders o ON o.id = c.order_id
			WHERE c.provider = ? AND NOT c.verified AND (c.checked_at IS NULL OR c.checked_at < now() - make_interval(secs => ?))
				AND ((c.state = 'open' AND c.created_at < now() - make_interval(secs => ?))
					OR (c.state <> 'open' AND c.closed_at > now() - interval '3 days' AND o.payment_status IN ('none', 'awaiting')))
			ORDER BY coalesce(c.checked_at, c.created_at) LIMIT ? FOR UPDATE OF c SKIP LOCKED)
		RETURNING order_id::text AS order_id, provider, session_id`, provider, secs, secs, limit).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("checkouts to verify: %w", err)
	}
	return out, nil
}

// RefundsToConfirm lists up to limit refunds of provider made but not final yet (the provider
// accepted them; they may still fail), oldest first: of orders' late payments, then of conflicts.
func (d *DB) RefundsToConfirm(ctx context.Context, provider string, limit int) ([]RefundDue, error) {
	var out []RefundDue
	err := d.g.WithContext(ctx).Raw(`(SELECT id::text AS order_id, payment_provider AS provider, payment_id, '' AS session_id, refund_id, refunded_at
		FROM orders WHERE refund_id IS NOT NULL AND NOT refund_final AND payment_provider = ? ORDER BY refunded_at LIMIT ?)
		UNION ALL
		(SELECT coalesce(order_id::text, '') AS order_id, provider, payment_id, session_id, refund_id, refunded_at
		FROM payment_conflicts WHERE state = 'refunded' AND NOT refund_final AND provider = ? ORDER BY refunded_at LIMIT ?)`,
		provider, limit, provider, limit).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("refunds to confirm: %w", err)
	}
	return out, nil
}

// ConfirmRefund records a refund's final state: succeeded, or failed with the provider's reason
// (the order no longer counts as refunded; a conflict's refund is refund_failed).
func (d *DB) ConfirmRefund(ctx context.Context, r RefundDue, failed bool, reason string) error {
	var failure any
	if failed {
		if reason == "" {
			reason = "failed at the provider"
		}
		failure = reason
	}
	var err error
	if r.Conflict() {
		err = d.g.WithContext(ctx).Exec(`UPDATE payment_conflicts SET refund_final = true, refund_failure = ?,
				state = CASE WHEN ? THEN 'refund_failed' ELSE state END
			WHERE provider = ? AND session_id = ? AND refund_id = ? AND NOT refund_final`, failure, failed, r.Provider, r.SessionID, r.RefundID).Error
	} else {
		err = d.g.WithContext(ctx).Exec(`UPDATE orders SET refund_final = true, refund_failure = ?
			WHERE id = ?::uuid AND refund_id = ? AND NOT refund_final`, failure, r.OrderID, r.RefundID).Error
	}
	if err != nil {
		return fmt.Errorf("confirm refund %s: %w", r.RefundID, err)
	}
	return nil
}

// UnheardSessions answers which of the provider's paid sessions the shop has no word of: no
// conflict recorded for it, and no order holding a payment through it.
func (d *DB) UnheardSessions(ctx context.Context, provider string, sessionIDs []string) (map[string]bool, error) {
	var ids []string
	err := d.g.WithContext(ctx).Raw(`SELECT s FROM unnest(?::text[]) AS s
		WHERE NOT EXISTS (SELECT 1 FROM payment_conflicts pc WHERE pc.provider = ? AND pc.session_id = s)
		AND NOT EXISTS (SELECT 1 FROM checkouts c JOIN orders o ON o.id = c.order_id
			WHERE c.provider = ? AND c.session_id = s AND o.payment_id IS NOT NULL)`,
		pgArray(sessionIDs).literal(), provider, provider).Scan(&ids).Error
	if err != nil {
		return nil, fmt.Errorf("unheard sessions: %w", err)
	}
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// MarkVerified records that the provider's word on the order's closed checkout sessionID has
// been applied: the reconciler does not ask about it again.
func (d *DB) MarkVerified(ctx context.Context, orderID, sessionID string) error {
	if err := d.g.WithContext(ctx).Exec(`UPDATE checkouts SET verified = true WHERE order_id = ?::uuid AND session_id = ? AND state <> 'open'`,
		orderID, sessionID).Error; err != nil {
		return fmt.Errorf("verify checkout of %s: %w", orderID, err)
	}
	return nil
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

// RefundDue is a payment that must go back: the payment of an order that had ended when it
// arrived, or a conflict (a payment that was not its order's own).
type RefundDue struct {
	OrderID   string
	Provider  string
	PaymentID string
	SessionID string // a conflict's session ("" for an order's own payment)
	RefundID  string // the provider's refund, once made (RefundsToConfirm)
}

// Conflict reports whether the refund is of a conflict rather than of an order's own payment.
func (r RefundDue) Conflict() bool { return r.SessionID != "" }

// RefundsDue lists up to limit payments of provider that must go back and have not (neither
// refunded nor refused for good), but those whose payment is in skip (waiting to be tried again):
// the orders' late payments, then the conflicts.
func (d *DB) RefundsDue(ctx context.Context, provider string, skip []string, limit int) ([]RefundDue, error) {
	var out []RefundDue
	err := d.g.WithContext(ctx).Raw(`(SELECT id::text AS order_id, payment_provider AS provider, payment_id, '' AS session_id, created_at
		FROM orders WHERE payment_status = 'refunded' AND refund_id IS NULL AND refund_failure IS NULL AND payment_provider = ?
			AND NOT (payment_id = ANY(?::text[]))
		ORDER BY created_at LIMIT ?)
		UNION ALL
		(SELECT coalesce(order_id::text, '') AS order_id, provider, payment_id, session_id, created_at
		FROM payment_conflicts WHERE state = 'refund_due' AND provider = ? AND NOT (payment_id = ANY(?::text[]))
		ORDER BY created_at LIMIT ?)`,
		provider, pgArray(skip).literal(), limit, provider, pgArray(skip).literal(), limit).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("refunds due: %w", err)
	}
	return out, nil
}

// RecordRefund keeps the provider's refund id of a payment that went back (once: a second call
// changes nothing).
func (d *DB) RecordRefund(ctx context.Context, r RefundDue, refundID string) error {
	if refundID == "" {
		return errors.New("record refund: empty refund id")
	}
	var err error
	if r.Conflict() {
		err = d.g.WithContext(ctx).Exec(`UPDATE payment_conflicts SET state = 'refunded', refund_id = ?, refunded_at = now()
			WHERE provider = ? AND session_id = ? AND state = 'refund_due'`, refundID, r.Provider, r.SessionID).Error
	} else {
		err = d.g.WithContext(ctx).Exec(`UPDATE orders SET refund_id = ?, refunded_at = now()
			WHERE id = ?::uuid AND payment_status = 'refunded' AND refund_id IS NULL AND refund_failure IS NULL`, refundID, r.OrderID).Error
	}
	if err != nil {
		return fmt.Errorf("record refund of %s: %w", r.PaymentID, err)
	}
	return nil
}

// RecordRefundFailure keeps why the provider refused a refund for good: it is not asked again,
// and the merchant's money view counts it (refundsFailed) with its reason in the orders list.
func (d *DB) RecordRefundFailure(ctx context.Context, r RefundDue, reason string) error {
	if reason == "" {
		reason = "refused by the provider"
	}
	var err error
	if r.Conflict() {
		err = d.g.WithContext(ctx).Exec(`UPDATE payment_conflicts SET state = 'refund_failed', refund_failure = ?
			WHERE provider = ? AND session_id = ? AND state = 'refund_due'`, reason, r.Provider, r.SessionID).Error
	} else {
		err = d.g.WithContext(ctx).Exec(`UPDATE orders SET refund_failure = ?
			WHERE id = ?::uuid AND payment_status = 'refunded' AND refund_id IS NULL AND refund_failure IS NULL`, reason, r.OrderID).Error
	}
	if err != nil {
		return fmt.Errorf("record refund failure of %s: %w", r.PaymentID, err)
	}
	return nil
}
