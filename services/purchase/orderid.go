package purchase

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"time"

	"github.com/flashsale/flashsale/services/internal/mac"
	"github.com/google/uuid"
)

// NewOrderID returns a UUID (version 8, RFC 9562) that carries its item id: 48 bits of Unix
// milliseconds (so ids sort by time), 42 random bits, and the item id in the last 32 bits. A
// status poll can then find a queued order's in-flight entry under its item's hash tag without a
// global index. The purchase path names an order after its purchase attempt instead
// (attemptIDs); this is the same layout with random bits, for callers without a token.
func NewOrderID(itemID int64, now time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[6:12])
	return orderIDOf(&b, itemID, now)
}

// orderIDOf fills the time, version, variant and item id of b, whose bytes 6 to 11 hold the
// id's own bits, and formats it.
func orderIDOf(b *[16]byte, itemID int64, at time.Time) string {
	ms := uint64(at.UnixMilli())
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	b[6] = 0x80 | (b[6] & 0x0f) // version 8
	b[8] = 0x80 | (b[8] & 0x3f) // RFC 9562 variant
	binary.BigEndian.PutUint32(b[12:], uint32(itemID))
	return uuid.UUID(*b).String()
}

// attemptIDs names each purchase attempt's order after the attempt itself, so that the same
// attempt sent again (the shopper's page resends a purchase whose answer was lost) carries the
// same order id into the reserve script, which then answers it as it answered the first send
// instead of taking it for a second use of the token.
//
// The id keeps NewOrderID's layout: the token's issue time in the first 48 bits, the item id in
// the last 32, and in between 42 bits of HMAC-SHA256, under a key derived from the server's
// secret, of the token (shopper, sale, nonce) and the item. Another item bought with the
// same token is another id (a used token there, as before); nobody without the secret can tell
// the id an attempt will get or make two attempts collide: the nonce is 96 random bits, and the
// 42 bits are as unpredictable as NewOrderID's random ones.
type attemptIDs struct{ mac *mac.Pool }

func newAttemptIDs(secret []byte) attemptIDs {
	return attemptIDs{mac: mac.NewPool(mac.PurposeKey(secret, "flashsale order id v1"))}
}

// of returns the order id of the attempt tok makes on itemID; issued is when tok was issued.
func (a attemptIDs) of(tok purchaseToken, itemID int64, issued time.Time) string {
	// 48 bytes: with SHA-256's padding one block, so the sum costs two compressions (the keyed
	// states are pooled). The nonce alone names the token (96 random bits, one per token).
	var msg [8 + 8 + 8 + 24]byte
	binary.BigEndian.PutUint64(msg[0:], uint64(tok.UserID))
	binary.BigEndian.PutUint64(msg[8:], uint64(tok.SaleID))
	binary.BigEndian.PutUint64(msg[16:], uint64(itemID))
	copy(msg[24:], tok.Nonce)
	var sum [sha256.Size]byte
	a.mac.SumBytes(msg[:], &sum)
	var b [16]byte
	copy(b[6:12], sum[:6])
	return orderIDOf(&b, itemID, issued)
}

// ItemOfOrderID parses an order id and returns the item id it carries; ok is false for anything
// that is not an order id this package made.
func ItemOfOrderID(id string) (itemID int64, canonical string, ok bool) {
	if len(id) != 36 {
		return 0, "", false
	}
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 8 || u.Variant() != uuid.RFC4122 {
		return 0, "", false
	}
	item := int64(binary.BigEndian.Uint32(u[12:]))
	if item == 0 {
		return 0, "", false
	}
	return item, u.String(), true
}
