package purchase

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale/services/captcha"
	"github.com/flashsale/flashsale/services/faults"
	"github.com/flashsale/flashsale/services/internal/mac"
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
	stock   *store.Stock
	db      *store.DB
	pub     Publisher
	captcha captcha.Captcha
	soldOut *SoldOut
	limiter *limits.Limiter
	returns Returner
	tokens  tokenSigner
	ids     attemptIDs // names each attempt's order after its token and item
	metrics *metrics.Metrics
	log     *slog.Logger
	now     func() time.Time
	floors  sync.Map // sale id -> *saleFloors: the highest reservation seq this instance knows of in each shard of the sale

	queueWait *QueueWait     // a QUEUED order's place
	funnel    FunnelCounter  // counts the sale's funnel for the merchant's live view
	mine      *myOrdersState // "my orders": the sales that may hold QUEUED orders (services/myorders.go)
}

// Deps are what the purchase path works with. Funnel and WriterRate may be left out: then nothing
// is counted for the merchant's live view, and a QUEUED order's wait is estimated at the default
// writer rate.
type Deps struct {
	Catalog    Catalog
	Stock      *store.Stock
	DB         *store.DB
	Publisher  Publisher
	Captcha    captcha.Captcha
	SoldOut    *SoldOut
	Limiter    *limits.Limiter
	Returns    Returner
	Funnel     FunnelCounter // counts every attempt, and every refused purchase-token request (in memory)
	WriterRate WriterRate    // the local writer's recent throughput, for a QUEUED order's estimated wait
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
	return &Purchases{cfg: cfg, sales: d.Catalog, stock: d.Stock, db: d.DB, pub: d.Publisher, captcha: d.Captcha, soldOut: d.SoldOut,
		limiter: d.Limiter, returns: d.Returns, funnel: d.Funnel, queueWait: NewQueueWait(d.Stock, d.WriterRate),
		tokens: newTokenSigner(cfg.SigningSecret), ids: newAttemptIDs(cfg.SigningSecret), metrics: metrics.Or(d.Metrics),
		log: d.Log, now: d.Now, mine: newMyOrdersState(d.Now)}
}

func retryAfter(d time.Duration) time.Duration {
	return ((d + time.Second - 1) / time.Second) * time.Second
}

var errSoldOut = shop.Errorf(shop.CodeSoldOut, "sold out: every unit has been taken")

func (p *Purchases) allSoldOut(sale store.Sale) bool {
	for _, it := range sale.Items {
		if !p.soldOut.Is(it.ID) {
			return false
		}
	}
	return len(sale.Items) > 0
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

// NewCaptcha returns a challenge for a shopper of a sale that has not ended.
func (p *Purchases) NewCaptcha(ctx context.Context, userID, saleID int64, ip string) (string, string, error) {
	sale, err := p.sales.CachedRow(ctx, saleID)
	if err != nil {
		return "", "", err
	}
	if !p.now().Before(sale.EndsAt) {
		return "", "", shop.Errorf(shop.CodeSaleEnded, "the sale has ended")
	}
	if err := p.limiter.Allow(ctx, saleID, userID, ip, limits.Of(sale)); err != nil {
		return "", "", err
	}
	id, img, err := p.captcha.New(ctx, userID, saleID)
	if err != nil {
		return "", "", shop.Unavailable(err)
	}
	return id, img, nil
}

// TokenGate answers the refusals of a purchase-token request that need nothing from its body:
// an unknown sale, one outside its window, paused, or every item sold out (as this instance
// knows it). The handler asks it before reading the body, so the crowd refused after a sell-out
// costs no body read and no JSON decoding; nil means go on to IssueToken, which asks again.
func (p *Purchases) TokenGate(ctx context.Context, userID, saleID int64) error {
	_, _, known, err := p.tokenGate(ctx, saleID)
	if err != nil && known {
		p.funnel.Record(saleID, err)
	}
	return err
}

// IssueToken gives a shopper a single-use purchase token for a live sale, once the captcha is
// solved. Before the start it answers NOT_STARTED with the wait; a sale that has ended or whose
// every item this instance knows to be sold out answers at once, without touching the captcha.
func (p *Purchases) IssueToken(ctx context.Context, userID, saleID int64, captchaID, answer, ip string) (string, time.Time, error) {
	tok, exp, known, err := p.issueToken(ctx, userID, saleID, captchaID, answer, ip)
	if err != nil && known {
		p.funnel.Record(saleID, err) // a shopper stopped before the purchase; an issued token is counted by its purchase
	}
	return tok, exp, err
}

// tokenGate is TokenGate's checks; it returns the sale's cached row and the time it judged by.
// known reports whether the sale exists.
func (p *Purchases) tokenGate(ctx context.Context, saleID int64) (_ store.Sale, now time.Time, known bool, _ error) {
	sale, err := p.sales.CachedRow(ctx, saleID)
	if err != nil {
		return store.Sale{}, now, false, err
	}
	now = p.now()
	if err := saleWindow(sale.StartsAt, sale.EndsAt, now); err != nil {
		return sale, now, true, err
	}
	if sale.Paused {
		return sale, now, true, shop.ErrPaused // as this instance's catalog knows it (at most a few seconds old)
	}
	if p.allSoldOut(sale) {
		return sale, now, true, errSoldOut
	}
	return sale, now, true, nil
}

// issueToken is IssueToken; known reports whether the sale exists.
func (p *Purchases) issueToken(ctx context.Context, userID, saleID int64, captchaID, answer, ip string) (_ string, _ time.Time, known bool, _ error) {
	sale, now, known, err := p.tokenGate(ctx, saleID)
	if err != nil {
		return "", time.Time{}, known, err
	}
	if err := p.limiter.Allow(ctx, saleID, userID, ip, limits.Of(sale)); err != nil {
		return "", time.Time{}, true, err
	}
	if captchaID == "" || len(captchaID) > 128 || answer == "" || len(answer) > 64 {
		return "", time.Time{}, true, shop.Errorf(shop.CodeCaptchaFailed, "the captcha answer is wrong or expired; solve a new one")
	}
	ok, err := p.captcha.Verify(ctx, userID, saleID, captchaID, answer)
	if err != nil {
		return "", time.Time{}, true, shop.Unavailable(err)
	}
	if !ok {
		return "", time.Time{}, true, shop.Errorf(shop.CodeCaptchaFailed, "the captcha answer is wrong or expired; solve a new one")
	}
	// Redis knows a pause at once on every instance (this instance trusts its answer for a
	// second, less where the pause's notice arrives); asked only for a solved captcha, so the
	// crowd refused earlier never pays this round trip.
	if err := p.sales.CheckPaused(ctx, sale); err != nil {
		return "", time.Time{}, true, err
	}
	exp := now.Add(p.cfg.TokenTTL)
	return p.tokens.sign(purchaseToken{UserID: userID, SaleID: saleID, Expires: exp, Nonce: mac.Nonce()}), exp, true, nil
}

// Purchase tries to buy one unit of itemID for userID with a purchase token. On success the
// order is durably queued and its id returned (the caller answers 202 QUEUED).
func (p *Purchases) Purchase(ctx context.Context, userID, itemID int64, token, ip string) (string, error) {
	id, saleID, err := p.purchase(ctx, userID, itemID, token, ip)
	p.funnel.Record(saleID, err) // in memory; flushed to Redis once a second, off this path
	outcome := "ACCEPTED"
	if err != nil {
		outcome = string(shop.ErrorCode(err))
	}
	p.metrics.Purchases.WithLabelValues(outcome).Inc()
	return id, err
}

// purchase returns the order id, and the item's sale when the item is known (0 otherwise).
func (p *Purchases) purchase(ctx context.Context, userID, itemID int64, token, ip string) (string, int64, error) {
	info, err := p.admit(ctx, userID, itemID, ip)
	if err != nil {
		return "", info.SaleID, err
	}
	tok, err := p.checkToken(info, userID, token)
	if err != nil {
		return "", info.SaleID, err
	}
	reservedAt := p.now()
	orderID, res, err := p.reserve(ctx, info, userID, tok)
	if err != nil {
		return "", info.SaleID, err
	}
	if res.Again {
		id, err := p.again(ctx, info, userID, orderID, res)
		return id, info.SaleID, err
	}
	faults.Reached(faults.AfterReserve)
	id, err := p.handOver(ctx, info, userID, orderID, res, reservedAt)
	if err == nil {
		faults.Reached(faults.AfterPubAck)
	}
	return id, info.SaleID, err
}

// admit runs the cheap checks that need no Redis call for the reservation: the item exists, the
// sale is open (by this instance's clock; the reserve script checks again on Redis's), the item
// is not known sold out here, and the shopper is within the rate limits. A refusal of a known
// item still returns it (its sale's funnel counts the refusal).
func (p *Purchases) admit(ctx context.Context, userID, itemID int64, ip string) (shop.ItemInfo, error) {
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
		return info, errSoldOut // no Redis call, no network
	}
	if err := p.limiter.Allow(ctx, info.SaleID, userID, ip, info.Limits); err != nil {
		return info, err
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

// raiseFloor raises a floor to seq (a floor never goes down).
func raiseFloor(floor *atomic.Int64, seq int64) {
	for {
		f := floor.Load()
		if seq <= f || floor.CompareAndSwap(f, seq) {
			return
		}
	}
}

// saleFloors are this instance's floors of one sale, one per stock shard (each shard has its own
// reservation counter): the highest seq it knows the shard issued. The reserve script refuses
// (and marks the sale lost) where Redis's counter is below it: Redis went back in time.
//
// A floor starts at the highest seq Postgres holds for the shard, read once per sale and
// instance before its first reserve there, and rises with every seq Redis answers. Starting at 0
// instead, an instance restarted after Redis lost writes would take the reissued seqs for new
// ones: once the counter passed the lost maximum, no check would ever see the loss.
type saleFloors struct {
	seeded atomic.Bool // shards hold Postgres's seqs (set once, after them)
	shards [shop.MaxStockShards]atomic.Int64

	mu       sync.Mutex
	seeding  chan struct{} // closed when the read under way ends; nil while none is
	failedAt time.Time     // the last read that failed, and why: the next waits floorRetry
	err      error
}

const (
	floorReadTimeout = 2 * time.Second        // a seed's read of Postgres, shared by whoever waits for it
	floorRetry       = 500 * time.Millisecond // after a failed read, purchases of the sale answer 503 at once this long
)

// floorsOf returns the floors of a sale of k shards, seeded from Postgres. The first purchase of
// the sale on this instance reads them (one query; purchases arriving meanwhile wait for the
// same read); every later one finds them in memory. Postgres unreachable: 503, and for
// floorRetry no purchase of the sale waits for another read. A floor of 0 would let a Redis that
// lost writes sell again the units it forgot, so the sale fails closed instead, like a Redis
// that cannot be reached.
func (p *Purchases) floorsOf(ctx context.Context, saleID int64, k int) (*saleFloors, error) {
	v, ok := p.floors.Load(saleID)
	if !ok {
		v, _ = p.floors.LoadOrStore(saleID, new(saleFloors))
	}
	f := v.(*saleFloors)
	if f.seeded.Load() {
		return f, nil
	}
	read := func(ctx context.Context) ([]int64, error) {
		seqs, err := p.maxSeqs(ctx, saleID, k)
		if err != nil {
			p.log.Warn("purchase: cannot read the sale's highest reservation seqs from postgres; its purchases answer 503 until it can", "sale", saleID, "err", err)
		}
		return seqs, err
	}
	return f, f.seed(ctx, p.now, read)
}

// seed sets f's floors from read, run once by one caller while the others wait for it (or for
// their ctx). After a failed read, callers get its error at once for floorRetry, then one reads
// again.
func (f *saleFloors) seed(ctx context.Context, now func() time.Time, read func(context.Context) ([]int64, error)) error {
	for {
		f.mu.Lock()
		if f.seeded.Load() {
			f.mu.Unlock()
			return nil
		}
		if ch := f.seeding; ch != nil {
			f.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if !f.failedAt.IsZero() && now().Sub(f.failedAt) < floorRetry {
			err := f.err
			f.mu.Unlock()
			return err
		}
		ch := make(chan struct{})
		f.seeding = ch
		f.mu.Unlock()

		// Detached from the caller: the read is shared with whoever waits for it.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), floorReadTimeout)
		seqs, err := read(rctx)
		cancel()

		f.mu.Lock()
		if err == nil {
			for sh, seq := range seqs {
				if sh < len(f.shards) {
					raiseFloor(&f.shards[sh], seq)
				}
			}
			f.seeded.Store(true)
		} else {
			f.failedAt, f.err = now(), err
		}
		f.seeding = nil
		close(ch)
		f.mu.Unlock()
		return err
	}
}

// maxSeqs are the highest reservation seqs Postgres holds for each of the sale's k shards.
func (p *Purchases) maxSeqs(ctx context.Context, saleID int64, k int) ([]int64, error) {
	if k <= 1 {
		n, err := p.db.MaxSeqOfSale(ctx, saleID)
		return []int64{n}, err
	}
	return p.db.MaxSeqOfShards(ctx, saleID, k)
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
	res, err := p.stock.Reserve(ctx, a)
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
	switch {
	case err == nil:
		raiseFloor(floor, res.Seq)
		return orderID, res, nil
	case errors.Is(err, store.ErrSoldOut):
		if res.AllEmpty {
			// a sharded sale's item is sold out only when every shard is empty and no
			// transfer is in flight; one empty shard only refuses this shopper
			p.soldOut.Mark(info.ItemID)
		}
		return "", res, errSoldOut
	case errors.Is(err, store.ErrAlreadyBuyer):
		msg := "you already hold an item of this sale (one per shopper); find it in your orders"
		if info.Limit == shop.LimitPerItem {
			msg = "you already hold this item (one per shopper); find it in your orders"
		}
		return "", res, &shop.Error{Code: shop.CodeAlreadyPurchased, Message: msg, OrderID: res.HeldOrder}
	case errors.Is(err, store.ErrTokenAlreadyUsed):
		return "", res, shop.Errorf(shop.CodeInvalidPurchaseToken, "this purchase token was already used or has expired; request a new one")
	case errors.Is(err, store.ErrNotStarted):
		return "", res, &shop.Error{Code: shop.CodeNotStarted, Message: "the sale has not started yet", RetryAfter: time.Second}
	case errors.Is(err, store.ErrEnded):
		return "", res, shop.Errorf(shop.CodeSaleEnded, "the sale has ended")
	case errors.Is(err, store.ErrPaused):
		return "", res, shop.ErrPaused
	case errors.Is(err, store.ErrRedisWentBack):
		p.log.Error("redis lost reservations (its counter went back): the sale fails closed until rebuilt from postgres", "sale", info.SaleID)
		p.metrics.RedisLoss.WithLabelValues("reserve").Inc()
		return "", res, shop.Unavailable(err)
	case errors.Is(err, store.ErrStockUnknown):
		return "", res, shop.Unavailable(err) // fail closed until the keeper rebuilds Redis from Postgres
	}
	// Still unknown: the script may have run. The unit, if taken, is left to orphan recovery (or
	// to a resend of this attempt, which finds it in flight and confirms it).
	p.log.Warn("reserve: outcome unknown; a unit it took goes back through orphan recovery", "order", orderID, "err", err)
	return "", res, shop.Unavailable(err)
}

// isRefusal reports whether err is one of the reserve script's answers (the outcome is known).
func isRefusal(err error) bool {
	for _, r := range [...]error{store.ErrSoldOut, store.ErrAlreadyBuyer, store.ErrTokenAlreadyUsed, store.ErrNotStarted,
		store.ErrEnded, store.ErrPaused, store.ErrRedisWentBack, store.ErrStockUnknown} {
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

// written reports whether Postgres holds orderID as a live order.
func (p *Purchases) written(ctx context.Context, orderID string) bool {
	have, err := p.db.ExistingOrders(ctx, []string{orderID})
	st, ok := have[orderID]
	return err == nil && ok && st != shop.StatusFailed
}

func orderView(o store.OrderDetail) shop.OrderView {
	v := shop.OrderView{OrderID: o.ID, ItemID: o.ItemID, SaleID: o.SaleID, Status: o.Status, ItemName: o.ItemName,
		PriceCents: o.PriceCents, Currency: o.Currency, SaleName: o.SaleName, CreatedAt: o.CreatedAt}
	if o.Status == shop.StatusPending || o.Status == shop.StatusPaid {
		payBy := o.PayBy.UTC()
		v.PayBy = &payBy
	}
	if o.Failure != nil {
		v.Failure = *o.Failure
	}
	return v
}

// Order returns a shopper's order; another shopper's order is NOT_FOUND.
func (p *Purchases) Order(ctx context.Context, userID int64, orderID string) (shop.OrderView, error) {
	itemID, id, ok := ItemOfOrderID(orderID)
	if !ok {
		return shop.OrderView{}, shop.Errorf(shop.CodeNotFound, "no order %q", orderID)
	}
	info, err := p.sales.Item(ctx, itemID)
	if err != nil {
		return shop.OrderView{}, err
	}
	if !info.Found {
		return shop.OrderView{}, shop.Errorf(shop.CodeNotFound, "no order %q", orderID)
	}
	// Redis first: once the writer settles an order it leaves flight after it is in Postgres,
	// so checking in this order never misses one in between.
	r, inFlight, rerr := p.stock.InFlightOrder(ctx, info.SaleID, id)
	if inFlight && r.UserID == userID && r.Claimed {
		// The writer holds it: it may be written already (its settle in Redis comes after the
		// commit, or failed): Postgres says, so a pay or cancel answer matches what it did.
		if o, err := p.db.OrderDetailByID(ctx, id); err == nil && o.UserID == userID {
			return orderView(o), nil
		}
	}
	if inFlight && r.UserID == userID {
		v := shop.OrderView{OrderID: id, ItemID: itemID, SaleID: info.SaleID, Status: shop.StatusQueued, CreatedAt: r.ReservedAt}
		p.sales.Describe(ctx, &v)
		p.queueEstimate(ctx, &v, r)
		return v, nil
	}
	o, err := p.db.OrderDetailByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) && rerr != nil {
		return shop.OrderView{}, shop.Unavailable(rerr) // it may be queued; Redis cannot say now
	}
	if errors.Is(err, store.ErrNotFound) || (err == nil && o.UserID != userID) {
		return shop.OrderView{}, shop.Errorf(shop.CodeNotFound, "no order %q", orderID)
	}
	if err != nil {
		return shop.OrderView{}, shop.Unavailable(err)
	}
	return orderView(o), nil
}

// Pay simulates the payment of a PENDING order within its window (by Postgres's clock, the one
// expiry uses: pay and expire racing on one order, exactly one wins). Paying a PAID order again
// succeeds (idempotent). Paying too late expires the order there and then, so the answer and the
// state agree.
func (p *Purchases) Pay(ctx context.Context, userID int64, orderID string) (shop.OrderView, error) {
	_, id, ok := ItemOfOrderID(orderID)
	if !ok {
		return shop.OrderView{}, shop.Errorf(shop.CodeNotFound, "no order %q", orderID)
	}
	if _, err := p.db.PayOrder(ctx, id, userID); err != nil {
		return shop.OrderView{}, shop.Unavailable(err)
	}
	v, err := p.Order(ctx, userID, id)
	if err != nil {
		return shop.OrderView{}, err
	}
	if v.Status == shop.StatusPending {
		// Not paid, still PENDING: its window has closed. Expire it now.
		rets, err := p.db.ExpireOrder(ctx, store.Order{ID: id, ItemID: v.ItemID})
		if err != nil {
			return shop.OrderView{}, shop.Unavailable(err)
		}
		if len(rets) > 0 {
			p.metrics.Expired.Inc()
			p.returns.Apply(ctx, rets)
		}
		if v, err = p.Order(ctx, userID, id); err != nil {
			return shop.OrderView{}, err
		}
	}
	switch v.Status {
	case shop.StatusPaid:
		return v, nil
	case shop.StatusExpired:
		return v, shop.Errorf(shop.CodeExpired, "the payment window of this order has closed; its unit went back on sale")
	case shop.StatusQueued:
		return v, shop.Errorf(shop.CodeNotPayable, "the order is still queued; pay once it is PENDING")
	default:
		return v, shop.Errorf(shop.CodeNotPayable, "the order is %s and cannot be paid", v.Status)
	}
}

// Cancel gives up a PENDING order of its shopper: it becomes CANCELLED and its unit goes back on
// sale, once. Any other state answers NOT_CANCELLABLE naming it.
func (p *Purchases) Cancel(ctx context.Context, userID int64, orderID string) (shop.OrderView, error) {
	v, err := p.Order(ctx, userID, orderID)
	if err != nil {
		return shop.OrderView{}, err
	}
	switch v.Status {
	case shop.StatusQueued:
		return v, shop.Errorf(shop.CodeNotCancellable, "the order is still QUEUED; it can be cancelled in a moment, once it is PENDING")
	case shop.StatusPending:
	default:
		return v, shop.Errorf(shop.CodeNotCancellable, "the order is %s and cannot be cancelled", v.Status)
	}
	rets, err := p.db.CancelOrder(ctx, store.Order{ID: v.OrderID, ItemID: v.ItemID}, userID)
	if err != nil {
		return shop.OrderView{}, shop.Unavailable(err)
	}
	if len(rets) > 0 {
		p.metrics.Cancelled.Inc()
		p.returns.Apply(ctx, rets)
	}
	if v, err = p.Order(ctx, userID, orderID); err != nil {
		return shop.OrderView{}, err
	}
	if v.Status != shop.StatusCancelled {
		return v, shop.Errorf(shop.CodeNotCancellable, "the order is %s and cannot be cancelled", v.Status)
	}
	return v, nil
}

// MyOrdersPage is how many orders one page of "my orders" holds.
const MyOrdersPage = 20

// MyOrders lists a shopper's orders (of one sale when saleID > 0), newest first by reservation
// time, a page after cursor ("" for the first); next is "" on the last page. The first page also
// lists the shopper's acknowledged orders the writer has not written yet, as QUEUED, from Redis
// (services/myorders.go): one pipelined round trip, and no Postgres query per request beyond the
// page (the sales that can hold one are read once a second).
func (p *Purchases) MyOrders(ctx context.Context, userID, saleID int64, cursor string) ([]shop.OrderView, string, error) {
	after, err := shop.CursorFrom(cursor, store.DecodeOrderCursor)
	if err != nil {
		return nil, "", err
	}
	var queued []queuedOrder
	if after == nil {
		// Redis first, as Order does: the writer settles an order in Redis only after writing
		// it, so one that leaves flight meanwhile is in the page read next.
		queued = p.queuedOrders(ctx, userID, saleID)
	}
	rows, next, err := p.db.OrdersOfUser(ctx, userID, saleID, after, MyOrdersPage)
	if err != nil {
		return nil, "", shop.Unavailable(err)
	}
	out := withQueued(rows, queued)
	if next == nil {
		return out, "", nil
	}
	return out, next.Encode(), nil
}

// queueEstimate fills in a QUEUED order's place in the queue; without Redis's answer it
// leaves the fields out rather than guess.
func (p *Purchases) queueEstimate(ctx context.Context, v *shop.OrderView, e store.InFlightEntry) {
	est, err := p.queueWait.Estimate(ctx, v.SaleID, e.Seq)
	if err != nil {
		p.log.Warn("queue position unknown", "order", v.OrderID, "err", err)
		return
	}
	v.Queue = &est
}
