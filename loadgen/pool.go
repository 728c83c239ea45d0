// Package loadgen is flashsale's open-loop load generator: arrivals released at times fixed in
// advance, whatever the answers, to a fixed pool of workers with keep-alive connections through
// a lean HTTP/1.1 client; every answer recorded, lock-free, by kind and outcome, and every
// shopper's latency counted from its scheduled time. The flows (a shopper's visit, a purchase
// alone) speak flashsale's public contract. The benchmark tool (bench) and the merchant's fire
// drill (services/drill, through internal/app) both drive it.
package loadgen

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

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

// NewPool returns n workers against the loopback server at baseURL, each with its connections
// (opened by Warm, or on first use), through the raw or the std client; a request unanswered
// after timeout is a timeout.
func NewPool(client, baseURL string, n int, timeout time.Duration) (*Pool, error) {
	addr, err := LoopbackAddr(baseURL)
	if err != nil {
		return nil, err
	}
	d := newDialer(client, baseURL, addr, 2*n)
	p := &Pool{d: d, timeout: timeout}
	for i := range n {
		p.workers = append(p.workers, &Worker{id: i, c1: d.conn(), c2: d.conn(),
			tok1: make([]byte, 0, 128), tok2: make([]byte, 0, 128)})
	}
	return p, nil
}

// Warm opens the first connection of every worker (and the second one when needed) before a
// phase, so no dialling happens inside the measurement.
func (p *Pool) Warm(both bool) error {
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

// CollectAcked returns and forgets the order ids the workers saw accepted.
func (p *Pool) CollectAcked() []string {
	var out []string
	for _, w := range p.workers {
		out = append(out, w.acked...)
		w.acked = w.acked[:0]
	}
	return out
}

// Close closes every connection of the pool.
func (p *Pool) Close() {
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
	// OnStats, if set, is given the phase's statistics before the first arrival.
	OnStats func(s *Stats)
}

// Run drives the phase to completion and returns its statistics. The scheduler releases each
// arrival at its time whatever happened to the earlier ones (open loop); an arrival that finds
// every worker busy is late: it waits in a FIFO queue (its latency still counts from its
// scheduled time, so generator queueing is not hidden) or, with DropLate, is dropped.
func (p *Pool) Run(ctx context.Context, ph *Phase, prog *Progress) *Stats {
	s := newStats(ph.Base)
	if ph.OnStats != nil {
		ph.OnStats(s)
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
			p.work(w, s, ph, work, queue, hard)
		}()
	}
	release(ctx, ph, s, work, queue)
	close(work)
	close(queue)
	wg.Wait()
	return s
}

// work is one worker's loop: it serves arrivals handed to it directly or queued late, until
// both channels are closed and drained.
func (p *Pool) work(w *Worker, s *Stats, ph *Phase, work, queue chan int, hard time.Time) {
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
}

// release is the scheduler: it hands each arrival, at its time, to a waiting worker, or else
// queues it late (or drops it, with DropLate), until the offsets run out or ctx ends.
func release(ctx context.Context, ph *Phase, s *Stats, work, queue chan int) {
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
}

func (p *Pool) serve(w *Worker, s *Stats, ph *Phase, i int, hard time.Time) {
	sched := ph.Base.Add(ph.Offsets[i])
	now := time.Now()
	s.dispatch.Record(now.Sub(sched))
	s.started.Add(1)
	defer s.done.Add(1)
	if !now.Before(hard) {
		s.record(KindArrival, ClassTimeout, now.Sub(sched), int64(now.Sub(ph.Base)))
		return
	}
	deadline := now.Add(p.timeout)
	if deadline.After(hard) {
		deadline = hard
	}
	ph.Do(w, s, i, sched, deadline)
}

// exchange sends one request on c and records the answer as Kind k. It returns the status
// (0 on a network error or timeout), the body and the answer's time.
func exchange(c conn, r *request, s *Stats, k Kind, deadline time.Time) (Class, []byte, time.Time) {
	t0 := time.Now()
	if err := c.Send(r, deadline); err != nil {
		t1 := time.Now()
		cl := ClassOf(0, err)
		s.noteErr(k, "send", err)
		s.record(k, cl, t1.Sub(t0), int64(t1.Sub(s.base)))
		return cl, nil, t1
	}
	return finish(c, s, k, t0)
}

// finish reads the answer to a request sent at t0 and records it.
func finish(c conn, s *Stats, k Kind, t0 time.Time) (Class, []byte, time.Time) {
	status, body, err := c.Recv()
	t1 := time.Now()
	cl := ClassOf(status, err)
	if err != nil {
		s.noteErr(k, "receive", err)
	}
	at := int64(t1.Sub(s.base))
	s.record(k, cl, t1.Sub(t0), at)
	if err == nil && status >= 400 {
		s.recordCode(k, body, at)
	}
	if cl == Class202 {
		s.accepted.Add(1)
	}
	return cl, body, t1
}

// Schedule returns n arrival offsets spread over window: evenly ("uniform"), or as the order
// statistics of n uniform draws ("poisson": a Poisson process conditioned on n arrivals, with
// its bursts and gaps), from a fixed seed so runs are comparable.
func Schedule(n int, window time.Duration, arrivals string, seed uint64) []time.Duration {
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

// LoopbackAddr checks that a URL names a loopback host and returns "ip:port" for dialling: the
// generator loads nothing but this machine.
func LoopbackAddr(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return "", fmt.Errorf("%q: want http://127.0.0.1:PORT", raw)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
	}
	if !IsLoopbackHost(host) {
		return "", fmt.Errorf("%q: only loopback addresses may be load-test targets", raw)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	if _, err := strconv.Atoi(port); err != nil {
		return "", fmt.Errorf("%q: bad port", raw)
	}
	return net.JoinHostPort(host, port), nil
}

// IsLoopbackHost tells whether host is localhost or a loopback IP.
func IsLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
