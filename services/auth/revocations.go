package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale/store"
)

// RevocationLog is the log of ended sessions every instance shares (store.Revocations).
type RevocationLog interface {
	// Add records an ended session, dropping entries older than keep.
	Add(ctx context.Context, key [16]byte, exp time.Time, keep time.Duration) error
	// Since returns up to n sessions ended after the entry afterID ("": from the first); an
	// entry that cannot be read has a zero Expires.
	Since(ctx context.Context, afterID string, n int64) ([]store.Revocation, error)
}

// revocationRefresh is how often an instance reads the logouts of the others, at most: the
// check on each request is then a lookup in memory, never a Redis call.
const revocationRefresh = time.Second

// revocations is this instance's copy of the sessions ended by a logout, by the hash of the
// token's canonical form (revocationKey).
type revocations struct {
	shared RevocationLog // nil until With: the logouts of this instance only
	log    *slog.Logger

	mu     sync.RWMutex
	set    map[[16]byte]time.Time // revocationKey → when the token expires anyway
	lastID string                 // the last stream entry read
	size   atomic.Int64           // len(set), read without the lock (none: the usual case)
	pruned time.Time              // when expired entries were last dropped

	last    atomic.Int64 // when the last refresh started (Unix ns)
	running atomic.Bool
}

func tokenHash(token string) [16]byte {
	sum := sha256.Sum256([]byte(token))
	var h [16]byte
	copy(h[:], sum[:16])
	return h
}

// revocationKey is the key of token's session among the revoked ones: the hash of its canonical
// form, in which an HS256 signature is spelled as the encoder writes it (the unused low bits of
// its last character zero). Every spelling of one signed token has one key, so a logout ends
// them all even where a lenient decoder would take another spelling; the canonical form of a
// token Issue wrote is the token itself, so its key is what earlier versions recorded.
func revocationKey(token string) [16]byte {
	last := strings.LastIndexByte(token, '.')
	const sigLen = 43 // base64.RawURLEncoding.EncodedLen(sha256.Size)
	if last < 0 || len(token)-last-1 != sigLen {
		return tokenHash(token)
	}
	var sig [sha256.Size]byte
	var enc, canon [sigLen]byte
	if n, err := base64.RawURLEncoding.Decode(sig[:], enc[:copy(enc[:], token[last+1:])]); err != nil || n != len(sig) {
		return tokenHash(token)
	}
	base64.RawURLEncoding.Encode(canon[:], sig[:])
	if canon == enc {
		return tokenHash(token)
	}
	d := sha256.New()
	d.Write([]byte(token[:last+1]))
	d.Write(canon[:])
	var h [16]byte
	copy(h[:], d.Sum(nil))
	return h
}

// has reports whether token's session was ended, starting a refresh in the background when the
// last one is older than revocationRefresh.
func (r *revocations) has(token string) bool {
	if r.shared != nil {
		if now := time.Now().UnixNano(); now-r.last.Load() > int64(revocationRefresh) && r.running.CompareAndSwap(false, true) {
			go func() {
				defer r.running.Store(false)
				r.refresh()
			}()
		}
	}
	if r.size.Load() == 0 {
		return false
	}
	h := revocationKey(token)
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.set[h]
	return ok
}

// add records an ended session here and in Redis.
func (r *revocations) add(ctx context.Context, token string, exp time.Time, maxTTL time.Duration) error {
	h := revocationKey(token)
	r.mu.Lock()
	if r.set == nil {
		r.set = map[[16]byte]time.Time{}
	}
	r.set[h] = exp
	r.size.Store(int64(len(r.set)))
	r.mu.Unlock()
	if r.shared == nil {
		return nil
	}
	return r.shared.Add(ctx, h, exp, maxTTL+time.Minute)
}

// refresh reads the logouts recorded since the last read and forgets sessions expired anyway.
func (r *revocations) refresh() {
	r.last.Store(time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r.mu.RLock()
	from := r.lastID
	r.mu.RUnlock()
	for {
		msgs, err := r.shared.Since(ctx, from, 1000)
		if err != nil {
			if r.log != nil {
				r.log.Warn("sessions: cannot read logouts from redis", "err", err)
			}
			return
		}
		now := time.Now()
		r.mu.Lock()
		if r.set == nil {
			r.set = map[[16]byte]time.Time{}
		}
		for _, m := range msgs {
			r.lastID = m.ID
			if m.Expires.After(now) {
				r.set[m.Key] = m.Expires
			}
		}
		if now.Sub(r.pruned) > time.Minute {
			for h, exp := range r.set {
				if !exp.After(now) {
					delete(r.set, h)
				}
			}
			r.pruned = now
		}
		r.size.Store(int64(len(r.set)))
		r.mu.Unlock()
		if len(msgs) < 1000 {
			return
		}
		from = msgs[len(msgs)-1].ID
	}
}
