package handlers

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/services/catalog"
)

// SaleLive is what the API needs for the merchant's live view of a sale.
type SaleLive interface {
	Live(ctx context.Context, merchantID, saleID int64) (catalog.LiveView, error)
}

type liveSaleJSON struct {
	SaleID   string  `json:"saleId"`
	Name     string  `json:"name"`
	Status   string  `json:"status"`
	StartsAt string  `json:"startsAt"`
	EndsAt   string  `json:"endsAt"`
	Paused   bool    `json:"paused"`
	LoadedAt *string `json:"loadedAt"`
	// the draw window after the start (0: no fair start)
	FairStartMillis int `json:"fairStartMillis"`
}

// liveDrawJSON is a fair start's draw at a glance (its record: GET /api/admin/sales/{id}/draw).
type liveDrawJSON struct {
	WindowMillis int     `json:"windowMillis"`
	Entries      int     `json:"entries"`
	Winners      int     `json:"winners"`
	ClosedAt     *string `json:"closedAt"` // null while open or being decided
}

type liveItemJSON struct {
	ItemID    string  `json:"itemId"`
	Name      string  `json:"name"`
	Quantity  int64   `json:"quantity"`
	Displayed int64   `json:"displayed"`
	Frozen    int64   `json:"frozen"`
	InFlight  int64   `json:"inFlight"`
	Pending   int64   `json:"pending"`
	Paid      int64   `json:"paid"`
	Expired   int64   `json:"expired"`
	Cancelled int64   `json:"cancelled"`
	Real      int64   `json:"real"`
	SoldOut   bool    `json:"soldOut"`
	LoadedAt  *string `json:"loadedAt"`
	// the item's money, in minor units of the sale's currency (money.currency)
	PaidCents       int64 `json:"paidCents"`
	AwaitingPayment int64 `json:"awaitingPayment"`
	AwaitingCents   int64 `json:"awaitingCents"`
	Refunds         int64 `json:"refunds"`
	RefundedCents   int64 `json:"refundedCents"`
}

// liveMoneyJSON is the sale's money: paid, awaiting the provider's confirmation, refunded (payments
// that came after their order had expired or been cancelled), in minor units of currency.
type liveMoneyJSON struct {
	Currency        string `json:"currency"`
	PaidCents       int64  `json:"paidCents"`
	AwaitingPayment int64  `json:"awaitingPayment"`
	AwaitingCents   int64  `json:"awaitingCents"`
	Refunds         int64  `json:"refunds"`
	RefundedCents   int64  `json:"refundedCents"`
	RefundsPending  int64  `json:"refundsPending"`
	// Payments that named an order of the sale but were not its own: refunded, never paying it.
	Conflicts     liveConflictsJSON `json:"conflicts"`
	RefundsFailed int64             `json:"refundsFailed"` // refunds the provider refused for good
}

type liveConflictsJSON struct {
	Count       int64 `json:"count"`
	AmountCents int64 `json:"amountCents"`
}

type liveCheckJSON struct {
	Name   string  `json:"name"`
	ItemID *string `json:"itemId"` // null: a check of the whole sale
	OK     bool    `json:"ok"`
	Detail string  `json:"detail"`
}

type liveReconciliationJSON struct {
	State          string          `json:"state"`
	AsOf           string          `json:"asOf"`
	Loaded         bool            `json:"loaded"`
	Lost           bool            `json:"lost"`
	RedisCounter   int64           `json:"redisCounter"`
	PostgresMaxSeq int64           `json:"postgresMaxSeq"`
	Checks         []liveCheckJSON `json:"checks"`
	// null: no rebuild pending; else the queued messages the rebuild of a sale Redis lost waits for
	RebuildWaitsFor *uint64 `json:"rebuildWaitsFor"`
}

type liveFunnelJSON struct {
	Requests  int64            `json:"requests"`
	Refused   map[string]int64 `json:"refused"`
	Accepted  int64            `json:"accepted"`
	Written   int64            `json:"written"`
	Paid      int64            `json:"paid"`
	Expired   int64            `json:"expired"`
	Cancelled int64            `json:"cancelled"`
}

type livePointJSON struct {
	T        int64 `json:"t"`
	Accepted int64 `json:"accepted"`
	Refused  int64 `json:"refused"`
}

type liveWriterJSON struct {
	LagSeconds float64 `json:"lagSeconds"`
	QueueDepth *uint64 `json:"queueDepth"`
}

type liveJSON struct {
	Sale           liveSaleJSON           `json:"sale"`
	Items          []liveItemJSON         `json:"items"`
	Money          liveMoneyJSON          `json:"money"`
	Reconciliation liveReconciliationJSON `json:"reconciliation"`
	Funnel         liveFunnelJSON         `json:"funnel"`
	Series         []livePointJSON        `json:"series"`
	Writer         liveWriterJSON         `json:"writer"`
	Reminders      int64                  `json:"reminders"` // shoppers who asked to be reminded of the start (an estimate)
	Draw           *liveDrawJSON          `json:"draw"`      // null: the sale has no fair start
	AsOf           string                 `json:"asOf"`
}

// AdminLive handles the "GET /api/admin/sales/:saleId/live" route: the merchant's live view of a
// sale, polled every second by the dashboard.
func (a *API) AdminLive(c *gin.Context) {
	saleID, err := pathID(c, "saleId")
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	v, err := a.Live.Live(c.Request.Context(), caller(c).UserID, saleID)
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	out := liveJSON{
		Sale: liveSaleJSON{SaleID: idString(v.Sale.ID), Name: v.Sale.Name, Status: v.Sale.Status, StartsAt: rfc3339(v.Sale.StartsAt),
			EndsAt: rfc3339(v.Sale.EndsAt), Paused: v.Sale.Paused, LoadedAt: optTimeNano(v.Sale.LoadedAt), FairStartMillis: v.Sale.FairStartMillis},
		Items: make([]liveItemJSON, len(v.Items)),
		Money: liveMoneyJSON{Currency: v.Money.Currency, PaidCents: v.Money.PaidCents, AwaitingPayment: v.Money.Awaiting,
			AwaitingCents: v.Money.AwaitingCents, Refunds: v.Money.Refunds, RefundedCents: v.Money.RefundedCents,
			RefundsPending: v.Money.RefundsPending, Conflicts: liveConflictsJSON{Count: v.Money.Conflicts, AmountCents: v.Money.ConflictCents},
			RefundsFailed: v.Money.RefundsFailed},
		Reconciliation: liveReconciliationJSON{State: v.Reconciliation.State, AsOf: v.Reconciliation.AsOf.UTC().Format(time.RFC3339Nano),
			Loaded: v.Reconciliation.Loaded, Lost: v.Reconciliation.Lost, RedisCounter: v.Reconciliation.RedisCounter,
			PostgresMaxSeq: v.Reconciliation.PostgresMaxSeq, Checks: make([]liveCheckJSON, len(v.Reconciliation.Checks)),
			RebuildWaitsFor: v.Reconciliation.RebuildWaitsFor},
		Funnel: liveFunnelJSON{Requests: v.Funnel.Requests, Refused: v.Funnel.Refused, Accepted: v.Funnel.Accepted,
			Written: v.Funnel.Written, Paid: v.Funnel.Paid, Expired: v.Funnel.Expired, Cancelled: v.Funnel.Cancelled},
		Series:    make([]livePointJSON, len(v.Series)),
		Writer:    liveWriterJSON{LagSeconds: v.Writer.LagSeconds, QueueDepth: v.Writer.QueueDepth},
		Reminders: v.Reminders,
		AsOf:      v.AsOf.UTC().Format(time.RFC3339Nano),
	}
	if d := v.Draw; d != nil {
		out.Draw = &liveDrawJSON{WindowMillis: d.WindowMillis, Entries: d.Entries, Winners: d.Winners, ClosedAt: optTimeNano(d.ClosedAt)}
	}
	for i, it := range v.Items {
		out.Items[i] = liveItemJSON{ItemID: idString(it.ItemID), Name: it.Name, Quantity: it.Quantity, Displayed: it.Displayed,
			Frozen: it.Frozen, InFlight: it.InFlight, Pending: it.Pending, Paid: it.Paid, Expired: it.Expired,
			Cancelled: it.Cancelled, Real: it.Real, SoldOut: it.SoldOut, LoadedAt: optTimeNano(it.LoadedAt)}
		m := v.Money.Items[it.ItemID]
		out.Items[i].PaidCents, out.Items[i].AwaitingPayment, out.Items[i].AwaitingCents = m.PaidCents, m.Awaiting, m.AwaitingCents
		out.Items[i].Refunds, out.Items[i].RefundedCents = m.Refunds, m.RefundedCents
	}
	for i, ch := range v.Reconciliation.Checks {
		out.Reconciliation.Checks[i] = liveCheckJSON{Name: ch.Name, OK: ch.OK, Detail: ch.Detail}
		if ch.ItemID != 0 {
			id := idString(ch.ItemID)
			out.Reconciliation.Checks[i].ItemID = &id
		}
	}
	for i, p := range v.Series {
		out.Series[i] = livePointJSON{T: p.T, Accepted: p.Accepted, Refused: p.Refused}
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, out)
}
