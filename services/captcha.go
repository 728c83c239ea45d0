package services

import (
	"context"
	"encoding/base64"
	"strings"
)

// Captcha renders challenges and checks answers, bound to a user and a sale.
type Captcha interface {
	// New returns a challenge id and its image as a data: URL.
	New(ctx context.Context, userID, saleID int64) (id, image string, err error)
	// Verify reports whether answer solves challenge id for this user and sale.
	Verify(ctx context.Context, userID, saleID int64, id, answer string) (bool, error)
}

// TestCaptcha is the provider for development, tests and benchmarks: its image says "type test"
// and the answer "test" always passes. The server refuses it when FLASHSALE_ENV=production.
type TestCaptcha struct{}

var testCaptchaImage = "data:image/svg+xml;base64," + base64.StdEncoding.EncodeToString([]byte(
	`<svg xmlns="http://www.w3.org/2000/svg" width="160" height="48" viewBox="0 0 160 48">`+
		`<rect width="160" height="48" rx="6" fill="#f4f4f5"/>`+
		`<text x="80" y="30" font-family="monospace" font-size="18" text-anchor="middle" fill="#18181b">type: test</text></svg>`))

// New returns a fresh id and the fixed image.
func (TestCaptcha) New(context.Context, int64, int64) (string, string, error) {
	return newNonce(), testCaptchaImage, nil
}

// Verify accepts the answer "test" for any non-empty challenge id.
func (TestCaptcha) Verify(_ context.Context, _, _ int64, id, answer string) (bool, error) {
	return id != "" && strings.EqualFold(strings.TrimSpace(answer), "test"), nil
}
