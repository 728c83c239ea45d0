package web

import (
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/handlers"
	"github.com/flashsale/flashsale/shop"
)

// edge guards every state-changing request (POST, PUT, PATCH, DELETE), the login and the
// registration included, before any handler runs:
//
//   - 403 CSRF when the browser says it comes from another site: an Origin that is not this
//     server's own (scheme and Host; https only in production; "null" too), or Sec-Fetch-Site
//     cross-site, or same-site (a sibling origin, never this one). Programs that send neither
//     header pass: they hold no victim's cookies.
//   - 415 UNSUPPORTED_MEDIA_TYPE for a body that is not declared application/json: an HTML form
//     can post text/plain, urlencoded or multipart across sites without a CORS preflight, but
//     never application/json. A request with no body and no Content-Type passes (the purchase,
//     pay, cancel, captcha and logout routes need none); a declared non-JSON type is refused
//     even with an empty body.
//
// The double-submit cookie check of cookie-authenticated requests stays in authenticate. In
// production every answer also carries Strict-Transport-Security.
func edge(production bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		if production {
			c.Header("Strict-Transport-Security", "max-age=63072000")
		}
		switch c.Request.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			c.Next()
			return
		}
		r := c.Request
		if !sameOrigin(r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site"), r.Host, production) {
			handlers.Abort(c, shop.CodeCSRF, "cross-site request refused: this route takes requests from this site's own pages only")
			return
		}
		if !jsonBody(r.Header.Get("Content-Type"), r.ContentLength) {
			handlers.Abort(c, shop.CodeUnsupportedMediaType, "the request body must be JSON with Content-Type: application/json")
			return
		}
		c.Next()
	}
}

// sameOrigin reports whether a request with these Origin and Sec-Fetch-Site headers may change
// state on the server at host. Absent headers say nothing and pass.
func sameOrigin(origin, fetchSite, host string, httpsOnly bool) bool {
	switch strings.ToLower(strings.TrimSpace(fetchSite)) {
	case "", "same-origin", "none":
	default: // cross-site, same-site (another origin of the site), or anything unknown
		return false
	}
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return false // "null" (a sandboxed frame, a redirect from elsewhere) and junk alike
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if httpsOnly {
			return false
		}
	default:
		return false
	}
	return host != "" && strings.EqualFold(u.Host, host)
}

// jsonBody reports whether a request's declared Content-Type and length are acceptable: a JSON
// media type, or no type at all and no body.
func jsonBody(contentType string, length int64) bool {
	switch contentType {
	case "application/json", "application/json; charset=utf-8": // what clients send: no parsing
		return true
	}
	if strings.TrimSpace(contentType) == "" {
		return length == 0
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}
