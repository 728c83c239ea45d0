package handlers

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/gin-gonic/gin"
)

type loginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

type registerRequest struct {
	Username  string `json:"username"`
	Password  string `json:"password"`
	CaptchaID string `json:"captchaId"`
	Answer    string `json:"answer"`
}

// tokenResponse answers a login or a registration. The token is left out for a browser (see
// fromBrowser): it has the session as an HttpOnly cookie, which its scripts cannot read, and
// the token in the body would undo that.
type tokenResponse struct {
	Token  string `json:"token,omitempty"`
	Role   string `json:"role"`
	UserID string `json:"userId"`
}

// fromBrowser tells a browser's request from an API client's: every current browser sends Origin
// on a POST (same-origin included) and Sec-Fetch-Site on every request, and a page's script
// can set neither; curl, the benchmark tool and other programs send neither.
func fromBrowser(c *gin.Context) bool {
	return c.GetHeader("Origin") != "" || c.GetHeader("Sec-Fetch-Site") != ""
}

func (a *API) setSession(c *gin.Context, token string) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	maxAge := int(a.SessionTTL / time.Second)
	c.SetSameSite(http.SameSiteLaxMode)
	c.SetCookie(a.SessionCookieName(), token, maxAge, "/", "", a.SecureCookie, true)
	c.SetCookie(a.CSRFCookieName(), hex.EncodeToString(b[:]), maxAge, "/", "", a.SecureCookie, false)
}

func (a *API) clearSession(c *gin.Context) {
	c.SetSameSite(http.SameSiteLaxMode)
	c.SetCookie(a.SessionCookieName(), "", -1, "/", "", a.SecureCookie, true)
	c.SetCookie(a.CSRFCookieName(), "", -1, "/", "", a.SecureCookie, false)
}

// AuthCaptcha handles the "POST /api/auth/captcha" route: a challenge for a registration.
func (a *API) AuthCaptcha(c *gin.Context) {
	var in struct{}
	if err := decodeJSON(c, &in, true); err != nil {
		Error(c, a.Log, err)
		return
	}
	id, img, err := a.Accounts.NewCaptcha(c.Request.Context(), c.ClientIP())
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, gin.H{"captchaId": id, "image": img})
}

// Register handles the "POST /api/auth/register" route.
func (a *API) Register(c *gin.Context) {
	var in registerRequest
	if err := decodeJSON(c, &in, false); err != nil {
		Error(c, a.Log, err)
		return
	}
	tok, id, err := a.Accounts.Register(c.Request.Context(), in.Username, in.Password, in.CaptchaID, in.Answer, c.ClientIP())
	a.sessionAnswer(c, tok, id, err, http.StatusCreated)
}

// Login handles the "POST /api/auth/login" route.
func (a *API) Login(c *gin.Context) {
	var in loginRequest
	if err := decodeJSON(c, &in, false); err != nil {
		Error(c, a.Log, err)
		return
	}
	tok, id, err := a.Accounts.Login(c.Request.Context(), in.Username, in.Password, c.ClientIP())
	a.sessionAnswer(c, tok, id, err, http.StatusOK)
}

// sessionAnswer sets the browser session cookies and answers {"token","role","userId"} with
// status, the token only to an API client.
func (a *API) sessionAnswer(c *gin.Context, tok string, id auth.Identity, err error, status int) {
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	a.setSession(c, tok)
	out := tokenResponse{Token: tok, Role: id.Role, UserID: idString(id.UserID)}
	if fromBrowser(c) {
		out.Token = ""
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(status, out)
}

// Logout handles the "POST /api/auth/logout" route: it ends the session of the bearer token or
// session cookie on the server (the token is refused from then on, on every instance) and
// clears the browser's cookies. Without a valid session it only clears the cookies.
func (a *API) Logout(c *gin.Context) {
	token := ""
	if h := c.GetHeader("Authorization"); h != "" {
		if scheme, t, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			token = strings.TrimSpace(t)
		}
	} else if ck, err := c.Cookie(a.SessionCookieName()); err == nil {
		token = ck
	}
	if token != "" {
		if err := a.Accounts.Logout(c.Request.Context(), token); err != nil {
			Error(c, a.Log, err)
			return
		}
	}
	a.clearSession(c)
	c.Status(http.StatusNoContent)
}

// Me handles the "GET /api/auth/me" route: who the session or token belongs to.
func (a *API) Me(c *gin.Context) {
	id, _ := IdentityOf(c)
	c.Header("Cache-Control", "no-store")
	name, err := a.Accounts.Username(c.Request.Context(), id.UserID)
	if err != nil {
		Error(c, a.Log, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"userId": idString(id.UserID), "role": id.Role, "username": name})
}
