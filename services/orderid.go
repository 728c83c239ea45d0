package services

import (
	"crypto/rand"
	"encoding/binary"
	"time"

	"github.com/google/uuid"
)

// NewOrderID returns a UUID (version 8, RFC 9562) that carries its item id: 48 bits of Unix
// milliseconds (so ids sort by time), 42 random bits, and the item id in the last 32 bits. A
// status poll can then find a queued order's in-flight entry under its item's hash tag without a
// global index.
func NewOrderID(itemID int64, now time.Time) string {
	var b [16]byte
	ms := uint64(now.UnixMilli())
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	_, _ = rand.Read(b[6:12])
	b[6] = 0x80 | (b[6] & 0x0f) // version 8
	b[8] = 0x80 | (b[8] & 0x3f) // RFC 9562 variant
	binary.BigEndian.PutUint32(b[12:], uint32(itemID))
	return uuid.UUID(b).String()
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
