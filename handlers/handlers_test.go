package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/gin-gonic/gin"
)

func init() { gin.SetMode(gin.TestMode) }

// testContext returns a gin context for a POST with body, and its recorder.
func testContext(body string) (*gin.Context, *httptest.ResponseRecorder) {
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	c.Request = httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(body))
	return c, w
}

type creds struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

func TestDecodeJSON(t *testing.T) {
	t.Parallel()
	exact := `{"username":"` + strings.Repeat("a", maxBody-len(`{"username":""}`)) + `"}`
	for _, c := range []struct {
		name       string
		body       string
		allowEmpty bool
		ok         bool
		want       creds
	}{
		{"object", `{"username":"abc","password":"12345678"}`, false, true, creds{"abc", "12345678"}},
		{"surrounding whitespace", " \n{\"username\":\"abc\"}\n ", false, true, creds{Username: "abc"}},
		{"empty object", `{}`, false, true, creds{}},
		{"exactly 64 KiB", exact, false, true, creds{Username: strings.Repeat("a", maxBody-len(`{"username":""}`))}},
		{"empty allowed", "", true, true, creds{}},
		{"blank allowed", " \t\r\n", true, true, creds{}},

		{"empty", "", false, false, creds{}},
		{"blank", "  \n", false, false, creds{}},
		{"one byte over 64 KiB", exact + " ", false, false, creds{}},
		{"far over 64 KiB, allowed empty", `{"username":"` + strings.Repeat("a", 1<<20) + `"}`, true, false, creds{}},
		{"truncated", `{"username":"abc"`, false, false, creds{}},
		{"syntax error", `{"username" "abc"}`, false, false, creds{}},
		{"unknown field", `{"username":"abc","role":"merchant"}`, false, false, creds{}},
		{"unknown field, empty allowed", `{"x":1}`, true, false, creds{}},
		{"wrong type", `{"username":1}`, false, false, creds{}},
		{"array", `[{"username":"abc"}]`, false, false, creds{}},
		{"string", `"abc"`, false, false, creds{}},
		{"number", `1`, false, false, creds{}},
		{"two objects", `{"username":"a"}{"username":"b"}`, false, false, creds{}},
		{"two objects, spaced", `{} {}`, false, false, creds{}},
		{"trailing garbage", `{"username":"abc"} x`, false, false, creds{}},
		{"trailing number", `{} 1`, false, false, creds{}},
		{"raw control character", "{\"username\":\"a\x01\"}", false, false, creds{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			gc, _ := testContext(c.body)
			var got creds
			err := decodeJSON(gc, &got, c.allowEmpty)
			if c.ok {
				if err != nil || got != c.want {
					t.Errorf("decodeJSON = %+v, %v; want %+v", got, err, c.want)
				}
				return
			}
			var e *shop.Error
			if !errors.As(err, &e) || e.Code != shop.CodeInvalidInput || e.Message == "" {
				t.Errorf("decodeJSON = %v, want INVALID_INPUT", err)
			}
			if len(e.Message) > 300 {
				t.Errorf("message of %d bytes: %.100q…", len(e.Message), e.Message)
			}
		})
	}
}

// decodeJSON promises "one object": a JSON value that is not an object, or anything after it,
// is refused.
func TestDecodeJSONOnlyOneObject(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`null`, `{"username":"abc"}}`, `{"username":"abc"}]`, `{} ]`} {
		gc, _ := testContext(body)
		var got creds
		if err := decodeJSON(gc, &got, false); shop.ErrorCode(err) != shop.CodeInvalidInput {
			t.Errorf("decodeJSON(%q) = %v, want INVALID_INPUT", body, err)
		}
	}
}

func TestDecodeJSONMessages(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"username":1}`:    "field username must be string",
		`[]`:                "expected a JSON object",
		`{"username":"a"`:   "malformed JSON body",
		`{"zzz":"a"}`:       `unknown field "zzz"`,
		"":                  "required",
		`{"username":"a"}x`: "malformed JSON body",
	} {
		gc, _ := testContext(body)
		var got creds
		err := decodeJSON(gc, &got, false)
		var e *shop.Error
		if !errors.As(err, &e) || !strings.Contains(e.Message, want) {
			t.Errorf("decodeJSON(%q) = %v, want a message containing %q", body, err, want)
		}
	}
}

func TestPathID(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want int64 // 0: refused
	}{
		{"1", 1},
		{"42", 42},
		{"9223372036854775807", 9223372036854775807},
		{"", 0},
		{"0", 0},
		{"-0", 0},
		{"00", 0},
		{"-1", 0},
		{"+1", 0},
		{"abc", 0},
		{"1a", 0},
		{"1.0", 0},
		{"1e3", 0},
		{"0x1F", 0},
		{"1_000", 0},
		{" 1", 0},
		{"1 ", 0},
		{"9223372036854775808", 0},
		{"99999999999999999999", 0},
		{"-9223372036854775808", 0},
		{"١", 0},
		{"①", 0},
	} {
		w := httptest.NewRecorder()
		gc, _ := gin.CreateTestContext(w)
		gc.Params = gin.Params{{Key: "saleId", Value: c.in}}
		got, err := pathID(gc, "saleId")
		if c.want != 0 {
			if err != nil || got != c.want {
				t.Errorf("pathID(%q) = %d, %v; want %d", c.in, got, err, c.want)
			}
			continue
		}
		var e *shop.Error
		if !errors.As(err, &e) || e.Code != shop.CodeInvalidInput || got != 0 || !strings.Contains(e.Message, "saleId") {
			t.Errorf("pathID(%q) = %d, %v; want INVALID_INPUT naming saleId", c.in, got, err)
		}
	}
}

// allCodes is every code of the contract with its status.
var allCodes = map[shop.Code]int{
	shop.CodeInvalidInput:         400,
	shop.CodeUnauthenticated:      401,
	shop.CodeInvalidCredentials:   401,
	shop.CodeForbidden:            403,
	shop.CodeCSRF:                 403,
	shop.CodeCaptchaFailed:        403,
	shop.CodeInvalidPurchaseToken: 403,
	shop.CodeNotFound:             404,
	shop.CodeUsernameTaken:        409,
	shop.CodeAlreadyPurchased:     409,
	shop.CodeExpired:              409,
	shop.CodeNotPayable:           409,
	shop.CodeNotCancellable:       409,
	shop.CodeSoldOut:              410,
	shop.CodeSaleEnded:            410,
	shop.CodeNotStarted:           425,
	shop.CodePaused:               503,
	shop.CodeSaleStarted:          409,
	shop.CodeQuantityTooLow:       409,
	shop.CodeQueueNotDrained:      409,
	shop.CodeDrillRunning:         409,
	shop.CodeDrillNotNow:          409,
	shop.CodeDrawInProgress:       409,
	shop.CodeMerchantsCannotBuy:   403,
	shop.CodeRateLimited:          429,
	shop.CodeUnavailable:          503,
	shop.CodeInternal:             500,
	shop.CodeUnsupportedMediaType: 415,
	shop.CodeUseCheckout:          409,
	shop.CodeBadSignature:         400,
	shop.CodePriceNotPayable:      422,
}

// PRICE_NOT_PAYABLE carries the provider's minimum and the currency beside the message.
func TestErrorPriceNotPayable(t *testing.T) {
	t.Parallel()
	a := runError(t, nil, &shop.Error{Code: shop.CodePriceNotPayable, Message: "below", MinimumCents: 400, Currency: "CNY"})
	if a.status != 422 || a.raw != `{"error":"PRICE_NOT_PAYABLE","message":"below","minimumCents":400,"currency":"CNY"}` {
		t.Fatalf("%d %s, want 422 with minimumCents and currency", a.status, a.raw)
	}
}

type answer struct {
	status     int
	retryAfter string
	body       errorBody
	raw        string
	aborted    bool
}

func runError(t *testing.T, log *slog.Logger, err error) answer {
	t.Helper()
	gc, w := testContext("")
	Error(gc, log, err)
	a := answer{status: w.Code, retryAfter: w.Header().Get("Retry-After"), raw: w.Body.String(), aborted: gc.IsAborted()}
	dec := json.NewDecoder(strings.NewReader(a.raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a.body); err != nil {
		t.Errorf("body %q is not {\"error\",\"message\"}: %v", a.raw, err)
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q", ct)
	}
	return a
}

func TestErrorMapsEveryCode(t *testing.T) {
	t.Parallel()
	if len(statusOf) != len(allCodes) {
		t.Errorf("statusOf has %d codes, the contract %d", len(statusOf), len(allCodes))
	}
	for code, status := range allCodes {
		a := runError(t, nil, &shop.Error{Code: code, Message: "because " + string(code)})
		if a.status != status || a.body.Error != string(code) || a.body.Message != "because "+string(code) || !a.aborted {
			t.Errorf("%s: %d %s (aborted %v), want %d", code, a.status, a.raw, a.aborted, status)
		}
		wantRetry := ""
		if status == 503 {
			wantRetry = "1" // a 503 always says when to come back
		}
		if a.retryAfter != wantRetry {
			t.Errorf("%s: Retry-After = %q, want %q", code, a.retryAfter, wantRetry)
		}
		// Wrapped, it maps the same.
		if b := runError(t, nil, fmt.Errorf("context: %w", &shop.Error{Code: code, Message: "m"})); b.status != status || b.body.Error != string(code) {
			t.Errorf("wrapped %s: %d %s", code, b.status, b.raw)
		}
	}
}

func TestErrorRetryAfter(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		code  shop.Code
		after time.Duration
		want  string
	}{
		{shop.CodeNotStarted, 90 * time.Second, "90"},
		{shop.CodeNotStarted, 1500 * time.Millisecond, "2"}, // rounded up, never 1 early
		{shop.CodeNotStarted, time.Millisecond, "1"},
		{shop.CodeRateLimited, 3 * time.Second, "3"},
		{shop.CodeUnavailable, 5 * time.Second, "5"},
		{shop.CodeUnavailable, 0, "1"},
	} {
		a := runError(t, nil, &shop.Error{Code: c.code, Message: "m", RetryAfter: c.after})
		if a.retryAfter != c.want {
			t.Errorf("%s after %v: Retry-After = %q, want %q", c.code, c.after, a.retryAfter, c.want)
		}
	}
}

func TestErrorUnknownIsInternal(t *testing.T) {
	t.Parallel()
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	secret := "pq: password authentication failed for user \"flashsale\" at 10.0.0.7"
	a := runError(t, log, errors.New(secret))
	if a.status != 500 || a.body.Error != "INTERNAL" || a.body.Message != "internal error" {
		t.Errorf("plain error: %d %s, want 500 INTERNAL with a generic message", a.status, a.raw)
	}
	if strings.Contains(a.raw, "password") || strings.Contains(a.raw, "10.0.0.7") {
		t.Errorf("the answer leaks the cause: %s", a.raw)
	}
	if !strings.Contains(logged.String(), "password authentication failed") {
		t.Errorf("an internal error is not logged: %q", logged.String())
	}
	if a := runError(t, log, nil); a.status != 500 || a.body.Error != "INTERNAL" {
		t.Errorf("nil error: %d %s", a.status, a.raw)
	}

	// A client's mistake is its answer, not a log line; a 503 is logged.
	logged.Reset()
	runError(t, log, shop.Errorf(shop.CodeSoldOut, "sold out"))
	if logged.Len() != 0 {
		t.Errorf("a 410 was logged: %q", logged.String())
	}
	runError(t, log, &shop.Error{Code: shop.CodeUnavailable, Message: "m", Err: errors.New("redis down")})
	if !strings.Contains(logged.String(), "redis down") {
		t.Errorf("a 503 was not logged with its cause: %q", logged.String())
	}
}

func TestAbort(t *testing.T) {
	t.Parallel()
	gc, w := testContext("")
	Abort(gc, shop.CodeCSRF, "missing header")
	if w.Code != 403 || !gc.IsAborted() || w.Body.String() != `{"error":"CSRF","message":"missing header"}` {
		t.Errorf("Abort = %d %s (aborted %v)", w.Code, w.Body.String(), gc.IsAborted())
	}
}
