package loadgen

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	for _, kind := range []string{"uniform", "poisson"} {
		off := Schedule(1000, 2*time.Second, kind, 1)
		if len(off) != 1000 {
			t.Fatalf("%s: %d offsets, want 1000", kind, len(off))
		}
		for i, o := range off {
			if o < 0 || o >= 2*time.Second || (i > 0 && o < off[i-1]) {
				t.Fatalf("%s: offset %d = %v: out of [0, 2s) or out of order", kind, i, o)
			}
		}
		again := Schedule(1000, 2*time.Second, kind, 1)
		for i := range off {
			if off[i] != again[i] {
				t.Fatalf("%s: not reproducible at %d", kind, i)
			}
		}
	}
	if u := Schedule(4, time.Second, "uniform", 1); u[1] != 250*time.Millisecond {
		t.Errorf("uniform[1] = %v, want 250ms", u[1])
	}
}

func TestJSONString(t *testing.T) {
	tests := []struct {
		body, key, want string
	}{
		{`{"purchaseToken":"abc.def","expiresAt":"x"}`, "purchaseToken", "abc.def"},
		{`{"orderId": "0190-1", "status":"QUEUED"}`, "orderId", "0190-1"},
		{`{"error":"SOLD_OUT","message":"sold out"}`, "error", "SOLD_OUT"},
		{`{"xerror":"no","error":"YES"}`, "error", "YES"},
		{`{"message":"error"}`, "error", ""},
		{`{"error":1}`, "error", ""},
	}
	for _, tt := range tests {
		if got := string(jsonString([]byte(tt.body), tt.key)); got != tt.want {
			t.Errorf("jsonString(%s, %q) = %q, want %q", tt.body, tt.key, got, tt.want)
		}
	}
}

func TestLoopbackOnly(t *testing.T) {
	tests := []struct {
		url, want string
		ok        bool
	}{
		{"http://127.0.0.1:8080", "127.0.0.1:8080", true},
		{"http://localhost:9000/", "127.0.0.1:9000", true},
		{"http://[::1]:8080", "[::1]:8080", true},
		{"http://127.0.0.2:80", "127.0.0.2:80", true},
		{"http://10.0.0.1:8080", "", false},
		{"http://example.com:8080", "", false},
		{"https://127.0.0.1:8080", "", false},
		{"127.0.0.1:8080", "", false},
	}
	for _, tt := range tests {
		got, err := LoopbackAddr(tt.url)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("LoopbackAddr(%q) = %q, %v; want %q, ok %v", tt.url, got, err, tt.want, tt.ok)
		}
	}
}

// rawConnHandler answers TestRawConn's requests: /echo (202 with the token and the body),
// /chunked (two flushed halves), /empty (204) and /close (410 with Connection: close).
func rawConnHandler(w http.ResponseWriter, r *http.Request) {
	if got := r.Header.Get("X-Purchase-Token"); r.URL.Path == "/echo" && got != "tok" {
		http.Error(w, "missing token "+got, 400)
		return
	}
	switch r.URL.Path {
	case "/echo":
		b := make([]byte, r.ContentLength)
		r.Body.Read(b)
		w.WriteHeader(202)
		w.Write([]byte(`{"orderId":"` + r.Header.Get("Authorization") + `","body":` + string(b) + `}`))
	case "/chunked":
		w.Write([]byte(strings.Repeat("a", 5000)))
		w.(http.Flusher).Flush()
		w.Write([]byte(strings.Repeat("b", 5000)))
	case "/empty":
		w.WriteHeader(204)
	case "/close":
		w.Header().Set("Connection", "close")
		w.WriteHeader(410)
		w.Write([]byte(`{"error":"SOLD_OUT"}`))
	}
}

// TestRawConn checks the lean client against net/http's server: Content-Length, chunked
// bodies, an empty 204, keep-alive across requests and Connection: close.
func TestRawConn(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(rawConnHandler))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	c := &rawConn{addr: addr}
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	send := func(r request) (int, string) {
		t.Helper()
		if err := c.Send(&r, deadline); err != nil {
			t.Fatalf("send %s: %v", r.path, err)
		}
		st, body, err := c.Recv()
		if err != nil {
			t.Fatalf("recv %s: %v", r.path, err)
		}
		return st, string(body)
	}
	st, body := send(request{method: "POST", path: []byte("/echo"), bearer: []byte("jwt"), ptoken: []byte("tok"), body: []byte(`{"a":1}`)})
	if st != 202 || body != `{"orderId":"Bearer jwt","body":{"a":1}}` {
		t.Errorf("echo: %d %s", st, body)
	}
	first := c.c
	st, body = send(request{method: "GET", path: []byte("/chunked")})
	if st != 200 || len(body) != 10000 || body[4999] != 'a' || body[5000] != 'b' {
		t.Errorf("chunked: %d, %d bytes", st, len(body))
	}
	if st, body := send(request{method: "POST", path: []byte("/empty")}); st != 204 || body != "" {
		t.Errorf("empty: %d %q", st, body)
	}
	if c.c != first {
		t.Errorf("the connection was not kept alive")
	}
	if st, body := send(request{method: "POST", path: []byte("/close")}); st != 410 || body != `{"error":"SOLD_OUT"}` || c.c != nil {
		t.Errorf("close: %d %q, conn closed %v", st, body, c.c == nil)
	}
	if st, _ := send(request{method: "POST", path: []byte("/empty")}); st != 204 {
		t.Errorf("after close: %d, want a new connection and 204", st)
	}
}

func TestClassOf(t *testing.T) {
	tests := []struct {
		status int
		want   Class
	}{
		{200, Class200}, {202, Class202}, {409, Class409}, {410, Class410}, {425, Class425}, {429, Class429},
		{403, Class4xx}, {401, Class4xx}, {500, Class5xx}, {503, Class5xx}, {302, Class4xx},
	}
	for _, tt := range tests {
		if got := ClassOf(tt.status, nil); got != tt.want {
			t.Errorf("ClassOf(%d) = %s, want %s", tt.status, ClassNames[got], ClassNames[tt.want])
		}
	}
	for _, c := range []Class{Class200, Class202, Class409, Class410} {
		if IsError(c) {
			t.Errorf("IsError(%s) = true", ClassNames[c])
		}
	}
	for _, c := range []Class{Class425, Class429, Class4xx, Class5xx, ClassTimeout, ClassNetErr} {
		if !IsError(c) {
			t.Errorf("IsError(%s) = false", ClassNames[c])
		}
	}
}

func TestParseStatus(t *testing.T) {
	tests := []struct {
		line string
		want int
		ok   bool
	}{
		{"HTTP/1.1 202 Accepted\r\n", 202, true},
		{"HTTP/1.0 100 Continue\r\n", 100, true},
		{"HTTP/1.1 999\r\n", 999, true},
		{"HTTP/1.1 20\r\n", 0, false},
		{"HTTP/2.0 200 OK\r\n", 0, false},
		{"HTTP/1.1 2/0 OK\r\n", 0, false},
		{"HTTP/1.1 20: OK\r\n", 0, false},
		{"http/1.1 200 OK\r\n", 0, false},
	}
	for _, tt := range tests {
		if got, ok := parseStatus([]byte(tt.line)); got != tt.want || ok != tt.ok {
			t.Errorf("parseStatus(%q) = %d, %v; want %d, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}
