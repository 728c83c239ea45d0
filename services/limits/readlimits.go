package limits

import (
	"time"

	"github.com/flashsale/flashsale/shop"
)

// ReadLimit is the bucket of one client address (an IPv6 client by its /64) on the public reads
// that take an id or a cursor (a sale, its stock, the sale and home pages, the listing, a
// shopper's orders), per instance. A shopper's pages poll about twice a second; the bucket
// leaves room for an office behind one address, and stops one address from driving lookups
// past the caches (made-up ids, cursors) at the speed of the network.
var ReadLimit = Rate{Rate: 100, Burst: 200, Period: time.Second}

// AllowRead takes one request of the client address ip from its read bucket, or returns
// RATE_LIMITED with the wait. It runs before any lookup, and only in this process (no Redis call:
// the reads answered from the caches must not cost a round trip, and keep working while Redis
// is down); off with the other limits (FLASHSALE_RATE_LIMITS=off).
func (l *Limiter) AllowRead(ip string) error {
	if l == nil || !l.on {
		return nil
	}
	if wait, ok := l.allowLocal("rl:r:ip:"+ClientKey(ip), ReadLimit); !ok {
		return &shop.Error{Code: shop.CodeRateLimited, Message: "too many requests from your address; slow down", RetryAfter: max(wait, time.Second)}
	}
	return nil
}
