package catalog

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// fakeSink records what a Funnel flushes, and fails while told to.
type fakeSink struct {
	mu       sync.Mutex
	fail     bool // refuse the flush
	lostAck  bool // apply the flush, then answer an error (a timeout after Redis ran it)
	calls    int
	got      []store.FunnelDelta
	seen     map[string]bool // flush ids applied, as lua/funnel.lua remembers them
	resentID int             // deltas that came again under an id already applied
}

func (f *fakeSink) FlushFunnel(_ context.Context, ds []store.FunnelDelta, fs store.FunnelStore) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if fs.Keep != FunnelKeep || fs.TTL != FunnelTTL {
		return errors.New("unexpected funnel store settings")
	}
	if f.fail {
		return errors.New("redis down")
	}
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	for _, d := range ds {
		if d.ID == "" {
			return errors.New("a delta without a flush id")
		}
		if f.seen[d.ID] {
			f.resentID++
			continue
		}
		f.seen[d.ID] = true
		f.got = append(f.got, d)
	}
	if f.lostAck {
		return context.DeadlineExceeded
	}
	return nil
}

// totals sums what reached the sink for one sale.
func (f *fakeSink) totals(sale int64) (accepted int64, refused map[string]int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	refused = map[string]int64{}
	for _, d := range f.got {
		if d.SaleID != sale {
			continue
		}
		accepted += d.Accepted
		for r, n := range d.Refused {
			refused[r] += n
		}
	}
	return accepted, refused
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestFunnelRecordAndFlush(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 700_000_000)
	sink := &fakeSink{}
	f := NewFunnel(sink, quietLog(), func() time.Time { return now })

	f.Record(7, nil)
	f.Record(7, nil)
	f.Record(7, errSoldOut)
	f.Record(7, &shop.Error{Code: shop.CodeAlreadyPurchased})
	f.Record(7, shop.Errorf(shop.CodeRateLimited, "slow down"))
	f.Record(7, errBadToken)
	f.Record(7, shop.Errorf(shop.CodeCaptchaFailed, "wrong"))
	f.Record(7, shop.ErrPaused)
	f.Record(7, shop.Errorf(shop.CodeNotStarted, "soon"))
	f.Record(7, shop.Unavailable(errors.New("redis down")))
	f.Record(8, errSoldOut)
	f.Record(0, nil) // unknown sale: not counted
	var nilFunnel *Funnel
	nilFunnel.Record(7, nil) // not counting: no panic

	if err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(sink.got) != 2 {
		t.Fatalf("flushed %d deltas, want one per sale (7, 8): %+v", len(sink.got), sink.got)
	}
	acc, ref := sink.totals(7)
	want := map[string]int64{RefusedSoldOut: 1, RefusedDuplicate: 1, RefusedRateLimited: 1, RefusedBadToken: 1,
		RefusedCaptcha: 1, RefusedPaused: 1, RefusedOther: 2}
	if acc != 2 || len(ref) != len(want) {
		t.Fatalf("sale 7: accepted %d, refused %v; want 2, %v", acc, ref, want)
	}
	for r, n := range want {
		if ref[r] != n {
			t.Errorf("sale 7 refused %s = %d, want %d", r, ref[r], n)
		}
	}
	if acc, ref := sink.totals(8); acc != 0 || ref[RefusedSoldOut] != 1 || len(ref) != 1 {
		t.Errorf("sale 8: accepted %d, refused %v; want 0 and one sold out", acc, ref)
	}
	for _, d := range sink.got {
		if d.At != now.Add(-500*time.Millisecond).Unix() {
			t.Errorf("delta of sale %d goes to second %d, want %d (the flushed interval's middle)", d.SaleID, d.At, now.Unix()-1)
		}
	}

	// Nothing new: nothing flushed, no call to Redis.
	calls := sink.calls
	if err := f.Flush(context.Background()); err != nil || sink.calls != calls {
		t.Errorf("an empty flush: err %v, calls %d -> %d; want no call", err, calls, sink.calls)
	}
}

func TestFunnelKeepsCountsRedisDidNotTake(t *testing.T) {
	t.Parallel()
	sink := &fakeSink{fail: true}
	f := NewFunnel(sink, quietLog(), time.Now)
	f.Record(3, nil)
	f.Record(3, errSoldOut)
	if err := f.Flush(context.Background()); err == nil {
		t.Fatal("a flush Redis refused reported no error")
	}
	f.Record(3, nil)
	sink.fail = false
	if err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if acc, ref := sink.totals(3); acc != 2 || ref[RefusedSoldOut] != 1 {
		t.Errorf("after a failed flush and a good one: accepted %d, refused %v; want 2 and one sold out", acc, ref)
	}
}

// A flush that Redis ran but whose answer was lost is resent under the same ids: the counts are
// added once, not twice; and counts Redis never takes are dropped after funnelResendFor.
func TestFunnelResendsALostFlushOnce(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	sink := &fakeSink{lostAck: true}
	f := NewFunnel(sink, quietLog(), func() time.Time { return now })
	f.Record(4, nil)
	f.Record(4, errSoldOut)
	if err := f.Flush(context.Background()); err == nil {
		t.Fatal("a flush without an answer reported no error")
	}
	f.Record(4, nil)
	sink.lostAck = false
	now = now.Add(time.Second)
	if err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if acc, ref := sink.totals(4); acc != 2 || ref[RefusedSoldOut] != 1 {
		t.Errorf("after a lost answer and a good flush: accepted %d, refused %v; want 2 and one sold out (counted once)", acc, ref)
	}
	if sink.resentID != 1 {
		t.Errorf("%d deltas resent under an applied id, want 1 (the first flush's)", sink.resentID)
	}
	// Redis refuses for longer than funnelResendFor: those counts go, later ones still arrive.
	sink.fail = true
	f.Record(4, nil)
	if err := f.Flush(context.Background()); err == nil {
		t.Fatal("a refused flush reported no error")
	}
	now = now.Add(funnelResendFor + time.Second)
	sink.fail = false
	f.Record(4, errSoldOut)
	if err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if acc, ref := sink.totals(4); acc != 2 || ref[RefusedSoldOut] != 2 {
		t.Errorf("after giving up on an old flush: accepted %d, refused %v; want 2 (the stale one dropped) and 2 sold out", acc, ref)
	}
}

// Counting from many goroutines while flushing concurrently loses and doubles nothing.
func TestFunnelConcurrentRecordAndFlush(t *testing.T) {
	t.Parallel()
	sink := &fakeSink{}
	f := NewFunnel(sink, quietLog(), time.Now)
	const workers, each = 8, 5000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		for {
			select {
			case <-stop:
				return
			default:
				_ = f.Flush(context.Background())
			}
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if (i+w)%3 == 0 {
					f.Record(1, errSoldOut)
				} else {
					f.Record(1, nil)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-flushed
	if err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	acc, ref := sink.totals(1)
	if acc+ref[RefusedSoldOut] != workers*each {
		t.Errorf("accepted %d + refused %d = %d, want %d", acc, ref[RefusedSoldOut], acc+ref[RefusedSoldOut], workers*each)
	}
	wantRefused := int64(0)
	for w := range workers {
		for i := range each {
			if (i+w)%3 == 0 {
				wantRefused++
			}
		}
	}
	if ref[RefusedSoldOut] != wantRefused {
		t.Errorf("refused %d, want %d", ref[RefusedSoldOut], wantRefused)
	}
}

// A sale with nothing to flush for funnelIdleForget is forgotten; counting again brings it back.
func TestFunnelForgetsIdleSales(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	sink := &fakeSink{}
	f := NewFunnel(sink, quietLog(), func() time.Time { return now })
	f.Record(5, nil)
	_ = f.Flush(context.Background())
	held := func() bool { _, ok := f.sales.Load(int64(5)); return ok }
	now = now.Add(time.Second)
	_ = f.Flush(context.Background()) // idle from here
	now = now.Add(funnelIdleForget - time.Second)
	_ = f.Flush(context.Background())
	if !held() {
		t.Fatal("forgot a sale idle for less than funnelIdleForget")
	}
	now = now.Add(2 * time.Second)
	_ = f.Flush(context.Background())
	if held() {
		t.Fatal("kept a sale idle for over funnelIdleForget")
	}
	f.Record(5, nil)
	_ = f.Flush(context.Background())
	if acc, _ := sink.totals(5); acc != 2 {
		t.Errorf("accepted %d after being forgotten and counting again, want 2", acc)
	}
}

func TestRefusalReasonsCoverEveryIndex(t *testing.T) {
	t.Parallel()
	codes := map[shop.Code]string{shop.CodeSoldOut: RefusedSoldOut, shop.CodeAlreadyPurchased: RefusedDuplicate, shop.CodeRateLimited: RefusedRateLimited,
		shop.CodeInvalidPurchaseToken: RefusedBadToken, shop.CodeCaptchaFailed: RefusedCaptcha, shop.CodePaused: RefusedPaused,
		shop.CodeSaleEnded: RefusedOther, shop.CodeUnavailable: RefusedOther, shop.CodeNotFound: RefusedOther}
	for c, want := range codes {
		if got := RefusalReasons[refusalReason(c)]; got != want {
			t.Errorf("%s counts as %s, want %s", c, got, want)
		}
	}
	if len(RefusalReasons) != len(saleCounts{}.refused) {
		t.Errorf("%d reasons, %d counters", len(RefusalReasons), len(saleCounts{}.refused))
	}
}

// The purchase path's cost of counting: one sync.Map lookup and one atomic add.
func BenchmarkFunnelRecord(b *testing.B) {
	f := NewFunnel(&fakeSink{}, quietLog(), time.Now)
	b.RunParallel(func(pb *testing.PB) {
		i := int64(0)
		for pb.Next() {
			i++
			if i%8 == 0 {
				f.Record(1, nil)
			} else {
				f.Record(1, errSoldOut)
			}
		}
	})
}

// The purchase path's refusals, as the funnel receives them.
var (
	errSoldOut  = shop.Errorf(shop.CodeSoldOut, "sold out: every unit has been taken")
	errBadToken = shop.Errorf(shop.CodeInvalidPurchaseToken, "the purchase token is invalid")
)
