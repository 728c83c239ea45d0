package purchase

import (
	"sync/atomic"
	"time"
)

// throttle lets a repeated warning through at most once per period, whichever goroutine asks
// (a Redis node down would otherwise be logged by every request).
type throttle struct{ last atomic.Int64 } // Unix ns of the last warning let through

// allow reports whether a warning at now may be said: none was in the last every.
func (t *throttle) allow(now time.Time, every time.Duration) bool {
	last := t.last.Load()
	return now.UnixNano()-last >= int64(every) && t.last.CompareAndSwap(last, now.UnixNano())
}
