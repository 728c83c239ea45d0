package store

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// maxCursor bounds what a client may send as a cursor: anything longer was not given out here.
const maxCursor = 200

// encodeCursor makes a keyset position (a time and an id) an opaque string for a client.
func encodeCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at.UnixMicro(), 10) + "|" + id))
}

// decodeCursor parses what encodeCursor made; ok is false for anything else.
func decodeCursor(s string) (at time.Time, id string, ok bool) {
	if len(s) > maxCursor {
		return time.Time{}, "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return time.Time{}, "", false
	}
	us, id, ok := strings.Cut(string(raw), "|")
	n, err := strconv.ParseInt(us, 10, 64)
	if !ok || err != nil {
		return time.Time{}, "", false
	}
	return time.UnixMicro(n), id, true
}
