package web

import (
	"bytes"
	"compress/gzip"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/static"
)

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("a broken gzip stream: %v", err)
	}
	return out
}

// Pages, JSON and the assets go out gzipped to a client that accepts it, with Vary:
// Accept-Encoding, and decode to the very bytes a client without gzip gets; the assets come
// compressed from start (each encoding with its own ETag, each answering its 304); small answers
// and a client that refuses gzip get plain bytes with no Vary.
func TestCompression(t *testing.T) {
	t.Parallel()
	h := fuzzRouter(auth.New(auth.Config{Secret: []byte("compress-secret-of-some-length"), TTL: time.Hour}, auth.Deps{Now: time.Now}))
	get := func(path string, header ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, path := range []string{"/", "/no-such-page", "/api/openapi.yaml", static.Path("js/sale.js"), static.Path("style.css"), "/static/style.css"} {
		plain := get(path)
		zipped := get(path, "Accept-Encoding", "br, gzip;q=0.8, deflate")
		if plain.Header().Get("Content-Encoding") != "" {
			t.Errorf("GET %s without Accept-Encoding: Content-Encoding %q", path, plain.Header().Get("Content-Encoding"))
		}
		if got := zipped.Header().Get("Content-Encoding"); got != "gzip" {
			t.Errorf("GET %s: Content-Encoding %q, want gzip", path, got)
			continue
		}
		if got := zipped.Header().Values("Vary"); !strings.Contains(strings.Join(got, ","), "Accept-Encoding") {
			t.Errorf("GET %s: Vary %q, want Accept-Encoding", path, got)
		}
		if zipped.Header().Get("Content-Length") != "" && zipped.Header().Get("Content-Length") != strconv.Itoa(zipped.Body.Len()) {
			t.Errorf("GET %s: Content-Length %s for %d bytes", path, zipped.Header().Get("Content-Length"), zipped.Body.Len())
		}
		body := gunzip(t, zipped.Body.Bytes())
		if !bytes.Equal(body, plain.Body.Bytes()) {
			t.Errorf("GET %s: the gzipped body decodes to %d bytes, the plain one is %d", path, len(body), plain.Body.Len())
		}
		if zipped.Body.Len() >= plain.Body.Len()/2 {
			t.Errorf("GET %s: %d bytes gzipped, %d plain: want less than half", path, zipped.Body.Len(), plain.Body.Len())
		}
		if etag := zipped.Header().Get("ETag"); etag != "" && zipped.Code == http.StatusOK {
			if again := get(path, "Accept-Encoding", "gzip", "If-None-Match", etag); again.Code != http.StatusNotModified {
				t.Errorf("GET %s again with its gzip ETag %s: %d, want 304", path, etag, again.Code)
			}
			if strings.HasPrefix(path, "/static/") && etag == plain.Header().Get("ETag") {
				t.Errorf("GET %s: the gzipped and the plain asset share the ETag %s", path, etag)
			}
		}
	}
	for _, c := range []struct{ path, ae string }{
		{"/api/time", "gzip"},       // a few bytes of JSON
		{"/", "gzip;q=0, identity"}, // refused
		{"/", "identity"},           // not asked for
		{static.Path("js/sale.js"), "deflate"},
	} {
		rec := get(c.path, "Accept-Encoding", c.ae)
		if got := rec.Header().Get("Content-Encoding"); got != "" {
			t.Errorf("GET %s (Accept-Encoding: %s): Content-Encoding %q, want none", c.path, c.ae, got)
		}
		if c.path == "/api/time" && rec.Header().Get("Vary") != "" {
			t.Errorf("GET %s: Vary %q on an answer sent as it is", c.path, rec.Header().Get("Vary"))
		}
	}
}

// No answer to a POST (the purchase, the purchase token…) is compressed, nor held back to find
// out, whatever its size; a CSV
// download is streamed as it is; a handler's own Content-Encoding and a range are left alone; a
// flush sends what is held at once; a panic leaves nothing held back for the 500.
func TestCompressionLeavesAlone(t *testing.T) {
	t.Parallel()
	big := strings.Repeat(`{"orderId":"x"},`, 200)
	r := gin.New()
	r.Use(recovery(slog.New(slog.DiscardHandler)), compress)
	r.POST("/api/flash-sales/items/:itemId/purchase", func(c *gin.Context) {
		c.Data(http.StatusAccepted, "application/json", []byte(big))
	})
	r.POST("/api/flash-sales/:saleId/purchase-token", func(c *gin.Context) {
		c.Data(http.StatusOK, "application/json", []byte(big))
	})
	r.GET("/csv", func(c *gin.Context) {
		c.Data(http.StatusOK, "text/csv; charset=utf-8", []byte(strings.Repeat("a,b\n", 1000)))
	})
	r.GET("/encoded", func(c *gin.Context) {
		c.Header("Content-Encoding", "br")
		c.Data(http.StatusOK, "text/css", []byte(big))
	})
	r.GET("/range", func(c *gin.Context) {
		c.Header("Content-Range", "bytes 0-2999/9000")
		c.Data(http.StatusPartialContent, "application/json", []byte(big))
	})
	r.GET("/flush", func(c *gin.Context) {
		c.Header("Content-Type", "application/json")
		c.Status(http.StatusOK)
		_, _ = c.Writer.Write([]byte("[1"))
		c.Writer.Flush()
		_, _ = c.Writer.Write([]byte(",2]"))
	})
	r.GET("/panic", func(c *gin.Context) {
		c.Header("Content-Type", "application/json")
		_, _ = c.Writer.Write([]byte(`{"half":`))
		panic("boom")
	})
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/flash-sales/items/7/purchase", big},
		{"POST", "/api/flash-sales/7/purchase-token", big},
		{"GET", "/csv", strings.Repeat("a,b\n", 1000)},
		{"GET", "/encoded", big},
		{"GET", "/range", big},
		{"GET", "/flush", "[1,2]"},
	} {
		req := httptest.NewRequest(c.method, c.path, nil)
		req.Header.Set("Accept-Encoding", "gzip")
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		if want := map[string]string{"/encoded": "br"}[c.path]; rec.Header().Get("Content-Encoding") != want {
			t.Errorf("%s %s: Content-Encoding %q, want %q", c.method, c.path, rec.Header().Get("Content-Encoding"), want)
		}
		if rec.Body.String() != c.body {
			t.Errorf("%s %s: body changed (%d bytes, want %d)", c.method, c.path, rec.Body.Len(), len(c.body))
		}
		if c.path == "/flush" && !rec.Flushed {
			t.Errorf("GET /flush: not flushed")
		}
	}
	req := httptest.NewRequest("GET", "/panic", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	if rec.Code != http.StatusInternalServerError || strings.Contains(rec.Body.String(), "half") || rec.Header().Get("Content-Encoding") != "" {
		t.Errorf("GET /panic: %d %q %q, want the plain 500 alone", rec.Code, rec.Header().Get("Content-Encoding"), rec.Body.String())
	}
}

// A handler behind the middleware reaches the connection through http.ResponseController (the
// CSV export moves its write deadline before every chunk: handlers/orders_admin.go), also for a
// client that accepts gzip, whose writer is the middleware's; the answer still goes through it,
// compressed.
func TestCompressionUnwrapsForTheResponseController(t *testing.T) {
	t.Parallel()
	r := gin.New()
	r.Use(compress)
	r.GET("/deadline", func(c *gin.Context) {
		say := "deadline moved"
		if err := http.NewResponseController(c.Writer).SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			say = "SetWriteDeadline: " + err.Error()
		}
		c.Data(http.StatusOK, "text/plain; charset=utf-8", []byte(strings.Repeat(say+"\n", 100)))
	})
	srv := httptest.NewServer(r)
	defer srv.Close()
	for _, ae := range []string{"", "gzip"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/deadline", nil)
		req.Header.Set("Accept-Encoding", ae) // set by hand: the client leaves the body as it came
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got, want := resp.Header.Get("Content-Encoding"), ae; got != want {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q, want %q", ae, got, want)
		}
		if ae == "gzip" {
			raw = gunzip(t, raw)
		}
		if first, _, _ := strings.Cut(string(raw), "\n"); first != "deadline moved" {
			t.Errorf("Accept-Encoding %q: the handler says %q, want the deadline moved on the connection", ae, first)
		}
	}
}
