package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/services/drill"
)

// Drills is what the API needs of the merchant's fire drill (services/drill).
type Drills interface {
	Start(ctx context.Context, merchantID, saleID int64, in drill.Settings) (drill.View, error)
	Status(ctx context.Context, merchantID, saleID int64) (drill.Status, error)
}

type drillRequestJSON struct {
	Shoppers      *int   `json:"shoppers"`
	Seconds       *int   `json:"seconds"`
	ExpectedCrowd *int64 `json:"expectedCrowd"`
}

type drillJSON struct {
	DrillID        string        `json:"drillId"`
	SaleID         string        `json:"saleId"`
	Phase          string        `json:"phase"`
	Shoppers       int           `json:"shoppers"`
	Seconds        int           `json:"seconds"`
	ExpectedCrowd  int64         `json:"expectedCrowd"`
	CrowdSource    string        `json:"crowdSource"`
	StartedAt      string        `json:"startedAt"`
	FinishedAt     *string       `json:"finishedAt"`
	ElapsedSeconds float64       `json:"elapsedSeconds"`
	Sent           int           `json:"sent"`
	Answered       int           `json:"answered"`
	Result         *drill.Result `json:"result"`
	Failure        *string       `json:"failure"`
}

type drillBlockedJSON struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	// the sale live or starting soon (DRILL_NOT_NOW), for the page's own words
	SaleID   *string `json:"saleId,omitempty"`
	SaleName *string `json:"saleName,omitempty"`
	StartsAt *string `json:"startsAt,omitempty"`
	EndsAt   *string `json:"endsAt,omitempty"`
	// when the merchant's next drill may start (DRILL_NOT_NOW after their last drill: the cooldown)
	NextAt *string `json:"nextAt,omitempty"`
}

type drillStatusJSON struct {
	Drill   *drillJSON        `json:"drill"`
	Blocked *drillBlockedJSON `json:"blocked"`
}

func drillOf(v drill.View) *drillJSON {
	return &drillJSON{DrillID: idString(v.DrillID), SaleID: idString(v.SaleID), Phase: v.Phase,
		Shoppers: v.Shoppers, Seconds: v.Seconds, ExpectedCrowd: v.ExpectedCrowd, CrowdSource: v.CrowdSource,
		StartedAt: v.StartedAt.UTC().Format(time.RFC3339Nano), FinishedAt: optTimeNano(v.FinishedAt), ElapsedSeconds: v.ElapsedSeconds,
		Sent: v.Sent, Answered: v.Answered, Result: v.Result, Failure: optString(v.Failure)}
}

// StartDrill handles the "POST /api/admin/sales/:saleId/drill" route: a fire drill of the
// merchant's sale starts (202 with its progress).
func (a *API) StartDrill(c *gin.Context) {
	saleID, err := pathID(c, "saleId")
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	var in drillRequestJSON
	if err := decodeJSON(c, &in, true); err != nil {
		Error(c, a.Log, err)
		return
	}
	v, err := a.Drills.Start(c.Request.Context(), caller(c).UserID, saleID,
		drill.Settings{Shoppers: in.Shoppers, Seconds: in.Seconds, ExpectedCrowd: in.ExpectedCrowd})
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusAccepted, drillOf(v))
}

// DrillStatus handles the "GET /api/admin/sales/:saleId/drill" route: the sale's last drill
// (running or ended, with its result) and why a drill could not start now, if it could not.
func (a *API) DrillStatus(c *gin.Context) {
	saleID, err := pathID(c, "saleId")
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	st, err := a.Drills.Status(c.Request.Context(), caller(c).UserID, saleID)
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	out := drillStatusJSON{}
	if st.Drill != nil {
		out.Drill = drillOf(*st.Drill)
	}
	if st.Blocked != "" {
		out.Blocked = &drillBlockedJSON{Error: string(st.Blocked), Message: st.BlockedWhy}
		if s := st.BlockedBy; s != nil {
			starts, ends := rfc3339(s.StartsAt), rfc3339(s.EndsAt)
			out.Blocked.StartsAt, out.Blocked.EndsAt = &starts, &ends
			if s.ID != 0 { // the merchant's own sale; another merchant's is not named
				id := idString(s.ID)
				out.Blocked.SaleID, out.Blocked.SaleName = &id, &s.Name
			}
		}
		if st.NextAt != nil {
			next := rfc3339(*st.NextAt)
			out.Blocked.NextAt = &next
		}
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, out)
}
