package handlers

import (
	"context"
	"log/slog"
	"net/http"
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

// Purchases is what the API needs of the purchase service (services/purchase).
type Purchases interface {
	NewCaptcha(ctx context.Context, userID, saleID int64, ip string) (string, string, error)
	TokenGate(ctx context.Context, saleID int64) error
	PurchaseGate(ctx context.Context, itemID int64, token string) error
	IssueToken(ctx context.Context, userID, saleID int64, captchaID, answer, ip string) (string, time.Time, error)
	Purchase(ctx context.Context, userID, itemID int64, token, ip string) (orderID string, draw bool, err error)
	Order(ctx context.Context, userID int64, orderID string) (shop.OrderView, error)
	Pay(ctx context.Context, userID int64, orderID string) (shop.OrderView, error)
	Cancel(ctx context.Context, userID int64, orderID string) (shop.OrderView, error)
	MyOrders(ctx context.Context, userID, saleID int64, cursor string) ([]shop.OrderView, string, error)
}

// Cookie names of the browser session (see docs/api.md and the OpenAPI document). With Secure
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
	Purchases    Purchases
	Admin        SaleAdmin // edit, pause, resume, end and warm a sale (handlers/admin.go)
	Log          *slog.Logger
	Now          func() time.Time
	SecureCookie bool          // Secure, __Host- cookies (production)
	SessionTTL   time.Duration // cookie lifetime, same as the JWT's
	Orders       SaleOrders    // the merchant's order list and export (handlers/orders_admin.go)
	Live         SaleLive      // the merchant's live view of a sale (handlers/live.go)
	Reads        ReadLimiter   // the public reads' per-address limit; nil: none
	Payments     Payments      // checkouts, the provider's webhook, the simulated provider (handlers/payments.go)
	Reminders    Reminders     // a shopper's "Remind me" before a sale (handlers/remind.go)
	Draws        Draws         // a fair start's draw as the merchant sees it (handlers/draw.go)
	Drills       Drills        // the merchant's fire drill (handlers/drill.go)
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
	SaleID               string `json:"saleId"`
	Name                 string `json:"name"`
	StartsAt             string `json:"startsAt"`
	EndsAt               string `json:"endsAt"`
	Status               string `json:"status"`
	PaymentWindowSeconds int    `json:"paymentWindowSeconds"`
	PurchaseLimit        string `json:"purchaseLimit"`
	Currency             string `json:"currency"`
	Description          string `json:"description,omitempty"`
	Paused               bool   `json:"paused,omitempty"`
	FairStartMillis      int    `json:"fairStartMillis"`
	// a fair start's draw: the seed's commitment, fixed before the window; the seed once decided
	DrawCommitment string     `json:"drawCommitment,omitempty"`
	DrawSeed       string     `json:"drawSeed,omitempty"`
	Items          []itemJSON `json:"items,omitempty"`
}

func (a *API) saleJSON(s shop.Sale) saleJSON {
	out := saleJSON{SaleID: idString(s.ID), Name: s.Name, StartsAt: rfc3339(s.StartsAt), EndsAt: rfc3339(s.EndsAt),
		Status: shop.SaleStatus(s.StartsAt, s.EndsAt, a.Now()), PaymentWindowSeconds: s.PaymentWindowSeconds,
		PurchaseLimit: s.PurchaseLimit, Currency: s.Currency, Description: s.Description, Paused: s.Paused, FairStartMillis: s.FairStartMillis,
		DrawCommitment: s.Commitment(), DrawSeed: s.RevealedSeed()}
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
	ItemID   string `json:"itemId"`
	Stock    int64  `json:"stock"`
	Quantity int    `json:"quantity"`
}

// stockJSON is the stock answer: the units left, and the sale's state that an open sale page
// follows (paused, its window and status), so a pause, a resume, an early end or a moved end
// reaches every page through the poll it already makes.
type stockJSON struct {
	SaleID   string          `json:"saleId"`
	Items    []stockItemJSON `json:"items"`
	AsOf     string          `json:"asOf"`
	Status   string          `json:"status"`
	Paused   bool            `json:"paused"`
	StartsAt string          `json:"startsAt"`
	EndsAt   string          `json:"endsAt"`
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
		items[i] = stockItemJSON{ItemID: idString(it.ItemID), Stock: max(it.Stock, 0), Quantity: it.Quantity}
	}
	c.Header("Cache-Control", "public, max-age=1")
	status := shop.SaleStatus(d.StartsAt, d.EndsAt, a.Now())
	c.JSON(http.StatusOK, stockJSON{SaleID: idString(id), Items: items, AsOf: d.AsOf.UTC().Format(time.RFC3339Nano),
		Status: status, Paused: d.Paused && status != shop.SaleEnded, // an ended sale is over, paused before or not
		StartsAt: d.StartsAt.UTC().Format(time.RFC3339Nano), EndsAt: d.EndsAt.UTC().Format(time.RFC3339Nano)})
}
