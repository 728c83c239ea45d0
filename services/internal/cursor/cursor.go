// Package cursor makes the listings' positions (shop.SaleCursor, shop.OrderCursor) opaque strings
// for clients, signed, so that a client can only send back positions this deployment gave out: a
// made-up position would be a query of its own that no cache holds (the listings are cached per
// cursor).
package cursor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale/services/internal/mac"
	"github.com/flashsale/flashsale/shop"
)

// maxLen bounds what a client may send as a cursor: anything longer was not given out here.
const maxLen = 200

// macLen is how many bytes of the HMAC-SHA256 a cursor carries (128 bits).
const macLen = 16

// Signer encodes and decodes cursors under a key derived from the server's secret. Every
// instance behind one address must share the secret (a cursor one instance gave out is paged on
// another): the app passes FLASHSALE_JWT_SECRET, from which a key of its own is derived, so the
// cursor MAC never doubles as a token signature. Changing the secret makes the cursors given out
// before refused (the API's 400 INVALID_INPUT, the home page's first page).
type Signer struct{ key []byte }

// New returns the Signer of secret.
func New(secret []byte) Signer {
	return Signer{key: mac.PurposeKey(secret, "flashsale listing cursor v1")}
}

// Sale encodes a position in a list of sales.
func (s Signer) Sale(c shop.SaleCursor) string {
	return s.encode(c.StartsAt, strconv.FormatInt(c.ID, 10))
}

// Order encodes a position in a list of orders.
func (s Signer) Order(c shop.OrderCursor) string { return s.encode(c.ReservedAt, c.ID) }

// ParseSale decodes what Sale made: nil for "" (the first page), INVALID_INPUT for anything else
// this deployment did not give out.
func (s Signer) ParseSale(str string) (*shop.SaleCursor, error) {
	return shop.CursorFrom(str, func(str string) (shop.SaleCursor, bool) {
		at, id, ok := s.decode(str)
		i, err := strconv.ParseInt(id, 10, 64)
		if !ok || err != nil || i <= 0 {
			return shop.SaleCursor{}, false
		}
		return shop.SaleCursor{StartsAt: at, ID: i}, true
	})
}

// ParseOrder decodes what Order made, as ParseSale does.
func (s Signer) ParseOrder(str string) (*shop.OrderCursor, error) {
	return shop.CursorFrom(str, func(str string) (shop.OrderCursor, bool) {
		at, id, ok := s.decode(str)
		if !ok || len(id) != 36 {
			return shop.OrderCursor{}, false
		}
		return shop.OrderCursor{ReservedAt: at, ID: id}, true
	})
}

func (s Signer) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write(payload)
	return m.Sum(nil)[:macLen]
}

// encode makes a keyset position (a time and an id) an opaque string: base64url of "micros|id",
// a dot, and base64url of its MAC.
func (s Signer) encode(at time.Time, id string) string {
	payload := []byte(strconv.FormatInt(at.UnixMicro(), 10) + "|" + id)
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(s.mac(payload))
}

// decode parses what encode made; ok is false for anything else: malformed, not signed with
// this deployment's key, or not byte for byte what encode writes (another spelling of a
// position, such as base64 with other trailing bits or a line break, would be another cache key
// for the same query).
func (s Signer) decode(str string) (at time.Time, id string, ok bool) {
	if len(str) > maxLen {
		return time.Time{}, "", false
	}
	p64, m64, found := strings.Cut(str, ".")
	if !found {
		return time.Time{}, "", false
	}
	payload, err := base64.RawURLEncoding.Strict().DecodeString(p64)
	if err != nil {
		return time.Time{}, "", false
	}
	sum, err := base64.RawURLEncoding.Strict().DecodeString(m64)
	if err != nil || !hmac.Equal(sum, s.mac(payload)) {
		return time.Time{}, "", false
	}
	us, id, found := strings.Cut(string(payload), "|")
	n, err := strconv.ParseInt(us, 10, 64)
	if !found || err != nil {
		return time.Time{}, "", false
	}
	at = time.UnixMicro(n)
	if s.encode(at, id) != str {
		return time.Time{}, "", false
	}
	return at, id, true
}
