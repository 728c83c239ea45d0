package pipeline

import (
	"sync"
	"time"
)

const throughputWindow = 10 // seconds of history the writer's rate is measured over

// Throughput is the writer's recent capacity: the orders it took off the queue divided by the
// time it spent writing them, over the last ten seconds, times its concurrent workers. Measured
// while busy (not over wall time), an idle queue does not make the writer look slow.
type Throughput struct {
	workers int
	now     func() time.Time

	mu      sync.Mutex
	sec     [throughputWindow]int64 // the Unix second each slot holds
	orders  [throughputWindow]int64
	busyNS  [throughputWindow]int64
	hasData bool
}

// NewThroughput returns a meter for a writer with workers concurrent loops.
func NewThroughput(workers int, now func() time.Time) *Throughput {
	if now == nil {
		now = time.Now
	}
	return &Throughput{workers: max(workers, 1), now: now}
}

// Observe records one batch of n orders written in busy.
func (t *Throughput) Observe(n int, busy time.Duration) {
	if t == nil || n <= 0 {
		return
	}
	s := t.now().Unix()
	i := int(s % throughputWindow)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sec[i] != s {
		t.sec[i], t.orders[i], t.busyNS[i] = s, 0, 0
	}
	t.orders[i] += int64(n)
	t.busyNS[i] += max(busy.Nanoseconds(), int64(time.Millisecond))
	t.hasData = true
}

// Rate is the measured orders per second, and false with no batch in the window.
func (t *Throughput) Rate() (float64, bool) {
	if t == nil {
		return 0, false
	}
	now := t.now().Unix()
	t.mu.Lock()
	defer t.mu.Unlock()
	var n, ns int64
	for i := range t.sec {
		if t.sec[i] > now-throughputWindow && t.sec[i] <= now {
			n += t.orders[i]
			ns += t.busyNS[i]
		}
	}
	if n == 0 || ns == 0 {
		return 0, false
	}
	return float64(n) / (float64(ns) / 1e9) * float64(t.workers), true
}
