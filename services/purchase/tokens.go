package purchase

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"time"

	"github.com/flashsale/flashsale/services/internal/mac"
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
type tokenSigner struct{ mac *mac.Pool }

func newTokenSigner(secret []byte) tokenSigner {
	return tokenSigner{mac: mac.NewPool(mac.PurposeKey(secret, "flashsale purchase token v1"))}
}

func (s tokenSigner) sign(t purchaseToken) string {
	var p [tokenPayloadLen]byte
	binary.BigEndian.PutUint64(p[0:], uint64(t.UserID))
	binary.BigEndian.PutUint64(p[8:], uint64(t.SaleID))
	binary.BigEndian.PutUint64(p[16:], uint64(t.Expires.UnixMilli()))
	nonce, _ := hex.DecodeString(t.Nonce)
	copy(p[24:], nonce)
	var sum [sha256.Size]byte
	s.mac.Sum(string(p[:]), &sum)
	return base64.RawURLEncoding.EncodeToString(p[:]) + "." + base64.RawURLEncoding.EncodeToString(sum[:16])
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
	s.mac.Sum(string(p[:]), &sum)
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
