package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/golang-jwt/jwt/v5"
)

// hs256Header is the header segment of every token Issue signs: {"alg":"HS256","typ":"JWT"}.
var hs256Header = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))

// b64 decodes a token's segments strictly: unpadded base64url whose unused low bits in the last
// character are zero, as every encoder writes it. A lenient decoder ignores those bits, so one
// signed token would have several spellings (four for an HS256 signature), each a different
// string for the verified-token cache and for a logout keyed on the token.
var b64 = base64.RawURLEncoding.Strict()

// tokenLeeway is the clock skew allowed around a token's exp and nbf.
const tokenLeeway = 5 * time.Second

// verifyOwn is the fast path for a token in exactly the form Issue writes: the header segment
// compared as a string (no JSON), the HMAC checked, then the claims decoded once. It answers ok
// only for a token that is valid by the same rules as the library's parser below; for anything
// else (another header, a bad signature or encoding, a claim out of its time) it answers false
// and the library decides, with its own error, so the two paths never disagree on a refusal.
func (a *Auth) verifyOwn(token string) (claims, bool) {
	var c claims
	dot := len(hs256Header)
	if len(token) <= dot || token[:dot] != hs256Header || token[dot] != '.' {
		return c, false
	}
	last := strings.LastIndexByte(token, '.')
	if last <= dot {
		return c, false
	}
	var sig [sha256.Size]byte
	if base64.RawURLEncoding.EncodedLen(sha256.Size) != len(token)-last-1 {
		return c, false
	}
	var sigEnc [43]byte
	if n, err := b64.Decode(sig[:], sigEnc[:copy(sigEnc[:], token[last+1:])]); err != nil || n != sha256.Size {
		return c, false
	}
	var sum [sha256.Size]byte
	a.macs.Sum(token[:last], &sum)
	if !hmac.Equal(sum[:], sig[:]) {
		return c, false
	}
	// The claims Issue writes fit in a few hundred bytes: decoded on the stack (a longer
	// payload goes to the library).
	var enc [684]byte
	var buf [513]byte
	seg := token[dot+1 : last]
	if len(seg) > len(enc) {
		return c, false
	}
	n, err := b64.Decode(buf[:], enc[:copy(enc[:], seg)])
	if err != nil {
		return c, false
	}
	payload := buf[:n]
	if !flatClaims(payload, &c) {
		// copies, so that payload and c stay on the stack on the usual path
		var u claims
		if json.Unmarshal(bytes.Clone(payload), &u) != nil {
			return claims{}, false
		}
		c = u
	}
	now := a.now()
	if c.ExpiresAt == nil || !now.Before(c.ExpiresAt.Add(tokenLeeway)) {
		return c, false
	}
	if c.NotBefore != nil && now.Add(tokenLeeway).Before(c.NotBefore.Time) {
		return c, false
	}
	return c, true
}

// flatClaims reads the claims of a payload in the plain form Issue writes, without reflection: one
// flat JSON object whose values are strings of printable ASCII without escapes (role, sub, iss,
// jti) or integers of up to 15 digits (exp, iat, nbf). It answers false for anything else
// (another key, an escape, a fraction, an audience, a duplicate, white space), which
// json.Unmarshal then reads.
func flatClaims(p []byte, c *claims) bool {
	if len(p) < 2 || p[0] != '{' || p[len(p)-1] != '}' {
		return false
	}
	var seen uint8
	i := 1
	for i < len(p)-1 {
		key, next, ok := flatString(p, i)
		if !ok || next >= len(p) || p[next] != ':' {
			return false
		}
		i = next + 1
		str, next, isStr := flatString(p, i)
		var num int64
		if !isStr {
			if num, next, ok = flatInt(p, i); !ok {
				return false
			}
		}
		i = next
		bit, ok := setFlatClaim(c, key, str, num)
		if !ok || isStr != (bit < 16) || seen&bit != 0 {
			return false
		}
		seen |= bit
		if i < len(p)-1 {
			if p[i] != ',' {
				return false
			}
			i++
		}
	}
	return i == len(p)-1 && p[i-1] != ','
}

// flatString reads a string of printable ASCII without escapes at p[i] (JSON reads it as it is),
// and the index after its closing quote.
func flatString(p []byte, i int) ([]byte, int, bool) {
	if i >= len(p) || p[i] != '"' {
		return nil, i, false
	}
	end := bytes.IndexByte(p[i+1:], '"')
	if end < 0 {
		return nil, i, false
	}
	for _, b := range p[i+1 : i+1+end] {
		if b < 0x20 || b > 0x7e || b == '\\' {
			return nil, i, false
		}
	}
	return p[i+1 : i+1+end], i + end + 2, true
}

// flatInt reads a non-negative integer of up to 15 digits at p[i] (exact as JSON's float64, no
// leading zero), and the index after it.
func flatInt(p []byte, i int) (int64, int, bool) {
	j := i
	for j < len(p) && p[j] >= '0' && p[j] <= '9' {
		j++
	}
	if j == i || j-i > 15 || (p[i] == '0' && j-i > 1) {
		return 0, i, false
	}
	var n int64
	for _, d := range p[i:j] {
		n = n*10 + int64(d-'0')
	}
	return n, j, true
}

// setFlatClaim sets the claim key to str (the string claims) or num (the times) and returns its
// bit: below 16 for the string claims.
func setFlatClaim(c *claims, key, str []byte, num int64) (uint8, bool) {
	switch string(key) {
	case "role":
		switch string(str) { // the two known roles without a copy
		case RoleShopper:
			c.Role = RoleShopper
		case RoleMerchant:
			c.Role = RoleMerchant
		default:
			c.Role = string(str)
		}
		return 1, true
	case "sub":
		c.Subject = string(str)
		return 2, true
	case "iss":
		c.Issuer = string(str)
		return 4, true
	case "jti":
		c.ID = string(str)
		return 8, true
	case "exp":
		c.ExpiresAt = jwt.NewNumericDate(time.Unix(num, 0))
		return 16, true
	case "iat":
		c.IssuedAt = jwt.NewNumericDate(time.Unix(num, 0))
		return 32, true
	case "nbf":
		c.NotBefore = jwt.NewNumericDate(time.Unix(num, 0))
		return 64, true
	}
	return 0, false
}

func (a *Auth) verify(token string) (Identity, time.Time, error) {
	c, ok := a.verifyOwn(token)
	if !ok {
		c = claims{}
		if err := a.parse(token, &c); err != nil {
			return Identity{}, time.Time{}, err
		}
	}
	// a positive decimal in its canonical form: ParseInt would also take "+7" and "007"
	uid, err := strconv.ParseInt(c.Subject, 10, 64)
	if err != nil || uid <= 0 || c.Subject[0] < '1' || c.Subject[0] > '9' {
		return Identity{}, time.Time{}, shop.Errorf(shop.CodeUnauthenticated, "the token's subject is not a user id")
	}
	if c.Role != RoleShopper && c.Role != RoleMerchant {
		return Identity{}, time.Time{}, shop.Errorf(shop.CodeUnauthenticated, "the token's role is unknown")
	}
	// The parser allowed 5 s of leeway past exp; the cache allows none beyond it.
	return Identity{UserID: uid, Role: c.Role}, c.ExpiresAt.Add(tokenLeeway), nil
}

// parse is the library's full check of any token: HS256 only, the signature, exp required, every
// segment in its one strict spelling (as on the fast path).
func (a *Auth) parse(token string, c *claims) error {
	_, err := jwt.ParseWithClaims(token, c, func(*jwt.Token) (any, error) { return a.secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithStrictDecoding(),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(a.now),
		jwt.WithLeeway(tokenLeeway),
	)
	if err != nil {
		msg := "the token is invalid"
		if errors.Is(err, jwt.ErrTokenExpired) {
			msg = "the token has expired; log in again"
		}
		return &shop.Error{Code: shop.CodeUnauthenticated, Message: msg, Err: err}
	}
	return nil
}
