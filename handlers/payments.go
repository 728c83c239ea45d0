package handlers

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/a-h/templ"
	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/services/payments"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/views"
)

// Payments is the payment side the handlers call (payments.Payments).
type Payments interface {
	DirectPay() error
	Checkout(ctx context.Context, userID int64, orderID, origin string) (string, error)
	Webhook(ctx context.Context, payload []byte, signature string) error
	Simulated(ctx context.Context, sessionID string) (payments.SimulatedCheckout, error)
	SimulatedPay(ctx context.Context, sessionID string) (payments.SimulatedCheckout, error)
}

// origin is the shop's address for links an answer carries: the configured public address on a
// route behind Pages.PublicOrigin, else the scheme and host the request came to (behind a
// TLS-terminating proxy, the X-Forwarded-Proto it set); also where the provider sends the browser
// back when no public URL is set.
func origin(c *gin.Context) string {
	if o := c.GetString(publicOriginKey); o != "" {
		return o
	}
	scheme := "http"
	if c.Request.TLS != nil || strings.EqualFold(c.GetHeader("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + c.Request.Host
}

// Checkout handles "POST /api/flash-sales/orders/:orderId/checkout": the provider's page for the
// caller's PENDING order (one per order, whatever the number of clicks).
func (a *API) Checkout(c *gin.Context) {
	url, err := a.Payments.Checkout(c.Request.Context(), caller(c).UserID, c.Param("orderId"), origin(c))
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"checkoutUrl": url})
}

// StripeWebhook handles "POST /api/payments/stripe/webhook": Stripe's signed events. 200 once the
// event is applied (or was before); 400 BAD_SIGNATURE for one that does not verify; 503 when it
// cannot be recorded now (Stripe sends it again).
func (a *API) StripeWebhook(c *gin.Context) {
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, maxBody+1))
	if err != nil {
		Abort(c, shop.CodeInvalidInput, "the event could not be read")
		return
	}
	if len(body) > maxBody {
		Abort(c, shop.CodeInvalidInput, "the event is larger than 64 KiB")
		return
	}
	if err := a.Payments.Webhook(c.Request.Context(), body, c.GetHeader("Stripe-Signature")); err != nil {
		Error(c, a.Log, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"received": true})
}

// SimulatedPay handles "POST /api/payments/simulated/:sessionId/pay": the shopper paying on the
// simulated provider's page. It answers where the browser goes next (the order page).
func (a *API) SimulatedPay(c *gin.Context) {
	s, err := a.Payments.SimulatedPay(c.Request.Context(), c.Param("sessionId"))
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"orderId": s.OrderID, "paid": s.Paid, "returnUrl": "/orders/" + s.OrderID + "?payment=done"})
}

// SimulatedCheckout handles "GET /pay/simulated/:sessionId": the simulated provider's page,
// standing in for Stripe's. A session id it did not make is the not-found page.
func (p *Pages) SimulatedCheckout(c *gin.Context) {
	s, err := p.Payments.Simulated(c.Request.Context(), c.Param("sessionId"))
	var se *shop.Error
	if errors.As(err, &se) && se.Code == shop.CodeNotFound {
		p.NotFound(c)
		return
	}
	if err != nil {
		Error(c, p.Log, err)
		return
	}
	v := views.SimulatedCheckout{SessionID: s.SessionID, OrderID: s.OrderID, ItemName: s.ItemName, SaleName: s.SaleName,
		AmountCents: s.AmountCents, Currency: s.Currency, Open: s.Open, Paid: s.Paid, PayBy: s.PayBy}
	p.renderLocalized(c, http.StatusOK, "no-store", func(views.Locale) templ.Component { return views.SimulatedCheckoutPage(v) })
}
