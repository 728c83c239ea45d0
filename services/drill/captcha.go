package drill

import (
	"context"
	"crypto/subtle"

	"github.com/flashsale/flashsale/services/captcha"
)

// ShopperBase is the first user id of the drill's synthetic shoppers: ids no account gets
// (accounts count up from 1), so a drill's orders never show in a real shopper's "my orders",
// and a synthetic shopper exists only as a signed token (no users row to remove afterwards).
const ShopperBase int64 = 1 << 62

// IsShopper tells a drill's synthetic shopper by its user id.
func IsShopper(userID int64) bool { return userID >= ShopperBase }

// ChallengeID is the captcha id the drill's shoppers send with the drill's answer.
const ChallengeID = "fire-drill"

// Captcha is the shop's captcha with the drill's rule on top: a drill copy's purchase tokens go
// to the drill's own shoppers, answering the running drill's secret, and to no one else (on
// every instance: IsCopy asks the catalog); the drill's shoppers pass no other sale's captcha.
// Everything else is the inner captcha's to decide.
type Captcha struct {
	Inner  captcha.Captcha
	Drills *Drills
	// IsCopy tells whether a sale is a drill copy (the catalog's cached row; false if unknown).
	IsCopy func(ctx context.Context, saleID int64) bool
}

// New renders the inner captcha's challenge (a copy's image can never be answered).
func (c Captcha) New(ctx context.Context, userID, saleID int64) (string, string, error) {
	return c.Inner.New(ctx, userID, saleID)
}

// Verify checks an answer under the drill's rule, then the inner captcha's.
func (c Captcha) Verify(ctx context.Context, userID, saleID int64, id, answer string) (bool, error) {
	if secret, ok := c.Drills.answerFor(saleID); ok {
		return IsShopper(userID) && id == ChallengeID && subtle.ConstantTimeCompare([]byte(answer), []byte(secret)) == 1, nil
	}
	if IsShopper(userID) || (c.IsCopy != nil && c.IsCopy(ctx, saleID)) {
		return false, nil
	}
	return c.Inner.Verify(ctx, userID, saleID, id, answer)
}
