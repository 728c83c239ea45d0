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
	PublicDraw(ctx context.Context, saleID int64, cursor string) (shop.Draw, []shop.DrawEntry, string, error)
}

type drawEntryJSON struct {
	OrderID   string  `json:"orderId"`
	UserID    string  `json:"userId"`
	Username  *string `json:"username"`
	ItemID    string  `json:"itemId"`
	Rank      *int64  `json:"rank"` // its place among its item's ranked entries; null: not ranked
	EnteredAt string  `json:"enteredAt"`
	Status    string  `json:"status"`
	Won       bool    `json:"won"`
}

// publicEntryJSON is one entry of the public record: no shopper named.
type publicEntryJSON struct {
	OrderID string `json:"orderId"`
	ItemID  string `json:"itemId"`
	Rank    *int64 `json:"rank"`
	Outcome string `json:"outcome"` // WON or NOT_SELECTED
}

type drawItemJSON struct {
	ItemID string `json:"itemId"`
	Units  int    `json:"units"` // the units it offered to the draw: its best `units` ranks won
}

func rankOf(e shop.DrawEntry) *int64 {
	if e.Rank <= 0 {
		return nil
	}
	r := e.Rank
	return &r
}

func drawItems(d shop.Draw) []drawItemJSON {
	out := make([]drawItemJSON, len(d.Items))
	for i, it := range d.Items {
		out[i] = drawItemJSON{ItemID: idString(it.ItemID), Units: it.Units}
	}
	return out
}

// AdminDraw handles the "GET /api/admin/sales/:saleId/draw" route: the draw of a sale with a
// fair start; counts only until it is decided, then its record (entries and ranks, best first,
// paged).
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
			Rank: rankOf(e), EnteredAt: rfc3339(e.EnteredAt), Status: e.Status, Won: e.Won()}
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"windowMillis": d.WindowMillis, "decided": d.Decided(), "entries": d.Entries, "winners": d.Winners,
		"closedAt": optTime(d.ClosedAt), "pauses": d.Pauses, "commitment": optString(d.Commitment), "seed": optString(d.Seed),
		"items": drawItems(d), "record": out, "next": next})
}

// PublicDraw handles the "GET /api/flash-sales/:saleId/draw" route: the draw anyone can check.
// Until it is decided, {"decided":false,"entries":N} with its commitment; then the seed and every
// entry by order id with its rank and outcome (no shopper named), paged.
func (a *API) PublicDraw(c *gin.Context) {
	if !allowRead(c, a.Reads, a.Log) {
		return
	}
	saleID, err := pathID(c, "saleId")
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	d, rec, next, err := a.Draws.PublicDraw(c.Request.Context(), saleID, c.Query("cursor"))
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	if !d.Decided() {
		c.Header("Cache-Control", "public, max-age=1")
		c.JSON(http.StatusOK, gin.H{"decided": false, "entries": d.Entries, "commitment": d.Commitment, "pauses": d.Pauses})
		return
	}
	out := make([]publicEntryJSON, len(rec))
	for i, e := range rec {
		outcome := shop.StatusNotSelected
		if e.Won() {
			outcome = "WON"
		}
		out[i] = publicEntryJSON{OrderID: e.OrderID, ItemID: idString(e.ItemID), Rank: rankOf(e), Outcome: outcome}
	}
	// decided: ranks and outcomes no longer change (an entry written after the decision is
	// added, unranked, within the payment window at most)
	c.Header("Cache-Control", "public, max-age=10")
	c.JSON(http.StatusOK, gin.H{"decided": true, "commitment": d.Commitment, "seed": d.Seed, "pauses": d.Pauses,
		"closedAt": optTime(d.ClosedAt), "items": drawItems(d), "entries": out, "next": next})
}
