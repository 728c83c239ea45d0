package purchase

import (
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/internal/mac"
)

const b64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

func TestPurchaseTokenRoundTrip(t *testing.T) {
	t.Parallel()
	s := newTokenSigner([]byte("a secret of at least 16 bytes"))
	exp := time.UnixMilli(1_800_000_000_123)
	for _, in := range []purchaseToken{
		{UserID: 1, SaleID: 1, Expires: exp, Nonce: mac.Nonce()},
		{UserID: 1 << 62, SaleID: 9_000_000_000, Expires: exp.Add(time.Hour), Nonce: "000000000000000000000000"},
		{UserID: 42, SaleID: 7, Expires: exp, Nonce: "ffffffffffffffffffffffff"},
	} {
		tok := s.sign(in)
		if len(tok) != 71 || strings.Count(tok, ".") != 1 || tok[48] != '.' {
			t.Errorf("token %q: want 48 + '.' + 22 characters", tok)
		}
		out, ok := s.verify(tok)
		if !ok {
			t.Fatalf("verify(sign(%+v)) failed", in)
		}
		if out.UserID != in.UserID || out.SaleID != in.SaleID || !out.Expires.Equal(in.Expires) || out.Nonce != in.Nonce {
			t.Errorf("round trip = %+v, want %+v", out, in)
		}
	}
	if a, b := mac.Nonce(), mac.Nonce(); a == b || len(a) != 24 {
		t.Errorf("nonces %q, %q: want 24 distinct hex characters", a, b)
	}
}

func TestPurchaseTokenTampering(t *testing.T) {
	t.Parallel()
	s := newTokenSigner([]byte("a secret of at least 16 bytes"))
	tok := s.sign(purchaseToken{UserID: 5, SaleID: 6, Expires: time.Now().Add(time.Minute), Nonce: mac.Nonce()})

	// Any other character anywhere but the last is refused.
	for i := 0; i < len(tok)-1; i++ {
		for _, c := range b64url + ".=+/ " {
			if byte(c) == tok[i] {
				continue
			}
			forged := tok[:i] + string(c) + tok[i+1:]
			if _, ok := s.verify(forged); ok {
				t.Errorf("tampered at %d (%q → %q) verifies", i, tok[i], c)
			}
		}
	}
	// The last character carries 2 bits of the signature (the other 4 are padding): changing
	// those 2 bits is refused.
	last := strings.IndexByte(b64url, tok[len(tok)-1])
	for _, c := range b64url {
		v := strings.IndexRune(b64url, c)
		if v>>4 == last>>4 {
			continue
		}
		if _, ok := s.verify(tok[:len(tok)-1] + string(c)); ok {
			t.Errorf("signature's last bits changed (%q → %q) verifies", tok[len(tok)-1], c)
		}
	}

	other := newTokenSigner([]byte("another secret of 16 bytes or more"))
	if _, ok := other.verify(tok); ok {
		t.Errorf("a token verifies under another secret")
	}
	for name, bad := range map[string]string{
		"empty":              "",
		"one short":          tok[:len(tok)-1],
		"one long":           tok + "A",
		"padded":             tok + "=",
		"no signature":       tok[:49],
		"payload only":       tok[:48],
		"signature only":     tok[48:],
		"swapped halves":     tok[49:] + "." + tok[:48],
		"std base64 padding": tok[:69] + "==",
		"all dots":           strings.Repeat(".", len(tok)),
		"a JWT":              "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlc2lnbmF0dXJlc2lnbmF0dXJl",
	} {
		if _, ok := s.verify(bad); ok {
			t.Errorf("%s: %q verifies", name, bad)
		}
	}
}
