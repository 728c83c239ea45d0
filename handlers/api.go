package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/catalog"
	"github.com/flashsale/flashsale/shop"
)

// Accounts is what the API needs of the account service.
type Accounts interface {
	NewCaptcha(ctx context.Context, ip string) (id, image string, err error)
	Register(ctx context.Context, username, password, captchaID, answer, ip string) (string, auth.Identity, error)
	Login(ctx context.Context, username, password, ip string) (string, auth.Identity, error)
	Logout(ctx context.Context, token string) error
	Username(ctx context.Context, userID int64) (string, error)
}

// Catalog is what the API needs of the sales service.
type Catalog interface {
	Create(ctx context.Context, merchantID int64, in catalog.NewSale) (shop.Sale, error)
	Get(ctx context.Context, saleID int64) (shop.Sale, error)
	Cached(ctx context.Context, saleID int64) (shop.Sale, error)
	Upcoming(ctx context.Context, cursor string) ([]shop.Sale, string, error)
	OfMerchant(ctx context.Context, merchantID int64) ([]shop.Sale, error)
	Displayed(ctx context.Context, saleID int64) (catalog.DisplayedStock, error)
	AdminStock(ctx context.Context, merchantID, saleID int64) ([]catalog.AdminItemStock, error)
}

// Shop is what the API needs of the purchase service.
type Shop interface {
	NewCaptcha(ctx context.Context, userID, saleID int64, ip string) (string, string, error)
	TokenGate(ctx context.Context, userID, saleID int64) error
	IssueToken(ctx context.Context, userID, saleID int64, captchaID, answer, ip string) (string, time.Time, error)
	Purchase(ctx context.Context, userID, itemID int64, token, ip string) (string, error)
	Order(ctx context.Context, userID int64, orderID string) (shop.OrderView, error)
	Pay(ctx context.Context, userID int64, orderID string) (shop.OrderView, error)
	Cancel(ctx context.Context, userID int64, orderID string) (shop.OrderView, error)
	MyOrders(ctx context.Context, userID, saleID int64, cursor string) ([]shop.OrderView, string, error)
}

// Cookie names of the browser session (see README.md and the OpenAPI document). With Secure
// cookies (production) they carry the __Host- prefix: the browser then takes them only from this
// very host over HTTPS, with Path=/ and no Domain, so neither a sibling subdomain nor a plain-HTTP
// answer can plant a session.
const (
	SessionCookie = "fs_session"
	CSRFCookie    = "fs_csrf"
	hostPrefix    = "__Host-"
)

// API holds the JSON handlers.
type API struct {
	Accounts     Accounts
	Catalog      Catalog
	Shop         Shop
	Admin        SaleAdmin // edit, pause, resume, end and warm a sale (handlers/admin.go)
	Log          *slog.Logger
	Now          func() time.Time
	SecureCookie bool          // Secure, __Host- cookies (production)
	SessionTTL   time.Duration // cookie lifetime, same as the JWT's
	Orders       SaleOrders    // the merchant's order list and export (handlers/orders_admin.go)
	Live         SaleLive      // the merchant's live view of a sale (handlers/live.go)
	Reads        ReadLimiter   // the public reads' per-address limit; nil: none
}

// ReadLimiter limits, per client address, the public reads that take an id or a cursor: a sale,
// its stock, the listing, a shopper's orders, and the home and sale pages (limits.Limiter).
type ReadLimiter interface {
	AllowRead(ip string) error
}

// allowRead takes the request from its client's read bucket before anything is looked up; over
// the limit it answers 429 RATE_LIMITED with Retry-After (never cached) and reports false.
func allowRead(c *gin.Context, r ReadLimiter, log *slog.Logger) bool {
	if r == nil {
		return true
	}
	if err := r.AllowRead(c.ClientIP()); err != nil {
		c.Header("Cache-Control", "no-store")
		Error(c, log, err)
		return false
	}
	return true
}

// SessionCookieName is the name of the HttpOnly session cookie.
func (a *API) SessionCookieName() string {
	if a.SecureCookie {
		return hostPrefix + SessionCookie
	}
	return SessionCookie
}

// CSRFCookieName is the name of the readable double-submit cookie.
func (a *API) CSRFCookieName() string {
	if a.SecureCookie {
		return hostPrefix + CSRFCookie
	}
	return CSRFCookie
}

type loginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

type registerRequest struct {
	Username  string `json:"username"`
	Password  string `json:"password"`
	CaptchaID string `json:"captchaId"`
	Answer    string `json:"answer"`
}

// tokenResponse answers a login or a registration. The token is left out for a browser (see
// fromBrowser): it has the session as an HttpOnly cookie, which its scripts cannot read, and
// the token in the body would undo that.
type tokenResponse struct {
	Token  string `json:"token,omitempty"`
	Role   string `json:"role"`
	UserID string `json:"userId"`
}

// fromBrowser tells a browser's request from an API client's: every current browser sends Origin
// on a POST (same-origin included) and Sec-Fetch-Site on every request, and a page's script
// can set neither; curl, the benchmark tool and other programs send neither.
func fromBrowser(c *gin.Context) bool {
	return c.GetHeader("Origin") != "" || c.GetHeader("Sec-Fetch-Site") != ""
}

func (a *API) setSession(c *gin.Context, token string) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	maxAge := int(a.SessionTTL / time.Second)
	c.SetSameSite(http.SameSiteLaxMode)
	c.SetCookie(a.SessionCookieName(), token, maxAge, "/", "", a.SecureCookie, true)
	c.SetCookie(a.CSRFCookieName(), hex.EncodeToString(b[:]), maxAge, "/", "", a.SecureCookie, false)
}

func (a *API) clearSession(c *gin.Context) {
	c.SetSameSite(http.SameSiteLaxMode)
	c.SetCookie(a.SessionCookieName(), "", -1, "/", "", a.SecureCookie, true)
	c.SetCookie(a.CSRFCookieName(), "", -1, "/", "", a.SecureCookie, false)
}

// AuthCaptcha handles the "POST /api/auth/captcha" route: a challenge for a registration.
func (a *API) AuthCaptcha(c *gin.Context) {
	var in struct{}
	if err := decodeJSON(c, &in, true); err != nil {
		Error(c, a.Log, err)
		return
	}
	id, img, err := a.Accounts.NewCaptcha(c.Request.Context(), c.ClientIP())
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"captchaId": id, "image": img})
}

// Register handles the "POST /api/auth/register" route.
func (a *API) Register(c *gin.Context) {
	var in registerRequest
	if err := decodeJSON(c, &in, false); err != nil {
		Error(c, a.Log, err)
		return
	}
	tok, id, err := a.Accounts.Register(c.Request.Context(), in.Username, in.Password, in.CaptchaID, in.Answer, c.ClientIP())
	a.sessionAnswer(c, tok, id, err, http.StatusCreated)
}

// Login handles the "POST /api/auth/login" route.
func (a *API) Login(c *gin.Context) {
	var in loginRequest
	if err := decodeJSON(c, &in, false); err != nil {
		Error(c, a.Log, err)
		return
	}
	tok, id, err := a.Accounts.Login(c.Request.Context(), in.Username, in.Password, c.ClientIP())
	a.sessionAnswer(c, tok, id, err, http.StatusOK)
}

// sessionAnswer sets the browser session cookies and answers {"token","role","userId"} with
// status, the token only to an API client.
func (a *API) sessionAnswer(c *gin.Context, tok string, id auth.Identity, err error, status int) {
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	a.setSession(c, tok)
	out := tokenResponse{Token: tok, Role: id.Role, UserID: idString(id.UserID)}
	if fromBrowser(c) {
		out.Token = ""
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(status, out)
}

// Logout handles the "POST /api/auth/logout" route: it ends the session of the bearer token or
// session cookie on the server (the token is refused from then on, on every instance) and
// clears the browser's cookies. Without a valid session it only clears the cookies.
func (a *API) Logout(c *gin.Context) {
	token := ""
	if h := c.GetHeader("Authorization"); h != "" {
		if scheme, t, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			token = strings.TrimSpace(t)
		}
	} else if ck, err := c.Cookie(a.SessionCookieName()); err == nil {
		token = ck
	}
	if token != "" {
		if err := a.Accounts.Logout(c.Request.Context(), token); err != nil {
			Error(c, a.Log, err)
			return
		}
	}
	a.clearSession(c)
	c.Status(http.StatusNoContent)
}

// Me handles the "GET /api/auth/me" route: who the session or token belongs to.
func (a *API) Me(c *gin.Context) {
	id, _ := IdentityOf(c)
	c.Header("Cache-Control", "no-store")
	name, err := a.Accounts.Username(c.Request.Context(), id.UserID)
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"userId": idString(id.UserID), "role": id.Role, "username": name})
}

// Time handles the "GET /api/time" route: the server clock, never cached.
func (a *API) Time(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"now": a.Now().UTC().Format(time.RFC3339Nano)})
}

type itemJSON struct {
	ItemID     string `json:"itemId"`
	Name       string `json:"name"`
	PriceCents int64  `json:"priceCents"`
	Quantity   int    `json:"quantity"`
	ImageURL   string `json:"imageUrl,omitempty"`
}

type saleJSON struct {
	SaleID               string     `json:"saleId"`
	Name                 string     `json:"name"`
	StartsAt             string     `json:"startsAt"`
	EndsAt               string     `json:"endsAt"`
	Status               string     `json:"status"`
	PaymentWindowSeconds int        `json:"paymentWindowSeconds"`
	PurchaseLimit        string     `json:"purchaseLimit"`
	Currency             string     `json:"currency"`
	Description          string     `json:"description,omitempty"`
	Paused               bool       `json:"paused,omitempty"`
	Items                []itemJSON `json:"items,omitempty"`
}

func (a *API) saleJSON(s shop.Sale) saleJSON {
	out := saleJSON{SaleID: idString(s.ID), Name: s.Name, StartsAt: rfc3339(s.StartsAt), EndsAt: rfc3339(s.EndsAt),
		Status: shop.SaleStatus(s.StartsAt, s.EndsAt, a.Now()), PaymentWindowSeconds: s.PaymentWindowSeconds,
		PurchaseLimit: s.PurchaseLimit, Currency: s.Currency, Description: s.Description, Paused: s.Paused}
	for _, it := range s.Items {
		out.Items = append(out.Items, itemJSON{ItemID: idString(it.ID), Name: it.Name, PriceCents: it.PriceCents, Quantity: it.Quantity, ImageURL: it.ImageURL})
	}
	return out
}

// ListSales handles the "GET /api/flash-sales" route: live and upcoming sales.
func (a *API) ListSales(c *gin.Context) {
	if !allowRead(c, a.Reads, a.Log) {
		return
	}
	cursor := c.Query("cursor") // bounded and checked by the service's decoder
	sales, next, err := a.Catalog.Upcoming(c.Request.Context(), cursor)
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	out := make([]saleJSON, 0, len(sales))
	for _, s := range sales {
		out = append(out, a.saleJSON(s))
	}
	c.Header("Cache-Control", "public, max-age=1")
	c.JSON(http.StatusOK, gin.H{"sales": out, "next": next})
}

// GetSale handles the "GET /api/flash-sales/:saleId" route.
func (a *API) GetSale(c *gin.Context) {
	if !allowRead(c, a.Reads, a.Log) {
		return
	}
	id, err := pathID(c, "saleId")
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	s, err := a.Catalog.Cached(c.Request.Context(), id)
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	c.Header("Cache-Control", "public, max-age=1")
	c.JSON(http.StatusOK, a.saleJSON(s))
}

type stockItemJSON struct {
	ItemID string `json:"itemId"`
	Stock  int64  `json:"stock"`
}

// Stock handles the "GET /api/flash-sales/:saleId/stock" route: displayed stock, micro-cached.
func (a *API) Stock(c *gin.Context) {
	if !allowRead(c, a.Reads, a.Log) {
		return
	}
	id, err := pathID(c, "saleId")
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	d, err := a.Catalog.Displayed(c.Request.Context(), id)
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	items := make([]stockItemJSON, len(d.Items))
	for i, it := range d.Items {
		items[i] = stockItemJSON{ItemID: idString(it.ItemID), Stock: max(it.Stock, 0)}
	}
	c.Header("Cache-Control", "public, max-age=1")
	c.JSON(http.StatusOK, gin.H{"saleId": idString(id), "items": items, "asOf": d.AsOf.UTC().Format(time.RFC3339Nano)})
}

// caller returns the request's identity; the auth middleware guarantees one on these routes.
func caller(c *gin.Context) auth.Identity {
	id, _ := IdentityOf(c)
	return id
}

// Captcha handles the "POST /api/flash-sales/:saleId/captcha" route.
func (a *API) Captcha(c *gin.Context) {
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
	id, img, err := a.Shop.NewCaptcha(c.Request.Context(), caller(c).UserID, saleID, c.ClientIP())
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"captchaId": id, "image": img})
}

// PurchaseToken handles the "POST /api/flash-sales/:saleId/purchase-token" route.
func (a *API) PurchaseToken(c *gin.Context) {
	saleID, err := pathID(c, "saleId")
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	// The refusals that need nothing from the body come first: after a sell-out the crowd is
	// answered without reading a byte of it.
	if err := a.Shop.TokenGate(c.Request.Context(), caller(c).UserID, saleID); err != nil {
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
	tok, exp, err := a.Shop.IssueToken(c.Request.Context(), caller(c).UserID, saleID, in.CaptchaID, in.Answer, c.ClientIP())
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"purchaseToken": tok, "expiresAt": exp.UTC().Format(time.RFC3339Nano)})
}

// Purchase handles the "POST /api/flash-sales/items/:itemId/purchase" route.
func (a *API) Purchase(c *gin.Context) {
	itemID, err := pathID(c, "itemId")
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	orderID, err := a.Shop.Purchase(c.Request.Context(), caller(c).UserID, itemID, c.GetHeader("X-Purchase-Token"), c.ClientIP())
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	// The hot path's answer, written without reflection: an order id is a canonical UUID.
	body := make([]byte, 0, 64)
	body = append(body, `{"orderId":"`...)
	body = append(body, orderID...)
	body = append(body, `","status":"QUEUED"}`...)
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
	// QUEUED only (handlers/orders_admin.go): the place in the queue and the estimated wait.
	QueuePosition        *int64 `json:"queuePosition,omitempty"`
	EstimatedWaitSeconds *int64 `json:"estimatedWaitSeconds,omitempty"`
}

func toOrderJSON(v shop.OrderView) orderJSON {
	o := orderJSON{OrderID: v.OrderID, ItemID: idString(v.ItemID), SaleID: idString(v.SaleID), Status: v.Status,
		ItemName: v.ItemName, PriceCents: v.PriceCents, Currency: v.Currency, SaleName: v.SaleName, Failure: v.Failure}
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
	v, err := a.Shop.Order(c.Request.Context(), caller(c).UserID, c.Param("orderId"))
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
	list, next, err := a.Shop.MyOrders(c.Request.Context(), caller(c).UserID, saleID, cursor)
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
	v, err := a.Shop.Pay(c.Request.Context(), caller(c).UserID, c.Param("orderId"))
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"orderId": v.OrderID, "status": v.Status})
}

// Cancel handles the "POST /api/flash-sales/orders/:orderId/cancel" route.
func (a *API) Cancel(c *gin.Context) {
	v, err := a.Shop.Cancel(c.Request.Context(), caller(c).UserID, c.Param("orderId"))
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"orderId": v.OrderID, "status": v.Status})
}

type newSaleJSON struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	StartsAt    string `json:"startsAt"`
	EndsAt      string `json:"endsAt"`
	Items       []struct {
		Name       string `json:"name"`
		PriceCents int64  `json:"priceCents"`
		Quantity   int64  `json:"quantity"`
		ImageURL   string `json:"imageUrl"`
	} `json:"items"`
	RateLimits *struct {
		UserPerSecond int `json:"userPerSecond"`
		IPPerSecond   int `json:"ipPerSecond"`
	} `json:"rateLimits"`
	PaymentWindowSeconds *int   `json:"paymentWindowSeconds"`
	PurchaseLimit        string `json:"purchaseLimit"`
	Currency             string `json:"currency"`
	StockShards          *int   `json:"stockShards"`
}

func parseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, shop.Errorf(shop.CodeInvalidInput, "%s must be an RFC 3339 time such as 2026-12-01T10:00:00Z", field)
	}
	return t, nil
}

// CreateSale handles the "POST /api/admin/sales" route.
func (a *API) CreateSale(c *gin.Context) {
	var in newSaleJSON
	if err := decodeJSON(c, &in, false); err != nil {
		Error(c, a.Log, err)
		return
	}
	starts, err := parseTime("startsAt", in.StartsAt)
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	ends, err := parseTime("endsAt", in.EndsAt)
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	ns := catalog.NewSale{Name: in.Name, Description: in.Description, StartsAt: starts, EndsAt: ends, PaymentWindowSeconds: in.PaymentWindowSeconds, PurchaseLimit: in.PurchaseLimit, Currency: in.Currency,
		StockShards: in.StockShards}
	if in.RateLimits != nil {
		ns.Limits = &shop.RateLimits{UserPerSecond: in.RateLimits.UserPerSecond, IPPerSecond: in.RateLimits.IPPerSecond}
	}
	for _, it := range in.Items {
		ns.Items = append(ns.Items, catalog.NewItem{Name: it.Name, PriceCents: it.PriceCents, Quantity: it.Quantity, ImageURL: it.ImageURL})
	}
	s, err := a.Catalog.Create(c.Request.Context(), caller(c).UserID, ns)
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	j := a.saleJSON(s)
	c.JSON(http.StatusCreated, gin.H{"saleId": j.SaleID, "name": j.Name, "startsAt": j.StartsAt, "endsAt": j.EndsAt, "items": j.Items,
		"paymentWindowSeconds": j.PaymentWindowSeconds, "purchaseLimit": j.PurchaseLimit, "currency": j.Currency, "description": j.Description,
		"stockShards": s.StockShards})
}

// AdminSales handles the "GET /api/admin/sales" route: the merchant's own sales.
func (a *API) AdminSales(c *gin.Context) {
	sales, err := a.Catalog.OfMerchant(c.Request.Context(), caller(c).UserID)
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	out := make([]saleJSON, 0, len(sales))
	for _, s := range sales {
		out = append(out, a.saleJSON(s))
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"sales": out})
}

type adminStockJSON struct {
	ItemID     string  `json:"itemId"`
	Name       string  `json:"name"`
	Quantity   int64   `json:"quantity"`
	Displayed  int64   `json:"displayed"`
	Frozen     int64   `json:"frozen"`
	Real       int64   `json:"real"`
	Paid       int64   `json:"paid"`
	Pending    int64   `json:"pending"`
	Expired    int64   `json:"expired"`
	Cancelled  int64   `json:"cancelled"`
	InFlight   int64   `json:"inFlight"`
	SoldOut    bool    `json:"soldOut"`
	LoadedAt   *string `json:"loadedAt"`
	Reconciled bool    `json:"reconciled"`
	Mismatch   string  `json:"mismatch,omitempty"`
}

// AdminStock handles the "GET /api/admin/sales/:saleId/stock" route.
func (a *API) AdminStock(c *gin.Context) {
	saleID, err := pathID(c, "saleId")
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	items, err := a.Catalog.AdminStock(c.Request.Context(), caller(c).UserID, saleID)
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	out := make([]adminStockJSON, len(items))
	for i, it := range items {
		out[i] = adminStockJSON{ItemID: idString(it.ItemID), Name: it.Name, Quantity: it.Quantity, Displayed: it.Displayed,
			Frozen: it.Frozen, Real: it.Real, Paid: it.Paid, Pending: it.Pending, Expired: it.Expired, Cancelled: it.Cancelled,
			InFlight: it.InFlight, SoldOut: it.SoldOut, Reconciled: it.Reconciled, Mismatch: it.Mismatch, LoadedAt: optTimeNano(it.LoadedAt)}
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"saleId": idString(saleID), "items": out, "paused": a.pausedOf(c, saleID)})
}
