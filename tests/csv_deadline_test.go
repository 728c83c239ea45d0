package tests

import (
	"bufio"
	"compress/gzip"
	"encoding/csv"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/services/auth"
)

// smallBuffers accepts connections with a small send buffer, so a server writing to a client
// that does not read blocks within a few kilobytes instead of filling megabytes of kernel memory.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(32 << 10)
	}
	return c, err
}

// A CSV export that lasts longer than the server's timeouts arrives whole: the server here has a
// ReadTimeout and a WriteTimeout of one second (the binary's are 15 s and 30 s), and the
// merchant's client stops reading for 1.5 s after the first bytes, with the server blocked
// writing the first chunk. Before the route moved its deadlines per chunk, the download was cut
// short (the write passed the answer's deadline) and the file lacked most of its rows. The same
// for a client that accepts gzip, as every browser does: the compression middleware wraps the
// writer, and before it unwrapped (http.ResponseController) the route could not move its
// deadline through it, and such a download was cut at the server's WriteTimeout again.
func TestCSVExportOutlivesTheServerTimeouts(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	s := h.liveSale(1)
	const orders = 3000 // three chunks of the export, some 300 KB
	h.sqlInt(`WITH ins AS (
		INSERT INTO orders (id, item_id, sale_id, user_id, status, reserved_at, pay_by, failure)
		SELECT gen_random_uuid(), ?, ?, 100000 + g, 'FAILED', now() - g * interval '1 ms', now(), 'made by the test'
		FROM generate_series(1, ?) g RETURNING 1)
		SELECT count(*) FROM ins`, s.items[0], s.sale, orders)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h.app.Handler, ReadHeaderTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second}
	go func() { _ = srv.Serve(smallBuffers{ln}) }()
	t.Cleanup(func() { _ = srv.Close() })

	token := h.token(9000, auth.RoleMerchant)
	for _, acceptEncoding := range []string{"", "gzip, deflate, br"} {
		body := slowExport(t, ln.Addr().String(), s.sale, token, acceptEncoding)
		rows, perr := csv.NewReader(strings.NewReader(body)).ReadAll()
		if perr != nil || len(rows) != orders+1 {
			t.Errorf("Accept-Encoding %q: export read after a pause past the server's timeouts: %d bytes, %d lines, CSV error %v; want the header and %d rows",
				acceptEncoding, len(body), strings.Count(body, "\n"), perr, orders)
			continue
		}
		if rows[0][0] != "orderId" || rows[orders][4] != "FAILED" {
			t.Errorf("Accept-Encoding %q: export: header %v, last row %v", acceptEncoding, rows[0], rows[orders])
		}
	}
}

// slowExport downloads a sale's orders.csv over a connection with a small receive buffer, asking
// with acceptEncoding ("" for none), and pauses 1.5 s after the first 512 bytes of the file; it
// returns the file as the client reads it (decompressed when the answer is gzipped), however
// much of it arrived.
func slowExport(t *testing.T, addr string, saleID int64, token, acceptEncoding string) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(32 << 10)
	ae := ""
	if acceptEncoding != "" {
		ae = "Accept-Encoding: " + acceptEncoding + "\r\n"
	}
	fmt.Fprintf(conn, "GET /api/admin/sales/%d/orders.csv HTTP/1.1\r\nHost: shop\r\nAuthorization: Bearer %s\r\n%sConnection: close\r\n\r\n",
		saleID, token, ae)
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 1<<10), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("export: %d %s", resp.StatusCode, b)
	}
	var file io.Reader = resp.Body
	switch enc := resp.Header.Get("Content-Encoding"); enc {
	case "":
	case "gzip":
		if acceptEncoding == "" {
			t.Errorf("a client that accepts no encoding got a gzipped export")
		}
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatalf("Accept-Encoding %q: a gzipped export that does not begin as gzip: %v", acceptEncoding, err)
		}
		file = zr
	default:
		t.Fatalf("Accept-Encoding %q: export with Content-Encoding %q", acceptEncoding, enc)
	}
	first := make([]byte, 512)
	if _, err := io.ReadFull(file, first); err != nil {
		t.Fatalf("Accept-Encoding %q: the first bytes: %v", acceptEncoding, err)
	}
	time.Sleep(1500 * time.Millisecond) // past both of the server's timeouts
	rest, err := io.ReadAll(file)
	if err != nil {
		t.Errorf("Accept-Encoding %q: reading the export after the pause: %v (after %d bytes)", acceptEncoding, err, 512+len(rest))
	}
	return string(first) + string(rest)
}
