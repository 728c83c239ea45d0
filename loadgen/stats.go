package loadgen

import (
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale/loadgen/hist"
)

// Stats collects one phase's outcomes from every worker at once.
type Stats struct {
	base     time.Time // the phase's time zero (a monotonic reading)
	lat      [NumKinds][NumClasses]hist.Hist
	first    [NumKinds][NumClasses]atomic.Int64 // ns since base of the first answer, +1 (0: none)
	last     [NumKinds][NumClasses]atomic.Int64 // ns since base of the last answer
	codes    [NumKinds][]atomic.Int64
	dispatch hist.Hist // scheduled time → a worker starts the arrival (generator queueing)

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
		s.codes[k] = make([]atomic.Int64, len(CodeNames))
	}
	return s
}

// record notes one answer of kind k: its latency and the moment (ns since base) it arrived.
func (s *Stats) record(k Kind, c Class, lat time.Duration, at int64) {
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
	if k != KindArrival {
		s.requests.Add(1)
	}
}

// recordCode counts the contract error code of an answer body.
func (s *Stats) recordCode(k Kind, body []byte, at int64) {
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
func (s *Stats) noteErr(k Kind, what string, err error) {
	if s.firstErr.Load() == nil {
		msg := KindNames[k] + ": " + what + ": " + err.Error()
		s.firstErr.CompareAndSwap(nil, &msg)
	}
}

// Count returns how many answers of kind k had outcome c.
func (s *Stats) Count(k Kind, c Class) int64 { return int64(s.lat[k][c].Count()) }

// Errors returns how many answers of kind k were errors (IsError).
func (s *Stats) Errors(k Kind) int64 {
	var n int64
	for c := Class(0); c < NumClasses; c++ {
		if IsError(c) {
			n += s.Count(k, c)
		}
	}
	return n
}

// LastAnswer is the ns since base of the last answer of any Kind.
func (s *Stats) LastAnswer() int64 {
	var m int64
	for k := range s.last {
		for c := range s.last[k] {
			m = max(m, s.last[k][c].Load())
		}
	}
	return m
}

// The reading side, for the report once the phase is over (and the progress line meanwhile).

// Base is the phase's time zero.
func (s *Stats) Base() time.Time { return s.base }

// Latency returns a frozen copy of the latencies of kind k with outcome c.
func (s *Stats) Latency(k Kind, c Class) hist.Snap { return s.lat[k][c].Snapshot() }

// FirstAt and LastAt return the ns since time zero of the first and the last answer of kind k
// with outcome c (FirstAt: -1 if none).
func (s *Stats) FirstAt(k Kind, c Class) int64 { return s.first[k][c].Load() - 1 }

// LastAt: see FirstAt.
func (s *Stats) LastAt(k Kind, c Class) int64 { return s.last[k][c].Load() }

// Code returns how many answers of kind k carried the error code CodeNames[i].
func (s *Stats) Code(k Kind, i int) int64 { return s.codes[k][i].Load() }

// Dispatch returns the dispatch delays: scheduled time → a worker starts the arrival.
func (s *Stats) Dispatch() hist.Snap { return s.dispatch.Snapshot() }

// FirstError returns the text of the phase's first network error or timeout, or "".
func (s *Stats) FirstError() string {
	if e := s.firstErr.Load(); e != nil {
		return *e
	}
	return ""
}

// FirstSoldOut returns the ns since time zero of the first SOLD_OUT answer, or -1.
func (s *Stats) FirstSoldOut() int64 { return s.firstSoldOut.Load() - 1 }

// Scheduled returns how many arrivals' times have come (sent or queued); safe while the phase runs.
func (s *Stats) Scheduled() int64 { return s.scheduled.Load() }

// Late returns how many arrivals found no free worker at their time.
func (s *Stats) Late() int64 { return s.late.Load() }

// Dropped returns how many late arrivals were not sent (DropLate).
func (s *Stats) Dropped() int64 { return s.dropped.Load() }

// Done returns how many arrivals are over (answered, abandoned or dropped).
func (s *Stats) Done() int64 { return s.done.Load() }

// Requests returns how many requests were answered (any outcome).
func (s *Stats) Requests() int64 { return s.requests.Load() }

// Accepted returns how many purchases were answered 202 so far; safe while the phase runs.
func (s *Stats) Accepted() int64 { return s.accepted.Load() }
