package loadgen

import (
	"bufio"
	"context"
	"strconv"
	"testing"
	"time"
)

// loopReader serves the same bytes over and over, so a rawConn can parse answers without a
// socket: the benchmarks below measure the parser and the scheduler, not the network.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], l.data[l.off:])
		n += c
		l.off = (l.off + c) % len(l.data)
	}
	return n, nil
}

// BenchmarkReadResponse parses canned answers of each framing the generator meets: a
// Content-Length body (the API's JSON answers), a chunked one and an empty 204.
func BenchmarkReadResponse(b *testing.B) {
	const order = `{"orderId":"0190abcd-0000-7000-8000-000000000001","status":"QUEUED"}`
	answers := []struct{ name, raw string }{
		{"length", "HTTP/1.1 202 Accepted\r\nContent-Type: application/json\r\nDate: Wed, 02 Dec 2026 06:00:00 GMT\r\nContent-Length: " + strconv.Itoa(len(order)) + "\r\n\r\n" + order},
		{"chunked", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{\"purchaseToken\"\r\n12\r\n:\"abcdefghijklmn\"}\r\n0\r\n\r\n"},
		{"empty", "HTTP/1.1 204 No Content\r\nDate: Wed, 02 Dec 2026 06:00:00 GMT\r\n\r\n"},
		{"continue", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 410 Gone\r\nContent-Length: 20\r\n\r\n{\"error\":\"SOLD_OUT\"}"},
	}
	for _, a := range answers {
		b.Run(a.name, func(b *testing.B) {
			rc := &rawConn{br: bufio.NewReaderSize(&loopReader{data: []byte(a.raw)}, 16<<10), body: make([]byte, 0, 1024)}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rc.readResponse(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRun is the scheduler and the workers' dispatch per arrival: every arrival due at
// once, queued in order, served by a Do that only records its answer.
func BenchmarkRun(b *testing.B) {
	for _, drop := range []bool{false, true} {
		name := "queue"
		if drop {
			name = "drop"
		}
		b.Run(name, func(b *testing.B) {
			p, err := NewPool("raw", "http://127.0.0.1:1", 4, time.Second)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			offsets := make([]time.Duration, b.N)
			ph := &Phase{Name: "bench", Base: time.Now(), Offsets: offsets, DropLate: drop, Deadline: time.Hour,
				Do: func(w *Worker, s *Stats, i int, sched, deadline time.Time) {
					s.record(KindArrival, Class200, 0, 0)
				}}
			b.ReportAllocs()
			b.ResetTimer()
			p.Run(context.Background(), ph, nil)
		})
	}
}
