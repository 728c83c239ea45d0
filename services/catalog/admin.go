package catalog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale/services/pipeline"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// SaleEdit is a merchant's partial change of a sale: nil fields stay as they are.
type SaleEdit struct {
	Name                 *string
	Description          *string // "" removes it
	StartsAt             *time.Time
	EndsAt               *time.Time
	PaymentWindowSeconds *int
	FairStartMillis      *int // before the start only
	PurchaseLimit        *string
	Currency             *string
	Items                []ItemEdit
}

// ItemEdit changes one item (ItemID set) or adds one (ItemID 0: Name, PriceCents and Quantity
// are required).
type ItemEdit struct {
	ItemID     int64
	Name       *string
	PriceCents *int64
	Quantity   *int64
	ImageURL   *string // "" removes it
}

// Edit changes a merchant's sale. Everything is checked and written in one Postgres transaction,
// which applies the change to Redis (stock deltas, added items, times, limit) atomically before it
// commits; a refusal changes nothing.
func (s *Sales) Edit(ctx context.Context, merchantID, saleID int64, in SaleEdit) (shop.Sale, error) {
	return s.change(ctx, merchantID, saleID, func(cur shop.Sale, now time.Time) (shop.Sale, error) {
		next, err := applyEdit(cur, in, now)
		if err != nil {
			return shop.Sale{}, err
		}
		return next, checkPayable(cur, next, s.prices)
	})
}

// Pause stops purchases and purchase tokens of a sale (503 PAUSED) on every instance at once.
func (s *Sales) Pause(ctx context.Context, merchantID, saleID int64) (shop.Sale, error) {
	return s.setPaused(ctx, merchantID, saleID, true)
}

// Resume lets a paused sale sell again.
func (s *Sales) Resume(ctx context.Context, merchantID, saleID int64) (shop.Sale, error) {
	return s.setPaused(ctx, merchantID, saleID, false)
}

func (s *Sales) setPaused(ctx context.Context, merchantID, saleID int64, paused bool) (shop.Sale, error) {
	return s.change(ctx, merchantID, saleID, func(cur shop.Sale, _ time.Time) (shop.Sale, error) {
		next := cur
		next.Paused = paused
		return next, nil
	})
}

// End ends a sale now (an ended sale stays as it is). A sale that has not started ends before it
// starts: its start moves to just before now.
func (s *Sales) End(ctx context.Context, merchantID, saleID int64) (shop.Sale, error) {
	return s.change(ctx, merchantID, saleID, func(cur shop.Sale, now time.Time) (shop.Sale, error) {
		next := cur
		now = now.UTC().Truncate(time.Millisecond)
		if !cur.EndsAt.After(now) {
			return next, nil
		}
		next.EndsAt = now
		if !next.StartsAt.Before(now) {
			next.StartsAt = now.Add(-time.Millisecond)
		}
		return next, nil
	})
}

// Warm loads a sale's stock into Redis now, unless Redis holds it already. A sale Redis lost is
// rebuilt only under the keeper's rule (Loader.Rebuild): with orders still queued, 409
// QUEUE_NOT_DRAINED.
func (s *Sales) Warm(ctx context.Context, merchantID, saleID int64) (shop.Sale, error) {
	row, err := s.ownSale(ctx, merchantID, saleID)
	if err != nil {
		return shop.Sale{}, err
	}
	if row.Epoch == 0 || pipeline.BeforeStart(row.StartsAt, s.now()) {
		// Never loaded, or not started: no reservation of it exists anywhere, Postgres is
		// complete.
		if _, err := s.loader.LoadFirst(ctx, saleID); err != nil {
			return shop.Sale{}, shop.Unavailable(err)
		}
	} else if err := s.loader.Rebuild(ctx, saleID, s.queue); err != nil {
		return shop.Sale{}, err
	}
	s.liveCache.Forget(saleID)
	return row, nil
}

// change runs one edit of a merchant's sale: Postgres and Redis, then this instance's caches.
func (s *Sales) change(ctx context.Context, merchantID, saleID int64, edit func(cur shop.Sale, now time.Time) (shop.Sale, error)) (shop.Sale, error) {
	now := s.now()
	var redis redisStep
	row, err := s.db.EditSale(ctx, saleID, func(cur shop.Sale) (shop.Sale, error) {
		if !cur.OwnedBy(merchantID) {
			return shop.Sale{}, shop.Errorf(shop.CodeNotFound, "no sale %d", saleID)
		}
		return edit(cur, now)
	}, func(old, next shop.Sale) error { return s.applyInRedis(ctx, old, next, &redis) })
	if err != nil {
		if redis.applied {
			// Redis took the change but Postgres did not commit: fail the sale closed, so it is
			// rebuilt from Postgres (the source of truth) once the queue has drained.
			if _, lerr := s.stock.MarkLost(context.WithoutCancel(ctx), saleID, 0, ""); lerr != nil {
				s.log.Error("sale edit not committed after redis applied it, and marking the sale lost failed", "sale", saleID, "err", lerr)
			}
		}
		var e *shop.Error
		switch {
		case errors.As(err, &e):
			return shop.Sale{}, e
		case errors.Is(err, store.ErrNotFound):
			return shop.Sale{}, shop.Errorf(shop.CodeNotFound, "no sale %d", saleID)
		}
		return shop.Sale{}, shop.Unavailable(err)
	}
	s.forget(row)
	s.announce(row)
	for _, id := range redis.raised {
		s.loader.Returned(id)
	}
	s.warmIfDue(ctx, row, now)
	return row, nil
}

// redisStep is what an edit's Redis step did: applied, and the items whose stock rose.
type redisStep struct {
	applied bool
	raised  []int64
}

// applyInRedis applies an edit to Redis inside the edit's Postgres transaction, before it commits.
func (s *Sales) applyInRedis(ctx context.Context, old, next shop.Sale, done *redisStep) error {
	adj, up := adjustmentOf(old, next)
	if len(adj.Meta) == 0 && len(adj.Stock) == 0 {
		return nil
	}
	if len(adj.Stock) > 0 && old.FairStartMillis > 0 && old.DrawClosedAt == nil && !pipeline.BeforeStart(old.StartsAt, s.now()) {
		return errDrawInProgress
	}
	if err := s.drawApplied(ctx, old, adj); err != nil {
		return err
	}
	res, err := s.stock.Adjust(ctx, adj)
	if err == nil && !res.Applied && old.Epoch != 0 && lowersQuantity(adj) {
		// Redis does not hold the sale healthy (lost): the quantities were checked against
		// Postgres alone, which misses the orders still queued. Only a drained queue makes
		// Postgres's counts complete.
		if err := pipeline.QueueDrained(ctx, s.queue); err != nil {
			return err
		}
	}
	if errors.Is(err, store.ErrAdjustTooLow) {
		return shop.Errorf(shop.CodeQuantityTooLow, "item %d: %d units are neither sold nor held by a reservation in flight; its quantity cannot go lower by more than that",
			res.ItemID, res.Left)
	}
	if err != nil {
		// The Redis step's outcome is unknown (Redis may have taken it and the reply was
		// lost): store.Adjust has marked the sale lost, so the rebuild from Postgres, where
		// this transaction rolls back, replaces whatever Redis took.
		return shop.Unavailable(err)
	}
	done.applied, done.raised = res.Applied, up
	return nil
}

// warmIfDue loads an edited sale that was never loaded when its start is now within WarmAhead (an
// edit that brought the start closer): at once, as at creation. A failure is the keeper's to
// retry.
func (s *Sales) warmIfDue(ctx context.Context, row shop.Sale, now time.Time) {
	if row.Epoch != 0 || !row.EndsAt.After(now) || !shop.DueForWarmUp(row.StartsAt, now, s.warmAhead) {
		return
	}
	if _, err := s.loader.LoadFirst(ctx, row.ID); err != nil {
		s.log.Warn("edited sale not loaded into redis; the keeper will retry", "sale", row.ID, "err", err)
	}
}

// forget drops this instance's cached view of a sale. Other instances drop theirs when the
// change is announced (services/catalog/salenotice.go), or catch up within catalogTTL; the reserve script
// reads pause and the times from Redis, the token issuer pause within pausedTTL.
func (s *Sales) forget(row shop.Sale) {
	s.salesCache.Forget(row.ID)
	s.stockCache.Forget(row.ID)
	s.liveCache.Forget(row.ID)
	s.pausedCache.Forget(row.ID)
	for _, it := range row.Items {
		s.items.Forget(it.ID)
	}
}

// adjustmentOf is the Redis side of an edit; up lists the items whose stock rises.
func adjustmentOf(old, next shop.Sale) (store.Adjustment, []int64) {
	adj := store.Adjustment{SaleID: next.ID, Meta: map[string]string{}}
	if !old.StartsAt.Equal(next.StartsAt) {
		adj.Meta["starts"] = strconv.FormatInt(next.StartsAt.UnixMilli(), 10)
	}
	if !old.EndsAt.Equal(next.EndsAt) {
		adj.Meta["ends"] = strconv.FormatInt(next.EndsAt.UnixMilli(), 10)
	}
	if old.PurchaseLimit != next.PurchaseLimit {
		adj.Meta["limit"] = next.PurchaseLimit
	}
	if old.Paused != next.Paused {
		adj.Meta["paused"] = map[bool]string{true: "1", false: "0"}[next.Paused]
	}
	if !old.DrawWindowEnd().Equal(next.DrawWindowEnd()) || old.FairStartMillis != next.FairStartMillis {
		adj.Meta["fair"] = "0"
		if next.FairStartMillis > 0 {
			adj.Meta["fair"] = strconv.FormatInt(next.DrawWindowEnd().UnixMilli(), 10)
		}
	}
	before := map[int64]int{}
	for _, it := range old.Items {
		before[it.ID] = it.Quantity
	}
	var up []int64
	for _, it := range next.Items {
		q, ok := before[it.ID]
		switch {
		case !ok:
			n := int64(it.Quantity)
			adj.Stock = append(adj.Stock, store.StockAdjust{ItemID: it.ID, Initial: &n})
			up = append(up, it.ID)
		case q != it.Quantity:
			adj.Stock = append(adj.Stock, store.StockAdjust{ItemID: it.ID, Delta: int64(it.Quantity - q)})
			if it.Quantity > q {
				up = append(up, it.ID)
			}
		}
	}
	return adj, up
}

// lowersQuantity tells whether an adjustment takes units away from an item.
func lowersQuantity(a store.Adjustment) bool {
	for _, st := range a.Stock {
		if st.Delta < 0 {
			return true
		}
	}
	return false
}

// applyEdit checks an edit against the sale as it is and returns the sale as it must be: the
// fields by the one validation of a sale (saleInput.validate), then what a change may not do.
func applyEdit(cur shop.Sale, in SaleEdit, now time.Time) (shop.Sale, error) {
	next := cur
	next.Items = append([]shop.Item(nil), cur.Items...)
	if err := (saleInput{Name: in.Name, Description: in.Description}).validate(); err != nil {
		return next, err
	}
	started := !now.Before(cur.StartsAt)
	if in.Name != nil {
		next.Name = strings.TrimSpace(*in.Name)
	}
	if in.Description != nil {
		next.Description = strings.TrimSpace(*in.Description)
	}
	// Each field is checked where it is applied, in this order, so a client sees the same
	// refusal for the same edit whatever else it holds.
	steps := []func(*shop.Sale) error{
		func(next *shop.Sale) error { return editWindow(next, in, started, now) },
		func(next *shop.Sale) error {
			if err := optional(in.PaymentWindowSeconds, validPaymentWindow); err != nil {
				return err
			}
			if w := in.PaymentWindowSeconds; w != nil {
				next.PaymentWindowSeconds = *w
			}
			return nil
		},
		func(next *shop.Sale) error { return editTerms(next, in, started) },
		func(next *shop.Sale) error { return editFairStart(next, in, started) },
		func(next *shop.Sale) error { return editItems(next, in.Items, started) },
	}
	for _, step := range steps {
		if err := step(&next); err != nil {
			return next, err
		}
	}
	return next, nil
}

// editWindow moves a sale's start (before it started) and its end (to a time still to come).
func editWindow(next *shop.Sale, in SaleEdit, started bool, now time.Time) error {
	if in.StartsAt != nil && !in.StartsAt.Equal(next.StartsAt) {
		if started {
			return shop.Errorf(shop.CodeSaleStarted, "the sale has started: its start cannot move")
		}
		next.StartsAt = in.StartsAt.UTC()
	}
	if in.EndsAt != nil && !in.EndsAt.Equal(next.EndsAt) {
		if !in.EndsAt.After(now) {
			return shop.Errorf(shop.CodeInvalidInput, "endsAt must be in the future (to end the sale now, use its end action)")
		}
		next.EndsAt = in.EndsAt.UTC()
	}
	if in.StartsAt != nil || in.EndsAt != nil {
		return checkWindow(next.StartsAt, next.EndsAt)
	}
	return nil
}

// editTerms changes the purchase limit and the currency, which stay as they are once the sale
// has started.
func editTerms(next *shop.Sale, in SaleEdit, started bool) error {
	if l := in.PurchaseLimit; l != nil && *l != next.PurchaseLimit {
		if err := validPurchaseLimit(*l); err != nil {
			return err
		}
		if started {
			return shop.Errorf(shop.CodeSaleStarted, "the sale has started: its purchase limit cannot change")
		}
		next.PurchaseLimit = *l
	}
	if c := in.Currency; c != nil && *c != next.Currency {
		if err := validCurrency(*c); err != nil {
			return err
		}
		if started {
			return shop.Errorf(shop.CodeSaleStarted, "the sale has started: its currency cannot change")
		}
		next.Currency = *c
	}
	return nil
}

// editItems changes the items named and adds the new ones (before the start only). A quantity
// may not go below the units already sold.
func editItems(next *shop.Sale, edits []ItemEdit, started bool) error {
	index := map[int64]int{}
	for i, it := range next.Items {
		index[it.ID] = i
	}
	seen := map[int64]bool{}
	for i, e := range edits {
		field := fmt.Sprintf("items[%d]", i)
		var it shop.Item
		if e.ItemID == 0 {
			if started {
				return shop.Errorf(shop.CodeSaleStarted, "the sale has started: items cannot be added")
			}
			if e.Name == nil || e.PriceCents == nil || e.Quantity == nil {
				return shop.Errorf(shop.CodeInvalidInput, "%s: a new item needs name, priceCents and quantity", field)
			}
		} else {
			j, ok := index[e.ItemID]
			if !ok {
				return shop.Errorf(shop.CodeInvalidInput, "%s.itemId %d is not an item of this sale", field, e.ItemID)
			}
			if seen[e.ItemID] {
				return shop.Errorf(shop.CodeInvalidInput, "%s.itemId %d is named twice", field, e.ItemID)
			}
			seen[e.ItemID] = true
			it = next.Items[j]
		}
		if err := (itemInput{Name: e.Name, PriceCents: e.PriceCents, Quantity: e.Quantity}).validate(field); err != nil {
			return err
		}
		if q := e.Quantity; q != nil && *q < int64(it.Sold) {
			return shop.Errorf(shop.CodeQuantityTooLow, "%s.quantity cannot go below the %d units already sold", field, it.Sold)
		}
		if err := (itemInput{ImageURL: e.ImageURL}).validate(field); err != nil {
			return err
		}
		it = editedItem(it, e)
		if e.ItemID == 0 {
			next.Items = append(next.Items, it)
		} else {
			next.Items[index[e.ItemID]] = it
		}
	}
	if len(next.Items) > shop.MaxItemsPerSale {
		return shop.Errorf(shop.CodeInvalidInput, "a sale has at most %d items", shop.MaxItemsPerSale)
	}
	return nil
}

// editedItem is it with the validated fields of e set.
func editedItem(it shop.Item, e ItemEdit) shop.Item {
	if e.Name != nil {
		it.Name = strings.TrimSpace(*e.Name)
	}
	if p := e.PriceCents; p != nil {
		it.PriceCents = *p
	}
	if q := e.Quantity; q != nil {
		it.Quantity = int(*q)
	}
	if u := e.ImageURL; u != nil {
		it.ImageURL = strings.TrimSpace(*u)
	}
	return it
}

// CheckPaused refuses a purchase token while the sale is paused. The cached row may be up to
// catalogTTL old on another instance, so the sale's Redis meta is read too (one HGET, trusted for
// pausedTTL): a pause holds on every instance within a second, at once where its notice arrives
// (services/catalog/salenotice.go), and the reserve script refuses the purchase itself regardless.
func (s *Sales) CheckPaused(ctx context.Context, sale shop.Sale) error {
	if sale.Paused {
		return shop.ErrPaused
	}
	paused, err := s.pausedCache.Get(ctx, sale.ID, func(ctx context.Context) (bool, error) {
		return s.stock.Paused(ctx, sale.ID)
	})
	if err != nil {
		return shop.Unavailable(err)
	}
	if paused {
		return shop.ErrPaused
	}
	return nil
}

// editFairStart changes the draw window, which stays as it is once the sale has started.
func editFairStart(next *shop.Sale, in SaleEdit, started bool) error {
	f := in.FairStartMillis
	if f == nil || *f == next.FairStartMillis {
		return nil
	}
	if err := validFairStart(*f); err != nil {
		return err
	}
	if started {
		return shop.Errorf(shop.CodeSaleStarted, "the sale has started: its fair start cannot change")
	}
	next.FairStartMillis = *f
	return nil
}

// errDrawInProgress refuses a change of quantities (or a new item) from the start of a draw's
// window (within the clocks' margin) until it is decided: the entries compete for the units the
// window opened with, and whoever could change them while watching the entries come in could set
// the number of winners at a chosen entrant's place. A pause stays possible: an emergency stop,
// counted in the draw's record.
var errDrawInProgress = &shop.Error{Code: shop.CodeDrawInProgress,
	Message: "this sale's fair-start draw is not decided yet: its quantities cannot change until it is (a few seconds after its window); pausing the sale stays possible"}

// errDrawApplying refuses a change of quantities while a decided draw is not applied to every
// shard yet: the apply sets a shard's stock from the units the decision left, over a change made
// after it (moments; longer only when the instance applying it died, until another does).
var errDrawApplying = &shop.Error{Code: shop.CodeUnavailable, RetryAfter: time.Second,
	Message: "the fair start's draw is being applied to the stock; change the quantities again in a moment"}

// drawApplied checks that an edit that moves stock does not fall between a draw's decision and
// its apply. Before the decision a change is safe: the decision (which waits for this edit's
// row lock) reads the new quantities, and the apply sets the stock from them.
func (s *Sales) drawApplied(ctx context.Context, old shop.Sale, adj store.Adjustment) error {
	if old.FairStartMillis <= 0 || old.DrawClosedAt == nil || len(adj.Stock) == 0 {
		return nil
	}
	shards, err := s.stock.DrawShards(ctx, old.ID)
	if err != nil {
		return shop.Unavailable(err)
	}
	for _, sh := range shards {
		if sh.Held && !sh.WindowEnd.IsZero() && !sh.Drawn {
			return errDrawApplying
		}
	}
	return nil
}
