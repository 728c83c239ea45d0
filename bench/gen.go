package main

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// kind is what a latency measures.
type kind int

const (
	kToken    kind = iota // POST purchase-token, send → answer
	kPurchase             // POST purchase, send → answer
	kDup                  // the second purchase of a double-click, send → answer
	kArrival              // one arrival (shopper), scheduled time → its last answer
	nKinds
)

var kindNames = [nKinds]string{"token", "purchase", "dup", "shopper"}

// class is an outcome.
type class int

const (
	c200 class = iota
	c202
	c409
	c410
	c425
	c429
	c4xx // any other 4xx (401, 403, 404, …)
	c5xx
	cTimeout // no answer within -timeout, or not even sent before the phase's hard deadline
	cNetErr  // connection refused or reset, malformed answer
	nClasses
)

var classNames = [nClasses]string{"200", "202", "409", "410", "425", "429", "4xx", "5xx", "timeout", "neterr"}

func classOf(status int, err error) class {
	if err != nil {
		if isTimeout(err) {
			return cTimeout
		}
		return cNetErr
	}
	switch {
	case status == 200:
		return c200
	case status == 202:
		return c202
	case status == 409:
		return c409
	case status == 410:
		return c410
	case status == 425:
		return c425
	case status == 429:
		return c429
	case status >= 400 && status < 500:
		return c4xx
	case status >= 500:
		return c5xx
	}
	return c4xx // 1xx/3xx and unexpected 2xx: not a contract answer
}

// isError tells the outcomes that count against a server's stability: anything that is not
// one of the contract's answers to a shopper (200, 202, 409, 410).
func isError(c class) bool {
	switch c {
	case c200, c202, c409, c410:
		return false
	}
	return true
}

// Error codes the generator counts (from the {"error": CODE} bodies).
var codeNames = []string{"SOLD_OUT", "ALREADY_PURCHASED", "SALE_ENDED", "NOT_STARTED", "INVALID_PURCHASE_TOKEN",
	"CAPTCHA_FAILED", "UNAUTHENTICATED", "RATE_LIMITED", "UNAVAILABLE", "INTERNAL", "NOT_FOUND", "other"}

const codeSoldOut = 0

func codeIndex(b []byte) int {
	switch string(b) {
	case "SOLD_OUT":
		return 0
	case "ALREADY_PURCHASED":
		return 1
	case "SALE_ENDED":
		return 2
	case "NOT_STARTED":
		return 3
	case "INVALID_PURCHASE_TOKEN":
		return 4
	case "CAPTCHA_FAILED":
		return 5
	case "UNAUTHENTICATED":
		return 6
	case "RATE_LIMITED":
		return 7
	case "UNAVAILABLE":
		return 8
	case "INTERNAL":
		return 9
	case "NOT_FOUND":
		return 10
	}
	return len(codeNames) - 1
}

// Stats collects one phase's outcomes from every worker at once.
type Stats struct {
	base     time.Time // the phase's time zero (a monotonic reading)
	lat      [nKinds][nClasses]Hist
	first    [nKinds][nClasses]atomic.Int64 // ns since base of the first answer, +1 (0: none)
	last     [nKinds][nClasses]atomic.Int64 // ns since base of the last answer
	codes    [nKinds][]atomic.Int64
	dispatch Hist // scheduled time → a worker starts the arrival (generator queueing)

	firstErr     atomic.Pointer[string] // the first network error's text, for diagnosis
	firstSoldOut atomic.Int64           // ns since base +1 of the first SOLD_OUT answer
	scheduled    atomic.Int64           // arrivals whose time has come
	started      atomic.Int64           // arrivals a worker has started
	done         atomic.Int64           // arrivals fully answered
	late         atomic.Int64           // arrivals that found no free worker at their time
	dropped      atomic.Int64           // late arrivals not sent (ladders: k6's dropped iterations)
	requests     atomic.Int64           // requests answered (any outcome)
	accepted     atomic.Int64           // 202s
}

func newStats(base time.Time) *Stats {
	s := &Stats{base: base}
	for k := range s.codes {
		s.codes[k] = make([]atomic.Int64, len(codeNames))
	}
	return s
}

// record notes one answer of kind k: its latency and the moment (ns since base) it arrived.
func (s *Stats) record(k kind, c class, lat time.Duration, at int64) {
	s.lat[k][c].Record(lat)
	f := &s.first[k][c]
	for {
		v := f.Load()
		if (v != 0 && v <= at+1) || f.CompareAndSwap(v, at+1) {
			break
		}
	}
	l := &s.last[k][c]
	for {
		v := l.Load()
		if v >= at || l.CompareAndSwap(v, at) {
			break
		}
	}
	if k != kArrival {
		s.requests.Add(1)
	}
}

// recordCode counts the contract error code of an answer body.
func (s *Stats) recordCode(k kind, body []byte, at int64) {
	code := jsonString(body, "error")
	if code == nil {
		return
	}
	i := codeIndex(code)
	s.codes[k][i].Add(1)
	if i == codeSoldOut {
		for {
			v := s.firstSoldOut.Load()
			if (v != 0 && v <= at+1) || s.firstSoldOut.CompareAndSwap(v, at+1) {
				break
			}
		}
	}
}

// noteErr keeps the text of the phase's first network error or timeout.
func (s *Stats) noteErr(k kind, what string, err error) {
	if s.firstErr.Load() == nil {
		msg := kindNames[k] + ": " + what + ": " + err.Error()
		s.firstErr.CompareAndSwap(nil, &msg)
	}
}

func (s *Stats) count(k kind, c class) int64 { return int64(s.lat[k][c].Count()) }

func (s *Stats) errors(k kind) int64 {
	var n int64
	for c := class(0); c < nClasses; c++ {
		if isError(c) {
			n += s.count(k, c)
		}
	}
	return n
}

// lastAnswer is the ns since base of the last answer of any kind.
func (s *Stats) lastAnswer() int64 {
	var m int64
	for k := range s.last {
		for c := range s.last[k] {
			m = max(m, s.last[k][c].Load())
		}
	}
	return m
}

// Worker is one generator goroutine's state: its connections and reused buffers.
type Worker struct {
	id     int
	c1, c2 conn
	req    request
	tok1   []byte
	tok2   []byte
	acked  []string // order ids answered 202
}

// Pool is the generator's fixed set of workers against one target.
type Pool struct {
	d       *dialer
	workers []*Worker
	timeout time.Duration
}

func newPool(d *dialer, n int, timeout time.Duration) *Pool {
	p := &Pool{d: d, timeout: timeout}
	for i := range n {
		p.workers = append(p.workers, &Worker{id: i, c1: d.conn(), c2: d.conn(),
			tok1: make([]byte, 0, 128), tok2: make([]byte, 0, 128)})
	}
	return p
}

// warm opens the first connection of every worker (and the second one when needed) before a
// phase, so no dialling happens inside the measurement.
func (p *Pool) warm(both bool) error {
	deadline := time.Now().Add(10 * time.Second)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	sem := make(chan struct{}, 64)
	for _, w := range p.workers {
		for i, c := range []conn{w.c1, w.c2} {
			rc, ok := c.(*rawConn)
			if !ok || (i == 1 && !both) {
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if err := rc.Warm(deadline); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}()
		}
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return err
	}
	return nil
}

// collectAcked returns and forgets the order ids the workers saw accepted.
func (p *Pool) collectAcked() []string {
	var out []string
	for _, w := range p.workers {
		out = append(out, w.acked...)
		w.acked = w.acked[:0]
	}
	return out
}

func (p *Pool) close() {
	for _, w := range p.workers {
		w.c1.Close()
		w.c2.Close()
	}
	p.d.close()
}

// Phase is one open-loop run: arrivals at fixed offsets from Base, served by the pool.
type Phase struct {
	Name     string
	Base     time.Time       // time zero; must carry a monotonic reading
	Offsets  []time.Duration // sorted arrival times relative to Base
	DropLate bool            // late arrivals are dropped (ladders) instead of queued (rush)
	// Deadline bounds the phase (relative to Base): requests end by then and arrivals not yet
	// started are abandoned (counted as timeouts), so every run stops by itself.
	Deadline time.Duration
	// Do performs arrival i on worker w and records its outcomes in s. sched is its
	// scheduled time; deadline is when its requests must end.
	Do func(w *Worker, s *Stats, i int, sched, deadline time.Time)
	// onStats, if set, is given the phase's statistics before the first arrival.
	onStats func(s *Stats)
}

// run drives the phase to completion and returns its statistics. The scheduler releases each
// arrival at its time whatever happened to the earlier ones (open loop); an arrival that finds
// every worker busy is late: it waits in a FIFO queue (its latency still counts from its
// scheduled time, so generator queueing is not hidden) or, with DropLate, is dropped.
func (p *Pool) run(ctx context.Context, ph *Phase, prog *progress) *Stats {
	s := newStats(ph.Base)
	if ph.onStats != nil {
		ph.onStats(s)
	}
	if prog != nil {
		prog.set(ph.Name, s, len(ph.Offsets))
		defer prog.set("", nil, 0)
	}
	work := make(chan int) // unbuffered: a send succeeds only if a worker is waiting
	queueCap := 1
	if !ph.DropLate {
		queueCap = len(ph.Offsets) + 1
	}
	queue := make(chan int, queueCap)
	hard := ph.Base.Add(ph.Deadline)

	var wg sync.WaitGroup
	for _, w := range p.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk, q := work, queue
			for wk != nil || q != nil {
				var i int
				var ok bool
				select {
				case i, ok = <-wk:
					if !ok {
						wk = nil
						continue
					}
				case i, ok = <-q:
					if !ok {
						q = nil
						continue
					}
				}
				p.serve(w, s, ph, i, hard)
			}
		}()
	}

	// the scheduler
	for i, off := range ph.Offsets {
		if d := off - time.Since(ph.Base); d > 50*time.Millisecond {
			select { // a long wait (the rush's countdown): stay interruptible
			case <-ctx.Done():
			case <-time.After(d):
			}
		} else if d > 0 {
			time.Sleep(d) // the goroutine's own timer: no allocation per arrival
		}
		if ctx.Err() != nil {
			break
		}
		s.scheduled.Add(1)
		if len(queue) > 0 { // others are already waiting: keep the order
			s.late.Add(1)
			queue <- i
			continue
		}
		select {
		case work <- i:
		default:
			s.late.Add(1)
			if ph.DropLate {
				s.dropped.Add(1)
				s.done.Add(1)
				continue
			}
			queue <- i
		}
	}
	close(work)
	close(queue)
	wg.Wait()
	return s
}

func (p *Pool) serve(w *Worker, s *Stats, ph *Phase, i int, hard time.Time) {
	sched := ph.Base.Add(ph.Offsets[i])
	now := time.Now()
	s.dispatch.Record(now.Sub(sched))
	s.started.Add(1)
	defer s.done.Add(1)
	if !now.Before(hard) {
		s.record(kArrival, cTimeout, now.Sub(sched), int64(now.Sub(ph.Base)))
		return
	}
	deadline := now.Add(p.timeout)
	if deadline.After(hard) {
		deadline = hard
	}
	ph.Do(w, s, i, sched, deadline)
}

// exchange sends one request on c and records the answer as kind k. It returns the status
// (0 on a network error or timeout), the body and the answer's time.
func exchange(c conn, r *request, s *Stats, k kind, deadline time.Time) (class, []byte, time.Time) {
	t0 := time.Now()
	if err := c.Send(r, deadline); err != nil {
		t1 := time.Now()
		cl := classOf(0, err)
		s.noteErr(k, "send", err)
		s.record(k, cl, t1.Sub(t0), int64(t1.Sub(s.base)))
		return cl, nil, t1
	}
	return finish(c, s, k, t0)
}

// finish reads the answer to a request sent at t0 and records it.
func finish(c conn, s *Stats, k kind, t0 time.Time) (class, []byte, time.Time) {
	status, body, err := c.Recv()
	t1 := time.Now()
	cl := classOf(status, err)
	if err != nil {
		s.noteErr(k, "receive", err)
	}
	at := int64(t1.Sub(s.base))
	s.record(k, cl, t1.Sub(t0), at)
	if err == nil && status >= 400 {
		s.recordCode(k, body, at)
	}
	if cl == c202 {
		s.accepted.Add(1)
	}
	return cl, body, t1
}

// schedule returns n arrival offsets spread over window: evenly ("uniform"), or as the order
// statistics of n uniform draws ("poisson": a Poisson process conditioned on n arrivals, with
// its bursts and gaps), from a fixed seed so runs are comparable.
func schedule(n int, window time.Duration, arrivals string, seed uint64) []time.Duration {
	out := make([]time.Duration, n)
	if n == 0 {
		return out
	}
	if arrivals == "uniform" {
		step := float64(window) / float64(n)
		for i := range out {
			out[i] = time.Duration(math.Round(float64(i) * step))
		}
		return out
	}
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	for i := range out {
		out[i] = time.Duration(r.Int64N(int64(window)))
	}
	slices.Sort(out)
	return out
}
