package services

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"sync"
	"time"
)

// purchaseToken is a signed, short-lived permission to attempt one purchase in one sale. It is
// stateless to issue; its single use is enforced by the reserve script, which marks its nonce.
type purchaseToken struct {
	UserID  int64
	SaleID  int64
	Expires time.Time
	Nonce   string // 24 hex characters
}

const tokenPayloadLen = 8 + 8 + 8 + 12

// tokenSigner signs and verifies purchase tokens with HMAC-SHA256.
type tokenSigner struct{ mac *macPool }

func newTokenSigner(secret []byte) tokenSigner {
	return tokenSigner{mac: newMACPool(purposeKey(secret, "flashsale purchase token v1"))}
}

// purposeKey derives from the server's secret the key of one use (purchase tokens, order ids),
// so that no MAC made for one can pass for another.
func purposeKey(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// macPool hands out HMAC-SHA256 states keyed once: Reset brings one back to its keyed state, so
// a sum costs the message's blocks only, not the two more that keying takes. Each state comes
// with a buffer to copy the message into (the HMAC takes bytes, the tokens are strings).
type macPool struct {
	key  []byte
	pool sync.Pool
}

type macState struct {
	h   hash.Hash
	buf []byte
	out [sha256.Size]byte // Sum appends here: a caller's array passed to it would escape
}

func newMACPool(key []byte) *macPool { return &macPool{key: key} }

// sum writes HMAC-SHA256(key, msg) into out.
func (m *macPool) sum(msg string, out *[sha256.Size]byte) {
	st := m.get()
	st.buf = append(st.buf[:0], msg...)
	st.h.Write(st.buf)
	m.put(st, out)
}

// sumBytes is sum of a message in bytes (copied too: msg, often an array on the caller's
// stack, would escape through the hash's interface).
func (m *macPool) sumBytes(msg []byte, out *[sha256.Size]byte) {
	st := m.get()
	st.buf = append(st.buf[:0], msg...)
	st.h.Write(st.buf)
	m.put(st, out)
}

func (m *macPool) get() *macState {
	st, ok := m.pool.Get().(*macState)
	if ok {
		st.h.Reset()
	} else {
		st = &macState{h: hmac.New(sha256.New, m.key)}
	}
	return st
}

// put writes the state's sum into out and gives the state back to the pool.
func (m *macPool) put(st *macState, out *[sha256.Size]byte) {
	*out = [sha256.Size]byte(st.h.Sum(st.out[:0]))
	if cap(st.buf) > 4096 {
		st.buf = nil // a token that long is refused anyway; keep the pool small
	}
	m.pool.Put(st)
}

func (s tokenSigner) sign(t purchaseToken) string {
	var p [tokenPayloadLen]byte
	binary.BigEndian.PutUint64(p[0:], uint64(t.UserID))
	binary.BigEndian.PutUint64(p[8:], uint64(t.SaleID))
	binary.BigEndian.PutUint64(p[16:], uint64(t.Expires.UnixMilli()))
	nonce, _ := hex.DecodeString(t.Nonce)
	copy(p[24:], nonce)
	var sum [sha256.Size]byte
	s.mac.sum(string(p[:]), &sum)
	return base64.RawURLEncoding.EncodeToString(p[:]) + "." + base64.RawURLEncoding.EncodeToString(sum[:16])
}

func newNonce() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// verify parses a token and checks its signature; the caller checks user, sale and expiry.
func (s tokenSigner) verify(tok string) (purchaseToken, bool) {
	if len(tok) != 48+1+22 {
		return purchaseToken{}, false
	}
	var p [tokenPayloadLen]byte
	if n, err := base64.RawURLEncoding.Decode(p[:], []byte(tok[:48])); err != nil || n != tokenPayloadLen {
		return purchaseToken{}, false
	}
	if tok[48] != '.' {
		return purchaseToken{}, false
	}
	var sig [16]byte
	if n, err := base64.RawURLEncoding.Decode(sig[:], []byte(tok[49:])); err != nil || n != 16 {
		return purchaseToken{}, false
	}
	var sum [sha256.Size]byte
	s.mac.sum(string(p[:]), &sum)
	if !hmac.Equal(sum[:16], sig[:]) {
		return purchaseToken{}, false
	}
	return purchaseToken{
		UserID:  int64(binary.BigEndian.Uint64(p[0:])),
		SaleID:  int64(binary.BigEndian.Uint64(p[8:])),
		Expires: time.UnixMilli(int64(binary.BigEndian.Uint64(p[16:]))),
		Nonce:   hex.EncodeToString(p[24:]),
	}, true
}
