// Package mac signs with HMAC-SHA256 keys derived from the server's secret, one key per use, with
// the keyed states pooled so that a signature allocates nothing.
package mac

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"sync"
)

// PurposeKey derives from the server's secret the key of one use (purchase tokens, order ids),
// so that no MAC made for one can pass for another.
func PurposeKey(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// Pool hands out HMAC-SHA256 states keyed once: Reset brings one back to its keyed state, so
// a sum costs the message's blocks only, not the two more that keying takes. Each state comes
// with a buffer to copy the message into (the HMAC takes bytes, the tokens are strings).
type Pool struct {
	key  []byte
	pool sync.Pool
}

type state struct {
	h   hash.Hash
	buf []byte
	out [sha256.Size]byte // Sum appends here: a caller's array passed to it would escape
}

func NewPool(key []byte) *Pool { return &Pool{key: key} }

// Sum writes HMAC-SHA256(key, msg) into out.
func (m *Pool) Sum(msg string, out *[sha256.Size]byte) {
	st := m.get()
	st.buf = append(st.buf[:0], msg...)
	st.h.Write(st.buf)
	m.put(st, out)
}

// SumBytes is sum of a message in bytes (copied too: msg, often an array on the caller's
// stack, would escape through the hash's interface).
func (m *Pool) SumBytes(msg []byte, out *[sha256.Size]byte) {
	st := m.get()
	st.buf = append(st.buf[:0], msg...)
	st.h.Write(st.buf)
	m.put(st, out)
}

func (m *Pool) get() *state {
	st, ok := m.pool.Get().(*state)
	if ok {
		st.h.Reset()
	} else {
		st = &state{h: hmac.New(sha256.New, m.key)}
	}
	return st
}

// put writes the state's sum into out and gives the state back to the pool.
func (m *Pool) put(st *state, out *[sha256.Size]byte) {
	*out = [sha256.Size]byte(st.h.Sum(st.out[:0]))
	if cap(st.buf) > 4096 {
		st.buf = nil // a token that long is refused anyway; keep the pool small
	}
	m.pool.Put(st)
}

// Nonce returns 12 random bytes in hex: a purchase token's or a captcha challenge's id.
func Nonce() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
