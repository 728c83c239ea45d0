package purchase

import (
	"context"
	"time"

	"github.com/flashsale/flashsale/services/internal/mac"
	"github.com/flashsale/flashsale/shop"
)

// NewCaptcha returns a challenge for a shopper of a sale that has not ended.
func (p *Purchases) NewCaptcha(ctx context.Context, userID, saleID int64, ip string) (string, string, error) {
	sale, err := p.sales.CachedRow(ctx, saleID)
	if err != nil {
		return "", "", err
	}
	if !p.now().Before(sale.EndsAt) {
		return "", "", shop.Errorf(shop.CodeSaleEnded, "the sale has ended")
	}
	if err := p.limiter.Allow(ctx, saleID, userID, ip, sale.RateLimits()); err != nil {
		return "", "", err
	}
	id, img, err := p.captcha.New(ctx, userID, saleID)
	if err != nil {
		return "", "", shop.Unavailable(err)
	}
	return id, img, nil
}

// TokenGate answers the refusals of a purchase-token request that depend on the sale alone: an
// unknown sale, one outside its window, paused, or every item sold out (as this instance knows
// it). The handler asks it before anything else, the caller's identity included: after a
// sell-out the crowd is refused without a JWT verified, a body read or JSON decoded, and what
// it is told is what the public sale and stock routes say. nil means go on to IssueToken,
// which asks again.
func (p *Purchases) TokenGate(ctx context.Context, saleID int64) error {
	_, _, known, err := p.tokenGate(ctx, saleID, true)
	if err != nil && known {
		p.funnel.Record(saleID, err)
	}
	return err
}

// IssueToken gives a shopper a single-use purchase token for a live sale, once the captcha is
// solved. Before the start it answers NOT_STARTED with the wait; a sale that has ended answers at
// once, without touching the captcha. The sold-out flags are TokenGate's, asked first: a request
// it let through to ask Redis again (SoldOut.Refuses) is not refused here by the flag it renewed.
func (p *Purchases) IssueToken(ctx context.Context, userID, saleID int64, captchaID, answer, ip string) (string, time.Time, error) {
	tok, exp, known, err := p.issueToken(ctx, userID, saleID, captchaID, answer, ip)
	if err != nil && known {
		p.funnel.Record(saleID, err) // a shopper stopped before the purchase; an issued token is counted by its purchase
	}
	return tok, exp, err
}

// tokenGate is TokenGate's checks, the sold-out flags only with soldOut; it returns the sale's
// cached row and the time it judged by. known reports whether the sale exists.
func (p *Purchases) tokenGate(ctx context.Context, saleID int64, soldOut bool) (_ shop.Sale, now time.Time, known bool, _ error) {
	sale, err := p.sales.CachedRow(ctx, saleID)
	if err != nil {
		return shop.Sale{}, now, false, err
	}
	now = p.now()
	if err := saleWindow(sale.StartsAt, sale.EndsAt, now); err != nil {
		return sale, now, true, err
	}
	if sale.Paused {
		return sale, now, true, shop.ErrPaused // as this instance's catalog knows it (at most a few seconds old)
	}
	if soldOut && p.allSoldOut(ctx, sale) {
		return sale, now, true, shop.ErrSoldOut
	}
	if soldOut && p.budget.spent(saleID) {
		return sale, now, true, ErrSpokenFor
	}
	return sale, now, true, nil
}

// issueToken is IssueToken; known reports whether the sale exists.
func (p *Purchases) issueToken(ctx context.Context, userID, saleID int64, captchaID, answer, ip string) (_ string, _ time.Time, known bool, _ error) {
	sale, _, known, err := p.tokenGate(ctx, saleID, false)
	if err != nil {
		return "", time.Time{}, known, err
	}
	if err := p.limiter.Allow(ctx, saleID, userID, ip, sale.RateLimits()); err != nil {
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
	exp, err := p.budget.take(ctx, sale, userID, p.soldOut.Drained)
	if err != nil {
		return "", time.Time{}, true, err
	}
	return p.tokens.sign(purchaseToken{UserID: userID, SaleID: saleID, Expires: exp, Nonce: mac.Nonce()}), exp, true, nil
}
