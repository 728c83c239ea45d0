package handlers

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/shop"
	"github.com/gin-gonic/gin"
)

// caller returns the request's identity; the auth middleware guarantees one on these routes.
func caller(c *gin.Context) auth.Identity {
	id, _ := IdentityOf(c)
	return id
}

// buyer refuses a merchant's identity on the shopper's purchase routes (403
// MERCHANTS_CANNOT_BUY) and reports whether the request may go on: a comparison of the role the
// auth middleware verified, nothing looked up.
func (a *API) buyer(c *gin.Context) bool {
	if caller(c).Role == auth.RoleMerchant {
		Error(c, a.Log, shop.ErrMerchantsCannotBuy)
		return false
	}
	return true
}

// Captcha handles the "POST /api/flash-sales/:saleId/captcha" route.
func (a *API) Captcha(c *gin.Context) {
	if !a.buyer(c) {
		return
	}
	saleID, err := pathID(c, "saleId")
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	var in struct{}
	if err := decodeJSON(c, &in, true); err != nil {
		Error(c, a.Log, err)
		return
	}
	id, img, err := a.Purchases.NewCaptcha(c.Request.Context(), caller(c).UserID, saleID, c.ClientIP())
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"captchaId": id, "image": img})
}

// TokenGate answers, on the "POST /api/flash-sales/:saleId/purchase-token" route, the refusals
// that depend on the sale alone (unknown, not started, ended, paused, sold out) before the
// caller's identity is verified: the crowd refused after a sell-out costs no JWT, no body read
// and no JSON decoding, and learns only what the sale's public routes say. Anything else goes on
// to authentication and PurchaseToken.
func (a *API) TokenGate(c *gin.Context) {
	saleID, err := pathID(c, "saleId")
	if err == nil {
		err = a.Purchases.TokenGate(c.Request.Context(), saleID)
	}
	if err != nil {
		Error(c, a.Log, err)
	}
}

// PurchaseToken handles the "POST /api/flash-sales/:saleId/purchase-token" route, behind TokenGate.
func (a *API) PurchaseToken(c *gin.Context) {
	if !a.buyer(c) {
		return
	}
	saleID, err := pathID(c, "saleId")
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	var in struct {
		CaptchaID string `json:"captchaId"`
		Answer    string `json:"answer"`
	}
	if err := decodeJSON(c, &in, false); err != nil {
		Error(c, a.Log, err)
		return
	}
	tok, exp, err := a.Purchases.IssueToken(c.Request.Context(), caller(c).UserID, saleID, in.CaptchaID, in.Answer, c.ClientIP())
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.Data(http.StatusOK, jsonType, tokenJSON(tok, exp))
}

// tokenJSON is the purchase token's answer, json.Marshal's bytes for it (keys in its order)
// written without reflection: a token is base64url and a dot, a time RFC 3339 digits.
func tokenJSON(tok string, exp time.Time) []byte {
	at := exp.UTC().Format(time.RFC3339Nano)
	if !plainJSON(tok) {
		out, _ := json.Marshal(map[string]string{"purchaseToken": tok, "expiresAt": at})
		return out
	}
	b := make([]byte, 0, len(tok)+len(at)+36)
	b = append(b, `{"expiresAt":"`...)
	b = append(b, at...)
	b = append(b, `","purchaseToken":"`...)
	b = append(b, tok...)
	return append(b, `"}`...)
}

// PurchaseGate answers, on the "POST /api/flash-sales/items/:itemId/purchase" route, the refusals
// that depend on the item alone (unknown, its sale not started or ended, sold out here) before
// the caller's identity is verified: the shoppers still holding a token after the sell-out are
// refused without a JWT verified. Anything else goes on to authentication and Purchase.
func (a *API) PurchaseGate(c *gin.Context) {
	itemID, err := pathID(c, "itemId")
	if err == nil {
		err = a.Purchases.PurchaseGate(c.Request.Context(), itemID, c.GetHeader("X-Purchase-Token"))
	}
	if err != nil {
		Error(c, a.Log, err)
	}
}

// Purchase handles the "POST /api/flash-sales/items/:itemId/purchase" route, behind PurchaseGate.
func (a *API) Purchase(c *gin.Context) {
	if !a.buyer(c) {
		return
	}
	itemID, err := pathID(c, "itemId")
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	orderID, draw, err := a.Purchases.Purchase(c.Request.Context(), caller(c).UserID, itemID, c.GetHeader("X-Purchase-Token"), c.ClientIP())
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	// The hot path's answer, written without reflection: an order id is a canonical UUID.
	body := make([]byte, 0, 80)
	body = append(body, `{"orderId":"`...)
	body = append(body, orderID...)
	if draw {
		body = append(body, `","status":"QUEUED","draw":true}`...)
	} else {
		body = append(body, `","status":"QUEUED"}`...)
	}
	c.Data(http.StatusAccepted, "application/json; charset=utf-8", body)
}

type orderJSON struct {
	OrderID    string  `json:"orderId"`
	ItemID     string  `json:"itemId"`
	SaleID     string  `json:"saleId"`
	Status     string  `json:"status"`
	PayBy      *string `json:"payBy"`
	ItemName   string  `json:"itemName"`
	PriceCents int64   `json:"priceCents"`
	Currency   string  `json:"currency"`
	SaleName   string  `json:"saleName,omitempty"`
	Failure    string  `json:"failure,omitempty"`
	CreatedAt  string  `json:"createdAt"`
	// The payment: none, awaiting (a checkout is open), paid, refunded (it came after the order
	// expired or was cancelled; refunded is true once the provider accepted the refund).
	PaymentStatus string `json:"paymentStatus"`
	Refunded      bool   `json:"refunded"`
	Message       string `json:"message,omitempty"` // a sentence for the shopper where the status alone does not tell
	Draw          bool   `json:"draw,omitempty"`    // an entry of the sale's fair-start draw
	// QUEUED only (handlers/orders_admin.go): the place in the queue and the estimated wait.
	QueuePosition        *int64 `json:"queuePosition,omitempty"`
	EstimatedWaitSeconds *int64 `json:"estimatedWaitSeconds,omitempty"`
}

func toOrderJSON(v shop.OrderView) orderJSON {
	o := orderJSON{OrderID: v.OrderID, ItemID: idString(v.ItemID), SaleID: idString(v.SaleID), Status: v.Status,
		ItemName: v.ItemName, PriceCents: v.PriceCents, Currency: v.Currency, SaleName: v.SaleName, Failure: v.Failure,
		PaymentStatus: v.PaymentStatus, Refunded: v.Refunded}
	if o.PaymentStatus == "" {
		o.PaymentStatus = shop.PaymentNone
	}
	if o.PaymentStatus == shop.PaymentRefunded {
		o.Message = shop.RefundMessage(v.Refunded)
	}
	o.Draw = v.Draw
	if v.Status == shop.StatusNotSelected {
		o.Message = shop.NotSelectedMessage()
	}
	if v.PayBy != nil {
		s := rfc3339(*v.PayBy)
		o.PayBy = &s
	}
	if !v.CreatedAt.IsZero() {
		o.CreatedAt = rfc3339(v.CreatedAt)
	}
	if v.Queue != nil {
		pos, wait := v.Queue.Position, v.Queue.WaitSeconds
		o.QueuePosition, o.EstimatedWaitSeconds = &pos, &wait
	}
	return o
}

// Order handles the "GET /api/flash-sales/orders/:orderId" route.
func (a *API) Order(c *gin.Context) {
	if !allowRead(c, a.Reads, a.Log) {
		return
	}
	v, err := a.Purchases.Order(c.Request.Context(), caller(c).UserID, c.Param("orderId"))
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	setQueueRetryAfter(c, v)
	c.JSON(http.StatusOK, toOrderJSON(v))
}

// MyOrders handles the "GET /api/flash-sales/orders" route: the caller's orders, newest first.
func (a *API) MyOrders(c *gin.Context) {
	if !allowRead(c, a.Reads, a.Log) {
		return
	}
	cursor := c.Query("cursor") // bounded and checked by the service's decoder
	var saleID int64
	if v := c.Query("saleId"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			Error(c, a.Log, shop.Errorf(shop.CodeInvalidInput, "saleId must be a sale id (a positive integer)"))
			return
		}
		saleID = id
	}
	list, next, err := a.Purchases.MyOrders(c.Request.Context(), caller(c).UserID, saleID, cursor)
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	out := make([]orderJSON, len(list))
	for i, v := range list {
		out[i] = toOrderJSON(v)
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"orders": out, "next": next})
}

// Pay handles the "POST /api/flash-sales/orders/:orderId/pay" route (simulated payment).
func (a *API) Pay(c *gin.Context) {
	if err := a.Payments.DirectPay(); err != nil {
		Error(c, a.Log, err) // 409 USE_CHECKOUT: a real provider takes money only through its checkout
		return
	}
	v, err := a.Purchases.Pay(c.Request.Context(), caller(c).UserID, c.Param("orderId"))
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"orderId": v.OrderID, "status": v.Status})
}

// Cancel handles the "POST /api/flash-sales/orders/:orderId/cancel" route.
func (a *API) Cancel(c *gin.Context) {
	v, err := a.Purchases.Cancel(c.Request.Context(), caller(c).UserID, c.Param("orderId"))
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"orderId": v.OrderID, "status": v.Status})
}
