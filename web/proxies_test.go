package web

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/flashsale/handlers"
)

// Issue 18, item 10: a trusted proxy gin cannot read is never ignored. Gin stops at it and
// trusts only the entries before it, so every client behind the proxies after it would get the
// proxy's address (and share its rate-limit buckets): the router refuses to be built, naming the
// entry, and the entries it takes make X-Forwarded-For believed from those proxies only.
func TestRouterRefusesBadTrustedProxy(t *testing.T) {
	build := func(proxies ...string) (r *gin.Engine, panicked string) {
		defer func() {
			if p := recover(); p != nil {
				panicked, _ = p.(string)
				if panicked == "" {
					panicked = "a panic that is not a string"
				}
			}
		}()
		return NewRouter(Config{Log: slog.New(slog.DiscardHandler), API: &handlers.API{}, Pages: &handlers.Pages{},
			Registry: prometheus.NewRegistry(), TrustedProxies: proxies}), ""
	}
	for _, bad := range []string{"nginx", "10.0.0.5:80", "10.0.0.0/33", ""} {
		_, msg := build("127.0.0.1", bad, "10.0.0.0/8")
		if !strings.Contains(msg, "FLASHSALE_TRUSTED_PROXIES: \""+bad+"\" is neither an IP address nor a CIDR range") {
			t.Errorf("trusted proxies [127.0.0.1 %q 10.0.0.0/8]: panic %q, want one naming the entry", bad, msg)
		}
		if err := CheckTrustedProxies([]string{"127.0.0.1", bad}); err == nil || !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("CheckTrustedProxies(%q): %v, want an error naming it", bad, err)
		}
	}

	r, msg := build("192.0.2.1", "10.0.0.0/8", "2001:db8::/32")
	if msg != "" {
		t.Fatalf("good trusted proxies: panic %q", msg)
	}
	if err := CheckTrustedProxies([]string{"192.0.2.1", "10.0.0.0/8", "2001:db8::/32"}); err != nil {
		t.Fatalf("CheckTrustedProxies of good entries: %v", err)
	}
	var seen string
	r.GET("/test/client-ip", func(c *gin.Context) { seen = c.ClientIP() })
	for _, c := range []struct{ remote, want string }{
		{"10.1.2.3:4000", "198.51.100.7"},      // from a trusted range: the forwarded address
		{"[2001:db8::5]:4000", "198.51.100.7"}, // an IPv6 range
		{"192.0.2.1:4000", "198.51.100.7"},     // a single address
		{"192.0.2.2:4000", "192.0.2.2"},        // anyone else: its own address
	} {
		req := httptest.NewRequest(http.MethodGet, "/test/client-ip", nil)
		req.RemoteAddr = c.remote
		req.Header.Set("X-Forwarded-For", "198.51.100.7")
		r.ServeHTTP(httptest.NewRecorder(), req)
		if seen != c.want {
			t.Errorf("from %s: client IP %q, want %q", c.remote, seen, c.want)
		}
	}
}
