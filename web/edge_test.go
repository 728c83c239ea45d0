package web

import (
	"net/url"
	"strings"
	"testing"
)

func TestSameOrigin(t *testing.T) {
	t.Parallel()
	const host = "shop.example:8080"
	for _, c := range []struct {
		origin, site string
		https        bool
		want         bool
	}{
		{"", "", false, true},            // a program: no browser headers
		{"", "same-origin", false, true}, // a browser's same-origin request without Origin
		{"", "none", false, true},        // typed by the user
		{"http://shop.example:8080", "same-origin", false, true},
		{"https://shop.example:8080", "", false, true},
		{"HTTP://SHOP.EXAMPLE:8080", "", false, true},
		{"http://shop.example:8080", "", true, false}, // production: https only
		{"https://shop.example:8080", "same-origin", true, true},
		{"https://evil.example", "", false, false},
		{"https://shop.example", "", false, false}, // another port is another origin
		{"https://sub.shop.example:8080", "same-site", false, false},
		{"null", "", false, false},
		{"https://shop.example:8080/path", "", false, false},
		{"https://user@shop.example:8080", "", false, false},
		{"ftp://shop.example:8080", "", false, false},
		{"", "cross-site", false, false},
		{"", "same-site", false, false},
		{"", "Cross-Site", false, false},
		{"", "something-new", false, false},
		{"http://shop.example:8080", "cross-site", false, false},
	} {
		if got := sameOrigin(c.origin, c.site, host, c.https); got != c.want {
			t.Errorf("sameOrigin(%q, %q, https only %v) = %v, want %v", c.origin, c.site, c.https, got, c.want)
		}
	}
}

func TestJSONBody(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ct   string
		n    int64
		want bool
	}{
		{"application/json", 10, true},
		{"application/json; charset=utf-8", 10, true},
		{"Application/JSON", 10, true},
		{"application/json", 0, true},
		{"", 0, true},   // no body, no type: the bodiless routes
		{"", 10, false}, // a body must say it is JSON
		{"", -1, false}, // chunked, unknown length
		{"text/plain", 10, false},
		{"text/plain", 0, false}, // a declared form type, even empty
		{"text/plain; charset=utf-8", 10, false},
		{"application/x-www-form-urlencoded", 10, false},
		{"multipart/form-data; boundary=x", 10, false},
		{"application/json-patch+json", 10, false},
		{"application/json;;", 10, false},
	} {
		if got := jsonBody(c.ct, c.n); got != c.want {
			t.Errorf("jsonBody(%q, %d) = %v, want %v", c.ct, c.n, got, c.want)
		}
	}
}

// FuzzSameOrigin: no panic, and nothing passes whose Origin names another host or scheme.
func FuzzSameOrigin(f *testing.F) {
	for _, s := range []string{"", "null", "http://h:1", "https://h:1", "https://evil", "http://h:1/", "http://[::1]:1", "http://h:1#x", "javascript:alert(1)", "http://h:1@evil"} {
		f.Add(s, "", "h:1")
		f.Add(s, "same-origin", "h:1")
	}
	f.Fuzz(func(t *testing.T, origin, site, host string) {
		ok := sameOrigin(origin, site, host, false)
		if !ok || origin == "" {
			return
		}
		u, err := url.Parse(origin)
		if err != nil || !strings.EqualFold(u.Host, host) || (u.Scheme != "http" && u.Scheme != "https" && !strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https")) {
			t.Fatalf("sameOrigin(%q, %q, %q) passed a foreign origin", origin, site, host)
		}
		if sameOrigin(origin, site, host, true) && !strings.EqualFold(u.Scheme, "https") {
			t.Fatalf("https-only passed %q", origin)
		}
	})
}

// FuzzJSONBody: no panic; a body without a declared JSON type never passes.
func FuzzJSONBody(f *testing.F) {
	for _, s := range []string{"", "application/json", "text/plain", "application/json; charset=utf-8", "a/b; c=\"", "application/json,text/plain"} {
		f.Add(s, int64(3))
	}
	f.Fuzz(func(t *testing.T, ct string, n int64) {
		if jsonBody(ct, n) && n != 0 && !strings.Contains(strings.ToLower(ct), "application/json") {
			t.Fatalf("jsonBody(%q, %d) passed", ct, n)
		}
	})
}
