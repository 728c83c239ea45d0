package catalog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// The reasons a request of the purchase funnel is refused, as the merchant's live view names them.
const (
	RefusedSoldOut     = "soldOut"
	RefusedDuplicate   = "duplicate"
	RefusedRateLimited = "rateLimited"
	RefusedBadToken    = "badToken"
	RefusedCaptcha     = "captcha"
	RefusedPaused      = "paused"
	RefusedOther       = "other"
)

// RefusalReasons lists every reason, in the order the live view shows them.
var RefusalReasons = []string{RefusedSoldOut, RefusedDuplicate, RefusedRateLimited, RefusedBadToken, RefusedCaptcha, RefusedPaused, RefusedOther}

// refusalReason names the reason of a refusal by its error code.
func refusalReason(c shop.Code) int {
	switch c {
	case shop.CodeSoldOut:
		return 0
	case shop.CodeAlreadyPurchased:
		return 1
	case shop.CodeRateLimited:
		return 2
	case shop.CodeInvalidPurchaseToken:
		return 3
	case shop.CodeCaptchaFailed:
		return 4
	case shop.CodePaused:
		return 5
	}
	return 6
}

// FunnelSink takes the counts an instance flushes (store.Stock in production).
type FunnelSink interface {
	FlushFunnel(ctx context.Context, deltas []store.FunnelDelta, fs store.FunnelStore) error
}

// Funnel counts a sale's purchase funnel on this instance, in memory (an atomic add per request,
// no Redis call on the purchase path), and adds it to the sale's totals in Redis once a second
// (Run), where every instance's counts meet. A request is a purchase attempt, or a purchase-token
// request that was refused (the shopper stopped before the purchase): each one is either
// accepted or refused for one reason, so requests = accepted + refused.
type Funnel struct {
	sink  FunnelSink
	store store.FunnelStore
	log   *slog.Logger
	now   func() time.Time

	sales sync.Map // sale id -> *saleCounts

	// A flush whose answer did not come back may or may not have been applied: it is resent as it
	// was, under the same ids, which Redis applies once (lua/funnel.lua).
	mu      sync.Mutex
	pending []store.FunnelDelta
	pendAt  time.Time // when the oldest pending delta was first sent
	idBase  string    // this process's random prefix of flush ids
	nextID  atomic.Uint64
}

type saleCounts struct {
	accepted atomic.Int64
	refused  [7]atomic.Int64 // by RefusalReasons' index
	idleAt   atomic.Int64    // unix ms when the last flush found nothing; 0 while counting
}

// FunnelKeep is how much of a sale's per-second series Redis keeps; FunnelTTL how long its funnel
// keys outlive their last flush.
const (
	FunnelKeep = time.Hour
	FunnelTTL  = 7 * 24 * time.Hour
)

// funnelIdleForget is how long a sale with nothing to flush keeps its counters in memory.
const funnelIdleForget = 10 * time.Minute

// NewFunnel returns a Funnel flushing into sink.
func NewFunnel(sink FunnelSink, log *slog.Logger, now func() time.Time) *Funnel {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Funnel{sink: sink, store: store.FunnelStore{Keep: FunnelKeep, TTL: FunnelTTL}, log: log, now: now,
		idBase: hex.EncodeToString(b[:])}
}

// funnelResendFor is how long a flush that got no answer is resent before its counts are dropped:
// well inside the time Redis remembers a flush id (store.FunnelFlushMarkTTL).
const funnelResendFor = 5 * time.Minute

func (f *Funnel) counts(saleID int64) *saleCounts {
	if v, ok := f.sales.Load(saleID); ok {
		return v.(*saleCounts)
	}
	v, _ := f.sales.LoadOrStore(saleID, new(saleCounts))
	return v.(*saleCounts)
}

// Record counts one request of a sale: accepted when err is nil, else refused for err's reason.
// Safe on a nil Funnel (not counting).
func (f *Funnel) Record(saleID int64, err error) {
	if f == nil || saleID <= 0 {
		return
	}
	c := f.counts(saleID)
	if err == nil {
		c.accepted.Add(1)
		return
	}
	var code shop.Code
	if e, ok := err.(*shop.Error); ok {
		code = e.Code // the purchase path's refusals, without errors.As's allocation
	} else {
		code = shop.ErrorCode(err)
	}
	c.refused[refusalReason(code)].Add(1)
}

// take empties the counters and returns what they held, per sale with anything to flush, the
// series second set to `at`. A sale idle for funnelIdleForget is forgotten.
func (f *Funnel) take(at time.Time) []store.FunnelDelta {
	var out []store.FunnelDelta
	f.sales.Range(func(k, v any) bool {
		c := v.(*saleCounts)
		d := store.FunnelDelta{SaleID: k.(int64), At: at.Unix(), Accepted: c.accepted.Swap(0)}
		for i := range c.refused {
			if n := c.refused[i].Swap(0); n != 0 {
				if d.Refused == nil {
					d.Refused = map[string]int64{}
				}
				d.Refused[RefusalReasons[i]] = n
			}
		}
		if d.Accepted == 0 && len(d.Refused) == 0 {
			idle := c.idleAt.Load()
			switch {
			case idle == 0:
				c.idleAt.Store(at.UnixMilli())
			case at.Sub(time.UnixMilli(idle)) > funnelIdleForget:
				// Forgotten: a request arriving later counts in a new entry. Only one that took
				// this entry just before the delete and adds just after it is lost, after ten idle
				// minutes.
				f.sales.CompareAndDelete(k, v)
			}
			return true
		}
		c.idleAt.Store(0)
		out = append(out, d)
		return true
	})
	return out
}

// Flush sends what this instance counted since the last flush to Redis. The counts of the
// interval go to the series second half a second before now (the interval's middle, with the
// once-a-second flush of Run). A flush that fails is sent again, whole and under the same ids,
// with the next one (Redis adds each id once), for up to funnelResendFor.
func (f *Funnel) Flush(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	ds := f.take(now.Add(-500 * time.Millisecond))
	for i := range ds {
		ds[i].ID = f.idBase + "." + strconv.FormatUint(f.nextID.Add(1), 36)
	}
	if len(f.pending) > 0 {
		if now.Sub(f.pendAt) > funnelResendFor {
			f.log.Warn("funnel: dropping counts Redis did not take in time", "flushes", len(f.pending))
			f.pending = nil
		} else {
			ds = append(f.pending, ds...)
		}
	}
	if len(ds) == 0 {
		return nil
	}
	if err := f.sink.FlushFunnel(ctx, ds, f.store); err != nil {
		var part *store.FunnelNotTaken
		if errors.As(err, &part) {
			ds = part.NotTaken // the others were added (another node of a Redis Cluster took them)
		}
		if len(f.pending) == 0 {
			f.pendAt = now
		}
		f.pending = ds
		return err
	}
	f.pending = nil
	return nil
}

// Run flushes once a second until ctx ends, then once more.
func (f *Funnel) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			if err := f.Flush(fctx); err != nil {
				f.log.Warn("funnel: last flush failed; this instance's latest counts are lost", "err", err)
			}
			cancel()
			return
		case <-t.C:
			fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			if err := f.Flush(fctx); err != nil && ctx.Err() == nil {
				f.log.Warn("funnel: flush failed; the counts are kept for the next one", "err", err)
			}
			cancel()
		}
	}
}
