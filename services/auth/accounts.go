package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale/services/captcha"
	"github.com/flashsale/flashsale/services/limits"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/bcrypt"
)

func validCredentials(username, password string) error {
	if err := shop.CheckUsername(username); err != nil {
		return err
	}
	if len(password) < 8 || len(password) > 72 || strings.ContainsRune(password, 0) {
		return shop.Errorf(shop.CodeInvalidInput, "password must be 8 to 72 bytes")
	}
	return nil
}

// hashSlot takes one of the bcrypt slots for a client at ip, or refuses at once with
// Retry-After: a burst of logins must not queue up CPU-bound work behind which every other
// request waits. With the rate limits on, one client address (an IPv6 client by its /64) holds
// at most a quarter of the slots (at least one); beyond its share it is refused with 429, so
// one client's burst never takes every slot and refuses everyone else's login. When every
// slot is taken: 503. An empty ip (the command line) has no share.
func (a *Auth) hashSlot(ip string) (release func(), err error) {
	client := ""
	if ip != "" && a.limiter.On() {
		client = limits.ClientKey(ip)
		share := max(1, cap(a.hashing)/4)
		a.hashMu.Lock()
		if a.hashBy[client] >= share {
			a.hashMu.Unlock()
			return nil, &shop.Error{Code: shop.CodeRateLimited, Message: "a login from your address is already in progress; try again in a moment", RetryAfter: time.Second}
		}
		if a.hashBy == nil {
			a.hashBy = map[string]int{}
		}
		a.hashBy[client]++
		a.hashMu.Unlock()
	}
	select {
	case a.hashing <- struct{}{}:
		return func() { <-a.hashing; a.hashDone(client) }, nil
	default:
		a.hashDone(client)
		return nil, &shop.Error{Code: shop.CodeUnavailable, Message: "too many logins at once; try again in a moment", RetryAfter: time.Second}
	}
}

// hashDone ends a bcrypt of client counted by hashSlot.
func (a *Auth) hashDone(client string) {
	if client == "" {
		return
	}
	a.hashMu.Lock()
	if a.hashBy[client]--; a.hashBy[client] <= 0 {
		delete(a.hashBy, client)
	}
	a.hashMu.Unlock()
}

// NewCaptcha renders a registration challenge for a client at ip.
func (a *Auth) NewCaptcha(ctx context.Context, ip string) (id, image string, err error) {
	if err := a.limiter.AllowAuth(ctx, limits.AuthCaptcha, ip, ""); err != nil {
		return "", "", err
	}
	if a.captcha == nil {
		return "", "", shop.Errorf(shop.CodeUnavailable, "registration is closed")
	}
	id, img, err := a.captcha.New(ctx, captcha.RegistrationUser, captcha.RegistrationSale)
	if err != nil {
		return "", "", shop.Unavailable(err)
	}
	return id, img, nil
}

// Register creates a shopper account for a client at ip that solved a registration captcha,
// and returns a token for it.
func (a *Auth) Register(ctx context.Context, username, password, captchaID, answer, ip string) (string, Identity, error) {
	if err := validCredentials(username, password); err != nil {
		return "", Identity{}, err
	}
	if err := a.limiter.AllowAuth(ctx, limits.AuthRegister, ip, username); err != nil {
		return "", Identity{}, err
	}
	failed := shop.Errorf(shop.CodeCaptchaFailed, "the captcha answer is wrong or expired; get a new captcha")
	if a.captcha == nil || captchaID == "" || len(captchaID) > 128 || len(answer) > 64 {
		return "", Identity{}, failed
	}
	ok, err := a.captcha.Verify(ctx, captcha.RegistrationUser, captcha.RegistrationSale, captchaID, answer)
	if err != nil {
		return "", Identity{}, shop.Unavailable(err)
	}
	if !ok {
		return "", Identity{}, failed
	}
	u, err := a.addUser(ctx, username, password, RoleShopper, ip)
	if err != nil {
		return "", Identity{}, err
	}
	id := Identity{UserID: u.ID, Role: u.Role}
	tok, err := a.Issue(id)
	if err == nil {
		a.limiter.SignedIn(ctx, ip, u.Username) // the creator's address is known to the account
	}
	return tok, id, err
}

// AddUser creates an account with the given role (merchants come from the command line or the
// development seed, never from the public API).
func (a *Auth) AddUser(ctx context.Context, username, password, role string) (shop.User, error) {
	return a.addUser(ctx, username, password, role, "")
}

// addUser creates an account, its bcrypt counted against the client at ip (empty: none).
func (a *Auth) addUser(ctx context.Context, username, password, role, ip string) (shop.User, error) {
	if err := validCredentials(username, password); err != nil {
		return shop.User{}, err
	}
	release, err := a.hashSlot(ip)
	if err != nil {
		return shop.User{}, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	release()
	if err != nil {
		return shop.User{}, fmt.Errorf("hash password: %w", err)
	}
	u := shop.User{Username: username, PasswordHash: string(hash), Role: role}
	if err := a.db.CreateUser(ctx, &u); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return shop.User{}, shop.Errorf(shop.CodeUsernameTaken, "the username %q is taken", username)
		}
		return shop.User{}, shop.Unavailable(err)
	}
	return u, nil
}

// dummyHash is compared against when the username is unknown, so that an unknown username takes
// as long as a wrong password and the timing tells nothing of which accounts exist.
var dummyHash = sync.OnceValue(func() []byte {
	h, err := bcrypt.GenerateFromPassword([]byte("flashsale: no such user"), bcrypt.DefaultCost)
	if err != nil {
		panic(err)
	}
	return h
})

// Login checks a username (case-insensitively) and password from a client at ip and returns a
// token. A success makes ip known to the account (limits.Limiter.SignedIn): its next logins skip
// the username's global bucket, which guesses from other addresses may have spent.
func (a *Auth) Login(ctx context.Context, username, password, ip string) (string, Identity, error) {
	bad := shop.Errorf(shop.CodeInvalidCredentials, "wrong username or password")
	if username == "" || len(username) > 64 || len(password) > 72 || strings.ContainsRune(username, 0) {
		return "", Identity{}, bad
	}
	if err := a.limiter.AllowAuth(ctx, limits.AuthLogin, ip, username); err != nil {
		return "", Identity{}, err
	}
	release, err := a.hashSlot(ip)
	if err != nil {
		return "", Identity{}, err
	}
	defer release()
	u, err := a.db.UserByName(ctx, username)
	hash := []byte(u.PasswordHash)
	switch {
	case errors.Is(err, store.ErrNotFound):
		hash = dummyHash()
	case err != nil:
		return "", Identity{}, shop.Unavailable(err)
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil || u.ID == 0 {
		return "", Identity{}, bad
	}
	id := Identity{UserID: u.ID, Role: u.Role}
	tok, err := a.Issue(id)
	if err == nil {
		a.limiter.SignedIn(ctx, ip, u.Username)
	}
	return tok, id, err
}

// Logout ends the session of token on every instance: it is refused from now on, here at once
// and on the other instances within revocationRefresh. A token that does not verify is ignored.
func (a *Auth) Logout(ctx context.Context, token string) error {
	if _, err := a.Verify(token); err != nil {
		return nil
	}
	var c claims
	if _, _, err := jwt.NewParser(jwt.WithStrictDecoding()).ParseUnverified(token, &c); err != nil || c.ExpiresAt == nil {
		return nil
	}
	exp := c.ExpiresAt.Add(5 * time.Second)
	if err := a.revoked.add(ctx, token, exp, a.ttl); err != nil {
		return shop.Unavailable(err)
	}
	return nil
}

// Username returns the name of a user id, or "" when this shop does not know it (a token from an
// external identity provider): pages then show the id.
func (a *Auth) Username(ctx context.Context, userID int64) (string, error) {
	name, err := a.db.UsernameByID(ctx, userID)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", shop.Unavailable(err)
	}
	return name, nil
}
