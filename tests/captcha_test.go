package tests

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
)

// The image captcha: a PNG data URL; its answer works once, only for its user and sale.
func TestImageCaptcha(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{env: map[string]string{"FLASHSALE_CAPTCHA": "image"}})
	s := h.liveSale(5)
	other := h.liveSale(5)
	alice, bob := h.token(1, auth.RoleShopper), h.token(2, auth.RoleShopper)

	tokenReq := func(bearer string, sale int64, id, answer string) response {
		return h.do("POST", fmt.Sprintf("/api/flash-sales/%d/purchase-token", sale), bearer, map[string]string{"captchaId": id, "answer": answer})
	}

	id, answer := h.imageChallenge(alice, s.sale)
	if r := tokenReq(alice, s.sale, id, answer); r.Status != http.StatusOK || r.str("purchaseToken") == "" {
		t.Fatalf("right answer: %d %s", r.Status, r.Raw)
	}
	if r := tokenReq(alice, s.sale, id, answer); r.Status != http.StatusForbidden || r.str("error") != "CAPTCHA_FAILED" {
		t.Errorf("replayed answer: %d %s, want 403 CAPTCHA_FAILED", r.Status, r.Raw)
	}
	id, answer = h.imageChallenge(alice, s.sale)
	if r := tokenReq(alice, s.sale, id, "000000x"); r.Status != http.StatusForbidden || r.str("error") != "CAPTCHA_FAILED" {
		t.Errorf("wrong answer: %d %s, want 403 CAPTCHA_FAILED", r.Status, r.Raw)
	}
	if r := tokenReq(alice, s.sale, id, answer); r.Status != http.StatusForbidden {
		t.Errorf("right answer after a wrong one (one try per challenge): %d %s, want 403", r.Status, r.Raw)
	}
	id, answer = h.imageChallenge(alice, s.sale)
	if r := tokenReq(bob, s.sale, id, answer); r.Status != http.StatusForbidden {
		t.Errorf("another user's challenge: %d %s, want 403", r.Status, r.Raw)
	}
	id, answer = h.imageChallenge(alice, s.sale)
	if r := tokenReq(alice, other.sale, id, answer); r.Status != http.StatusForbidden {
		t.Errorf("another sale's challenge: %d %s, want 403", r.Status, r.Raw)
	}
	id, answer = h.imageChallenge(alice, s.sale)
	h.app.Redis.PExpire(context.Background(), "captcha:"+id, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	if r := tokenReq(alice, s.sale, id, answer); r.Status != http.StatusForbidden {
		t.Errorf("expired challenge: %d %s, want 403", r.Status, r.Raw)
	}
	h.checkInvariants(s)
}

// imageChallenge asks for an image captcha of the sale; the image must be a PNG data URL. It
// returns the challenge and its answer (the shopper reads the digits off the image; the test
// reads them where the server keeps them).
func (h *harness) imageChallenge(bearer string, sale int64) (id, answer string) {
	t := h.t
	t.Helper()
	c := h.do("POST", fmt.Sprintf("/api/flash-sales/%d/captcha", sale), bearer, nil)
	if c.Status != http.StatusOK {
		t.Fatalf("captcha: %d %s", c.Status, c.Raw)
	}
	img := c.str("image")
	const prefix = "data:image/png;base64,"
	png, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(img, prefix))
	if !strings.HasPrefix(img, prefix) || err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
		t.Fatalf("captcha image is not a PNG data URL: %.60s", img)
	}
	// The shopper reads the digits off the image; the test reads them where the server keeps them.
	v, err := h.app.Redis.Get(context.Background(), "captcha:"+c.str("captchaId")).Result()
	if err != nil {
		t.Fatalf("captcha answer in redis: %v", err)
	}
	_, answer, _ = strings.Cut(v, "|")
	if len(answer) != 6 {
		t.Fatalf("captcha answer %q, want six digits", answer)
	}
	return c.str("captchaId"), answer
}
