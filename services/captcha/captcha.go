// Package captcha issues and checks the challenges a shopper solves before a purchase token (and
// before registering): images from a library, answers kept in Redis, each verified once.
package captcha

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/dchest/captcha"

	"github.com/flashsale/flashsale/services/internal/mac"
	"github.com/flashsale/flashsale/store"
)

// Captcha renders challenges and checks answers, bound to a user and a sale, or, for a
// registration, to RegistrationUser and RegistrationSale.
type Captcha interface {
	// New returns a challenge id and its image as a data: URL.
	New(ctx context.Context, userID, saleID int64) (id, image string, err error)
	// Verify reports whether answer solves challenge id for this user and sale. A challenge
	// can be verified once only.
	Verify(ctx context.Context, userID, saleID int64, id, answer string) (bool, error)
}

// Image renders six distorted digits (github.com/dchest/captcha) and keeps the answer in
// Redis, bound to the user and the sale, checked once and only once, expiring with the store.
type Image struct {
	Store *store.Challenges
}

const captchaDigits = 6

// A registration's challenge is bound to user 0 and sale 0: no purchase challenge can be (user
// and sale ids are positive), so an answer for one is never taken for the other.
const (
	RegistrationUser int64 = 0
	RegistrationSale int64 = 0
)

func binding(userID, saleID int64) string {
	return strconv.FormatInt(userID, 10) + ":" + strconv.FormatInt(saleID, 10)
}

// New renders a fresh challenge.
func (c Image) New(ctx context.Context, userID, saleID int64) (string, string, error) {
	id := mac.Nonce()
	digits := captcha.RandomDigits(captchaDigits)
	answer := make([]byte, len(digits))
	for i, d := range digits {
		answer[i] = '0' + d
	}
	if err := c.Store.Put(ctx, id, binding(userID, saleID), string(answer)); err != nil {
		return "", "", err
	}
	var buf bytes.Buffer
	if _, err := captcha.NewImage(id, digits, 240, 80).WriteTo(&buf); err != nil {
		return "", "", err
	}
	return id, "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// Verify takes the challenge (one try) and compares the answer in constant time.
func (c Image) Verify(ctx context.Context, userID, saleID int64, id, answer string) (bool, error) {
	v, ok, err := c.Store.Take(ctx, id)
	if err != nil || !ok {
		return false, err
	}
	bound, want, _ := strings.Cut(v, "|")
	got := strings.Map(func(r rune) rune {
		if r == ' ' {
			return -1
		}
		return r
	}, answer)
	return bound == binding(userID, saleID) && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1, nil
}

// Test is the provider for development, tests and benchmarks: its image says "type test"
// and the answer "test" always passes. The server refuses it when FLASHSALE_ENV=production.
type Test struct{}

var testCaptchaImage = "data:image/svg+xml;base64," + base64.StdEncoding.EncodeToString([]byte(
	`<svg xmlns="http://www.w3.org/2000/svg" width="160" height="48" viewBox="0 0 160 48">`+
		`<rect width="160" height="48" rx="6" fill="#f4f4f5"/>`+
		`<text x="80" y="30" font-family="monospace" font-size="18" text-anchor="middle" fill="#18181b">type: test</text></svg>`))

// New returns a fresh id and the fixed image.
func (Test) New(context.Context, int64, int64) (string, string, error) {
	return mac.Nonce(), testCaptchaImage, nil
}

// Verify accepts the answer "test" for any non-empty challenge id.
func (Test) Verify(_ context.Context, _, _ int64, id, answer string) (bool, error) {
	return id != "" && strings.EqualFold(strings.TrimSpace(answer), "test"), nil
}
