package handlers

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/services/purchase"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/views"
)

// Pages holds the HTML handlers. Every page is the same for every visitor, so a CDN can cache
// it; what belongs to a shopper is fetched by the page's script.
type Pages struct {
	Catalog Catalog
	Log     *slog.Logger
	Now     func() time.Time
	// SecureCookie sets the fs_lang cookie Secure (production).
	SecureCookie bool
	// Reads limits the home and sale pages per client address, before any lookup; nil: no limit.
	Reads ReadLimiter
	// Payments serves the simulated provider's page.
	Payments Payments
	// Past lists the ended sales the home page folds behind a link (/?ended=1); nil: none listed.
	Past PastSales
	// PublicURL is where shoppers reach the shop (FLASHSALE_PUBLIC_URL, "https://shop.example.com"):
	// the address a cached answer names (the calendar file's link, PublicOrigin); "" is each
	// request's own address.
	PublicURL string
}

// PastSales is what the home page needs of the catalog for the ended sales.
type PastSales interface {
	Ended(ctx context.Context, cursor string) ([]shop.Sale, string, error)
}

// render writes a component with an ETag; a matching If-None-Match gets 304. The pages of a
// language (handlers/lang.go) render in it: the ETag names the language too, so a cache never
// takes one language's copy for another's.
func (p *Pages) render(c *gin.Context, status int, cacheControl string, comp templ.Component) {
	p.renderIn(c, status, cacheControl, comp, nil)
}

// renderLocalized renders a shopper page in the language the request asks for.
func (p *Pages) renderLocalized(c *gin.Context, status int, cacheControl string, comp func(views.Locale) templ.Component) {
	loc := p.locale(c)
	p.renderIn(c, status, cacheControl, comp(loc), &loc)
}

func (p *Pages) renderIn(c *gin.Context, status int, cacheControl string, comp templ.Component, loc *views.Locale) {
	ctx := c.Request.Context()
	prefix := ""
	if loc != nil {
		ctx = views.WithLocale(ctx, *loc)
		prefix = string(loc.Lang) + "-"
	}
	var buf bytes.Buffer
	if err := comp.Render(ctx, &buf); err != nil {
		Error(c, p.Log, err)
		return
	}
	sum := sha256.Sum256(buf.Bytes())
	etag := `"` + prefix + hex.EncodeToString(sum[:12]) + `"`
	c.Header("Cache-Control", cacheControl)
	c.Header("ETag", etag)
	if status == http.StatusOK && etagMatches(c.GetHeader("If-None-Match"), etag) {
		c.Status(http.StatusNotModified)
		return
	}
	c.Data(status, "text/html; charset=utf-8", buf.Bytes())
}

func etagMatches(header, etag string) bool {
	for _, part := range strings.Split(header, ",") {
		part = strings.TrimPrefix(strings.TrimSpace(part), "W/")
		if part == etag || part == "*" {
			return true
		}
	}
	return false
}

const publicPage = "public, max-age=5, stale-while-revalidate=30"

// Home handles the "GET /" route: live and upcoming sales.
func (p *Pages) Home(c *gin.Context) {
	if !allowRead(c, p.Reads, p.Log) {
		return
	}
	if c.Query("ended") != "" && p.Past != nil {
		p.endedSales(c)
		return
	}
	// A page of sales by start time; "More sales" links to the next. A cursor this server did
	// not give out (an old or edited link) shows the first page.
	cursor := c.Query("cursor")
	sales, next, err := p.Catalog.Upcoming(c.Request.Context(), cursor)
	if shop.ErrorCode(err) == shop.CodeInvalidInput {
		cursor = ""
		sales, next, err = p.Catalog.Upcoming(c.Request.Context(), "")
	}
	if err != nil {
		Error(c, p.Log, err)
		return
	}
	now := p.Now()
	h := views.Home{Next: next, Paged: cursor != ""}
	for _, s := range sales {
		h.Sales = append(h.Sales, homeCard(s, now))
	}
	// Live sales first, then upcoming ones by start time, ended ones not at all. The listing is
	// by start time, which already puts the live ones first; the stable sort keeps that true
	// whatever order it comes in, and a sale that ended since the listing was read is dropped.
	h.Sales = slices.DeleteFunc(h.Sales, func(s views.SaleCard) bool { return s.Status == "ended" })
	slices.SortStableFunc(h.Sales, func(a, b views.SaleCard) int {
		return cmp.Compare(homeRank(a.Status), homeRank(b.Status))
	})
	p.renderLocalized(c, http.StatusOK, publicPage, func(views.Locale) templ.Component { return views.HomePage(h) })
}

// endedSales handles "GET /?ended=1": the sales that have ended, the latest first, a page at a
// time, folded away from the current ones.
func (p *Pages) endedSales(c *gin.Context) {
	cursor := c.Query("cursor")
	sales, next, err := p.Past.Ended(c.Request.Context(), cursor)
	if shop.ErrorCode(err) == shop.CodeInvalidInput {
		cursor = ""
		sales, next, err = p.Past.Ended(c.Request.Context(), "")
	}
	if err != nil {
		Error(c, p.Log, err)
		return
	}
	now := p.Now()
	h := views.Home{Next: next, Paged: cursor != "", Ended: true}
	for _, s := range sales {
		h.Sales = append(h.Sales, homeCard(s, now))
	}
	p.renderLocalized(c, http.StatusOK, publicPage, func(views.Locale) templ.Component { return views.HomePage(h) })
}

// homeRank orders the cards of the home page: live before upcoming.
func homeRank(status string) int {
	if status == "live" {
		return 0
	}
	return 1
}

// homeCard is one sale of the home page, with its items and prices in the sale's currency.
func homeCard(s shop.Sale, now time.Time) views.SaleCard {
	card := views.SaleCard{ID: idString(s.ID), Name: s.Name, StartsAt: s.StartsAt, EndsAt: s.EndsAt,
		Status: shop.SaleStatus(s.StartsAt, s.EndsAt, now), Currency: s.Currency, Description: s.Description}
	for _, it := range s.Items {
		card.Items = append(card.Items, itemView(it))
	}
	return card
}

// itemView is an item as the pages show it, its picture included (an https address: the
// catalog's validation refuses any other).
func itemView(it shop.Item) views.SaleItem {
	return views.SaleItem{ID: idString(it.ID), Name: it.Name, PriceCents: it.PriceCents, Quantity: it.Quantity, ImageURL: it.ImageURL}
}

func saleView(s shop.Sale) views.Sale {
	v := views.Sale{ID: idString(s.ID), Name: s.Name, StartsAt: s.StartsAt, EndsAt: s.EndsAt, Currency: s.Currency, Description: s.Description,
		FairStartMillis: s.FairStartMillis}
	for _, it := range s.Items {
		v.Items = append(v.Items, itemView(it))
	}
	return v
}

// saleOfPath reads the sale of the path's :saleId for a page about it, once the client's read
// bucket allowed it; it has answered (the 404 page, an error) when it reports false.
func (p *Pages) saleOfPath(c *gin.Context) (shop.Sale, bool) {
	if !allowRead(c, p.Reads, p.Log) {
		return shop.Sale{}, false
	}
	id, err := pathID(c, "saleId")
	if err != nil {
		p.NotFound(c)
		return shop.Sale{}, false
	}
	s, err := p.Catalog.Cached(c.Request.Context(), id)
	if shop.ErrorCode(err) == shop.CodeNotFound {
		p.NotFound(c)
		return shop.Sale{}, false
	}
	if err != nil {
		Error(c, p.Log, err)
		return shop.Sale{}, false
	}
	return s, true
}

// Sale handles the "GET /sales/:saleId" route: the cacheable sale page.
func (p *Pages) Sale(c *gin.Context) {
	s, ok := p.saleOfPath(c)
	if !ok {
		return
	}
	v := saleView(s)
	v.Upcoming = p.Now().Before(s.StartsAt)
	v.FairOver = !p.Now().Before(s.StartsAt.Add(time.Duration(s.FairStartMillis) * time.Millisecond))
	p.renderLocalized(c, http.StatusOK, publicPage, func(views.Locale) templ.Component { return views.SalePage(v) })
}

// Order handles the "GET /orders/:orderId" route: the page polls the order's status.
func (p *Pages) Order(c *gin.Context) {
	id := c.Param("orderId")
	if _, canonical, ok := purchase.ItemOfOrderID(id); ok {
		p.renderLocalized(c, http.StatusOK, "private, no-cache", func(views.Locale) templ.Component { return views.OrderPage(views.Order{ID: canonical}) })
		return
	}
	p.NotFound(c)
}

// MyOrders handles the "GET /orders" route: the signed-in shopper's orders. The page is the same
// for everyone (the script fetches the orders), but it is about one shopper: kept out of shared caches.
func (p *Pages) MyOrders(c *gin.Context) {
	p.renderLocalized(c, http.StatusOK, "private, no-cache", func(views.Locale) templ.Component { return views.MyOrdersPage(views.MyOrders{}) })
}

// Admin handles the "GET /admin" route: the merchant's dashboard.
func (p *Pages) Admin(c *gin.Context) {
	p.renderLocalized(c, http.StatusOK, "no-store", func(views.Locale) templ.Component { return views.AdminPage(views.Admin{}) })
}

// AdminSale handles the "GET /admin/sales/:saleId" route: the live view of one of the merchant's
// sales. The page holds nothing but the id (its script reads the merchant-only API), so it is
// served to anyone, like /admin; an id that is not one is the not-found page.
func (p *Pages) AdminSale(c *gin.Context) {
	id, err := pathID(c, "saleId")
	if err != nil {
		p.NotFound(c)
		return
	}
	p.renderLocalized(c, http.StatusOK, "no-store", func(views.Locale) templ.Component { return views.AdminLivePage(views.AdminSale{ID: idString(id)}) })
}

// AdminSaleOrders handles the "GET /admin/sales/:saleId/orders" route: the orders of one of the
// merchant's sales, loaded by the page's script.
func (p *Pages) AdminSaleOrders(c *gin.Context) {
	id, err := pathID(c, "saleId")
	if err != nil {
		p.NotFound(c)
		return
	}
	p.renderLocalized(c, http.StatusOK, "no-store", func(views.Locale) templ.Component { return views.AdminOrdersPage(views.AdminSale{ID: idString(id)}) })
}

// NotFound answers unknown pages with a page, and unknown API routes with the contract's JSON.
func (p *Pages) NotFound(c *gin.Context) {
	if strings.HasPrefix(c.Request.URL.Path, "/api/") {
		Abort(c, shop.CodeNotFound, "no such route: "+c.Request.Method+" "+c.Request.URL.Path)
		return
	}
	p.renderLocalized(c, http.StatusNotFound, "no-store", func(l views.Locale) templ.Component {
		return views.NotFoundPage(views.MessagesOf(l.Lang).NothingAtAddress)
	})
}
