package services

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/flashsale/flashsale/store"
)

// Order statuses as clients see them; QUEUED is a reservation not yet in Postgres.
const (
	StatusQueued = "QUEUED"
)

// OrderView is one order as its shopper sees it.
type OrderView struct {
	OrderID string
	ItemID  int64
	Status  string
	PayBy   *time.Time
}

// Publisher durably queues a reservation and answers only once it is durable.
type Publisher interface {
	Publish(ctx context.Context, o store.QueuedOrder) error
}

// PurchaseConfig are the tunables of the purchase path.
type PurchaseConfig struct {
	TokenTTL      time.Duration // how long a purchase token is valid
	PayWindow     time.Duration // how long a PENDING order may be paid
	SlowPublish   time.Duration // a PubAck later than this after the reservation is confirmed against the writer's claim; well under the orphan age
	SigningSecret []byte
}

// Purchases is the hot path: captcha, purchase tokens, the Redis reserve, the durable hand-off,
// and the shopper's view of an order.
type Purchases struct {
	cfg     PurchaseConfig
	sales   *Sales
	stock   *store.Stock
	db      *store.DB
	pub     Publisher
	captcha Captcha
	soldOut *SoldOut
	limiter *Limiter
	tokens  tokenSigner
	metrics *Metrics
	log     *slog.Logger
	now     func() time.Time
}

// NewPurchases returns the purchase service.
func NewPurchases(cfg PurchaseConfig, sales *Sales, stock *store.Stock, db *store.DB, pub Publisher, captcha Captcha, soldOut *SoldOut, limiter *Limiter, m *Metrics, log *slog.Logger, now func() time.Time) *Purchases {
	return &Purchases{cfg: cfg, sales: sales, stock: stock, db: db, pub: pub, captcha: captcha, soldOut: soldOut, limiter: limiter,
		tokens: newTokenSigner(cfg.SigningSecret), metrics: m, log: log, now: now}
}

func retryAfter(d time.Duration) time.Duration {
	return ((d + time.Second - 1) / time.Second) * time.Second
}

var errSoldOut = Errorf(CodeSoldOut, "sold out: every unit has been taken")

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
		return &Error{Code: CodeNotStarted, Message: "the sale has not started yet", RetryAfter: retryAfter(startsAt.Sub(now))}
	}
	if !now.Before(endsAt) {
		return Errorf(CodeSaleEnded, "the sale has ended")
	}
	return nil
}

// NewCaptcha returns a challenge for a shopper of a sale that has not ended.
func (p *Purchases) NewCaptcha(ctx context.Context, userID, saleID int64, ip string) (string, string, error) {
	sale, err := p.sales.Cached(ctx, saleID)
	if err != nil {
		return "", "", err
	}
	if !p.now().Before(sale.EndsAt) {
		return "", "", Errorf(CodeSaleEnded, "the sale has ended")
	}
	if err := p.limiter.Allow(ctx, saleID, userID, ip, LimitsOf(sale)); err != nil {
		return "", "", err
	}
	id, img, err := p.captcha.New(ctx, userID, saleID)
	if err != nil {
		return "", "", unavailable(err)
	}
	return id, img, nil
}

// IssueToken gives a shopper a single-use purchase token for a live sale, once the captcha is
// solved. Before the start it answers NOT_STARTED with the wait; a sale that has ended or whose
// every item this instance knows to be sold out answers at once, without touching the captcha.
func (p *Purchases) IssueToken(ctx context.Context, userID, saleID int64, captchaID, answer, ip string) (string, time.Time, error) {
	sale, err := p.sales.Cached(ctx, saleID)
	if err != nil {
		return "", time.Time{}, err
	}
	now := p.now()
	if err := saleWindow(sale.StartsAt, sale.EndsAt, now); err != nil {
		return "", time.Time{}, err
	}
	if p.allSoldOut(sale) {
		return "", time.Time{}, Errorf(CodeSoldOut, "sold out: every unit has been taken")
	}
	if err := p.limiter.Allow(ctx, saleID, userID, ip, LimitsOf(sale)); err != nil {
		return "", time.Time{}, err
	}
	if captchaID == "" || len(captchaID) > 128 || answer == "" || len(answer) > 64 {
		return "", time.Time{}, Errorf(CodeCaptchaFailed, "the captcha answer is wrong or expired; solve a new one")
	}
	ok, err := p.captcha.Verify(ctx, userID, saleID, captchaID, answer)
	if err != nil {
		return "", time.Time{}, unavailable(err)
	}
	if !ok {
		return "", time.Time{}, Errorf(CodeCaptchaFailed, "the captcha answer is wrong or expired; solve a new one")
	}
	exp := now.Add(p.cfg.TokenTTL)
	return p.tokens.sign(purchaseToken{UserID: userID, SaleID: saleID, Expires: exp, Nonce: newNonce()}), exp, nil
}

// Purchase tries to buy one unit of itemID for userID with a purchase token. On success the
// order is durably queued and its id returned (the caller answers 202 QUEUED).
func (p *Purchases) Purchase(ctx context.Context, userID, itemID int64, token, ip string) (string, error) {
	id, err := p.purchase(ctx, userID, itemID, token, ip)
	if p.metrics != nil {
		outcome := "ACCEPTED"
		if err != nil {
			outcome = string(ErrorCode(err))
		}
		p.metrics.Purchases.WithLabelValues(outcome).Inc()
	}
	return id, err
}

func (p *Purchases) purchase(ctx context.Context, userID, itemID int64, token, ip string) (string, error) {
	info, err := p.sales.item(ctx, itemID)
	if err != nil {
		return "", err
	}
	if !info.found {
		return "", Errorf(CodeNotFound, "no item %d", itemID)
	}
	now := p.now()
	if err := saleWindow(info.StartsAt, info.EndsAt, now); err != nil {
		return "", err
	}
	if p.soldOut.Is(itemID) {
		return "", errSoldOut // no Redis call, no network
	}
	if err := p.limiter.Allow(ctx, info.SaleID, userID, ip, info.Limits); err != nil {
		return "", err
	}
	tok, ok := p.tokens.verify(token)
	if !ok || tok.UserID != userID || tok.SaleID != info.SaleID || !now.Before(tok.Expires) {
		return "", Errorf(CodeInvalidPurchaseToken, "the purchase token is missing, invalid, expired or for another sale; request a new one")
	}
	orderID := NewOrderID(itemID, now)
	_, err = p.stock.Reserve(ctx, itemID, userID, orderID, tok.Nonce, tok.Expires.Sub(now)+time.Second, now)
	switch {
	case err == nil:
	case errors.Is(err, store.ErrSoldOut):
		p.soldOut.Mark(itemID)
		return "", errSoldOut
	case errors.Is(err, store.ErrAlreadyBuyer):
		return "", Errorf(CodeAlreadyPurchased, "you already hold this item (one per shopper)")
	case errors.Is(err, store.ErrTokenAlreadyUsed):
		return "", Errorf(CodeInvalidPurchaseToken, "this purchase token was already used; request a new one")
	case errors.Is(err, store.ErrStockUnknown):
		return "", unavailable(err) // fail closed until the warmer rebuilds Redis from Postgres
	default:
		return "", unavailable(err)
	}
	q := store.QueuedOrder{OrderID: orderID, ItemID: itemID, UserID: userID, ReservedAt: now.UnixMilli()}
	perr := p.pub.Publish(ctx, q)
	// Timed from the reservation itself, not from the publish: a pause anywhere since then
	// counts, because orphan recovery judges a reservation by its age.
	if perr == nil && p.now().Sub(now) < p.cfg.SlowPublish {
		return orderID, nil
	}
	// The publish failed, or was so slow that orphan recovery might be looking at this
	// reservation: settle who owns it, atomically, in Redis. Released: nothing was sold (and a
	// message that did reach the queue will be skipped by the writer). Claimed: the writer holds
	// the order from the queue, so it is durable.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if perr == nil {
		claimed, err := p.stock.Claim(rctx, itemID, []string{orderID})
		if err == nil && len(claimed) == 1 && claimed[0] {
			return orderID, nil
		}
		if err != nil {
			p.log.Warn("slow publish: claim failed; orphan recovery decides", "order", orderID, "err", err)
		} else if p.written(rctx, orderID) {
			return orderID, nil // the writer was faster than this check: the order exists
		}
		return "", unavailable(errors.New("publish acknowledged after the reservation was recovered"))
	}
	outcome, err := p.stock.Release(rctx, itemID, orderID, true, false)
	if err != nil {
		// The reservation stays in flight; orphan recovery gives it back within a minute.
		p.log.Warn("publish failed and release failed; orphan recovery will return the unit", "order", orderID, "publish_err", perr, "err", err)
		return "", unavailable(perr)
	}
	if outcome == store.Claimed || (outcome == store.NotInFlight && p.written(rctx, orderID)) {
		return orderID, nil // the message did reach the queue: the order is (being) written
	}
	if outcome == store.Released {
		p.soldOut.Returned(itemID)
		if p.metrics != nil {
			p.metrics.Released.WithLabelValues("publish_failed").Inc()
		}
	}
	p.log.Warn("publish failed; unit released", "order", orderID, "err", perr)
	return "", unavailable(perr)
}

// written reports whether Postgres holds orderID as a live order.
func (p *Purchases) written(ctx context.Context, orderID string) bool {
	have, err := p.db.ExistingOrders(ctx, []string{orderID})
	st, ok := have[orderID]
	return err == nil && ok && st != store.StatusFailed
}

// Order returns a shopper's order; another shopper's order is NOT_FOUND.
func (p *Purchases) Order(ctx context.Context, userID int64, orderID string) (OrderView, error) {
	itemID, id, ok := ItemOfOrderID(orderID)
	if !ok {
		return OrderView{}, Errorf(CodeNotFound, "no order %q", orderID)
	}
	// Redis first: once the writer settles an order it leaves flight after it is in Postgres,
	// so checking in this order never misses one in between.
	r, inFlight, rerr := p.stock.InFlightOrder(ctx, itemID, id)
	if inFlight && r.UserID == userID {
		return OrderView{OrderID: id, ItemID: itemID, Status: StatusQueued}, nil
	}
	o, err := p.db.OrderByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) && rerr != nil {
		return OrderView{}, unavailable(rerr) // it may be queued; Redis cannot say now
	}
	if errors.Is(err, store.ErrNotFound) || (err == nil && o.UserID != userID) {
		return OrderView{}, Errorf(CodeNotFound, "no order %q", orderID)
	}
	if err != nil {
		return OrderView{}, unavailable(err)
	}
	payBy := o.PayBy.UTC()
	return OrderView{OrderID: id, ItemID: o.ItemID, Status: o.Status, PayBy: &payBy}, nil
}

// Pay simulates the payment of a PENDING order within its window. Paying a PAID order again
// succeeds (idempotent).
func (p *Purchases) Pay(ctx context.Context, userID int64, orderID string) (OrderView, error) {
	_, id, ok := ItemOfOrderID(orderID)
	if !ok {
		return OrderView{}, Errorf(CodeNotFound, "no order %q", orderID)
	}
	now := p.now()
	if _, err := p.db.PayOrder(ctx, id, userID, now); err != nil {
		return OrderView{}, unavailable(err)
	}
	v, err := p.Order(ctx, userID, id)
	if err != nil {
		return OrderView{}, err
	}
	switch {
	case v.Status == store.StatusPaid:
		return v, nil
	case v.Status == store.StatusExpired || (v.Status == store.StatusPending && v.PayBy != nil && !now.Before(*v.PayBy)):
		return v, Errorf(CodeExpired, "the payment window of this order has closed")
	case v.Status == StatusQueued:
		return v, Errorf(CodeNotPayable, "the order is still queued; pay once it is PENDING")
	default:
		return v, Errorf(CodeNotPayable, "the order is %s and cannot be paid", v.Status)
	}
}
