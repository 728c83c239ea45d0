package payments

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/flashsale/flashsale/services/internal/mac"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// SimulatedName is the simulated provider's name.
const SimulatedName = "simulated"

// SimulatedPagePath is where the simulated provider's page lives: /pay/simulated/{sessionId}.
const SimulatedPagePath = "/pay/simulated/"

// Simulated is the development provider: its checkout is a page of this server that stands in for
// the provider's (the browser makes the same round trip as with Stripe), its payment is
// confirmed in-process through the same path as a provider's webhook, and it refunds by saying so.
// A session id names its order and carries a MAC, so a made-up one is refused.
type Simulated struct {
	key []byte
}

// NewSimulated returns the simulated provider; secret signs its session ids.
func NewSimulated(secret []byte) *Simulated {
	return &Simulated{key: mac.PurposeKey(secret, "flashsale simulated checkout")}
}

func (s *Simulated) Name() string { return SimulatedName }

func (s *Simulated) sessionID(orderID string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(orderID))
	return "sim_cs_" + orderID + "_" + hex.EncodeToString(m.Sum(nil)[:12])
}

// orderOf reads the order a session id names; false for one it did not make.
func (s *Simulated) orderOf(sessionID string) (string, bool) {
	rest, ok := strings.CutPrefix(sessionID, "sim_cs_")
	if !ok || len(rest) != 36+1+24 || !shop.IsOrderID(rest[:36]) {
		return "", false
	}
	orderID := rest[:36]
	return orderID, hmac.Equal([]byte(s.sessionID(orderID)), []byte(sessionID))
}

// Checkout answers the simulated provider's page of the order (a path on this server).
func (s *Simulated) Checkout(_ context.Context, r CheckoutRequest) (Session, error) {
	id := s.sessionID(r.OrderID)
	return Session{ID: id, URL: SimulatedPagePath + id}, nil
}

// ExpireSession closes nothing of its own: the page reads the checkout's state that the keeper
// records, and refuses to pay one that is not open.
func (s *Simulated) ExpireSession(context.Context, string) error { return nil }

// Refund answers the refund's id.
func (s *Simulated) Refund(_ context.Context, r RefundRequest) (string, error) {
	if r.OrderID == "" {
		return "sim_re_" + r.PaymentID, nil
	}
	return "sim_re_" + r.OrderID, nil
}

// Lookup answers ErrNoLookup: the simulated provider confirms a payment in-process, in the same
// call that takes it, so there is no notification to lose and nothing to ask.
func (s *Simulated) Lookup(context.Context, string) (SessionState, error) {
	return SessionState{}, ErrNoLookup
}

// RefundState answers succeeded: the simulated provider's refunds never fail.
func (s *Simulated) RefundState(context.Context, string) (string, string, error) {
	return RefundSucceeded, "", nil
}

// Completed answers ErrNoLookup, as Lookup does.
func (s *Simulated) Completed(context.Context, time.Time, func(string, SessionState) error) error {
	return ErrNoLookup
}

// MinimumCents is one minor unit: the simulated provider takes any positive price.
func (s *Simulated) MinimumCents(string) int64 { return 1 }

// SimulatedCheckout is what the simulated provider's page shows.
type SimulatedCheckout struct {
	SessionID   string
	OrderID     string
	ItemName    string
	SaleName    string
	AmountCents int64
	Currency    string
	Open        bool // still payable; false once expired or completed
	Paid        bool // its order is paid
	PayBy       time.Time
}

// Simulated returns the simulated provider's checkout of sessionID; NOT_FOUND for one it did not
// make, or with another provider.
func (p *Payments) Simulated(ctx context.Context, sessionID string) (SimulatedCheckout, error) {
	sim, ok := p.provider.(*Simulated)
	if !ok {
		return SimulatedCheckout{}, shop.Errorf(shop.CodeNotFound, "no simulated checkout here")
	}
	orderID, ok := sim.orderOf(sessionID)
	if !ok {
		return SimulatedCheckout{}, shop.Errorf(shop.CodeNotFound, "no checkout %q", sessionID)
	}
	c, err := p.db.CheckoutOf(ctx, orderID)
	if errors.Is(err, store.ErrNotFound) {
		return SimulatedCheckout{}, shop.Errorf(shop.CodeNotFound, "no checkout %q", sessionID)
	}
	if err != nil {
		return SimulatedCheckout{}, shop.Unavailable(err)
	}
	o, err := p.db.OrderDetailByID(ctx, orderID)
	if err != nil {
		return SimulatedCheckout{}, shop.Unavailable(err)
	}
	return SimulatedCheckout{SessionID: sessionID, OrderID: orderID, ItemName: o.ItemName, SaleName: o.SaleName,
		AmountCents: o.PriceCents, Currency: o.Currency, Open: c.State == store.CheckoutOpen,
		Paid: o.Status == shop.StatusPaid, PayBy: o.PayBy}, nil
}

// SimulatedPay is the shopper paying on the simulated provider's page: the provider takes the
// money and confirms it, as Stripe's webhook would, through Apply. A checkout that is no longer
// open (expired with its order) is refused: NOT_PAYABLE.
func (p *Payments) SimulatedPay(ctx context.Context, sessionID string) (SimulatedCheckout, error) {
	c, err := p.Simulated(ctx, sessionID)
	if err != nil {
		return c, err
	}
	if !c.Open {
		if c.Paid {
			return c, nil
		}
		return c, shop.Errorf(shop.CodeNotPayable, "this checkout has expired: the order's payment window closed")
	}
	err = p.Apply(ctx, Event{ID: "sim_evt_" + sessionID, Kind: EventPaid, OrderID: c.OrderID, SessionID: sessionID,
		PaymentID: "sim_pi_" + c.OrderID, AmountCents: c.AmountCents, Currency: c.Currency})
	if err != nil {
		return c, err
	}
	return p.Simulated(ctx, sessionID)
}
