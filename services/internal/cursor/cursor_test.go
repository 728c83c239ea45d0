package cursor_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/internal/cursor"
	"github.com/flashsale/flashsale/shop"
)

// Cursors round-trip, and anything this server did not give out (junk, too long, the other
// kind's) is refused.
func TestCursors(t *testing.T) {
	setSecret([]byte("a deployment's secret"))
	at := time.UnixMicro(1764550000123456)
	o := shop.OrderCursor{ReservedAt: at, ID: "01a22f2c-d409-845b-ad2f-fe1a00000016"}
	if got, ok := decodeOrder(signer.Order(o)); !ok || got != o {
		t.Errorf("order cursor round trip = %+v, %v", got, ok)
	}
	sc := shop.SaleCursor{StartsAt: at, ID: 42}
	if got, ok := decodeSale(signer.Sale(sc)); !ok || !got.StartsAt.Equal(at) || got.ID != 42 {
		t.Errorf("sale cursor round trip = %+v, %v", got, ok)
	}
	for _, bad := range []string{"", "nonsense", "!!!", signer.Sale(sc) + strings.Repeat("A", 200)} {
		if _, ok := decodeOrder(bad); ok {
			t.Errorf("order cursor %q accepted", bad)
		}
		if _, ok := decodeSale(bad); ok {
			t.Errorf("sale cursor %q accepted", bad)
		}
	}
	if _, ok := decodeOrder(signer.Sale(sc)); ok {
		t.Error("a sale cursor was taken for an order cursor")
	}
	if _, ok := decodeSale(signer.Order(o)); ok {
		t.Error("an order cursor was taken for a sale cursor")
	}
}

// A cursor is signed: a client can send back only the positions this deployment gave out, in
// exactly the spelling it gave them out (each other spelling of a position would be a cache key
// of its own, so a query no cache holds). Instances sharing the secret read each other's.
func TestCursorsAreSigned(t *testing.T) {
	setSecret([]byte("one deployment's secret, 32 bytes or more"))
	at := time.UnixMicro(1764550000123456)
	sc := shop.SaleCursor{StartsAt: at, ID: 42}
	good := signer.Sale(sc)
	if _, ok := decodeSale(good); !ok {
		t.Fatalf("a cursor given out here was refused: %q", good)
	}
	payload, mac, found := strings.Cut(good, ".")
	if !found {
		t.Fatalf("cursor %q has no MAC part", good)
	}
	b64 := base64.RawURLEncoding
	raw, _ := b64.DecodeString(payload)
	// The position moved on: another time, another id, the MAC kept.
	moved := strings.Replace(string(raw), "|42", "|43", 1)
	// A well-formed cursor of the old, unsigned kind: base64url of "micros|id".
	unsigned := b64.EncodeToString([]byte("1764550000123456|42"))
	// The last character of each part with its unused low bits set: the same bytes decoded.
	lowBits := func(s string) string {
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		last := strings.IndexByte(alphabet, s[len(s)-1])
		return s[:len(s)-1] + string(alphabet[last|1])
	}
	flipped := []byte(mac)
	flipped[0] ^= 'A' ^ 'B'
	for name, bad := range map[string]string{
		"moved position":        b64.EncodeToString([]byte(moved)) + "." + mac,
		"unsigned":              unsigned,
		"unsigned with a dot":   unsigned + ".",
		"another MAC":           payload + "." + string(flipped),
		"MAC cut short":         payload + "." + mac[:len(mac)-2],
		"payload low bits":      lowBits(payload) + "." + mac,
		"MAC low bits":          payload + "." + lowBits(mac),
		"line break":            payload[:4] + "\n" + payload[4:] + "." + mac,
		"trailing line break":   good + "\n",
		"padded":                payload + "==." + mac,
		"standard base64":       strings.NewReplacer("-", "+", "_", "/").Replace(good) + "+/",
		"two dots":              good + ".AAAA",
		"leading zeros in time": b64.EncodeToString([]byte("01764550000123456|42")) + "." + mac,
	} {
		if bad == good {
			continue // the low bits of this one were already set
		}
		if _, ok := decodeSale(bad); ok {
			t.Errorf("%s: cursor %q accepted", name, bad)
		}
	}
	// Another deployment's secret: its cursors are not this one's.
	setSecret([]byte("another deployment's secret, also 32+ bytes"))
	if _, ok := decodeSale(good); ok {
		t.Error("a cursor signed with another secret was accepted")
	}
	// The same secret again (another instance of the first deployment): accepted.
	setSecret([]byte("one deployment's secret, 32 bytes or more"))
	if got, ok := decodeSale(good); !ok || got.ID != 42 || !got.StartsAt.Equal(at) {
		t.Errorf("an instance with the same secret read %q as %+v, %v", good, got, ok)
	}
}

// signer is the Signer of the secret the test set last (setSecret): an instance of a deployment.
var signer cursor.Signer

func setSecret(secret []byte) { signer = cursor.New(secret) }

func decodeSale(s string) (shop.SaleCursor, bool) {
	p, err := signer.ParseSale(s)
	if err != nil || p == nil {
		return shop.SaleCursor{}, false
	}
	return *p, true
}

func decodeOrder(s string) (shop.OrderCursor, bool) {
	p, err := signer.ParseOrder(s)
	if err != nil || p == nil {
		return shop.OrderCursor{}, false
	}
	return *p, true
}
