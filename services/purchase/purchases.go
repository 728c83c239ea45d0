package purchase

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/flashsale/flashsale/services/captcha"
	"github.com/flashsale/flashsale/services/faults"
	"github.com/flashsale/flashsale/services/internal/cursor"
	"github.com/flashsale/flashsale/services/limits"
	"github.com/flashsale/flashsale/services/metrics"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// Publisher durably queues a reservation and answers only once it is durable.
type Publisher interface {
	Publish(ctx context.Context, o store.QueuedOrder) error
}

// PurchaseConfig are the tunables of the purchase path.
type PurchaseConfig struct {
	TokenTTL      time.Duration // how long a purchase token is valid
	SlowPublish   time.Duration // a PubAck later than this after the reservation is confirmed against the writer's claim; well under the orphan age
	SigningSecret []byte
}

// Purchases is the hot path: captcha, purchase tokens, the Redis reserve, the durable hand-off,
// and the shopper's view of their orders (pay, cancel, list).
type Purchases struct {
	cfg     PurchaseConfig
	sales   Catalog
	stock   Stock
	db      DB
	pub     Publisher
	captcha captcha.Captcha
	soldOut *SoldOut
	limiter *limits.Limiter
	returns Returner
	tokens  tokenSigner
	cursors cursor.Signer // my orders' pages
	budget  *tokenBlocks  // the purchase tokens' shared budget (budget.go)
	ids     attemptIDs    // names each attempt's order after its token and item
	draws   Draws         // closes a sale's draw once its window has passed
	metrics *metrics.Metrics
	log     *slog.Logger
	now     func() time.Time
	floors  sync.Map // sale id -> *saleFloors: the highest reservation seq this instance knows of in each shard of the sale

	queueWait *QueueWait     // a QUEUED order's place
	funnel    FunnelCounter  // counts the sale's funnel for the merchant's live view
	mine      *myOrdersState // "my orders": the sales that may hold QUEUED orders (services/purchase/myorders.go)
}

// Deps are what the purchase path works with. Funnel and WriterRate may be left out: then nothing
// is counted for the merchant's live view, and a QUEUED order's wait is estimated at the default
// writer rate.
type Deps struct {
	Catalog    Catalog
	Stock      Stock
	DB         DB
	Publisher  Publisher
	Captcha    captcha.Captcha
	SoldOut    *SoldOut
	Limiter    *limits.Limiter
	Returns    Returner
	Funnel     FunnelCounter // counts every attempt, and every refused purchase-token request (in memory)
	WriterRate WriterRate    // the local writer's recent throughput, for a QUEUED order's estimated wait
	Draws      Draws         // closes fair-start draws (nil: NoDraws)
	Metrics    *metrics.Metrics
	Log        *slog.Logger
	Now        func() time.Time
}

// NewPurchases returns the purchase service.
func NewPurchases(cfg PurchaseConfig, d Deps) *Purchases {
	if d.Funnel == nil {
		d.Funnel = NoFunnel{}
	}
	if d.WriterRate == nil {
		d.WriterRate = noRate{}
	}
	if d.Draws == nil {
		d.Draws = NoDraws{}
	}
	return &Purchases{cfg: cfg, sales: d.Catalog, stock: d.Stock, db: d.DB, pub: d.Publisher, captcha: d.Captcha, soldOut: d.SoldOut,
		limiter: d.Limiter, returns: d.Returns, funnel: d.Funnel, queueWait: NewQueueWait(d.Stock, d.WriterRate),
		tokens: newTokenSigner(cfg.SigningSecret), cursors: cursor.New(cfg.SigningSecret), budget: newTokenBlocks(d.Stock, cfg.TokenTTL, d.Log, d.Now), ids: newAttemptIDs(cfg.SigningSecret), draws: d.Draws,
		metrics: metrics.Or(d.Metrics),
		log:     d.Log, now: d.Now, mine: newMyOrdersState(d.Now)}
}

func retryAfter(d time.Duration) time.Duration {
	return ((d + time.Second - 1) / time.Second) * time.Second
}

// allSoldOut reports whether every item of the sale is known sold out here, for a purchase-token
// request. When an item's flags have just run out and this request is the one to check again
// (SoldOut.forTokens), it reads the sale's stock in Redis (one round trip) rather than hand out a
// token on trust: a unit there clears its flag, none renews the flags. An error, or a sale Redis
// does not hold, lets the request on (the purchase then asks Redis itself).
func (p *Purchases) allSoldOut(ctx context.Context, sale shop.Sale) bool {
	askAgain := false
	for _, it := range sale.Items {
		switch p.soldOut.forTokens(it.ID) {
		case tokensClear:
			return false
		case tokensAskAgain:
			askAgain = true
		}
	}
	if len(sale.Items) == 0 || !askAgain {
		return len(sale.Items) > 0
	}
	ids := make([]int64, len(sale.Items))
	for i, it := range sale.Items {
		ids[i] = it.ID
	}
	levels, err := p.stock.Levels(ctx, sale.ID, ids)
	if err != nil {
		p.log.Warn("sold-out check: stock levels not read; the request goes on", "sale", sale.ID, "err", err)
		return false
	}
	soldOut := true
	for i, n := range levels {
		switch {
		case n > 0:
			p.soldOut.Available(ids[i])
			soldOut = false
		case n < 0: // the sale is not in Redis: its purchase answers for it
			soldOut = false
		default:
			p.soldOut.Drained(ids[i])
		}
	}
	return soldOut
}

// saleWindow checks that the sale is open at now.
func saleWindow(startsAt, endsAt, now time.Time) error {
	if now.Before(startsAt) {
		return &shop.Error{Code: shop.CodeNotStarted, Message: "the sale has not started yet", RetryAfter: retryAfter(startsAt.Sub(now))}
	}
	if !now.Before(endsAt) {
		return shop.Errorf(shop.CodeSaleEnded, "the sale has ended")
	}
	return nil
}

// PurchaseGate answers the refusals of a purchase that depend on the item alone (itemRefusal).
// The handler asks it before the caller's identity is verified, so the shoppers still holding a
// token after the sell-out are refused at the cost of a cache lookup; nil means go on to
// Purchase, which checks again. A refusal is counted as Purchase counts its own.
func (p *Purchases) PurchaseGate(ctx context.Context, itemID int64, token string) error {
	info, err := p.itemRefusal(ctx, itemID)
	if err != nil {
		p.counted(info.SaleID, err)
		p.notUsed(ctx, info, err, token)
	}
	return err
}

// notUsed gives a valid purchase token refused by the item's sold-out flag (before the reserve
// script could use it) back to the sale's token budget: its holder's place is free.
func (p *Purchases) notUsed(ctx context.Context, info shop.ItemInfo, err error, token string) {
	if err != shop.ErrSoldOut || token == "" {
		return
	}
	tok, ok := p.tokens.verify(token)
	if !ok || tok.SaleID != info.SaleID {
		return
	}
	if k, serr := p.stock.Shards(ctx, info.SaleID); serr != nil || k > 1 {
		return // a sharded sale has no budget
	}
	p.budget.unused(info.SaleID, tok.Expires, tok.Nonce)
}

// Purchase tries to buy one unit of itemID for userID with a purchase token. On success the
// order is durably queued and its id returned (the caller answers 202 QUEUED); draw is true when
// the attempt fell in the sale's fair-start window and entered its draw instead.
func (p *Purchases) Purchase(ctx context.Context, userID, itemID int64, token, ip string) (id string, draw bool, err error) {
	id, saleID, draw, err := p.purchase(ctx, userID, itemID, token, ip)
	p.counted(saleID, err)
	return id, draw, err
}

// counted records a purchase's outcome in its sale's funnel (in memory; flushed to Redis once a
// second, off this path) and in the outcome's counter (0 sale: an unknown item, no funnel).
func (p *Purchases) counted(saleID int64, err error) {
	p.funnel.Record(saleID, err)
	outcome := "ACCEPTED"
	if err != nil {
		outcome = string(shop.ErrorCode(err))
	}
	p.metrics.Purchase(outcome).Inc()
}

// purchase returns the order id, and the item's sale when the item is known (0 otherwise).
func (p *Purchases) purchase(ctx context.Context, userID, itemID int64, token, ip string) (string, int64, bool, error) {
	info, err := p.admit(ctx, userID, itemID, ip)
	if err != nil {
		p.notUsed(ctx, info, err, token)
		return "", info.SaleID, false, err
	}
	tok, err := p.checkToken(info, userID, token)
	if err != nil {
		return "", info.SaleID, false, err
	}
	reservedAt := p.now()
	orderID, res, err := p.reserve(ctx, info, userID, tok)
	if err != nil {
		return "", info.SaleID, false, err
	}
	if res.Entered {
		id, err := p.enter(ctx, info, userID, orderID, tok.Nonce, res)
		return id, info.SaleID, err == nil, err
	}
	id, err := p.take(ctx, info, userID, orderID, res, reservedAt)
	return id, info.SaleID, false, err
}

// take goes on with a reservation: a resend's answer, or the hand-over to the queue.
func (p *Purchases) take(ctx context.Context, info shop.ItemInfo, userID int64, orderID string, res store.Reservation, reservedAt time.Time) (string, error) {
	if res.Again {
		return p.again(ctx, info, userID, orderID, res)
	}
	faults.Reached(faults.AfterReserve)
	id, err := p.handOver(ctx, info, userID, orderID, res, reservedAt)
	if err == nil {
		faults.Reached(faults.AfterPubAck)
	}
	return id, err
}

// admit runs the cheap checks that need no Redis call for the reservation: the item's
// (itemRefusal), then the shopper's rate limits. A refusal of a known item still returns it (its
// sale's funnel counts the refusal).
func (p *Purchases) admit(ctx context.Context, userID, itemID int64, ip string) (shop.ItemInfo, error) {
	info, err := p.itemRefusal(ctx, itemID)
	if err != nil {
		return info, err
	}
	if err := p.limiter.Allow(ctx, info.SaleID, userID, ip, info.Limits); err != nil {
		return info, err
	}
	return info, nil
}

// itemRefusal is the refusals of a purchase that depend on the item alone, with no Redis call:
// the item exists, its sale is open (by this instance's clock; the reserve script checks again
// on Redis's), and it is not known sold out here. A refusal of a known item still returns it.
func (p *Purchases) itemRefusal(ctx context.Context, itemID int64) (shop.ItemInfo, error) {
	info, err := p.sales.Item(ctx, itemID)
	if err != nil {
		return shop.ItemInfo{}, err
	}
	if !info.Found {
		return shop.ItemInfo{}, shop.Errorf(shop.CodeNotFound, "no item %d", itemID)
	}
	if err := saleWindow(info.StartsAt, info.EndsAt, p.now()); err != nil {
		return info, err
	}
	if p.soldOut.Is(itemID) {
		return info, shop.ErrSoldOut // no Redis call, no network
	}
	return info, nil
}

var errBadToken = shop.Errorf(shop.CodeInvalidPurchaseToken, "the purchase token is missing, invalid, expired or for another sale; request a new one")

// checkToken verifies the purchase token's signature, shopper and sale. Its single use and its
// expiry are checked in the reserve script, on Redis's clock.
func (p *Purchases) checkToken(info shop.ItemInfo, userID int64, token string) (purchaseToken, error) {
	tok, ok := p.tokens.verify(token)
	if !ok || tok.UserID != userID || tok.SaleID != info.SaleID || !p.now().Before(tok.Expires.Add(time.Second)) {
		return purchaseToken{}, errBadToken
	}
	return tok, nil
}

// reserve runs the one Lua call of the purchase and turns its refusals into the contract's
// errors. The order id is the attempt's (attemptIDs): the same attempt sent again carries it
// again, and the script answers it as it did the first time (res.Again when it had reserved).
//
// A reply lost on the way back (the Redis client's own retries spent) leaves the outcome unknown;
// the same attempt is asked once more, which the script answers for what it did. Without an
// answer then either, the purchase answers 503 and releases nothing: with order ids tied to the
// token, a release here could undo the reservation of an earlier send that answered 202. A
// reservation left so goes back through orphan recovery, unless a resend confirms it first.
func (p *Purchases) reserve(ctx context.Context, info shop.ItemInfo, userID int64, tok purchaseToken) (string, store.Reservation, error) {
	orderID := p.ids.of(tok, info.ItemID, tok.Expires.Add(-p.cfg.TokenTTL))
	k, err := p.stock.Shards(ctx, info.SaleID)
	if err != nil {
		return "", store.Reservation{}, shop.Unavailable(err)
	}
	shard := store.ShardOf(userID, k)
	floors, err := p.floorsOf(ctx, info.SaleID, k)
	if err != nil {
		return "", store.Reservation{}, shop.Unavailable(err)
	}
	floor := &floors.shards[shard]
	a := store.Attempt{SaleID: info.SaleID, ItemID: info.ItemID, UserID: userID, OrderID: orderID, Nonce: tok.Nonce,
		TokenExpires: tok.Expires, Floor: floor.Load()}
	a.Entry = mayEnter(info, p.now())
	res, err := p.stock.Reserve(ctx, a)
	if errors.Is(err, store.ErrRankNeeded) { // this instance's clock is off the draw window: Redis's decides
		a.Entry = true
		res, err = p.stock.Reserve(ctx, a)
	}
	if errors.Is(err, store.ErrDrawClosing) {
		// the window has closed and the draw is not applied yet: decide it (or wait for the
		// instance deciding it), then ask again
		if cerr := p.closeDraw(ctx, info.SaleID); cerr != nil {
			p.log.Info("purchase after the draw window: draw not closed yet", "sale", info.SaleID, "err", cerr)
			return "", res, errDrawClosing
		}
		res, err = p.stock.Reserve(ctx, a)
		if errors.Is(err, store.ErrDrawClosing) {
			return "", res, errDrawClosing
		}
	}
	if err != nil && !isRefusal(err) {
		p.log.Warn("reserve: outcome unknown; asking again", "order", orderID, "err", err)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		a.Floor = floor.Load()
		res, err = p.stock.Reserve(rctx, a)
		cancel()
	}
	if res.Borrowed {
		p.metrics.Borrows.Inc()
	}
	if res.LenderSeq > 0 && res.Lender < len(floors.shards) {
		// the lending shard issued this seq: a failover that lost the loan leaves it below
		raiseFloor(&floors.shards[res.Lender], res.LenderSeq)
	}
	if err == nil {
		raiseFloor(floor, res.Seq)
		if k == 1 && !res.Again && !res.Entered { // a sharded sale's Left is its shard's
			p.soldOut.Reserved(info.ItemID, res.Left)
		}
		return orderID, res, nil
	}
	return "", res, p.refused(info, orderID, res, err)
}

// refused turns the reserve script's refusal (or a reserve whose outcome stayed unknown) into the
// contract's answer.
func (p *Purchases) refused(info shop.ItemInfo, orderID string, res store.Reservation, err error) error {
	switch {
	case errors.Is(err, store.ErrSoldOut):
		if res.AllEmpty {
			// a sharded sale's item is sold out only when every shard is empty and no
			// transfer is in flight; one empty shard only refuses this shopper
			p.soldOut.Mark(info.ItemID)
		}
		return shop.ErrSoldOut
	case errors.Is(err, store.ErrAlreadyBuyer):
		msg := "you already hold an item of this sale (one per shopper); find it in your orders"
		if info.Limit == shop.LimitPerItem {
			msg = "you already hold this item (one per shopper); find it in your orders"
		}
		return &shop.Error{Code: shop.CodeAlreadyPurchased, Message: msg, OrderID: res.HeldOrder}
	case errors.Is(err, store.ErrTokenAlreadyUsed):
		p.budget.forget(info.SaleID) // a token void after a rebuild: this instance's block may be too
		return shop.Errorf(shop.CodeInvalidPurchaseToken, "this purchase token was already used or has expired; request a new one")
	case errors.Is(err, store.ErrNotStarted):
		return &shop.Error{Code: shop.CodeNotStarted, Message: "the sale has not started yet", RetryAfter: time.Second}
	case errors.Is(err, store.ErrEnded):
		return shop.Errorf(shop.CodeSaleEnded, "the sale has ended")
	case errors.Is(err, store.ErrPaused):
		return shop.ErrPaused
	case errors.Is(err, store.ErrRedisWentBack):
		p.log.Error("redis lost reservations (its counter went back): the sale fails closed until rebuilt from postgres", "sale", info.SaleID)
		p.metrics.RedisLoss.WithLabelValues("reserve").Inc()
		p.budget.forget(info.SaleID) // its tokens are void once rebuilt
		return shop.Unavailable(err)
	case errors.Is(err, store.ErrStockUnknown):
		p.budget.forget(info.SaleID)
		return shop.Unavailable(err) // fail closed until the keeper rebuilds Redis from Postgres
	}
	// Still unknown: the script may have run. The unit, if taken, is left to orphan recovery (or
	// to a resend of this attempt, which finds it in flight and confirms it).
	p.log.Warn("reserve: outcome unknown; a unit it took goes back through orphan recovery", "order", orderID, "err", err)
	return shop.Unavailable(err)
}

// isRefusal reports whether err is one of the reserve script's answers (the outcome is known).
func isRefusal(err error) bool {
	for _, r := range [...]error{store.ErrSoldOut, store.ErrAlreadyBuyer, store.ErrTokenAlreadyUsed, store.ErrNotStarted,
		store.ErrEnded, store.ErrPaused, store.ErrRedisWentBack, store.ErrStockUnknown, store.ErrDrawClosing, store.ErrRankNeeded} {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

// errUndecided answers a resend whose first send's reservation is in flight while this send
// could not make sure it is queued: it may be on its way to the queue, or go back to stock.
var errUndecided = &shop.Error{Code: shop.CodeUnavailable, RetryAfter: time.Second,
	Message: "this purchase was received before and its outcome is not settled yet; send it again in a moment, or look in your orders"}

// again answers a send of an attempt that reserved before (the shopper's page resending a
// purchase whose answer was lost, or the Redis client retrying a script whose reply was lost):
// 202 with the same order id if its order is durable. The writer holds it (res.Durable): at
// once. Still in flight: the first send may have answered 202 for it, or may yet release it
// (its publish failed), or may have died before publishing. So this send publishes it again and
// then claims it in Redis, which makes it the writer's (no release can take it any more): 202.
// A claim that finds the unit gone (released meanwhile) answers 503: nothing is reserved, and the
// copy just queued is recorded as released by the writer. Nothing here ever releases it.
//
// The copy goes through the group publisher, whose message ids are its orders' ids hashed
// (store.GroupPublisher), so it never takes the id of the first send's message: JetStream's
// duplicate check drops a message whose id it has seen, with whatever else it carries. The
// writer takes an order carried twice once (Postgres's key).
func (p *Purchases) again(ctx context.Context, info shop.ItemInfo, userID int64, orderID string, res store.Reservation) (string, error) {
	if res.Durable {
		return orderID, nil
	}
	q := store.QueuedOrder{OrderID: orderID, SaleID: info.SaleID, ItemID: info.ItemID, UserID: userID, Seq: res.Seq, ReservedAt: res.ReservedAt.UnixMilli()}
	perr := p.pub.Publish(context.WithoutCancel(ctx), q)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if perr == nil {
		verdicts, err := p.stock.Claim(rctx, info.SaleID, []store.ClaimItem{{OrderID: orderID, Seq: res.Seq, UserID: userID}})
		switch {
		case err != nil || len(verdicts) != 1:
			p.log.Warn("resent purchase: claim failed; its order is queued, the writer decides", "order", orderID, "err", err)
		case verdicts[0] == store.ClaimClaimed:
			return orderID, nil
		case verdicts[0] == store.ClaimGone:
			return "", shop.Unavailable(errors.New("resent purchase: its reservation was released before it was queued"))
		case p.written(rctx, orderID):
			return orderID, nil // written and settled meanwhile
		}
		return "", errUndecided
	}
	// Not queued by this send: durable only if the writer holds it from the first send's message.
	e, inFlight, err := p.stock.InFlightOrder(rctx, info.SaleID, orderID)
	if err == nil && ((inFlight && e.Claimed) || (!inFlight && p.written(rctx, orderID))) {
		return orderID, nil
	}
	p.log.Warn("resent purchase: publish failed; the first send's outcome decides", "order", orderID, "err", perr)
	return "", errUndecided
}

// handOver publishes the reservation durably and answers once it is acknowledged. A failed or
// slow publish is settled against the writer's claim in Redis, atomically: released (nothing
// sold; a message that did reach the queue will be skipped) or claimed (the order is durable).
func (p *Purchases) handOver(ctx context.Context, info shop.ItemInfo, userID int64, orderID string, res store.Reservation, started time.Time) (string, error) {
	q := store.QueuedOrder{OrderID: orderID, SaleID: info.SaleID, ItemID: info.ItemID, UserID: userID, Seq: res.Seq, ReservedAt: res.ReservedAt.UnixMilli()}
	// Not cut short by the shopper's connection dropping: the reservation is made, and a page
	// that lost the answer sends the attempt again, which finds it queued instead of released.
	perr := p.pub.Publish(context.WithoutCancel(ctx), q)
	// Timed from the reservation (this instance's clock at the reserve), so a pause anywhere
	// since counts: orphan recovery judges a reservation by its age.
	if perr == nil && p.now().Sub(started) < p.cfg.SlowPublish {
		return orderID, nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if perr == nil {
		verdicts, err := p.stock.Claim(rctx, info.SaleID, []store.ClaimItem{{OrderID: orderID, Seq: res.Seq, UserID: userID}})
		if err == nil && len(verdicts) == 1 && verdicts[0] == store.ClaimClaimed {
			return orderID, nil
		}
		if err != nil {
			p.log.Warn("slow publish: claim failed; orphan recovery decides", "order", orderID, "err", err)
		} else if p.written(rctx, orderID) {
			return orderID, nil // the writer was faster than this check: the order exists
		}
		return "", shop.Unavailable(errors.New("publish acknowledged after the reservation was recovered"))
	}
	ref := shop.OrderRef{SaleID: info.SaleID, ItemID: info.ItemID, UserID: userID, OrderID: orderID}
	outcome, err := p.stock.Release(rctx, ref, shop.ReleaseUnsold)
	if err != nil {
		p.log.Warn("publish failed and release failed; orphan recovery will return the unit", "order", orderID, "publish_err", perr, "err", err)
		return "", shop.Unavailable(perr)
	}
	if outcome == store.Claimed || (outcome == store.NotInFlight && p.written(rctx, orderID)) {
		return orderID, nil // the message did reach the queue: the order is (being) written
	}
	if outcome == store.Released {
		p.soldOut.Returned(info.ItemID)
		p.metrics.Released.WithLabelValues("publish_failed").Inc()
	}
	p.log.Warn("publish failed; unit released", "order", orderID, "err", perr)
	return "", shop.Unavailable(perr)
}
