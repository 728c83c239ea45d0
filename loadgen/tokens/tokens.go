// Package tokens holds what the generator sends as identity: shopper and merchant JWTs minted
// before the clock starts, and arenas that keep hundreds of thousands of short tokens in one
// pointer-free buffer.
package tokens

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Arena holds many short byte strings (JWTs, purchase tokens) in one pointer-free buffer, so
// hundreds of thousands of them cost the garbage collector nothing.
type Arena struct {
	buf  []byte
	off  []int32 // string i is buf[off[i]:off[i+1]] (appendable arenas)
	slot int     // fixed-slot arenas: string i is buf[i*slot : i*slot+lens[i]]
	lens []uint8
}

// Get returns token i; the bytes belong to the arena.
func (a *Arena) Get(i int) []byte {
	if a.slot > 0 {
		o := i * a.slot
		return a.buf[o : o+int(a.lens[i])]
	}
	return a.buf[a.off[i]:a.off[i+1]]
}

// Len returns how many tokens the arena holds (set or not, for a fixed-slot arena).
func (a *Arena) Len() int {
	if a.slot > 0 {
		return len(a.lens)
	}
	return len(a.off) - 1
}

// NewSlots returns an arena of n fixed slots of size bytes, filled concurrently with Set.
func NewSlots(n, size int) *Arena {
	return &Arena{buf: make([]byte, n*size), slot: size, lens: make([]uint8, n)}
}

// Set copies b into slot i (distinct slots may be set from different goroutines); it reports
// false, leaving the slot as it was, when b does not fit.
func (a *Arena) Set(i int, b []byte) bool {
	if len(b) > a.slot || len(b) > 255 {
		return false
	}
	copy(a.buf[i*a.slot:], b)
	a.lens[i] = uint8(len(b))
	return true
}

// Of returns an arena holding the given tokens, in order.
func Of(toks ...string) *Arena {
	a := &Arena{off: make([]int32, 0, len(toks)+1)}
	for _, t := range toks {
		a.off = append(a.off, int32(len(a.buf)))
		a.buf = append(a.buf, t...)
	}
	a.off = append(a.off, int32(len(a.buf)))
	return a
}

// Minter signs the HS256 JWTs of the public contract: sub (the user id, a decimal string),
// role and exp. Shopper tokens are minted by hand (the header is constant, the claims are
// short), thousands per millisecond; the merchant's through golang-jwt. A unit test checks that
// golang-jwt accepts what the fast path makes.
type Minter struct {
	Secret []byte
	TTL    time.Duration
}

var jwtHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))

func (m Minter) one(mac hash.Hash, dst []byte, user int64, role string, exp int64) []byte {
	var claims [96]byte
	c := append(claims[:0], `{"exp":`...)
	c = strconv.AppendInt(c, exp, 10)
	c = append(c, `,"role":"`...)
	c = append(c, role...)
	c = append(c, `","sub":"`...)
	c = strconv.AppendInt(c, user, 10)
	c = append(c, `"}`...)
	start := len(dst)
	dst = append(dst, jwtHeader...)
	dst = append(dst, '.')
	dst = base64.RawURLEncoding.AppendEncode(dst, c)
	mac.Reset()
	mac.Write(dst[start:])
	var sum [sha256.Size]byte
	dst = append(dst, '.')
	return base64.RawURLEncoding.AppendEncode(dst, mac.Sum(sum[:0]))
}

// Shoppers mints tokens for users first … first+n-1, using every CPU (before the clock starts).
func (m Minter) Shoppers(first int64, n int) *Arena {
	exp := time.Now().Add(m.TTL).Unix()
	parts := runtime.NumCPU()
	if n < 4096 {
		parts = 1
	}
	chunks := make([]*Arena, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*n/parts, (p+1)*n/parts
		wg.Add(1)
		go func() {
			defer wg.Done()
			mac := hmac.New(sha256.New, m.Secret)
			a := &Arena{buf: make([]byte, 0, (hi-lo)*160), off: make([]int32, 0, hi-lo+1)}
			for i := lo; i < hi; i++ {
				a.off = append(a.off, int32(len(a.buf)))
				a.buf = m.one(mac, a.buf, first+int64(i), "shopper", exp)
			}
			a.off = append(a.off, int32(len(a.buf)))
			chunks[p] = a
		}()
	}
	wg.Wait()
	if parts == 1 {
		return chunks[0]
	}
	out := &Arena{off: make([]int32, 0, n+1)}
	for _, a := range chunks {
		base := int32(len(out.buf))
		for _, o := range a.off[:len(a.off)-1] {
			out.off = append(out.off, base+o)
		}
		out.buf = append(out.buf, a.buf...)
	}
	out.off = append(out.off, int32(len(out.buf)))
	return out
}

// Merchant mints the merchant's token with golang-jwt.
func (m Minter) Merchant(id int64) (string, error) {
	c := jwt.MapClaims{"sub": strconv.FormatInt(id, 10), "role": "merchant", "exp": time.Now().Add(m.TTL).Unix()}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(m.Secret)
}
