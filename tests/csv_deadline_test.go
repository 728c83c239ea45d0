package tests

import (
	"bufio"
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
// short (the write passed the answer's deadline) and the file lacked most of its rows.
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

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(32 << 10)
	fmt.Fprintf(conn, "GET /api/admin/sales/%d/orders.csv HTTP/1.1\r\nHost: shop\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n",
		s.sale, h.token(9000, auth.RoleMerchant))
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 1<<10), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("export: %d %s", resp.StatusCode, b)
	}
	first := make([]byte, 512)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatalf("the first bytes: %v", err)
	}
	time.Sleep(1500 * time.Millisecond) // past both of the server's timeouts
	rest, err := io.ReadAll(resp.Body)
	body := string(first) + string(rest)
	rows, perr := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || perr != nil || len(rows) != orders+1 {
		lines := strings.Count(body, "\n")
		t.Fatalf("export read after a pause past the server's timeouts: %d bytes, %d lines, read error %v, CSV error %v; want the header and %d rows",
			len(body), lines, err, perr, orders)
	}
	if rows[0][0] != "orderId" || rows[orders][4] != "FAILED" {
		t.Errorf("export: header %v, last row %v", rows[0], rows[orders])
	}
}
