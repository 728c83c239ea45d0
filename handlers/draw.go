package handlers

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/shop"
)

// Draws is what the API needs for a fair start's draw (catalog.Sales).
type Draws interface {
	Draw(ctx context.Context, merchantID, saleID int64, cursor string) (shop.Draw, []shop.DrawEntry, string, error)
}

type drawEntryJSON struct {
	OrderID   string  `json:"orderId"`
	UserID    string  `json:"userId"`
	Username  *string `json:"username"`
	ItemID    string  `json:"itemId"`
	Rank      int64   `json:"rank"`
	EnteredAt string  `json:"enteredAt"`
	Status    string  `json:"status"`
	Won       bool    `json:"won"`
}

// AdminDraw handles the "GET /api/admin/sales/:saleId/draw" route: the draw of a sale with a
// fair start and its record (entries and ranks, best first, paged).
func (a *API) AdminDraw(c *gin.Context) {
	saleID, err := pathID(c, "saleId")
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	d, rec, next, err := a.Draws.Draw(c.Request.Context(), caller(c).UserID, saleID, c.Query("cursor"))
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	out := make([]drawEntryJSON, len(rec))
	for i, e := range rec {
		out[i] = drawEntryJSON{OrderID: e.OrderID, UserID: idString(e.UserID), Username: optString(e.Username), ItemID: idString(e.ItemID),
			Rank: e.Rank, EnteredAt: rfc3339(e.EnteredAt), Status: e.Status, Won: e.Won()}
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"windowMillis": d.WindowMillis, "entries": d.Entries, "winners": d.Winners, "closedAt": optTime(d.ClosedAt),
		"record": out, "next": next})
}
