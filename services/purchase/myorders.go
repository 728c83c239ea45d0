package purchase

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/flashsale/flashsale/services/internal/ttlcache"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// "My orders" and QUEUED orders. An acknowledged order is in Postgres only once the writer has
// written it, which during a backlog takes minutes; until then Redis knows it: the shopper's
// entry in the sale's buyers hash names the order, and the order's in-flight entry says it is
// not written yet. The first page of "my orders" looks those up for the sales that can hold one,
// in one pipelined round trip (one read-only script per sale, on the shard the shopper is pinned
// to), and lists each order in flight that Postgres's page does not hold as QUEUED.

// queuedHorizon is how long after its end a sale is still looked at for QUEUED orders: the
// window of the keeper's orphan recovery and reconciliation.
const queuedHorizon = time.Hour

// openSalesTTL is how long every "my orders" request of this instance shares one read of the
// sales that can hold a QUEUED order: one Postgres query a second at most, whatever the polls.
const openSalesTTL = time.Second

// openStartSlack lists a sale that far ahead of its start already: a reservation is made by
// Redis's clock, which may be ahead of this instance's.
const openStartSlack = time.Minute

// openSale is what the QUEUED lookup needs of a sale that may hold reservations not yet written.
type openSale struct {
	id       int64
	name     string
	currency string
	perItem  bool
	shards   int
	items    []openItem
}

type openItem struct {
	id         int64
	name       string
	priceCents int64
}

// queuedOrder is a QUEUED order with its reservation time, the key "my orders" sorts by.
type queuedOrder struct {
	v  shop.OrderView
	at time.Time
}

// myOrdersState is what "my orders" keeps between calls.
type myOrdersState struct {
	open  *ttlcache.Cache[int64, []openSale] // keyed by the highest sale id known when read
	warns throttle                           // the warnings about a failed lookup
}

func newMyOrdersState(now func() time.Time) *myOrdersState {
	return &myOrdersState{open: ttlcache.New[int64](ttlcache.Config[[]openSale]{TTL: openSalesTTL, Max: 2, StaleFor: time.Minute}, now)}
}

// openSales returns the sales that may hold a QUEUED order: started (or about to) and not ended
// over queuedHorizon ago, read at most once a second by this instance. The read is keyed by the
// highest sale id this instance knows, so a sale created here (or bought from here: its item
// lookup raises the bound) is listed at once; one created on another instance within a second.
func (p *Purchases) openSales(ctx context.Context) ([]openSale, error) {
	key := p.sales.HighestSaleID()
	return p.mine.open.Get(ctx, key, func(ctx context.Context) ([]openSale, error) {
		now := p.now()
		rows, err := p.db.SalesOpenSince(ctx, now.Add(-queuedHorizon-openSalesTTL), now.Add(openStartSlack))
		if err != nil {
			return nil, err
		}
		out := make([]openSale, len(rows))
		for i, r := range rows {
			s := openSale{id: r.ID, name: r.Name, currency: r.Currency, perItem: r.PurchaseLimit == shop.LimitPerItem,
				shards: max(r.StockShards, 1), items: make([]openItem, len(r.Items))}
			for j, it := range r.Items {
				s.items[j] = openItem{id: it.ID, name: it.Name, priceCents: it.PriceCents}
			}
			out[i] = s
		}
		return out, nil
	})
}

// queuedOrders returns the shopper's orders that Redis holds in flight (of one sale when
// saleID > 0), newest first. It never fails the listing: a sale whose Redis does not answer (or
// the sales' read failing) leaves its QUEUED orders out, with a warning (at most one every ten
// seconds), and Postgres's orders are listed as always.
func (p *Purchases) queuedOrders(ctx context.Context, userID, saleID int64) []queuedOrder {
	sales, err := p.openSales(ctx)
	if err != nil {
		p.warnQueued("the sales that may hold queued orders could not be read", err)
		return nil
	}
	var lookups []store.HeldLookup
	var of []*openSale
	for i := range sales {
		s := &sales[i]
		if saleID > 0 && s.id != saleID {
			continue
		}
		l := store.HeldLookup{SaleID: s.id, Shard: store.ShardOf(userID, s.shards)}
		if s.perItem {
			for _, it := range s.items {
				l.Members = append(l.Members, store.BuyerMember(shop.LimitPerItem, it.id, userID))
			}
		} else {
			l.Members = []string{store.BuyerMember(shop.LimitPerSale, 0, userID)}
		}
		if len(l.Members) > 0 {
			lookups = append(lookups, l)
			of = append(of, s)
		}
	}
	if len(lookups) == 0 {
		return nil
	}
	held, errs := p.stock.HeldInFlight(ctx, lookups)
	var out []queuedOrder
	for i, s := range of {
		if errs[i] != nil {
			p.warnQueued("a sale's queued orders could not be looked up", errs[i])
			continue
		}
		for _, e := range held[i] {
			if e.UserID != userID {
				continue
			}
			v := shop.OrderView{OrderID: e.OrderID, ItemID: e.ItemID, SaleID: s.id, Status: shop.StatusQueued, SaleName: s.name,
				Currency: s.currency, CreatedAt: e.ReservedAt.UTC()}
			for _, it := range s.items {
				if it.id == e.ItemID {
					v.ItemName, v.PriceCents = it.name, it.priceCents
				}
			}
			out = append(out, queuedOrder{v: v, at: e.ReservedAt})
		}
	}
	slices.SortFunc(out, func(a, b queuedOrder) int { return newerFirst(a.at, a.v.OrderID, b.at, b.v.OrderID) })
	return out
}

// newerFirst orders by time, then by id, both descending: Postgres's (reserved_at, id) DESC.
func newerFirst(at time.Time, id string, bt time.Time, bid string) int {
	if c := bt.Compare(at); c != 0 {
		return c
	}
	return cmp.Compare(bid, id)
}

// withQueued merges the QUEUED orders (newest first) into Postgres's page of orders (newest
// first by reservation time): an order Postgres holds is listed as Postgres has it, once (the
// writer settles an order in Redis after writing it, so a just-written one is in both).
func withQueued(rows []store.OrderDetail, queued []queuedOrder) []shop.OrderView {
	written := make(map[string]bool, len(rows))
	for _, o := range rows {
		written[o.ID] = true
	}
	out := make([]shop.OrderView, 0, len(rows)+len(queued))
	i := 0
	for _, q := range queued {
		if written[q.v.OrderID] {
			continue
		}
		for i < len(rows) && newerFirst(rows[i].ReservedAt, rows[i].ID, q.at, q.v.OrderID) < 0 {
			out = append(out, orderView(rows[i]))
			i++
		}
		out = append(out, q.v)
	}
	for ; i < len(rows); i++ {
		out = append(out, orderView(rows[i]))
	}
	return out
}

// warnQueued logs a failed QUEUED lookup, at most once every ten seconds (every poll would
// otherwise log it while a Redis node is down).
func (p *Purchases) warnQueued(msg string, err error) {
	if !p.mine.warns.allow(time.Now(), 10*time.Second) {
		return
	}
	p.log.Warn("my orders: "+msg+"; listed without them", "err", err)
}
