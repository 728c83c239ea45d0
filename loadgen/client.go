package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// request is one API call as the generator sends it. Its fields are byte slices owned by the
// caller (pre-minted tokens, pre-built paths), so building the wire form allocates nothing.
type request struct {
	method string
	path   []byte
	bearer []byte // shopper or merchant JWT
	ptoken []byte // X-Purchase-Token, if any
	body   []byte // JSON body, if any
}

// conn is one keep-alive connection of a worker. Send and Recv are split so that a worker can
// put two requests in flight on two connections (the double-click) without a goroutine.
type conn interface {
	Send(r *request, deadline time.Time) error
	// Recv returns the status and the body (valid until the next call) of the answer to Send.
	Recv() (status int, body []byte, err error)
	Close()
}

// errProtocol is an answer that is not HTTP/1.1 as the generator understands it.
var errProtocol = errors.New("malformed HTTP response")

// dialer makes connections to one target, with the client kind chosen by -client.
type dialer struct {
	kind string // raw or std
	addr string // 127.0.0.1:port
	base string // http://127.0.0.1:port
	std  *http.Client
}

func newDialer(kind, baseURL, addr string, conns int) *dialer {
	d := &dialer{kind: kind, addr: addr, base: baseURL}
	if kind == "std" {
		d.std = &http.Client{Transport: &http.Transport{
			MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
			IdleConnTimeout: 90 * time.Second, DisableCompression: true, ForceAttemptHTTP2: false,
		}}
	}
	return d
}

func (d *dialer) conn() conn {
	if d.kind == "std" {
		return &stdConn{d: d}
	}
	return &rawConn{addr: d.addr}
}

// close releases the idle connections of the std client.
func (d *dialer) close() {
	if d.std != nil {
		d.std.CloseIdleConnections()
	}
}

// rawConn is a minimal HTTP/1.1 client over one TCP connection: it writes a request built into
// a reused buffer and parses the status line, Content-Length (or chunked) and the body into
// another. It is several times cheaper per request than net/http's client, which matters when
// the generator shares two cores with the server it measures.
type rawConn struct {
	addr    string
	c       net.Conn
	br      *bufio.Reader
	wbuf    []byte
	body    []byte
	lastUse time.Time
	used    bool // a request went over c
}

// How long an unused connection is trusted. The servers (flashsale's http.Server settings)
// close a keep-alive connection idle for two minutes, and a new connection whose first request
// has not arrived within ReadHeaderTimeout (5 s); a request written into a connection the
// server is closing is lost, so the generator redials well before.
const (
	idleLimit  = 50 * time.Second
	freshLimit = 3 * time.Second
)

func (rc *rawConn) dial(deadline time.Time) error {
	d := net.Dialer{Deadline: deadline}
	c, err := d.Dial("tcp", rc.addr)
	if err != nil {
		return err
	}
	rc.c, rc.used, rc.lastUse = c, false, time.Now()
	if rc.br == nil {
		rc.br = bufio.NewReaderSize(c, 16<<10)
		rc.wbuf = make([]byte, 0, 1024)
		rc.body = make([]byte, 0, 1024)
	} else {
		rc.br.Reset(c)
	}
	return nil
}

// Warm opens the connection now, so the measured phase does not pay for dialling.
func (rc *rawConn) Warm(deadline time.Time) error {
	if rc.c != nil {
		return nil
	}
	return rc.dial(deadline)
}

func (rc *rawConn) Close() {
	if rc.c != nil {
		rc.c.Close()
		rc.c = nil
	}
}

func (rc *rawConn) Send(r *request, deadline time.Time) error {
	if rc.c != nil {
		if idle := time.Since(rc.lastUse); idle > idleLimit || (!rc.used && idle > freshLimit) {
			rc.Close()
		}
	}
	if rc.c == nil {
		if err := rc.dial(deadline); err != nil {
			return err
		}
	}
	if err := rc.c.SetDeadline(deadline); err != nil {
		rc.Close()
		return err
	}
	b := append(rc.wbuf[:0], r.method...)
	b = append(b, ' ')
	b = append(b, r.path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, rc.addr...)
	b = append(b, "\r\n"...)
	if len(r.bearer) > 0 {
		b = append(b, "Authorization: Bearer "...)
		b = append(b, r.bearer...)
		b = append(b, "\r\n"...)
	}
	if len(r.ptoken) > 0 {
		b = append(b, "X-Purchase-Token: "...)
		b = append(b, r.ptoken...)
		b = append(b, "\r\n"...)
	}
	if len(r.body) > 0 {
		b = append(b, "Content-Type: application/json\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(r.body)), 10)
		b = append(b, "\r\n\r\n"...)
		b = append(b, r.body...)
	} else if r.method != "GET" {
		b = append(b, "Content-Length: 0\r\n\r\n"...)
	} else {
		b = append(b, "\r\n"...)
	}
	rc.wbuf = b
	rc.used = true
	if _, err := rc.c.Write(b); err != nil {
		rc.Close()
		return err
	}
	return nil
}

func (rc *rawConn) Recv() (int, []byte, error) {
	if rc.c == nil {
		return 0, nil, net.ErrClosed
	}
	status, err := rc.readResponse()
	if err != nil {
		rc.Close()
		return 0, nil, err
	}
	rc.lastUse = time.Now()
	return status, rc.body, nil
}

// readResponse reads one answer into rc.body: its status line (past any 1xx), its headers and
// its body as they frame it; a Connection: close answer, or one whose body runs to the end,
// closes the connection.
func (rc *rawConn) readResponse() (int, error) {
	status, err := rc.readStatus()
	if err != nil {
		return 0, err
	}
	length, chunked, closing, err := rc.readHeaders()
	if err != nil {
		return 0, err
	}
	rc.body = rc.body[:0]
	switch {
	case status == 204 || status == 304:
	case chunked:
		err = rc.readChunked()
	case length >= 0:
		rc.body = grow(rc.body, length)
		_, err = io.ReadFull(rc.br, rc.body)
	default: // no length: the body runs to the end of the connection
		err = rc.readToEnd()
		closing = true
	}
	if err != nil {
		return 0, err
	}
	if closing {
		rc.Close()
	}
	return status, nil
}

// readStatus reads status lines until a final one (>= 200), skipping the headers of any 1xx.
func (rc *rawConn) readStatus() (int, error) {
	for {
		line, err := rc.br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		status, ok := parseStatus(line)
		if !ok {
			return 0, errProtocol
		}
		if status >= 200 {
			return status, nil
		}
		// 1xx: skip its headers, the real answer follows
		if err := rc.skipHeaders(); err != nil {
			return 0, err
		}
	}
}

// parseStatus reads the code of a status line "HTTP/1.x NNN ...".
func parseStatus(line []byte) (int, bool) {
	if len(line) < 12 || string(line[:7]) != "HTTP/1." {
		return 0, false
	}
	d0, d1, d2 := line[9]-'0', line[10]-'0', line[11]-'0' // a byte below '0' wraps past 9
	if d0 > 9 || d1 > 9 || d2 > 9 {
		return 0, false
	}
	return int(d0)*100 + int(d1)*10 + int(d2), true
}

// readHeaders reads the header lines up to the blank one and keeps the three that frame the
// body: Content-Length (-1 if absent), chunked Transfer-Encoding and Connection: close.
func (rc *rawConn) readHeaders() (length int, chunked, closing bool, err error) {
	length = -1
	for {
		line, err := rc.br.ReadSlice('\n')
		if err != nil {
			return 0, false, false, err
		}
		if len(line) <= 2 {
			return length, chunked, closing, nil
		}
		switch {
		case hasPrefixFold(line, "content-length:"):
			n, ok := parseUint(bytes.TrimSpace(line[len("content-length:"):]))
			if !ok {
				return 0, false, false, errProtocol
			}
			length = n
		case hasPrefixFold(line, "transfer-encoding:"):
			chunked = bytes.Contains(bytes.ToLower(line), []byte("chunked"))
		case hasPrefixFold(line, "connection:"):
			closing = bytes.Contains(bytes.ToLower(line), []byte("close"))
		}
	}
}

// readChunked appends a chunked body to rc.body, chunk by chunk, and skips its trailers.
func (rc *rawConn) readChunked() error {
	for {
		line, err := rc.br.ReadSlice('\n')
		if err != nil {
			return err
		}
		line = bytes.TrimSpace(line)
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		n, err := strconv.ParseUint(string(line), 16, 32)
		if err != nil {
			return errProtocol
		}
		if n == 0 {
			return rc.skipHeaders() // trailers
		}
		start := len(rc.body)
		rc.body = grow(rc.body, int(n))
		if _, err := io.ReadFull(rc.br, rc.body[start:]); err != nil {
			return err
		}
		if _, err := rc.br.Discard(2); err != nil {
			return err
		}
	}
}

// readToEnd appends everything up to the end of the connection to rc.body.
func (rc *rawConn) readToEnd() error {
	b, err := io.ReadAll(rc.br)
	if err != nil {
		return err
	}
	rc.body = append(rc.body, b...)
	return nil
}

func (rc *rawConn) skipHeaders() error {
	for {
		line, err := rc.br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			return nil
		}
	}
}

// grow extends b by n bytes, reusing its capacity.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), 2*cap(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

func hasPrefixFold(line []byte, prefix string) bool {
	if len(line) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := line[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

func parseUint(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 12 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// stdConn goes through net/http's client, for cross-checking the raw client (-client std). Its
// Send does the whole round trip, so a double-click is sent sequentially in this mode.
type stdConn struct {
	d      *dialer
	status int
	body   []byte
	err    error
}

func (sc *stdConn) Send(r *request, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var body io.Reader
	if len(r.body) > 0 {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, sc.d.base+string(r.path), body)
	if err != nil {
		return err
	}
	if len(r.bearer) > 0 {
		req.Header.Set("Authorization", "Bearer "+string(r.bearer))
	}
	if len(r.ptoken) > 0 {
		req.Header.Set("X-Purchase-Token", string(r.ptoken))
	}
	if len(r.body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := sc.d.std.Do(req)
	if err != nil {
		sc.status, sc.err = 0, err
		return nil
	}
	sc.body, err = appendAll(sc.body[:0], resp.Body)
	resp.Body.Close()
	sc.status, sc.err = resp.StatusCode, err
	return nil
}

func appendAll(b []byte, r io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

func (sc *stdConn) Recv() (int, []byte, error) { return sc.status, sc.body, sc.err }
func (sc *stdConn) Close()                     {}

// isTimeout tells a timeout from another network error.
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// jsonString returns the value of the first "key":"value" string field in a JSON body, without
// decoding it (the generator reads only purchaseToken, orderId, error and expiresAt).
func jsonString(body []byte, key string) []byte {
	// key is short and constant: search for `"key"` then skip `:` and spaces up to the quote
	for off := 0; off < len(body); {
		i := bytes.Index(body[off:], []byte(key))
		if i < 0 {
			return nil
		}
		i += off
		off = i + len(key)
		if i == 0 || body[i-1] != '"' || off >= len(body) || body[off] != '"' {
			continue
		}
		j := off + 1
		for j < len(body) && (body[j] == ' ' || body[j] == ':') {
			j++
		}
		if j >= len(body) || body[j] != '"' {
			return nil
		}
		end := bytes.IndexByte(body[j+1:], '"')
		if end < 0 {
			return nil
		}
		return body[j+1 : j+1+end]
	}
	return nil
}
