package store

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// maxCursor bounds what a client may send as a cursor: anything longer was not given out here.
const maxCursor = 200

// cursorMACLen is how many bytes of the HMAC-SHA256 a cursor carries (128 bits).
const cursorMACLen = 16

// cursorKey signs the cursors given out (SetCursorSecret). Until it is set, a random key of this
// process: its cursors work here and nowhere else.
var cursorKey atomic.Pointer[[]byte]

func init() {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	cursorKey.Store(&k)
}

// SetCursorSecret sets the secret the listing cursors are signed with. Every instance behind one
// address must share it (a cursor one instance gave out is paged on another): the app passes
// FLASHSALE_JWT_SECRET, from which a key of its own is derived, so the cursor MAC never doubles
// as a token signature. Changing the secret makes the cursors given out before refused (the
// API's 400 INVALID_INPUT, the home page's first page).
func SetCursorSecret(secret []byte) {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("flashsale listing cursor v1"))
	k := m.Sum(nil)
	cursorKey.Store(&k)
}

func cursorMAC(payload []byte) []byte {
	m := hmac.New(sha256.New, *cursorKey.Load())
	m.Write(payload)
	return m.Sum(nil)[:cursorMACLen]
}

// encodeCursor makes a keyset position (a time and an id) an opaque string for a client:
// base64url of "micros|id", a dot, and base64url of its MAC. Signed, so that a client can only
// send back positions this server gave out: a made-up position would be a query of its own that
// no cache holds (the listing is cached per cursor).
func encodeCursor(at time.Time, id string) string {
	payload := []byte(strconv.FormatInt(at.UnixMicro(), 10) + "|" + id)
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(cursorMAC(payload))
}

// decodeCursor parses what encodeCursor made; ok is false for anything else: malformed, not
// signed with this deployment's key, or not byte for byte what encodeCursor writes (another
// spelling of a position, such as base64 with other trailing bits or a line break, would be
// another cache key for the same query).
func decodeCursor(s string) (at time.Time, id string, ok bool) {
	if len(s) > maxCursor {
		return time.Time{}, "", false
	}
	p64, m64, found := strings.Cut(s, ".")
	if !found {
		return time.Time{}, "", false
	}
	payload, err := base64.RawURLEncoding.Strict().DecodeString(p64)
	if err != nil {
		return time.Time{}, "", false
	}
	mac, err := base64.RawURLEncoding.Strict().DecodeString(m64)
	if err != nil || !hmac.Equal(mac, cursorMAC(payload)) {
		return time.Time{}, "", false
	}
	us, id, found := strings.Cut(string(payload), "|")
	n, err := strconv.ParseInt(us, 10, 64)
	if !found || err != nil {
		return time.Time{}, "", false
	}
	at = time.UnixMicro(n)
	if encodeCursor(at, id) != s {
		return time.Time{}, "", false
	}
	return at, id, true
}
