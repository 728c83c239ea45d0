package services

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/bcrypt"

	"github.com/flashsale/flashsale/store"
)

// Roles a token can carry.
const (
	RoleShopper  = "shopper"
	RoleMerchant = "merchant"
)

// Identity is who a request is from, taken only from a verified token.
type Identity struct {
	UserID int64
	Role   string
}

// Auth issues and verifies the HS256 JWTs that are the identity, and keeps the local accounts.
type Auth struct {
	db     *store.DB
	secret []byte
	ttl    time.Duration
	now    func() time.Time
	seen   [verifiedShards]verifiedShard
}

// verifiedShards spreads the cache of verified tokens over independent locks.
const verifiedShards = 64

// maxVerifiedPerShard bounds the cache (64 × 4,096 tokens, about 80 MiB at the very worst).
const maxVerifiedPerShard = 4096

// verifiedShard remembers tokens already verified: in a rush every shopper presents the same
// token two or three times within seconds, and a map lookup is far cheaper than parsing and
// checking the JWT again. The key is the whole token, signature included, so a hit is the very
// string that passed; its expiry is checked again on every hit.
type verifiedShard struct {
	mu sync.RWMutex
	m  map[string]verified
}

type verified struct {
	id  Identity
	exp time.Time
}

// NewAuth returns an Auth signing with secret; tokens live for ttl.
func NewAuth(db *store.DB, secret []byte, ttl time.Duration, now func() time.Time) *Auth {
	return &Auth{db: db, secret: secret, ttl: ttl, now: now}
}

func (a *Auth) shard(token string) *verifiedShard {
	// The last bytes of a token are its signature: as good as random.
	var h uint32
	for i := max(0, len(token)-4); i < len(token); i++ {
		h = h<<8 | uint32(token[i])
	}
	return &a.seen[h%verifiedShards]
}

type claims struct {
	Role string `json:"role"`
	jwt.RegisteredClaims
}

// Issue signs a token for id.
func (a *Auth) Issue(id Identity) (string, error) {
	now := a.now()
	c := claims{Role: id.Role, RegisteredClaims: jwt.RegisteredClaims{
		Subject:   strconv.FormatInt(id.UserID, 10),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(a.ttl)),
	}}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(a.secret)
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	return s, nil
}

// Verify checks a token: HS256 only, signature, exp required and in the future, sub a positive
// decimal user id, role shopper or merchant.
func (a *Auth) Verify(token string) (Identity, error) {
	if token == "" || len(token) > 4096 {
		return Identity{}, Errorf(CodeUnauthenticated, "a valid bearer token or session cookie is required")
	}
	sh := a.shard(token)
	sh.mu.RLock()
	v, ok := sh.m[token]
	sh.mu.RUnlock()
	if ok && a.now().Before(v.exp) {
		return v.id, nil
	}
	id, exp, err := a.verify(token)
	if err != nil {
		return Identity{}, err
	}
	sh.mu.Lock()
	if sh.m == nil || len(sh.m) >= maxVerifiedPerShard {
		sh.m = make(map[string]verified, 256)
	}
	sh.m[strings.Clone(token)] = verified{id: id, exp: exp}
	sh.mu.Unlock()
	return id, nil
}

func (a *Auth) verify(token string) (Identity, time.Time, error) {
	var c claims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return a.secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(a.now),
		jwt.WithLeeway(5*time.Second),
	)
	if err != nil {
		msg := "the token is invalid"
		if errors.Is(err, jwt.ErrTokenExpired) {
			msg = "the token has expired; log in again"
		}
		return Identity{}, time.Time{}, &Error{Code: CodeUnauthenticated, Message: msg, Err: err}
	}
	uid, err := strconv.ParseInt(c.Subject, 10, 64)
	if err != nil || uid <= 0 || strconv.FormatInt(uid, 10) != c.Subject {
		return Identity{}, time.Time{}, Errorf(CodeUnauthenticated, "the token's subject is not a user id")
	}
	if c.Role != RoleShopper && c.Role != RoleMerchant {
		return Identity{}, time.Time{}, Errorf(CodeUnauthenticated, "the token's role is unknown")
	}
	// The parser allowed 5 s of leeway past exp; the cache allows none beyond it.
	return Identity{UserID: uid, Role: c.Role}, c.ExpiresAt.Add(5 * time.Second), nil
}

func validCredentials(username, password string) error {
	if n := utf8.RuneCountInString(username); n < 3 || n > 32 {
		return Errorf(CodeInvalidInput, "username must be 3 to 32 characters")
	}
	for _, r := range username {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return Errorf(CodeInvalidInput, "username may hold only letters, digits, '_', '-' and '.'")
		}
	}
	if len(password) < 8 || len(password) > 72 || strings.ContainsRune(password, 0) {
		return Errorf(CodeInvalidInput, "password must be 8 to 72 bytes")
	}
	return nil
}

// Register creates a shopper account and returns a token for it.
func (a *Auth) Register(ctx context.Context, username, password string) (string, Identity, error) {
	u, err := a.addUser(ctx, username, password, RoleShopper)
	if err != nil {
		return "", Identity{}, err
	}
	id := Identity{UserID: u.ID, Role: u.Role}
	tok, err := a.Issue(id)
	return tok, id, err
}

// AddUser creates an account with the given role (merchants come from the command line or the
// development seed, never from the public API).
func (a *Auth) AddUser(ctx context.Context, username, password, role string) (store.User, error) {
	return a.addUser(ctx, username, password, role)
}

func (a *Auth) addUser(ctx context.Context, username, password, role string) (store.User, error) {
	if err := validCredentials(username, password); err != nil {
		return store.User{}, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return store.User{}, fmt.Errorf("hash password: %w", err)
	}
	u := store.User{Username: username, PasswordHash: string(hash), Role: role}
	if err := a.db.CreateUser(ctx, &u); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return store.User{}, Errorf(CodeUsernameTaken, "the username %q is taken", username)
		}
		return store.User{}, unavailable(err)
	}
	return u, nil
}

// Login checks a username and password and returns a token.
func (a *Auth) Login(ctx context.Context, username, password string) (string, Identity, error) {
	bad := Errorf(CodeInvalidCredentials, "wrong username or password")
	if username == "" || len(username) > 64 || len(password) > 72 || strings.ContainsRune(username, 0) {
		return "", Identity{}, bad
	}
	u, err := a.db.UserByName(ctx, username)
	if errors.Is(err, store.ErrNotFound) {
		return "", Identity{}, bad
	}
	if err != nil {
		return "", Identity{}, unavailable(err)
	}
	if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(password)) != nil {
		return "", Identity{}, bad
	}
	id := Identity{UserID: u.ID, Role: u.Role}
	tok, err := a.Issue(id)
	return tok, id, err
}
