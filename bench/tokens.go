package main

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

// arena holds many short byte strings (JWTs, purchase tokens) in one pointer-free buffer, so
// hundreds of thousands of them cost the garbage collector nothing.
type arena struct {
	buf  []byte
	off  []int32 // string i is buf[off[i]:off[i+1]] (appendable arenas)
	slot int     // fixed-slot arenas: string i is buf[i*slot : i*slot+lens[i]]
	lens []uint8
}

func (a *arena) get(i int) []byte {
	if a.slot > 0 {
		o := i * a.slot
		return a.buf[o : o+int(a.lens[i])]
	}
	return a.buf[a.off[i]:a.off[i+1]]
}

func (a *arena) len() int {
	if a.slot > 0 {
		return len(a.lens)
	}
	return len(a.off) - 1
}

// newSlots returns an arena of n fixed slots of size bytes, filled concurrently with set.
func newSlots(n, size int) *arena {
	return &arena{buf: make([]byte, n*size), slot: size, lens: make([]uint8, n)}
}

// set copies b into slot i (distinct slots may be set from different goroutines).
func (a *arena) set(i int, b []byte) bool {
	if len(b) > a.slot || len(b) > 255 {
		return false
	}
	copy(a.buf[i*a.slot:], b)
	a.lens[i] = uint8(len(b))
	return true
}

// minter signs the HS256 JWTs of the public contract: sub (the user id, a decimal string),
// role and exp. Shopper tokens are minted by hand (the header is constant, the claims are
// short), thousands per millisecond; the merchant's through golang-jwt. A unit test checks that
// golang-jwt accepts what the fast path makes.
type minter struct {
	secret []byte
	ttl    time.Duration
}

var jwtHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))

func (m minter) one(mac hash.Hash, dst []byte, user int64, role string, exp int64) []byte {
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

// shoppers mints tokens for users first … first+n-1, using every CPU (before the clock starts).
func (m minter) shoppers(first int64, n int) *arena {
	exp := time.Now().Add(m.ttl).Unix()
	parts := runtime.NumCPU()
	if n < 4096 {
		parts = 1
	}
	chunks := make([]*arena, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*n/parts, (p+1)*n/parts
		wg.Add(1)
		go func() {
			defer wg.Done()
			mac := hmac.New(sha256.New, m.secret)
			a := &arena{buf: make([]byte, 0, (hi-lo)*160), off: make([]int32, 0, hi-lo+1)}
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
	out := &arena{off: make([]int32, 0, n+1)}
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

// merchant mints the merchant's token with golang-jwt.
func (m minter) merchant(id int64) (string, error) {
	c := jwt.MapClaims{"sub": strconv.FormatInt(id, 10), "role": "merchant", "exp": time.Now().Add(m.ttl).Unix()}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(m.secret)
}
