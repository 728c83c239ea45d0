package store

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// revokedStream is the Redis stream of ended sessions: one entry per logout, the token's key and
// when it would have expired; entries older than the longest token life are trimmed.
const revokedStream = "sessions:revoked"

// Revocations is the log of ended sessions that every instance shares (a Redis stream). It
// implements auth.RevocationLog.
type Revocations struct{ rdb redis.UniversalClient }

// NewRevocations returns the log kept in rdb.
func NewRevocations(rdb redis.UniversalClient) Revocations { return Revocations{rdb: rdb} }

// Revocation is one ended session: the key of its token, and when the token expires anyway
// (zero for an entry this version cannot read).
type Revocation struct {
	ID      string // the entry's id in the log, to read on after it
	Key     [16]byte
	Expires time.Time
}

// Add records an ended session, trimming entries older than keep.
func (r Revocations) Add(ctx context.Context, key [16]byte, exp time.Time, keep time.Duration) error {
	minID := strconv.FormatInt(time.Now().Add(-keep).UnixMilli(), 10)
	err := r.rdb.XAdd(ctx, &redis.XAddArgs{Stream: revokedStream, MinID: minID, Approx: true,
		Values: []string{"h", hex.EncodeToString(key[:]), "exp", strconv.FormatInt(exp.UnixMilli(), 10)}}).Err()
	if err != nil {
		return fmt.Errorf("record logout: %w", err)
	}
	return nil
}

// Since returns up to n sessions ended after the entry afterID ("": from the first).
func (r Revocations) Since(ctx context.Context, afterID string, n int64) ([]Revocation, error) {
	from := "-"
	if afterID != "" {
		from = "(" + afterID
	}
	msgs, err := r.rdb.XRangeN(ctx, revokedStream, from, "+", n).Result()
	if err != nil {
		return nil, err
	}
	out := make([]Revocation, len(msgs))
	for i, m := range msgs {
		out[i].ID = m.ID
		hs, _ := m.Values["h"].(string)
		ms, _ := m.Values["exp"].(string)
		expMS, err := strconv.ParseInt(ms, 10, 64)
		if n, herr := hex.Decode(out[i].Key[:], []byte(hs)); n != len(out[i].Key) || herr != nil || err != nil {
			out[i].Key = [16]byte{}
			continue
		}
		out[i].Expires = time.UnixMilli(expMS)
	}
	return out, nil
}
