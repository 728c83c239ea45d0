package catalog

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/store"
)

// partialSink takes every sale's delta but those of the sales in down (their Redis Cluster node
// is down), as store.Stock.FlushFunnel reports it.
type partialSink struct {
	mu   sync.Mutex
	down map[int64]bool
	got  map[int64]int64 // sale -> accepted taken
}

func (p *partialSink) FlushFunnel(_ context.Context, ds []store.FunnelDelta, _ store.FunnelStore) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var left []store.FunnelDelta
	for _, d := range ds {
		if p.down[d.SaleID] {
			left = append(left, d)
			continue
		}
		p.got[d.SaleID] += d.Accepted
	}
	if len(left) > 0 {
		return &store.FunnelNotTaken{NotTaken: left, Err: errors.New("dial tcp: connection refused")}
	}
	return nil
}

// A flush that one node of a cluster refused keeps only that node's sales for the next flush:
// the sales another node took are not counted twice.
func TestFunnelKeepsOnlyWhatANodeDidNotTake(t *testing.T) {
	t.Parallel()
	sink := &partialSink{down: map[int64]bool{2: true}, got: map[int64]int64{}}
	f := NewFunnel(sink, quietLog(), time.Now)
	for range 3 {
		f.Record(1, nil)
		f.Record(2, nil)
	}
	if err := f.Flush(context.Background()); err == nil {
		t.Fatal("a flush one node refused reported no error")
	}
	sink.mu.Lock()
	sink.down = nil
	sink.mu.Unlock()
	f.Record(1, nil)
	if err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sink.got[1] != 4 || sink.got[2] != 3 {
		t.Errorf("accepted taken: sale 1 %d, sale 2 %d; want 4 and 3 (each count once)", sink.got[1], sink.got[2])
	}
}
