package web

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/flashsale/handlers"
	"github.com/flashsale/flashsale/shop"
)

// testRouter builds the real router. Its handlers hold no services: the tests only enumerate
// the routes, or call routes that need none.
func testRouter(t *testing.T) *gin.Engine {
	t.Helper()
	return NewRouter(Config{
		Log:      slog.New(slog.DiscardHandler),
		API:      &handlers.API{},
		Pages:    &handlers.Pages{},
		Registry: prometheus.NewRegistry(),
	})
}

// loadOpenAPI parses and validates the embedded document.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI)
	if err != nil {
		t.Fatalf("parse openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("validate openapi.yaml: %v", err)
	}
	if got, want := doc.OpenAPI, "3.0.3"; got != want {
		t.Errorf("openapi version: got %q, want %q", got, want)
	}
	return doc
}

// ginPath turns an OpenAPI path into Gin's syntax: {param} becomes :param, except a last
// segment {path}, which is the catch-all *path (as in /static/*path).
func ginPath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
			continue
		}
		name := s[1 : len(s)-1]
		if name == "path" && i == len(segs)-1 {
			segs[i] = "*" + name
		} else {
			segs[i] = ":" + name
		}
	}
	return strings.Join(segs, "/")
}

// documented returns every operation of the document as "METHOD /gin/path".
func documented(doc *openapi3.T) map[string]bool {
	ops := map[string]bool{}
	for p, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			ops[method+" "+ginPath(p)] = true
		}
	}
	return ops
}

// routed returns every route of the router as "METHOD /gin/path".
func routed(r *gin.Engine) map[string]bool {
	routes := map[string]bool{}
	for _, rt := range r.Routes() {
		routes[rt.Method+" "+rt.Path] = true
	}
	return routes
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func TestOpenAPIValidates(t *testing.T) {
	loadOpenAPI(t)
}

func TestOpenAPIMatchesRouter(t *testing.T) {
	doc := loadOpenAPI(t)
	docOps, routes := documented(doc), routed(testRouter(t))

	for _, op := range sortedKeys(docOps) {
		if got, want := routes[op], true; got != want {
			t.Errorf("documented %s: in router got %v, want %v", op, got, want)
		}
	}
	for _, rt := range sortedKeys(routes) {
		if got, want := docOps[rt], true; got != want {
			t.Errorf("route %s: documented got %v, want %v", rt, got, want)
		}
	}
	if got, want := len(docOps), len(routes); got != want {
		t.Errorf("operations: got %d documented, want %d (the router's routes)", got, want)
	}

	// The routes the contract names must be among them, whatever else changes.
	for _, want := range []string{
		"POST /api/auth/register", "POST /api/auth/login", "GET /api/time",
		"GET /api/flash-sales/:saleId", "GET /api/flash-sales/:saleId/stock",
		"POST /api/flash-sales/:saleId/captcha", "POST /api/flash-sales/:saleId/purchase-token",
		"POST /api/flash-sales/items/:itemId/purchase", "GET /api/flash-sales/orders/:orderId",
		"POST /api/flash-sales/orders/:orderId/pay", "POST /api/admin/sales",
		"GET /api/admin/sales/:saleId/stock", "GET /", "GET /sales/:saleId", "GET /orders/:orderId",
		"GET /admin", "GET /static/*path", "GET /healthz", "GET /readyz",
		"GET /api/openapi.yaml",
	} {
		if got := docOps[want]; !got {
			t.Errorf("contract route %s: documented got %v, want true", want, got)
		}
	}
}

// allCodes are the contract's error codes (shop/errors.go).
var allCodes = []shop.Code{
	shop.CodeInvalidInput, shop.CodeUnauthenticated, shop.CodeInvalidCredentials,
	shop.CodeForbidden, shop.CodeMerchantsCannotBuy, shop.CodeCSRF, shop.CodeUnsupportedMediaType, shop.CodeCaptchaFailed,
	shop.CodeInvalidPurchaseToken, shop.CodeNotFound, shop.CodeUsernameTaken,
	shop.CodeAlreadyPurchased, shop.CodeExpired, shop.CodeNotPayable, shop.CodeNotCancellable,
	shop.CodeSoldOut, shop.CodeSaleEnded, shop.CodeNotStarted,
	shop.CodePaused, shop.CodeSaleStarted, shop.CodeQuantityTooLow, shop.CodeQueueNotDrained,
	shop.CodeRateLimited, shop.CodeUnavailable, shop.CodeInternal, shop.CodeUseCheckout, shop.CodeBadSignature,
	shop.CodeDrillRunning, shop.CodeDrillNotNow, shop.CodePriceNotPayable, shop.CodeDrawInProgress,
}

// statusOfCode asks the real error writer which status a code gets.
func statusOfCode(code string) int {
	rec := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(rec)
	c.Request = httptest.NewRequest(http.MethodGet, "/", nil)
	handlers.Abort(c, shop.Code(code), "test")
	return rec.Code
}

func enumStrings(vals []any) []string {
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		s, _ := v.(string)
		out = append(out, s)
	}
	return out
}

func TestOpenAPIErrorCodeEnum(t *testing.T) {
	doc := loadOpenAPI(t)
	ref := doc.Components.Schemas["ErrorCode"]
	if ref == nil || ref.Value == nil {
		t.Fatal("components.schemas.ErrorCode: got none, want the enum of error codes")
	}
	got := enumStrings(ref.Value.Enum)
	want := make([]string, len(allCodes))
	for i, c := range allCodes {
		want[i] = string(c)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("ErrorCode enum: got %v, want %v", got, want)
	}
}

// errorCodesOf returns the codes a JSON error response narrows its schema to: an allOf of the
// Error schema and an object whose "error" property is an enum.
func errorCodesOf(resp *openapi3.Response) []string {
	mt := resp.Content.Get("application/json")
	if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
		return nil
	}
	var codes []string
	isError := false
	for _, part := range mt.Schema.Value.AllOf {
		if part.Ref != "" { // the Error schema itself, whose enum is every code
			isError = isError || strings.HasSuffix(part.Ref, "/schemas/Error")
			continue
		}
		if part.Value == nil {
			continue
		}
		if p := part.Value.Properties["error"]; p != nil && p.Value != nil {
			codes = append(codes, enumStrings(p.Value.Enum)...)
		}
	}
	if !isError {
		return nil
	}
	return codes
}

// Every JSON error response lists its codes, and each code is one the real error writer
// answers with that very status.
func TestOpenAPIErrorStatuses(t *testing.T) {
	doc := loadOpenAPI(t)
	for _, p := range doc.Paths.InMatchingOrder() {
		for method, op := range doc.Paths.Value(p).Operations() {
			for status, ref := range op.Responses.Map() {
				n, err := strconv.Atoi(status)
				if err != nil {
					t.Errorf("%s %s: response %q: got a non-numeric status, want one", method, p, status)
					continue
				}
				if n < 400 || ref.Value == nil || ref.Value.Content.Get("application/json") == nil {
					continue
				}
				codes := errorCodesOf(ref.Value)
				if len(codes) == 0 {
					t.Errorf("%s %s %d: error codes got none, want the enum of codes it can answer", method, p, n)
				}
				for _, code := range codes {
					if got, want := statusOfCode(code), n; got != want {
						t.Errorf("%s %s: code %s: status got %d, want %d (as documented)", method, p, code, got, want)
					}
				}
			}
		}
	}
}

func TestServeOpenAPI(t *testing.T) {
	r := testRouter(t)
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/openapi.yaml", nil))

	if got, want := rec.Code, http.StatusOK; got != want {
		t.Fatalf("GET /api/openapi.yaml: status got %d, want %d", got, want)
	}
	if got, want := rec.Header().Get("Content-Type"), "application/yaml"; got != want {
		t.Errorf("GET /api/openapi.yaml: Content-Type got %q, want %q", got, want)
	}
	if got, want := rec.Body.String(), string(OpenAPI); got != want {
		t.Errorf("GET /api/openapi.yaml: body got %d bytes, want the %d embedded bytes", len(got), len(want))
	}
	if len(OpenAPI) == 0 {
		t.Error("OpenAPI: got 0 bytes, want the embedded document")
	}
}
