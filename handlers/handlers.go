// Package handlers turns HTTP requests into calls of the services and their results into the
// public contract's JSON and pages. It holds no flash-sale rules.
package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/shop"
)

const identityKey = "flashsale.identity"

// SetIdentity records the verified identity of the request (the auth middleware calls it).
func SetIdentity(c *gin.Context, id auth.Identity) { c.Set(identityKey, id) }

// IdentityOf returns the verified identity of the request, if any.
func IdentityOf(c *gin.Context) (auth.Identity, bool) {
	v, ok := c.Get(identityKey)
	if !ok {
		return auth.Identity{}, false
	}
	id, ok := v.(auth.Identity)
	return id, ok
}

var statusOf = map[shop.Code]int{
	shop.CodeInvalidInput:         http.StatusBadRequest,
	shop.CodeUnauthenticated:      http.StatusUnauthorized,
	shop.CodeInvalidCredentials:   http.StatusUnauthorized,
	shop.CodeForbidden:            http.StatusForbidden,
	shop.CodeCSRF:                 http.StatusForbidden,
	shop.CodeMerchantsCannotBuy:   http.StatusForbidden,
	shop.CodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	shop.CodeCaptchaFailed:        http.StatusForbidden,
	shop.CodeInvalidPurchaseToken: http.StatusForbidden,
	shop.CodeNotFound:             http.StatusNotFound,
	shop.CodeUsernameTaken:        http.StatusConflict,
	shop.CodeAlreadyPurchased:     http.StatusConflict,
	shop.CodeExpired:              http.StatusConflict,
	shop.CodeNotPayable:           http.StatusConflict,
	shop.CodeNotCancellable:       http.StatusConflict,
	shop.CodeSoldOut:              http.StatusGone,
	shop.CodeSaleEnded:            http.StatusGone,
	shop.CodeNotStarted:           http.StatusTooEarly,
	shop.CodePaused:               http.StatusServiceUnavailable,
	shop.CodeSaleStarted:          http.StatusConflict,
	shop.CodeQuantityTooLow:       http.StatusConflict,
	shop.CodeQueueNotDrained:      http.StatusConflict,
	shop.CodeDrillRunning:         http.StatusConflict,
	shop.CodeDrillNotNow:          http.StatusConflict,
	shop.CodeDrawInProgress:       http.StatusConflict,
	shop.CodeRateLimited:          http.StatusTooManyRequests,
	shop.CodeUnavailable:          http.StatusServiceUnavailable,
	shop.CodeInternal:             http.StatusInternalServerError,
	shop.CodeUseCheckout:          http.StatusConflict,
	shop.CodeBadSignature:         http.StatusBadRequest,
	shop.CodePriceNotPayable:      http.StatusUnprocessableEntity,
}

// errorBody is the contract's error JSON.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	OrderID string `json:"orderId,omitempty"` // ALREADY_PURCHASED: the order the shopper holds
	// PRICE_NOT_PAYABLE: the provider's minimum, in the currency's minor units.
	MinimumCents int64  `json:"minimumCents,omitempty"`
	Currency     string `json:"currency,omitempty"`
}

// Error is the one place that turns an error into the contract's {"error","message"} body and
// status. Only server-side failures are logged; a client's mistake is its answer.
func Error(c *gin.Context, log *slog.Logger, err error) {
	e, _ := err.(*shop.Error) // the refusals of the shopper's path: no errors.As
	if e == nil && (!errors.As(err, &e) || e == nil) {
		e = &shop.Error{Code: shop.CodeInternal, Message: "internal error", Err: err}
	}
	status, ok := statusOf[e.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if e.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	} else if status == http.StatusServiceUnavailable {
		c.Header("Retry-After", "1")
	}
	if status >= 500 && log != nil {
		log.Error("request failed", "method", c.Request.Method, "path", c.FullPath(), "code", e.Code, "err", err)
	}
	c.Abort()
	body, ok := prepared[e]
	if !ok {
		body = errorJSON(errorBody{Error: string(e.Code), Message: e.Message, OrderID: e.OrderID,
			MinimumCents: e.MinimumCents, Currency: e.Currency})
	}
	// c.Data without its render value and Content-Type slice: the crowd's answer.
	c.Writer.Header()["Content-Type"] = jsonTypeHeader
	c.Writer.WriteHeader(status)
	_, _ = c.Writer.Write(body)
}

// jsonType is the Content-Type of every JSON answer (gin's own for c.JSON).
const jsonType = "application/json; charset=utf-8"

// jsonTypeHeader is jsonType as a header value, shared: nothing appends to it.
var jsonTypeHeader = []string{jsonType}

// prepared are the bodies of the refusals a crowd is given, written once: the same bytes
// errorJSON would write for them every time.
var prepared = func() map[*shop.Error][]byte {
	m := map[*shop.Error][]byte{}
	for _, e := range []*shop.Error{shop.ErrSoldOut, shop.ErrPaused} {
		m[e] = errorJSON(errorBody{Error: string(e.Code), Message: e.Message})
	}
	return m
}()

// errorJSON is json.Marshal(b) without reflection for the common case, every string printable
// ASCII that JSON writes as it is (a refusal is the crowd's answer: it should cost next to
// nothing); anything else goes through encoding/json, which the tests compare it with.
func errorJSON(b errorBody) []byte {
	if !plainJSON(b.Error) || !plainJSON(b.Message) || !plainJSON(b.OrderID) || b.Currency != "" {
		out, _ := json.Marshal(b) // strings only: never fails
		return out
	}
	out := make([]byte, 0, len(b.Error)+len(b.Message)+len(b.OrderID)+40)
	out = append(out, `{"error":"`...)
	out = append(out, b.Error...)
	out = append(out, `","message":"`...)
	out = append(out, b.Message...)
	if b.OrderID != "" {
		out = append(out, `","orderId":"`...)
		out = append(out, b.OrderID...)
	}
	return append(out, `"}`...)
}

// plainJSON reports whether encoding/json writes s inside its quotes byte for byte: printable
// ASCII other than the quote, the backslash and the three characters it escapes for HTML.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// Abort answers with a contract error built from code and message.
func Abort(c *gin.Context, code shop.Code, message string) {
	Error(c, nil, &shop.Error{Code: code, Message: message})
}

const maxBody = 64 << 10

// decodeJSON reads a JSON object into v, strictly: one object, known fields, at most 64 KiB.
// An empty body decodes as {} when allowEmpty.
func decodeJSON(c *gin.Context, v any, allowEmpty bool) error {
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, maxBody+1))
	if err != nil {
		return shop.Errorf(shop.CodeInvalidInput, "could not read the request body")
	}
	if len(body) > maxBody {
		return shop.Errorf(shop.CodeInvalidInput, "the request body is larger than 64 KiB")
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		if allowEmpty {
			return nil
		}
		return shop.Errorf(shop.CodeInvalidInput, "a JSON object body is required")
	}
	if trimmed := bytes.TrimSpace(body); trimmed[0] != '{' {
		return shop.Errorf(shop.CodeInvalidInput, "malformed JSON body: expected a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return shop.Errorf(shop.CodeInvalidInput, "malformed JSON body: %s", jsonProblem(err))
	}
	if rest := bytes.TrimSpace(body[dec.InputOffset():]); len(rest) > 0 {
		return shop.Errorf(shop.CodeInvalidInput, "malformed JSON body: unexpected data after the JSON value")
	}
	return nil
}

func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return "field " + te.Field + " must be " + te.Type.String()
		}
		return "expected a JSON object"
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "syntax error at byte " + strconv.FormatInt(se.Offset, 10)
	}
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return strings.TrimPrefix(msg, "json: ")
}

// pathID parses a positive decimal id from the path parameter name.
func pathID(c *gin.Context, name string) (int64, error) {
	s := c.Param(name)
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 || s[0] == '+' {
		return 0, shop.Errorf(shop.CodeInvalidInput, "%s must be a positive decimal id", name)
	}
	return id, nil
}

func idString(id int64) string { return strconv.FormatInt(id, 10) }

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }
