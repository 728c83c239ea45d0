package handlers

import (
	"context"
	"net/http"
	"strconv"

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
		PurchaseLimit: in.PurchaseLimit, Currency: in.Currency}
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
	if a.Admin == nil {
		Error(c, a.Log, shop.Errorf(shop.CodeInternal, "sale administration is not configured"))
		return
	}
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
