package hist

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestBucketsCoverEveryValue(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := []int64{0, 1, 63, 64, 127, 128, 129, 255, 256, 1000, 1 << 20, maxValue - 1, maxValue}
	for range 10000 {
		vals = append(vals, r.Int64N(maxValue))
	}
	for _, v := range vals {
		b := bucketOf(v)
		lo, hi := bucketRange(b)
		if b < 0 || b >= numBuckets || v < lo || v > hi {
			t.Fatalf("value %d: bucket %d covers [%d, %d]", v, b, lo, hi)
		}
		if width := hi - lo + 1; v >= 2*subBuckets && float64(width)/float64(lo) > 1.0/subBuckets+1e-9 {
			t.Fatalf("value %d: bucket [%d, %d] wider than 1/%d", v, lo, hi, subBuckets)
		}
	}
	if got := bucketOf(-5); got != 0 {
		t.Errorf("bucketOf(-5) = %d, want 0", got)
	}
}

func TestHistQuantiles(t *testing.T) {
	var h Hist
	// 1 µs … 10,000 µs, once each
	for i := 1; i <= 10000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	s := h.Snapshot()
	tests := []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 5000 * time.Microsecond},
		{0.9, 9000 * time.Microsecond},
		{0.99, 9900 * time.Microsecond},
		{0.999, 9990 * time.Microsecond},
		{1, 10000 * time.Microsecond},
		{0, 1 * time.Microsecond},
	}
	for _, tt := range tests {
		got := s.Quantile(tt.q)
		if rel := math.Abs(float64(got-tt.want)) / float64(tt.want); rel > 1.0/subBuckets {
			t.Errorf("Quantile(%v) = %v, want %v within 1.6%%", tt.q, got, tt.want)
		}
	}
	if s.Min != int64(time.Microsecond) || s.Max != int64(10*time.Millisecond) {
		t.Errorf("min, max = %d, %d, want 1000, 10000000", s.Min, s.Max)
	}
	if got, want := s.Mean(), 5000500*time.Nanosecond; got != want {
		t.Errorf("Mean() = %v, want %v", got, want)
	}
	sum := s.Summary()
	if sum.Count != 10000 || sum.Max != 10 {
		t.Errorf("Summary() = %+v, want count 10000, max 10 ms", sum)
	}
}

func TestHistMergeAndEmpty(t *testing.T) {
	var empty Hist
	if got := empty.Snapshot().Quantile(0.99); got != 0 {
		t.Errorf("empty Quantile = %v, want 0", got)
	}
	var a, b Hist
	for range 99 {
		a.Record(time.Millisecond)
	}
	b.Record(time.Second)
	s := a.Snapshot()
	s.Merge(b.Snapshot())
	if s.N != 100 {
		t.Fatalf("merged N = %d, want 100", s.N)
	}
	if got := s.Quantile(0.99); got < time.Millisecond || float64(got) > float64(time.Millisecond)*(1+1.0/subBuckets) {
		t.Errorf("p99 = %v, want 1ms within 1.6%% (the 99th of 100)", got)
	}
	if got := s.Quantile(0.999); got != time.Second {
		t.Errorf("p99.9 = %v, want 1s", got)
	}
}

// TestHistConcurrent records from many goroutines at once: no observation may be lost.
func TestHistConcurrent(t *testing.T) {
	var h Hist
	const workers, each = 8, 5000
	done := make(chan struct{})
	for w := range workers {
		go func() {
			for i := range each {
				h.Record(time.Duration(w*each+i) * time.Microsecond)
			}
			done <- struct{}{}
		}()
	}
	for range workers {
		<-done
	}
	s := h.Snapshot()
	var sum uint64
	for _, c := range s.Counts {
		sum += c
	}
	if s.N != workers*each || sum != workers*each {
		t.Fatalf("N = %d, bucket sum = %d, want %d", s.N, sum, workers*each)
	}
	if s.Min != 0 || s.Max != int64((workers*each-1)*int(time.Microsecond)) {
		t.Errorf("min, max = %d, %d", s.Min, s.Max)
	}
}
