package testenv

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// FaultyStripe is a Stripe that misbehaves, in front of stripe-mock: every request goes on to
// stripe-mock (which checks it against Stripe's OpenAPI document) unless a fault set here answers
// it first. Faults: a number of 500s or dropped connections (no answer) for requests whose path
// starts with a prefix, a delay before answering, and the Checkout Sessions it keeps itself
// (stripe-mock keeps no state): a session set with Session is what retrieving it answers, and
// expiring it moves it to expired if it is open, or answers Stripe's 400 if it is not, and listing
// the sessions answers those it keeps. It records
// every request's method, path and idempotency key.
type FaultyStripe struct {
	URL string

	mu       sync.Mutex
	faults   []*stripeFault
	sessions map[string]*StripeSession
	refund   *stripeRefundAnswer
	refunds  map[string]stripeRefundAnswer // the refunds it answered itself, by id: what retrieving one answers
	seen     []StripeRequest
}

// StripeSession is a Checkout Session as FaultyStripe keeps it.
type StripeSession struct {
	Status            string // open, complete, expired
	PaymentStatus     string // unpaid, paid, no_payment_required
	PaymentIntent     string
	AmountTotal       int64
	Currency          string // lower case, as Stripe writes it
	ClientReferenceID string
}

// StripeRequest is one request FaultyStripe received.
type StripeRequest struct {
	Method, Path, IdempotencyKey string
	Answered                     int // the status it answered (0: dropped)
}

type stripeFault struct {
	method, prefix string
	left           int           // how many more requests it answers (-1: every one)
	status         int           // 0: drop the connection (no answer)
	delay          time.Duration // before answering (or passing on)
}

type stripeRefundAnswer struct{ status, reason string }

// StartFaultyStripe starts a FaultyStripe in front of stripe-mock (StripeMock); it stops with the test.
func StartFaultyStripe(t testing.TB) *FaultyStripe {
	t.Helper()
	up, err := url.Parse(StripeMock(t))
	if err != nil {
		t.Fatal(err)
	}
	f := &FaultyStripe{sessions: map[string]*StripeSession{}, refunds: map[string]stripeRefundAnswer{}}
	proxy := httputil.NewSingleHostReverseProxy(up)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.serve(w, r, proxy)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// Fail makes the next n requests of method whose path starts with prefix answer status (500, 502,
// 429…), or drop the connection without an answer when status is 0; n < 0: every one.
func (f *FaultyStripe) Fail(method, prefix string, n, status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, &stripeFault{method: method, prefix: prefix, left: n, status: status})
}

// Slow delays every request of method whose path starts with prefix by d before it is answered.
func (f *FaultyStripe) Slow(method, prefix string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, &stripeFault{method: method, prefix: prefix, left: -1, status: -1, delay: d})
}

// Heal removes every fault.
func (f *FaultyStripe) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = nil
}

// Session sets what the session id is at this Stripe.
func (f *FaultyStripe) Session(id string, s StripeSession) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cp := s
	f.sessions[id] = &cp
}

// SessionState answers the session id as this Stripe keeps it (ok false: it keeps none).
func (f *FaultyStripe) SessionState(id string) (StripeSession, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sessions[id]
	if !ok {
		return StripeSession{}, false
	}
	return *s, true
}

// RefundsAnswer makes every refund created from now on answer status (failed, canceled) with
// reason, as Stripe does for a refund it took and could not make.
func (f *FaultyStripe) RefundsAnswer(status, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refund = &stripeRefundAnswer{status: status, reason: reason}
}

// RefundState sets what retrieving refund id answers from now on (a pending refund that later
// failed: status failed and the reason). Only refunds this Stripe answered itself (RefundsAnswer).
func (f *FaultyStripe) RefundState(id, status, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refunds[id] = stripeRefundAnswer{status: status, reason: reason}
}

// Requests lists the requests received so far whose path starts with prefix.
func (f *FaultyStripe) Requests(prefix string) []StripeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []StripeRequest
	for _, r := range f.seen {
		if strings.HasPrefix(r.Path, prefix) {
			out = append(out, r)
		}
	}
	return out
}

func (f *FaultyStripe) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	req := StripeRequest{Method: r.Method, Path: r.URL.Path, IdempotencyKey: r.Header.Get("Idempotency-Key")}
	fault, delay := f.faultFor(r)
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			f.record(req)
			return
		}
	}
	rec := &statusRecorder{ResponseWriter: w}
	switch {
	case fault != nil && fault.status == 0:
		f.record(req)
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
			}
		}
		return
	case fault != nil:
		writeStripeError(rec, fault.status, "api_error", "", "FaultyStripe: injected failure")
	case !f.sessionAnswer(rec, r) && !f.refundAnswer(rec, r, next):
		next.ServeHTTP(rec, r)
	}
	req.Answered = rec.status
	f.record(req)
}

func (f *FaultyStripe) record(r StripeRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, r)
}

// faultFor is the failure to answer r with (nil: none) and the delay before answering.
func (f *FaultyStripe) faultFor(r *http.Request) (*stripeFault, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var delay time.Duration
	for _, ft := range f.faults {
		if (ft.method != "" && ft.method != r.Method) || !strings.HasPrefix(r.URL.Path, ft.prefix) {
			continue
		}
		if ft.status < 0 {
			delay += ft.delay
			continue
		}
		if ft.left == 0 {
			continue
		}
		if ft.left > 0 {
			ft.left--
		}
		return ft, delay
	}
	return nil, delay
}

// sessionAnswer answers a retrieval or expiry of a session this Stripe keeps, and the list of
// sessions (only those it keeps, filtered by status); false: not one of these.
func (f *FaultyStripe) sessionAnswer(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet && r.URL.Path == "/v1/checkout/sessions" {
		status := r.URL.Query().Get("status")
		f.mu.Lock()
		data := []json.RawMessage{}
		for id, s := range f.sessions {
			if status == "" || s.Status == status {
				data = append(data, sessionJSON(id, *s))
			}
		}
		f.mu.Unlock()
		b, _ := json.Marshal(map[string]any{"object": "list", "url": "/v1/checkout/sessions", "has_more": false, "data": data})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
		return true
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/checkout/sessions/")
	if !ok {
		return false
	}
	id, expire := strings.CutSuffix(rest, "/expire")
	f.mu.Lock()
	s, ok := f.sessions[id]
	if !ok {
		f.mu.Unlock()
		return false
	}
	if expire && r.Method == http.MethodPost {
		if s.Status != "open" {
			f.mu.Unlock()
			writeStripeError(w, http.StatusBadRequest, "invalid_request_error", "",
				fmt.Sprintf("Only Checkout Sessions with a status in [\"open\"] can be expired. This Checkout Session has a status of %q.", s.Status))
			return true
		}
		s.Status = "expired"
	}
	body := sessionJSON(id, *s)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
	return true
}

func sessionJSON(id string, s StripeSession) []byte {
	var pi any
	if s.PaymentIntent != "" {
		pi = s.PaymentIntent
	}
	b, _ := json.Marshal(map[string]any{"id": id, "object": "checkout.session", "mode": "payment", "status": s.Status,
		"payment_status": s.PaymentStatus, "payment_intent": pi, "amount_total": s.AmountTotal, "currency": s.Currency,
		"client_reference_id": s.ClientReferenceID, "livemode": false})
	return b
}

// refundAnswer answers a refund's creation with the status set by RefundsAnswer, and the
// retrieval of a refund it answered so; false: neither.
func (f *FaultyStripe) refundAnswer(w http.ResponseWriter, r *http.Request, next http.Handler) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	var id string
	var ans stripeRefundAnswer
	switch rest, isGet := strings.CutPrefix(r.URL.Path, "/v1/refunds/"); {
	case isGet && r.Method == http.MethodGet:
		a, ok := f.refunds[rest]
		if !ok {
			return false
		}
		id, ans = rest, a
	case f.refund != nil && r.Method == http.MethodPost && r.URL.Path == "/v1/refunds":
		_ = r.ParseForm()
		id, ans = "re_faulty_"+r.PostForm.Get("payment_intent"), *f.refund
		f.refunds[id] = ans
	default:
		return false
	}
	b, _ := json.Marshal(map[string]any{"id": id, "object": "refund", "status": ans.status, "failure_reason": ans.reason,
		"amount": 0, "currency": "cny"})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
	return true
}

func writeStripeError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_faulty")
	w.WriteHeader(status)
	e := map[string]any{"type": typ, "message": msg}
	if code != "" {
		e["code"] = code
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	_, _ = w.Write(b)
}

// statusRecorder keeps the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}
