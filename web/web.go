// Package web assembles the HTTP server: the router, its middleware and the static files.
package web

import (
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flashsale/flashsale/handlers"
	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/static"
)

// Verifier checks a bearer token and tells whose it is.
type Verifier interface {
	Verify(token string) (auth.Identity, error)
}

// Config is what the router needs besides the handlers.
type Config struct {
	Log            *slog.Logger
	Verifier       Verifier
	API            *handlers.API
	Pages          *handlers.Pages
	Registry       *prometheus.Registry
	Ready          func() []string // the dependencies that are down (Redis, Postgres, NATS); empty when ready
	TrustedProxies []string
	Production     bool // HSTS, and only https Origins pass the CSRF check (web/edge.go)
}

// CheckTrustedProxies returns an error naming the first entry of proxies that gin's
// SetTrustedProxies does not take: an entry is an IP address or a CIDR range, never a host name
// (nothing is resolved) nor an address with a port.
func CheckTrustedProxies(proxies []string) error {
	for _, p := range proxies {
		ok := net.ParseIP(p) != nil
		if strings.Contains(p, "/") {
			_, _, err := net.ParseCIDR(p)
			ok = err == nil
		}
		if !ok {
			return fmt.Errorf("FLASHSALE_TRUSTED_PROXIES: %q is neither an IP address nor a CIDR range (such as 172.28.0.10 or 10.0.0.0/24; host names are not resolved): "+
				"the proxies listed after it would not be trusted, and every client behind one would share its address and its rate limits", p)
		}
	}
	return nil
}

// NewRouter returns the Gin engine serving the whole public contract and the pages. It panics
// on a trusted proxy that is neither an IP address nor a CIDR range (see CheckTrustedProxies).
func NewRouter(cfg Config) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = false
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	if err := r.SetTrustedProxies(cfg.TrustedProxies); err != nil {
		// Gin would trust only the entries before the bad one, so every client behind the
		// proxy would share its address and its rate-limit buckets. LoadConfig refuses such a
		// list first (CheckTrustedProxies); a caller that skipped it must not serve.
		if named := CheckTrustedProxies(cfg.TrustedProxies); named != nil {
			err = named
		}
		panic("web: " + err.Error())
	}
	m := newHTTPMetrics(cfg.Registry)
	r.Use(recovery(cfg.Log), m.middleware, securityHeaders, edge(cfg.Production), compress)

	routeAPI(r, cfg)
	routePages(r, cfg.Pages)
	routeHealth(r, cfg.Ready)
	r.NoRoute(cfg.Pages.NotFound)
	return r
}

// routeAPI serves the JSON API: the accounts, the shopper's routes (a signed-in identity), the
// merchant's (a merchant's).
func routeAPI(r *gin.Engine, cfg Config) {
	api := cfg.API
	authed := authenticate(cfg.Verifier, api, "")
	merchant := authenticate(cfg.Verifier, api, auth.RoleMerchant)

	r.POST("/api/auth/captcha", api.AuthCaptcha)
	r.POST("/api/auth/register", api.Register)
	r.POST("/api/auth/login", api.Login)
	r.POST("/api/auth/logout", api.Logout)
	r.GET("/api/auth/me", authed, api.Me)
	r.GET("/api/time", api.Time)
	r.GET("/api/openapi.yaml", serveOpenAPI)

	r.GET("/api/flash-sales", api.ListSales)
	r.GET("/api/flash-sales/:saleId", api.GetSale)
	r.GET("/api/flash-sales/:saleId/stock", api.Stock)
	r.POST("/api/flash-sales/:saleId/remind", authed, api.Remind) // a signed-in shopper, counted once
	r.GET("/api/flash-sales/:saleId/draw", api.PublicDraw)
	r.POST("/api/flash-sales/:saleId/captcha", authed, api.Captcha)
	// The refusals that depend on the sale or item alone come before the identity (the gates).
	r.POST("/api/flash-sales/:saleId/purchase-token", api.TokenGate, authed, api.PurchaseToken)
	r.POST("/api/flash-sales/items/:itemId/purchase", api.PurchaseGate, authed, api.Purchase)
	r.GET("/api/flash-sales/orders", authed, api.MyOrders)
	r.GET("/api/flash-sales/orders/:orderId", authed, api.Order)
	r.POST("/api/flash-sales/orders/:orderId/pay", authed, api.Pay)
	r.POST("/api/flash-sales/orders/:orderId/cancel", authed, api.Cancel)
	r.POST("/api/flash-sales/orders/:orderId/checkout", authed, api.Checkout)
	// The payment provider's side: Stripe's signed webhook, and the simulated provider's Pay.
	r.POST("/api/payments/stripe/webhook", api.StripeWebhook)
	r.POST("/api/payments/simulated/:sessionId/pay", api.SimulatedPay)

	r.POST("/api/admin/sales", merchant, api.CreateSale)
	r.GET("/api/admin/sales", merchant, api.AdminSales)
	r.GET("/api/admin/sales/:saleId/stock", merchant, api.AdminStock)
	r.GET("/api/admin/sales/:saleId/live", merchant, api.AdminLive)
	r.PATCH("/api/admin/sales/:saleId", merchant, api.EditSale)
	r.POST("/api/admin/sales/:saleId/pause", merchant, api.PauseSale)
	r.POST("/api/admin/sales/:saleId/resume", merchant, api.ResumeSale)
	r.POST("/api/admin/sales/:saleId/end", merchant, api.EndSale)
	r.POST("/api/admin/sales/:saleId/warm", merchant, api.WarmSale)
	r.POST("/api/admin/sales/:saleId/drill", merchant, api.StartDrill)
	r.GET("/api/admin/sales/:saleId/drill", merchant, api.DrillStatus)
	r.GET("/api/admin/sales/:saleId/orders", merchant, api.AdminOrders)
	r.GET("/api/admin/sales/:saleId/draw", merchant, api.AdminDraw)
	r.GET("/api/admin/sales/:saleId/orders.csv", merchant, api.AdminOrdersCSV)

}

// routePages serves the HTML pages and the static assets.
func routePages(r *gin.Engine, pages *handlers.Pages) {
	r.GET("/", pages.Home)
	r.GET("/sales/:saleId", pages.Sale)
	r.GET("/sales/:saleId/calendar.ics", pages.PublicOrigin, pages.Calendar) // its URL: FLASHSALE_PUBLIC_URL when set
	r.GET("/orders", pages.MyOrders)
	r.GET("/orders/:orderId", pages.Order)
	r.GET("/admin", pages.Admin)
	r.GET("/admin/sales/:saleId", pages.AdminSale)
	r.GET("/admin/sales/:saleId/orders", pages.AdminSaleOrders)
	r.GET("/pay/simulated/:sessionId", pages.SimulatedCheckout) // the simulated payment provider's page

	assets := static.Handler() // hashed names immutable, plain ones revalidated, their types set
	r.GET("/static/*path", func(c *gin.Context) {
		if strings.HasSuffix(c.Param("path"), "/") {
			pages.NotFound(c) // files only: no directory listings
			return
		}
		assets.ServeHTTP(c.Writer, c.Request)
	})

}

// routeHealth serves liveness and readiness (ready names the dependencies that do not answer).
func routeHealth(r *gin.Engine, ready func() []string) {
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", func(c *gin.Context) {
		c.Header("Cache-Control", "no-store")
		if ready != nil {
			// Names only: no address, no error text (the logs have those).
			if down := ready(); len(down) > 0 {
				c.Header("Retry-After", "1")
				c.JSON(http.StatusServiceUnavailable, gin.H{"error": shop.CodeUnavailable, "message": "not ready: " + strings.Join(down, ", ") + " down",
					"status": "unavailable", "down": down})
				return
			}
		}
		c.JSON(http.StatusOK, gin.H{"status": "ready", "down": []string{}})
	})
}

// MetricsHandler serves the Prometheus metrics of reg at /metrics and Go's profiles under
// /debug/pprof/ (CPU, heap, mutex, block, goroutines, the runtime trace). It is served on its own
// listen address (FLASHSALE_METRICS_ADDR, loopback by default), never on the public one.
func MetricsHandler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// recovery turns a panic into the contract's 500 body and logs it.
func recovery(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error("panic serving request", "method", c.Request.Method, "path", c.Request.URL.Path, "panic", v)
				handlers.Abort(c, shop.CodeInternal, "internal error")
			}
		}()
		c.Next()
	}
}

var (
	hdrNoSniff    = []string{"nosniff"}
	hdrSameOrigin = []string{"same-origin"}
	hdrDeny       = []string{"DENY"}
	hdrCSP        = []string{"default-src 'self'; img-src 'self' data: https:; script-src 'self'; style-src 'self'; base-uri 'none'; frame-ancestors 'none'"}
)

func securityHeaders(c *gin.Context) {
	// Set in canonical form from shared values: no allocation per request (nothing appends to or
	// edits a header value in place; Add would copy).
	h := c.Writer.Header()
	h["X-Content-Type-Options"] = hdrNoSniff
	h["Referrer-Policy"] = hdrSameOrigin
	if !strings.HasPrefix(c.Request.URL.Path, "/api/") {
		h["X-Frame-Options"] = hdrDeny
		h["Content-Security-Policy"] = hdrCSP
	}
	c.Next()
}

// authenticate requires a verified identity: a bearer token, or the session cookie plus the
// double-submit CSRF header on state-changing requests. role, if set, is required too.
func authenticate(v Verifier, api *handlers.API, role string) gin.HandlerFunc {
	sessionCookie, csrfCookie := api.SessionCookieName(), api.CSRFCookieName()
	return func(c *gin.Context) {
		token, fromCookie := "", false
		if h := c.GetHeader("Authorization"); h != "" {
			scheme, t, ok := strings.Cut(h, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") {
				handlers.Abort(c, shop.CodeUnauthenticated, "the Authorization header must be 'Bearer <token>'")
				return
			}
			token = strings.TrimSpace(t)
		} else if ck, err := c.Cookie(sessionCookie); err == nil && ck != "" {
			token, fromCookie = ck, true
		}
		if token == "" {
			handlers.Abort(c, shop.CodeUnauthenticated, "please log in: a bearer token or session cookie is required")
			return
		}
		id, err := v.Verify(token)
		if err != nil {
			handlers.Error(c, nil, err)
			return
		}
		if fromCookie && c.Request.Method != http.MethodGet && c.Request.Method != http.MethodHead {
			want, _ := c.Cookie(csrfCookie)
			got := c.GetHeader("X-CSRF-Token")
			if want == "" || subtle.ConstantTimeCompare([]byte(want), []byte(got)) != 1 {
				handlers.Abort(c, shop.CodeCSRF, "missing or wrong X-CSRF-Token header (it must carry the fs_csrf cookie's value)")
				return
			}
		}
		if role != "" && id.Role != role {
			handlers.Abort(c, shop.CodeForbidden, "this needs a "+role+" account")
			return
		}
		handlers.SetIdentity(c, id)
		c.Next()
	}
}

type httpMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	routes   sync.Map // route -> *routeMetrics: the vectors' children, looked up once
}

// routeMetrics are one route's latency histogram and its counters by status.
type routeMetrics struct {
	latency prometheus.Observer
	status  [600]atomic.Pointer[prometheus.Counter] // by status code: no map key boxed per request
}

func (m *httpMetrics) route(route string) *routeMetrics {
	if r, ok := m.routes.Load(route); ok {
		return r.(*routeMetrics)
	}
	r, _ := m.routes.LoadOrStore(route, &routeMetrics{latency: m.latency.WithLabelValues(route)})
	return r.(*routeMetrics)
}

func (m *httpMetrics) count(route string, r *routeMetrics, status int) {
	if status < 0 || status >= len(r.status) {
		m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
		return
	}
	c := r.status[status].Load()
	if c == nil {
		// Two requests may both build it: WithLabelValues gives both the same child.
		child := m.requests.WithLabelValues(route, strconv.Itoa(status))
		c = &child
		r.status[status].Store(c)
	}
	(*c).Inc()
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_http_requests_total", Help: "HTTP requests by route and status.",
		}, []string{"route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flashsale_http_request_seconds", Help: "HTTP request latency by route.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}, []string{"route"}),
	}
	reg.MustRegister(m.requests, m.latency)
	return m
}

func (m *httpMetrics) middleware(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	// Routes are the router's patterns (a bounded set), so are the statuses it answers with.
	r := m.route(route)
	m.count(route, r, c.Writer.Status())
	r.latency.Observe(time.Since(start).Seconds())
}
