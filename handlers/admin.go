package handlers

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/services/catalog"
	"github.com/flashsale/flashsale/shop"
)

// SaleAdmin is what the API needs to change a merchant's sale.
type SaleAdmin interface {
	Edit(ctx context.Context, merchantID, saleID int64, in catalog.SaleEdit) (shop.Sale, error)
	Pause(ctx context.Context, merchantID, saleID int64) (shop.Sale, error)
	Resume(ctx context.Context, merchantID, saleID int64) (shop.Sale, error)
	End(ctx context.Context, merchantID, saleID int64) (shop.Sale, error)
	Warm(ctx context.Context, merchantID, saleID int64) (shop.Sale, error)
}

type editItemJSON struct {
	ItemID     *string `json:"itemId"`
	Name       *string `json:"name"`
	PriceCents *int64  `json:"priceCents"`
	Quantity   *int64  `json:"quantity"`
	ImageURL   *string `json:"imageUrl"`
}

type editSaleJSON struct {
	Name                 *string        `json:"name"`
	Description          *string        `json:"description"`
	StartsAt             *string        `json:"startsAt"`
	EndsAt               *string        `json:"endsAt"`
	PaymentWindowSeconds *int           `json:"paymentWindowSeconds"`
	FairStartMillis      *int           `json:"fairStartMillis"`
	PurchaseLimit        *string        `json:"purchaseLimit"`
	Currency             *string        `json:"currency"`
	Items                []editItemJSON `json:"items"`
}

// maxEditItems bounds the items of one PATCH (a sale has at most 50).
const maxEditItems = 50

// EditSale handles the "PATCH /api/admin/sales/:saleId" route: a partial change of a sale.
func (a *API) EditSale(c *gin.Context) {
	saleID, err := pathID(c, "saleId")
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	var in editSaleJSON
	if err := decodeJSON(c, &in, false); err != nil {
		Error(c, a.Log, err)
		return
	}
	ed := catalog.SaleEdit{Name: in.Name, Description: in.Description, PaymentWindowSeconds: in.PaymentWindowSeconds,
		FairStartMillis: in.FairStartMillis, PurchaseLimit: in.PurchaseLimit, Currency: in.Currency}
	if in.StartsAt != nil {
		t, err := parseTime("startsAt", *in.StartsAt)
		if err != nil {
			Error(c, a.Log, err)
			return
		}
		ed.StartsAt = &t
	}
	if in.EndsAt != nil {
		t, err := parseTime("endsAt", *in.EndsAt)
		if err != nil {
			Error(c, a.Log, err)
			return
		}
		ed.EndsAt = &t
	}
	if len(in.Items) > maxEditItems {
		Error(c, a.Log, shop.Errorf(shop.CodeInvalidInput, "a sale has at most %d items", maxEditItems))
		return
	}
	for i, it := range in.Items {
		e := catalog.ItemEdit{Name: it.Name, PriceCents: it.PriceCents, Quantity: it.Quantity, ImageURL: it.ImageURL}
		if it.ItemID != nil {
			id, err := strconv.ParseInt(*it.ItemID, 10, 64)
			if err != nil || id <= 0 || (*it.ItemID)[0] == '+' {
				Error(c, a.Log, shop.Errorf(shop.CodeInvalidInput, "items[%d].itemId must be a positive decimal id", i))
				return
			}
			e.ItemID = id
		}
		ed.Items = append(ed.Items, e)
	}
	a.adminAnswer(c, func(ctx context.Context, merchantID int64) (shop.Sale, error) {
		return a.Admin.Edit(ctx, merchantID, saleID, ed)
	})
}

// PauseSale handles the "POST /api/admin/sales/:saleId/pause" route.
func (a *API) PauseSale(c *gin.Context) { a.saleAction(c, SaleAdmin.Pause) }

// ResumeSale handles the "POST /api/admin/sales/:saleId/resume" route.
func (a *API) ResumeSale(c *gin.Context) { a.saleAction(c, SaleAdmin.Resume) }

// EndSale handles the "POST /api/admin/sales/:saleId/end" route: the sale ends now.
func (a *API) EndSale(c *gin.Context) { a.saleAction(c, SaleAdmin.End) }

// WarmSale handles the "POST /api/admin/sales/:saleId/warm" route: load the stock into Redis now.
func (a *API) WarmSale(c *gin.Context) { a.saleAction(c, SaleAdmin.Warm) }

func (a *API) saleAction(c *gin.Context, act func(SaleAdmin, context.Context, int64, int64) (shop.Sale, error)) {
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
	a.adminAnswer(c, func(ctx context.Context, merchantID int64) (shop.Sale, error) {
		return act(a.Admin, ctx, merchantID, saleID)
	})
}

func (a *API) adminAnswer(c *gin.Context, do func(ctx context.Context, merchantID int64) (shop.Sale, error)) {
	s, err := do(c.Request.Context(), caller(c).UserID)
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, a.saleJSON(s))
}

// pausedOf tells the merchant's stock view whether the sale is paused (false if unreadable: the
// view's other numbers come from the same sources and answered already).
func (a *API) pausedOf(c *gin.Context, saleID int64) bool {
	s, err := a.Catalog.Get(c.Request.Context(), saleID)
	return err == nil && s.Paused
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
	FairStartMillis      *int   `json:"fairStartMillis"`
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
		StockShards: in.StockShards, FairStartMillis: in.FairStartMillis}
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
		"stockShards": s.StockShards, "fairStartMillis": s.FairStartMillis})
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
