package web

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
	"github.com/klauspost/compress/gzip"

	"github.com/flashsale/flashsale/static"
)

// Text compression: a page, a JSON answer, the OpenAPI document go out gzipped to a client that
// accepts gzip, when they are big enough to gain from it (compressMinSize). The static assets
// are compressed once, at start (static/assets.go), and come here already encoded: this
// middleware leaves alone whatever a handler encoded itself.
//
// Left out:
//   - every answer to a POST (the purchase, the purchase token, the captcha, pay, login…): the
//     shopper's path, whose answers are a few hundred bytes, below the threshold anyway; they are
//     not even buffered to find out (the rush measured the buffering: about a microsecond a
//     request);
//   - a CSV export, streamed in chunks as the rows are read (a download, not a page);
//   - any answer under compressMinSize bytes, a HEAD, a 204 or 304, a range (206).
//
// A compressed answer carries Vary: Accept-Encoding; one sent as it is does not, so a cache in
// front (deploy/nginx, which asks for plain answers and compresses itself) keeps one copy.
// ETags are left as the handler set them: the two encodings of a page are the same bytes once
// decoded, and the handlers compare If-None-Match with their own tags.

// compressMinSize is the smallest body worth compressing: under it, gzip's header and a TCP
// packet's worth of bytes gain nothing.
const compressMinSize = 1024

// Compressible says whether a Content-Type is text worth compressing: HTML, CSS, JavaScript,
// JSON, YAML, plain text, SVG. CSV is not (a streamed download).
func Compressible(contentType string) bool {
	ct, _, _ := strings.Cut(contentType, ";")
	switch strings.TrimSpace(strings.ToLower(ct)) {
	case "text/html", "text/css", "text/javascript", "application/javascript", "application/json",
		"application/problem+json", "application/yaml", "application/x-yaml", "text/yaml", "text/plain",
		"image/svg+xml":
		return true
	}
	return false
}

var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.DefaultCompression)
	return w
}}

// compress is the middleware.
func compress(c *gin.Context) {
	r := c.Request
	if r.Method != http.MethodGet || !static.AcceptsGzip(r.Header.Get("Accept-Encoding")) {
		c.Next()
		return
	}
	w := &gzipResponse{ResponseWriter: c.Writer}
	c.Writer = w
	defer func() {
		c.Writer = w.ResponseWriter
		if v := recover(); v != nil {
			// Nothing held back goes out, and a gzip stream begun stays unfinished: recovery
			// answers the 500 through the plain writer, or the client sees a broken answer.
			panic(v)
		}
		w.finish()
	}()
	c.Next()
}

// gzipResponse holds a body back until it knows whether to compress it: at compressMinSize
// bytes, at a Flush, or at the end.
type gzipResponse struct {
	gin.ResponseWriter
	buf     []byte
	decided bool
	gz      *gzip.Writer // set when compressing
}

func (w *gzipResponse) Write(p []byte) (int, error) {
	if !w.decided {
		if len(w.buf)+len(p) < compressMinSize {
			w.buf = append(w.buf, p...)
			return len(p), nil
		}
		w.decide(true)
		if err := w.flushBuf(); err != nil {
			return 0, err
		}
	}
	if w.gz != nil {
		return w.gz.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

func (w *gzipResponse) WriteString(s string) (int, error) { return w.Write([]byte(s)) }

// WriteHeaderNow sends the header, decided as it stands (an answer with no body yet).
func (w *gzipResponse) WriteHeaderNow() {
	if !w.decided {
		w.decide(false)
	}
	w.ResponseWriter.WriteHeaderNow()
}

// Size and Written count what the handler wrote, held back or not.
func (w *gzipResponse) Size() int {
	if !w.decided && len(w.buf) > 0 {
		if s := w.ResponseWriter.Size(); s > 0 {
			return s + len(w.buf)
		}
		return len(w.buf)
	}
	return w.ResponseWriter.Size()
}

func (w *gzipResponse) Written() bool { return w.ResponseWriter.Written() || len(w.buf) > 0 }

// Flush sends what is held: a handler that flushes wants its bytes out now.
func (w *gzipResponse) Flush() {
	if !w.decided {
		w.decide(len(w.buf) >= compressMinSize)
		_ = w.flushBuf()
	}
	if w.gz != nil {
		_ = w.gz.Flush()
	}
	w.ResponseWriter.Flush()
}

func (w *gzipResponse) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.ResponseWriter.Hijack()
}

// Unwrap is the writer underneath, for http.ResponseController: a handler behind this middleware
// moves its write deadline (SetWriteDeadline: the CSV export, chunk by chunk) on the real
// connection, not ErrNotSupported. The body still goes through Write and Flush here: the
// controller calls a method of the wrapped writer only when this one lacks it.
func (w *gzipResponse) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// decide picks the encoding: gzip when big is true and the answer is text that no one encoded.
func (w *gzipResponse) decide(big bool) {
	w.decided = true
	h := w.ResponseWriter.Header()
	status := w.ResponseWriter.Status()
	if !big || status != http.StatusOK && status < 400 || // not a 206, 204, 304 or redirect
		h.Get("Content-Encoding") != "" || h.Get("Content-Range") != "" || !Compressible(h.Get("Content-Type")) {
		return
	}
	h.Set("Content-Encoding", "gzip")
	h.Del("Content-Length")
	h.Add("Vary", "Accept-Encoding")
	gz := gzipWriters.Get().(*gzip.Writer)
	gz.Reset(w.ResponseWriter)
	w.gz = gz
}

// flushBuf writes what was held back, through gzip if compressing.
func (w *gzipResponse) flushBuf() error {
	if len(w.buf) == 0 {
		return nil
	}
	b := w.buf
	w.buf = nil
	var err error
	if w.gz != nil {
		_, err = w.gz.Write(b)
	} else {
		_, err = w.ResponseWriter.Write(b)
	}
	return err
}

// finish ends the answer: a small body goes out as it is, a compressed one is closed.
func (w *gzipResponse) finish() {
	if !w.decided {
		w.decide(false)
		_ = w.flushBuf()
	}
	if w.gz != nil {
		_ = w.gz.Close()
		w.gz.Reset(nil)
		gzipWriters.Put(w.gz)
		w.gz = nil
	}
}
