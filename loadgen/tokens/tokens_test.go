package tokens

import (
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestMinterTokensVerifyWithGolangJWT(t *testing.T) {
	secret := []byte("a-secret-of-at-least-16-bytes")
	m := Minter{Secret: secret, TTL: time.Hour}
	a := m.Shoppers(12345, 5000) // enough to take the parallel path
	if a.Len() != 5000 {
		t.Fatalf("len = %d, want 5000", a.Len())
	}
	for _, i := range []int{0, 1, 2499, 2500, 4999} {
		var c jwt.MapClaims
		tok, err := jwt.ParseWithClaims(string(a.Get(i)), &c, func(*jwt.Token) (any, error) { return secret, nil },
			jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired())
		if err != nil || !tok.Valid {
			t.Fatalf("token %d: %v", i, err)
		}
		if got, want := c["sub"], strconv.Itoa(12345+i); got != want || c["role"] != "shopper" {
			t.Errorf("token %d: sub %v role %v, want sub %s role shopper", i, got, c["role"], want)
		}
	}
	small := m.Shoppers(7, 3) // the serial path
	if small.Len() != 3 || string(small.Get(2)) == string(a.Get(2)) {
		t.Errorf("serial path: %d tokens, token 2 equal to another user's", small.Len())
	}
	mt, err := m.Merchant(900000001)
	if err != nil {
		t.Fatal(err)
	}
	var c jwt.MapClaims
	if _, err := jwt.ParseWithClaims(mt, &c, func(*jwt.Token) (any, error) { return secret, nil }); err != nil || c["role"] != "merchant" || c["sub"] != "900000001" {
		t.Errorf("merchant token: %v, claims %v", err, c)
	}
}

func TestArenas(t *testing.T) {
	a := Of("one", "", "three")
	if a.Len() != 3 || string(a.Get(0)) != "one" || len(a.Get(1)) != 0 || string(a.Get(2)) != "three" {
		t.Errorf("Of: len %d, %q %q %q", a.Len(), a.Get(0), a.Get(1), a.Get(2))
	}
	s := NewSlots(4, 8)
	if s.Len() != 4 || len(s.Get(3)) != 0 {
		t.Fatalf("NewSlots: len %d, empty slot %q", s.Len(), s.Get(3))
	}
	if !s.Set(1, []byte("12345678")) || string(s.Get(1)) != "12345678" {
		t.Errorf("Set a full slot: %q", s.Get(1))
	}
	if s.Set(2, []byte("123456789")) || len(s.Get(2)) != 0 {
		t.Errorf("Set too long: accepted, slot %q", s.Get(2))
	}
	if len(s.Get(0)) != 0 || len(s.Get(3)) != 0 {
		t.Errorf("neighbouring slots changed: %q %q", s.Get(0), s.Get(3))
	}
}
