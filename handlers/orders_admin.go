package handlers

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/services/catalog"
	"github.com/flashsale/flashsale/shop"
)

// SaleOrders is what the API needs for a merchant's orders of a sale.
type SaleOrders interface {
	SaleOrders(ctx context.Context, merchantID, saleID int64, f catalog.SaleOrderFilter, cursor string) ([]catalog.AdminOrder, string, error)
	CheckSaleOwner(ctx context.Context, merchantID, saleID int64) error
	ExportOrders(ctx context.Context, saleID int64, fn func([]catalog.AdminOrder) error) error
}

type adminOrderJSON struct {
	OrderID   string  `json:"orderId"`
	ItemID    string  `json:"itemId"`
	UserID    string  `json:"userId"`
	Username  *string `json:"username"` // null when this shop has no account of userId
	Status    string  `json:"status"`
	CreatedAt string  `json:"createdAt"`
	PayBy     *string `json:"payBy"`
	PaidAt    *string `json:"paidAt"`
	// the payment: none, awaiting (the provider's confirmation), paid, or refunded (it came after the
	// order had expired or been cancelled; refunded says whether the refund is made)
	PaymentStatus string  `json:"paymentStatus"`
	PaidCents     *int64  `json:"paidCents"`
	Refunded      bool    `json:"refunded"`
	PaymentID     *string `json:"paymentId"`
	RefundID      *string `json:"refundId"`
	RefundFailure *string `json:"refundFailure"` // why the provider refused the refund for good; null: not refused
}

// optString is s, or null when it is empty.
func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := rfc3339(*t)
	return &s
}

// optTimeNano is optTime to the nanosecond (when Redis took a sale's stock, say).
func optTimeNano(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format(time.RFC3339Nano)
	return &s
}

// AdminOrders handles the "GET /api/admin/sales/:saleId/orders" route: a page of the sale's
// orders, newest first, filtered by ?status=, ?userId= and ?username=.
func (a *API) AdminOrders(c *gin.Context) {
	saleID, err := pathID(c, "saleId")
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	cursor := c.Query("cursor") // bounded and checked by the service's decoder
	var userID int64
	if v := c.Query("userId"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 || v[0] == '+' {
			Error(c, a.Log, shop.Errorf(shop.CodeInvalidInput, "userId must be a user id (a positive integer)"))
			return
		}
		userID = id
	}
	username := c.Query("username")
	if username != "" {
		if err := shop.CheckUsername(username); err != nil {
			Error(c, a.Log, err)
			return
		}
	}
	f := catalog.SaleOrderFilter{Status: c.Query("status"), UserID: userID, Username: username}
	list, next, err := a.Orders.SaleOrders(c.Request.Context(), caller(c).UserID, saleID, f, cursor)
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	out := make([]adminOrderJSON, len(list))
	for i, o := range list {
		out[i] = adminOrderJSON{OrderID: o.OrderID, ItemID: idString(o.ItemID), UserID: idString(o.UserID), Username: optString(o.Username), Status: o.Status,
			CreatedAt: rfc3339(o.CreatedAt), PayBy: optTime(o.PayBy), PaidAt: optTime(o.PaidAt),
			PaymentStatus: o.PaymentStatus, PaidCents: o.PaidCents, Refunded: o.Refunded(), PaymentID: o.PaymentID, RefundID: o.RefundID,
			RefundFailure: o.RefundFailure}
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"orders": out, "next": next})
}

// csvHeader is the first row of the export. Columns are only ever added at the end, so a
// reader that takes them by position keeps working.
var csvHeader = []string{"orderId", "itemId", "itemName", "userId", "status", "priceCents", "currency", "createdAt", "payBy", "paidAt", "username",
	"paymentStatus", "paidCents", "paymentId", "refundId"}

// csvSafe defuses CSV formula injection: a spreadsheet runs a cell starting with = + - @ (or a
// tab or carriage return before one) as a formula, so such a field gets a leading apostrophe.
func csvSafe(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}

func csvCents(c *int64) string {
	if c == nil {
		return ""
	}
	return strconv.FormatInt(*c, 10)
}

func csvOpt(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func csvTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return rfc3339(*t)
}

// csvChunkWindow is how long each chunk of the CSV export has to reach the client. The server's
// WriteTimeout (30 s) is a deadline for the whole answer, which the export of a big sale, or to a
// slow client, outlives: the export moves the deadline to now + this before the header and before
// every chunk. A client that takes no chunk for this long is cut off; one that keeps reading gets
// every row. (The ReadTimeout does not matter here: net/http lifts the read deadline once the
// request is read.)
const csvChunkWindow = 30 * time.Second

// AdminOrdersCSV handles the "GET /api/admin/sales/:saleId/orders.csv" route: every order of the
// sale, streamed. Postgres is read ExportChunk orders at a time and each chunk is written and
// flushed to the client before the next is read, so the sale's orders never sit in memory. An
// error after the first bytes can only cut the download short (the status is sent); it is
// logged, and the file then lacks its last rows rather than claiming to be whole.
func (a *API) AdminOrdersCSV(c *gin.Context) {
	saleID, ok := a.exportableSale(c)
	if !ok {
		return
	}
	e := newCSVExport(c, saleID)
	err := a.Orders.ExportOrders(c.Request.Context(), saleID, e.writeChunk)
	a.endCSVExport(e, err)
}

// exportableSale is the sale of the path, when the caller owns it; otherwise it answers the
// error and is not ok.
func (a *API) exportableSale(c *gin.Context) (int64, bool) {
	saleID, err := pathID(c, "saleId")
	if err != nil {
		Error(c, a.Log, err)
		return 0, false
	}
	if err := a.Orders.CheckSaleOwner(c.Request.Context(), caller(c).UserID, saleID); err != nil {
		Error(c, a.Log, err)
		return 0, false
	}
	return saleID, true
}

// csvExport writes one sale's orders as CSV to the client: the status and header row with the
// first chunk (or at the end, for a sale without orders), then each chunk, flushed.
type csvExport struct {
	c       *gin.Context
	saleID  int64
	w       *csv.Writer
	rc      *http.ResponseController
	row     []string
	started bool // the status and header row are sent
}

func newCSVExport(c *gin.Context, saleID int64) *csvExport {
	return &csvExport{c: c, saleID: saleID, w: csv.NewWriter(c.Writer), rc: http.NewResponseController(c.Writer),
		row: make([]string, len(csvHeader))}
}

// extend gives the next chunk its window (see csvChunkWindow). A writer without deadlines (a
// test's recorder) answers ErrNotSupported: nothing to move there.
func (e *csvExport) extend() { _ = e.rc.SetWriteDeadline(time.Now().Add(csvChunkWindow)) }

// start sends the 200 with the file's headers, and the header row.
func (e *csvExport) start() {
	e.extend()
	e.started = true
	h := e.c.Writer.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="sale-%d-orders.csv"`, e.saleID))
	h.Set("Cache-Control", "no-store")
	e.c.Status(http.StatusOK)
	_ = e.w.Write(csvHeader)
}

// writeChunk writes a chunk of orders, one row each, and flushes them to the client.
func (e *csvExport) writeChunk(orders []catalog.AdminOrder) error {
	if !e.started {
		e.start()
	}
	e.extend()
	row := e.row
	for _, o := range orders {
		row[0], row[1], row[2], row[3], row[4] = o.OrderID, idString(o.ItemID), csvSafe(o.ItemName), idString(o.UserID), o.Status
		row[5], row[6], row[7] = strconv.FormatInt(o.PriceCents, 10), csvSafe(o.Currency), rfc3339(o.CreatedAt)
		row[8], row[9], row[10] = csvTime(o.PayBy), csvTime(o.PaidAt), csvSafe(o.Username)
		row[11], row[12], row[13], row[14] = o.PaymentStatus, csvCents(o.PaidCents), csvSafe(csvOpt(o.PaymentID)), csvSafe(csvOpt(o.RefundID))
		if err := e.w.Write(row); err != nil {
			return err
		}
	}
	e.w.Flush()
	if err := e.w.Error(); err != nil {
		return err // the client went away
	}
	e.c.Writer.Flush()
	return nil
}

// endCSVExport ends the export as err says: an error answer when nothing was sent yet, a broken
// download when rows were, else the rest of the file.
func (a *API) endCSVExport(e *csvExport, err error) {
	switch {
	case err != nil && !e.started:
		Error(e.c, a.Log, err) // nothing sent yet: an honest error answer
	case err != nil:
		// Rows were sent with a 200: abort the connection so the client sees a broken
		// download, never a file that looks whole.
		a.Log.Warn("orders export cut short", "sale", e.saleID, "err", err)
		panic(http.ErrAbortHandler)
	default:
		if !e.started {
			e.start() // a sale without orders: the header row alone
		}
		e.w.Flush()
		e.c.Writer.Flush()
	}
}

// setQueueRetryAfter tells the poller of a QUEUED order when to ask again (1–5 s, from its place
// in the queue); other answers carry no Retry-After.
func setQueueRetryAfter(c *gin.Context, v shop.OrderView) {
	if v.Queue == nil {
		return
	}
	c.Header("Retry-After", strconv.Itoa(int(v.Queue.RetryAfter/time.Second)))
}
