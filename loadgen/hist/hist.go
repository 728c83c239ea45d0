// Package hist is the generator's latency histogram: lock-free, allocation-free recording from
// every worker at once, and percentiles read from a frozen copy.
package hist

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// Latencies are kept in HDR-like log-bucketed arrays: values below 128 ns get one bucket each,
// above that every power of two is split into 64 buckets, so a percentile is off by at most
// 1/64 (1.6%). Recording is one atomic add: no allocation, no lock, safe from every worker.
const (
	subBits    = 6
	subBuckets = 1 << subBits                // buckets per power of two
	maxShift   = 34                          // values up to 2^41 ns (about 36 minutes)
	numBuckets = (maxShift + 2) * subBuckets // 2304
	maxValue   = int64(1)<<(maxShift+subBits+1) - 1
)

// bucketOf returns the bucket of v nanoseconds (clamped to [0, maxValue]).
func bucketOf(v int64) int {
	if v < 0 {
		v = 0
	}
	if v > maxValue {
		v = maxValue
	}
	u := uint64(v)
	if u < 2*subBuckets {
		return int(u)
	}
	shift := bits.Len64(u) - (subBits + 1)
	return (shift+1)*subBuckets + int(u>>shift) - subBuckets
}

// bucketRange returns the lowest and highest value of bucket i.
func bucketRange(i int) (lo, hi int64) {
	if i < 2*subBuckets {
		return int64(i), int64(i)
	}
	shift := i/subBuckets - 1
	m := int64(i%subBuckets + subBuckets)
	return m << shift, (m+1)<<shift - 1
}

// Hist is a concurrent latency histogram; its zero value is empty and ready.
type Hist struct {
	counts [numBuckets]atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Uint64 // nanoseconds
	min    atomic.Int64  // nanoseconds + 1, 0 while empty
	max    atomic.Int64
}

// Record adds one observation.
func (h *Hist) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	h.counts[bucketOf(v)].Add(1)
	h.n.Add(1)
	h.sum.Add(uint64(v))
	for {
		m := h.min.Load()
		if m != 0 && m <= v+1 {
			break
		}
		if h.min.CompareAndSwap(m, v+1) {
			break
		}
	}
	for {
		m := h.max.Load()
		if m >= v || h.max.CompareAndSwap(m, v) {
			break
		}
	}
}

// Count returns the number of observations.
func (h *Hist) Count() uint64 { return h.n.Load() }

// Snapshot copies the histogram for reading (and merging).
func (h *Hist) Snapshot() Snap {
	s := Snap{Counts: make([]uint64, numBuckets), N: h.n.Load(), Sum: h.sum.Load(), Max: h.max.Load()}
	if m := h.min.Load(); m > 0 {
		s.Min = m - 1
	}
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
	}
	return s
}

// Snap is a frozen histogram: the counts of every bucket, and the count, sum, min and max.
type Snap struct {
	Counts   []uint64
	N, Sum   uint64
	Min, Max int64
}

// Merge adds o into s.
func (s *Snap) Merge(o Snap) {
	if o.N == 0 {
		return
	}
	if s.Counts == nil {
		s.Counts = make([]uint64, numBuckets)
	}
	if s.N == 0 || o.Min < s.Min {
		s.Min = o.Min
	}
	if o.Max > s.Max {
		s.Max = o.Max
	}
	s.N += o.N
	s.Sum += o.Sum
	for i, c := range o.Counts {
		s.Counts[i] += c
	}
}

// Quantile returns the value at quantile q (0..1): the midpoint of the bucket holding the
// ceil(q*N)-th smallest observation, clamped to the observed min and max.
func (s Snap) Quantile(q float64) time.Duration {
	if s.N == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(s.N)))
	if rank < 1 {
		rank = 1
	}
	if rank > s.N {
		rank = s.N
	}
	var cum uint64
	for i, c := range s.Counts {
		cum += c
		if cum >= rank {
			lo, hi := bucketRange(i)
			v := lo + (hi-lo)/2
			v = max(v, s.Min)
			v = min(v, s.Max)
			return time.Duration(v)
		}
	}
	return time.Duration(s.Max)
}

// Mean returns the average observation.
func (s Snap) Mean() time.Duration {
	if s.N == 0 {
		return 0
	}
	return time.Duration(s.Sum / s.N)
}

// Summary is the printable and JSON form of a histogram, in milliseconds.
type Summary struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Summary computes the percentiles of s.
func (s Snap) Summary() Summary {
	if s.N == 0 {
		return Summary{}
	}
	return Summary{Count: int64(s.N), Mean: ms(s.Mean()), P50: ms(s.Quantile(0.5)), P90: ms(s.Quantile(0.9)),
		P99: ms(s.Quantile(0.99)), P999: ms(s.Quantile(0.999)), Max: ms(time.Duration(s.Max))}
}

// AtMost returns how many observations were at most d (to within a bucket, 1/64: a bucket is
// counted when its lowest value is at most d).
func (s Snap) AtMost(d time.Duration) uint64 {
	var n uint64
	for i, c := range s.Counts {
		if lo, _ := bucketRange(i); lo > int64(d) {
			break
		}
		n += c
	}
	return n
}
