package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/flashsale/flashsale/services/internal/cursor"
	"github.com/flashsale/flashsale/services/internal/ttlcache"
	"github.com/flashsale/flashsale/services/pipeline"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// NewSale is what a merchant asks to create.
type NewSale struct {
	Name                 string
	Description          string // optional
	StartsAt             time.Time
	EndsAt               time.Time
	Items                []NewItem
	Limits               *shop.RateLimits // nil: the defaults
	PaymentWindowSeconds *int             // nil: the default payment window
	PurchaseLimit        string           // "" : per-sale
	Currency             string           // "" : CNY; one of shop.Currencies
	StockShards          *int             // nil: the default (FLASHSALE_STOCK_SHARDS); 1..64, fixed once created
	FairStartMillis      *int             // nil or 0: no draw; at most shop.MaxFairStartMillis
}

// NewItem is one product of a NewSale.
type NewItem struct {
	Name       string
	PriceCents int64
	Quantity   int64
	ImageURL   string // optional, https only
}

// ItemStock is the displayed stock of one item.
type ItemStock struct {
	ItemID   int64
	Stock    int64
	Quantity int // the units the sale offers of it (the merchant may change it while it runs)
}

// DisplayedStock is a snapshot of a sale's stock as shoppers see it, with the state of the sale
// the open sale pages follow (paused, its window, which the merchant may move or end early):
// the page itself is cached, this snapshot is what tells it of a change within two seconds.
type DisplayedStock struct {
	SaleID   int64
	Items    []ItemStock
	AsOf     time.Time
	StartsAt time.Time
	EndsAt   time.Time
	Paused   bool
}

// AdminItemStock is the merchant's view of one item's three kinds of stock.
type AdminItemStock struct {
	ItemID     int64
	Name       string
	Quantity   int64
	Displayed  int64 // Redis's remaining units (-1 when Redis does not know the item)
	Frozen     int64 // reserved, not paid: in flight + queued + PENDING
	Real       int64 // quantity - paid
	Paid       int64
	Pending    int64
	Expired    int64
	Cancelled  int64
	InFlight   int64 // reserved in Redis, not yet in Postgres
	SoldOut    bool
	LoadedAt   *time.Time // when Redis got the sale's stock; nil if not loaded
	Reconciled bool       // every invariant of the reconciliation holds
	Mismatch   string     // the violated checks with their numbers, when not reconciled
}

// Sales creates sales, reads them and keeps the catalog the purchase path checks against.
type Sales struct {
	cursors   cursor.Signer
	db        DB
	stock     Stock
	loader    Loader
	reconcile Reconciler
	log       *slog.Logger
	now       func() time.Time
	payWindow time.Duration // default payment window of a new sale
	warmAhead time.Duration // a sale's stock goes into Redis this long before its start
	shards    int           // the stock shards of a sale created without its own count

	items      *ttlcache.Cache[int64, shop.ItemInfo]
	salesCache *ttlcache.Cache[int64, cachedSale]
	stockCache *ttlcache.Cache[int64, DisplayedStock]
	listings   *ttlcache.Cache[string, listing] // pages of Upcoming, by cursor

	queue     pipeline.Backlogger              // the queue whose depth the live view shows, and rebuilds wait for
	liveCache *ttlcache.Cache[int64, LiveView] // the merchant's live view, per sale (services/catalog/live.go)
	liveSeen  liveState

	pausedCache *ttlcache.Cache[int64, bool] // Redis's paused flag per sale, for the token path (pausedTTL)
	bounds      *idBounds                    // the highest sale and item ids: a made-up id costs no query of its own
	notices     shop.Notices                 // where changes are announced to the other instances
	prices      PriceFloor                   // the payment provider's minimum charge per currency
}

// listing is one page of Upcoming as the listing cache shares it (callers must not modify it).
type listing struct {
	sales []shop.Sale
	next  string
}

// listingTTL is how long every request of this instance shares one read of the sales listing
// (the home page and GET /api/flash-sales): one Postgres query a second at most per page.
const listingTTL = time.Second

// cachedSale is a sale as the cache remembers it: NOT_FOUND is remembered too.
type cachedSale struct {
	sale shop.Sale
	err  error
}

// catalogTTL is how long the purchase path trusts what it read of a sale or an item.
const catalogTTL = 5 * time.Second

// absentTTL is how long an id found to be no sale (or no item) is answered "not found" without a
// query. Short, because such an id at or below the highest one (idBounds) may be a sale whose
// creation had not committed yet: the instance that creates a sale forgets it at once, the
// others when its notice arrives (services/catalog/salenotice.go), and at the latest after this.
const absentTTL = time.Second

// Config are the catalog's tunables.
type Config struct {
	PayWindow   time.Duration // the payment window of a sale created without its own
	WarmAhead   time.Duration // a sale's stock goes into Redis this long before its start, at creation or edit when the start is that close already, else by the keeper (0: shop.DefaultWarmAhead)
	StockShards int           // the Redis stock shards of a sale created without its own count (0: 1)
	// CursorSecret signs the listings' cursors (services/internal/cursor): the same on every
	// instance behind one address
	CursorSecret []byte
}

// Deps are what the catalog works with. Queue and Notices may be left out: then no rebuild of a
// lost sale goes ahead (its queue cannot be judged drained) and changes stay on this instance.
type Deps struct {
	DB        DB
	Stock     Stock
	Loader    Loader
	Reconcile Reconciler
	Queue     pipeline.Backlogger // the queue whose depth the live view shows, and rebuilds wait for
	Notices   shop.Notices        // tells the other instances when a merchant changes a sale
	Prices    PriceFloor          // the payment provider's minimum charge (nil: any positive price)
	Log       *slog.Logger
	Now       func() time.Time
}

// NewSales returns the catalog, listening to the other instances' sale-change notices.
func NewSales(cfg Config, d Deps) (*Sales, error) {
	if cfg.WarmAhead == 0 {
		cfg.WarmAhead = shop.DefaultWarmAhead
	}
	if d.Queue == nil {
		d.Queue = pipeline.NoQueue{}
	}
	if d.Notices == nil {
		d.Notices = shop.NoNotices{}
	}
	if d.Prices == nil {
		d.Prices = anyPrice{}
	}
	now := d.Now
	s := &Sales{cursors: cursor.New(cfg.CursorSecret), db: d.DB, stock: d.Stock, loader: d.Loader, reconcile: d.Reconcile, payWindow: cfg.PayWindow,
		warmAhead: cfg.WarmAhead, shards: cfg.StockShards, queue: d.Queue, notices: d.Notices, prices: d.Prices, log: d.Log, now: now,
		items: ttlcache.New[int64](ttlcache.Config[shop.ItemInfo]{TTL: catalogTTL, Max: 100_000, MaxAbsent: 10_000,
			Absent: func(i shop.ItemInfo) bool { return !i.Found }, AbsentTTL: absentTTL, StaleFor: 24 * time.Hour}, now),
		salesCache: ttlcache.New[int64](ttlcache.Config[cachedSale]{TTL: catalogTTL, Max: 10_000, MaxAbsent: 10_000,
			Absent: func(c cachedSale) bool { return c.err != nil }, AbsentTTL: absentTTL, StaleFor: 24 * time.Hour}, now),
		// The displayed stock is never served stale: an error says Redis is down.
		stockCache:  ttlcache.New[int64](ttlcache.Config[DisplayedStock]{TTL: time.Second, Max: 10_000}, now),
		listings:    ttlcache.New[string](ttlcache.Config[listing]{TTL: listingTTL, Max: 256, StaleFor: time.Minute}, now),
		liveCache:   ttlcache.New[int64](ttlcache.Config[LiveView]{TTL: liveTTL, Max: 100}, now),
		pausedCache: ttlcache.New[int64](ttlcache.Config[bool]{TTL: pausedTTL, Max: 10_000}, now),
		bounds:      newIDBounds(func(ctx context.Context) (int64, int64, error) { return d.DB.HighestIDs(ctx) }),
		liveSeen:    liveState{counter: map[int64]string{}}}
	if err := s.hearChanges(); err != nil {
		return nil, err
	}
	return s, nil
}

// WarmAhead tells how long before its start a sale's stock is loaded into Redis.
func (s *Sales) WarmAhead() time.Duration { return s.warmAhead }

// input is the new sale as the validation reads it (validate.go): "" for the currency and the
// limit means the default, so they are not checked.
func (in NewSale) input() saleInput {
	// The name is checked apart, first (create); the rest together.
	out := saleInput{Description: &in.Description, PaymentWindowSeconds: in.PaymentWindowSeconds,
		StockShards: in.StockShards, FairStartMillis: in.FairStartMillis, Limits: in.Limits, Items: make([]itemInput, len(in.Items))}
	if in.PurchaseLimit != "" {
		out.PurchaseLimit = &in.PurchaseLimit
	}
	if in.Currency != "" {
		out.Currency = &in.Currency
	}
	for i := range in.Items {
		it := &in.Items[i]
		out.Items[i] = itemInput{Name: &it.Name, PriceCents: &it.PriceCents, Quantity: &it.Quantity, ImageURL: &it.ImageURL}
	}
	return out
}

// checkNew checks what only a new sale must have: a window still to come and between one and
// MaxItemsPerSale items; then every field by the one validation of a sale.
func checkNew(in NewSale, now time.Time) error {
	switch {
	case in.StartsAt.IsZero() || in.EndsAt.IsZero():
		return shop.Errorf(shop.CodeInvalidInput, "startsAt and endsAt are required (RFC 3339)")
	case in.EndsAt.After(in.StartsAt) && !in.EndsAt.After(now):
		return shop.Errorf(shop.CodeInvalidInput, "endsAt must be in the future")
	}
	if err := checkWindow(in.StartsAt, in.EndsAt); err != nil {
		return err
	}
	switch {
	case len(in.Items) == 0:
		return shop.Errorf(shop.CodeInvalidInput, "a sale needs at least one item")
	case len(in.Items) > shop.MaxItemsPerSale:
		return shop.Errorf(shop.CodeInvalidInput, "a sale has at most %d items", shop.MaxItemsPerSale)
	}
	return nil
}

// newSale is a new, valid sale as the merchant asked for it.
func (s *Sales) newSale(merchantID int64, in NewSale) shop.Sale {
	sale := shop.Sale{MerchantID: merchantID, Name: strings.TrimSpace(in.Name), StartsAt: in.StartsAt.UTC(), EndsAt: in.EndsAt.UTC(),
		PaymentWindowSeconds: int(s.payWindow / time.Second), PurchaseLimit: shop.LimitPerSale, Currency: shop.Currencies[0].Code,
		Description: strings.TrimSpace(in.Description), StockShards: max(s.shards, 1)}
	if w := in.PaymentWindowSeconds; w != nil {
		sale.PaymentWindowSeconds = *w
	}
	if in.Currency != "" {
		sale.Currency = in.Currency
	}
	if in.PurchaseLimit != "" {
		sale.PurchaseLimit = in.PurchaseLimit
	}
	if k := in.StockShards; k != nil {
		sale.StockShards = *k
	}
	if f := in.FairStartMillis; f != nil {
		sale.FairStartMillis = *f
	}
	if l := in.Limits; l != nil {
		own := *l
		sale.Limits = &own
	}
	for _, it := range in.Items {
		sale.Items = append(sale.Items, shop.Item{Name: strings.TrimSpace(it.Name), PriceCents: it.PriceCents, Quantity: int(it.Quantity),
			ImageURL: strings.TrimSpace(it.ImageURL)})
	}
	return sale
}

// create validates and stores a new sale of merchantID, then loads its stock into Redis.
func (s *Sales) create(ctx context.Context, merchantID int64, in NewSale) (shop.Sale, error) {
	now := s.now()
	if err := (saleInput{Name: &in.Name}).validate(); err != nil { // the name first, as ever
		return shop.Sale{}, err
	}
	if err := checkNew(in, now); err != nil {
		return shop.Sale{}, err
	}
	if err := in.input().validate(); err != nil {
		return shop.Sale{}, err
	}
	sale := s.newSale(merchantID, in)
	if err := checkPayable(shop.Sale{}, sale, s.prices); err != nil {
		return shop.Sale{}, err
	}
	sale, err := s.db.CreateSale(ctx, sale)
	if err != nil {
		return shop.Sale{}, shop.Unavailable(err)
	}
	s.stock.RememberShards(sale.ID, sale.StockShards)
	for _, it := range sale.Items {
		if it.ID > math.MaxUint32 {
			return shop.Sale{}, &shop.Error{Code: shop.CodeInternal, Message: "item ids are exhausted", Err: fmt.Errorf("item id %d over 32 bits", it.ID)}
		}
	}
	// The new ids are known at once, here and on every other instance: an id someone tried a
	// moment ago, remembered as "not found", is forgotten (see absentTTL).
	for _, it := range sale.Items {
		s.bounds.raise(sale.ID, it.ID)
	}
	s.forget(sale)
	s.announce(sale)
	// Its stock goes into Redis WarmAhead before the start: now, if the start is that close (the
	// keeper retries if Redis is down now; until then purchases answer 503), else the keeper
	// loads it when the time comes.
	if shop.DueForWarmUp(sale.StartsAt, now, s.warmAhead) {
		if _, err := s.loader.LoadFirst(ctx, sale.ID); err != nil {
			s.log.Warn("sale not loaded into redis at creation; the keeper will retry", "sale", sale.ID, "err", err)
		}
	}
	return sale, nil
}

// getRow returns a sale with its items.
func (s *Sales) getRow(ctx context.Context, saleID int64) (shop.Sale, error) {
	sale, err := s.db.SaleByID(ctx, saleID)
	if errors.Is(err, store.ErrNotFound) {
		return shop.Sale{}, shop.Errorf(shop.CodeNotFound, "no sale %d", saleID)
	}
	if err != nil {
		return shop.Sale{}, shop.Unavailable(err)
	}
	return sale, nil
}

// CachedRow returns a sale from the in-process catalog cache (a few seconds old at most; unknown
// ids are remembered too). An edit, pause or resume drops this instance's entry at once; other
// instances see it within catalogTTL (the reserve script and the token issuer read pause and the
// sale's times from Redis, so they never wait for that).
func (s *Sales) CachedRow(ctx context.Context, saleID int64) (shop.Sale, error) {
	if c, ok := s.salesCache.Fresh(saleID); ok {
		return c.sale, c.err // the crowd's case: no load built, no bound read
	}
	if err := s.known(ctx, saleID); err != nil {
		return shop.Sale{}, err
	}
	c, err := s.salesCache.Get(ctx, saleID, func(ctx context.Context) (cachedSale, error) {
		sale, err := s.getRow(ctx, saleID)
		if err != nil && shop.ErrorCode(err) != shop.CodeNotFound {
			return cachedSale{}, err
		}
		if err == nil {
			s.stock.RememberShards(sale.ID, sale.StockShards)
		}
		return cachedSale{sale: sale, err: err}, nil
	})
	if err != nil {
		return shop.Sale{}, ttlcache.OrUnavailable(err)
	}
	return c.sale, c.err
}

// known answers NOT_FOUND, without a query, for a sale id above every sale Postgres held when
// the call began (idBounds); nil for any other, which the caller then looks up.
func (s *Sales) known(ctx context.Context, saleID int64) error {
	switch above, err := s.bounds.aboveSale(ctx, saleID); {
	case err != nil:
		return shop.Unavailable(err)
	case above:
		return shop.Errorf(shop.CodeNotFound, "no sale %d", saleID)
	}
	return nil
}

// SalesPage is how many sales one page of the listing holds.
const SalesPage = 50

// Upcoming lists the live and upcoming sales by start time, a page after cursor ("" for the
// first); next is "" on the last page.
func (s *Sales) Upcoming(ctx context.Context, cursor string) ([]shop.Sale, string, error) {
	return s.listPage(ctx, "", cursor, SalesPage, s.db.SalesEndingAfter)
}

// EndedPage is how many ended sales one page of their listing holds.
const EndedPage = 20

// Ended lists the sales that have ended, the latest end first, a page after cursor ("" for the
// first); next is "" on the last page. The home page folds them behind a link.
func (s *Sales) Ended(ctx context.Context, cursor string) ([]shop.Sale, string, error) {
	return s.listPage(ctx, "ended:", cursor, EndedPage, s.db.SalesEndedBy)
}

// listPage reads one page of a listing of sales (read, from now, after cursor): every request of
// this instance shares one read of a page a second, keyed by the listing and the cursor.
func (s *Sales) listPage(ctx context.Context, listingKey, cursor string, size int,
	read func(ctx context.Context, t time.Time, after *shop.SaleCursor, limit int) ([]shop.Sale, *shop.SaleCursor, error)) ([]shop.Sale, string, error) {
	after, err := s.cursors.ParseSale(cursor)
	if err != nil {
		return nil, "", err
	}
	l, err := s.listings.Get(ctx, listingKey+cursor, func(ctx context.Context) (listing, error) {
		out, next, err := read(ctx, s.now(), after, size)
		if err != nil {
			return listing{}, err
		}
		if next == nil {
			return listing{sales: out}, nil
		}
		return listing{sales: out, next: s.cursors.Sale(*next)}, nil
	})
	if err != nil {
		return nil, "", shop.Unavailable(err)
	}
	return l.sales, l.next, nil
}

// OfMerchant lists a merchant's sales.
func (s *Sales) OfMerchant(ctx context.Context, merchantID int64) ([]shop.Sale, error) {
	out, err := s.db.SalesByMerchant(ctx, merchantID, 200)
	if err != nil {
		return nil, shop.Unavailable(err)
	}
	return out, nil
}

// Item returns what the purchase path needs about an item, from the in-process catalog cache.
func (s *Sales) Item(ctx context.Context, itemID int64) (shop.ItemInfo, error) {
	if info, ok := s.items.Fresh(itemID); ok {
		return info, nil // every purchase's case: no load built, no bound read
	}
	switch above, err := s.bounds.aboveItem(ctx, itemID); {
	case err != nil:
		return shop.ItemInfo{}, shop.Unavailable(err)
	case above:
		return shop.ItemInfo{ItemID: itemID}, nil // no such item: no query, nothing cached
	}
	info, err := s.items.Get(ctx, itemID, func(ctx context.Context) (shop.ItemInfo, error) {
		it, err := s.db.ItemByID(ctx, itemID)
		if errors.Is(err, store.ErrNotFound) {
			return shop.ItemInfo{ItemID: itemID}, nil
		}
		if err != nil {
			return shop.ItemInfo{}, err
		}
		sale, err := s.db.SaleByID(ctx, it.SaleID)
		if err != nil {
			return shop.ItemInfo{}, err
		}
		// the purchase path then knows the sale's stock shards without a query of its own
		s.stock.RememberShards(sale.ID, sale.StockShards)
		return shop.ItemInfo{ItemID: itemID, SaleID: sale.ID, StartsAt: sale.StartsAt, EndsAt: sale.EndsAt, Limits: sale.RateLimits(),
			Limit: sale.PurchaseLimit, Found: true, FairStartMillis: sale.FairStartMillis}, nil
	})
	if err != nil {
		return shop.ItemInfo{}, shop.Unavailable(err)
	}
	return info, nil
}

// Displayed returns the sale's stock as shoppers see it: a Redis snapshot at most a second old,
// shared by every request of this instance.
func (s *Sales) Displayed(ctx context.Context, saleID int64) (DisplayedStock, error) {
	if err := s.known(ctx, saleID); err != nil {
		return DisplayedStock{}, err
	}
	d, err := s.stockCache.Get(ctx, saleID, func(ctx context.Context) (DisplayedStock, error) {
		return s.displayed(ctx, saleID)
	})
	return d, ttlcache.OrUnavailable(err)
}

// displayed reads a sale's stock from Redis.
func (s *Sales) displayed(ctx context.Context, saleID int64) (DisplayedStock, error) {
	now := s.now()
	sale, err := s.Cached(ctx, saleID) // a fire drill's copy is not found
	if err != nil {
		return DisplayedStock{}, err
	}
	ids := make([]int64, len(sale.Items))
	for i, it := range sale.Items {
		ids[i] = it.ID
	}
	levels, err := s.stock.Levels(ctx, saleID, ids)
	if err != nil {
		return DisplayedStock{}, shop.Unavailable(err)
	}
	d := DisplayedStock{SaleID: saleID, AsOf: now, StartsAt: sale.StartsAt, EndsAt: sale.EndsAt, Paused: sale.Paused}
	for i, it := range sale.Items {
		lv := levels[i]
		if lv < 0 { // not warmed: show the quantity; purchases answer 503 until it is
			lv = int64(it.Quantity)
		}
		d.Items = append(d.Items, ItemStock{ItemID: it.ID, Stock: lv, Quantity: it.Quantity})
	}
	return d, nil
}

// AdminStock returns the three kinds of stock of every item of a merchant's sale, with the
// reconciliation's verdict and numbers.
func (s *Sales) AdminStock(ctx context.Context, merchantID, saleID int64) ([]AdminItemStock, error) {
	if _, err := s.ownSale(ctx, merchantID, saleID); err != nil {
		return nil, err
	}
	rep, err := s.reconcile.Report(ctx, saleID)
	if err != nil {
		return nil, shop.Unavailable(err)
	}
	return adminItems(rep), nil
}

// adminItems is the merchant's view of each item of a reconciliation report.
func adminItems(rep pipeline.SaleReport) []AdminItemStock {
	// A sale-wide check (buyers, counter, one per shopper in the sale) marks every item.
	saleOK, saleViolations := pipeline.AllOK(rep.Checks), pipeline.Violations(rep.Checks)
	out := make([]AdminItemStock, len(rep.Items))
	for i, it := range rep.Items {
		a := AdminItemStock{
			ItemID: it.ItemID, Name: it.Name, Quantity: it.Quantity, Displayed: it.RedisStock,
			Paid: it.Paid, Pending: it.Pending, Expired: it.Expired, Cancelled: it.Cancelled, InFlight: it.InFlight,
			Real: it.Quantity - it.Paid, Frozen: it.Pending + it.InFlight,
			SoldOut:    it.RedisStock == 0 || (it.RedisStock < 0 && it.Live >= it.Quantity),
			Reconciled: it.OK() && saleOK, Mismatch: strings.Trim(it.Violations()+"; "+saleViolations, "; "),
		}
		if rep.Loaded {
			t := rep.LoadedAt
			a.LoadedAt = &t
		}
		out[i] = a
	}
	return out
}

// Describe fills in an order view's item and sale from the catalog cache.
func (s *Sales) Describe(ctx context.Context, v *shop.OrderView) {
	sale, err := s.CachedRow(ctx, v.SaleID)
	if err != nil {
		return
	}
	v.SaleName, v.Currency = sale.Name, sale.Currency
	for _, it := range sale.Items {
		if it.ID == v.ItemID {
			v.ItemName, v.PriceCents = it.Name, it.PriceCents
		}
	}
}
