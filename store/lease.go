package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/lua"
)

// ErrEmbeddedNATSLive is returned when another instance with an embedded NATS server is live on
// the same Redis: two embedded servers mean two separate queues, and each instance's background
// jobs would judge "the queue has drained" by its own, releasing the other's acknowledged orders.
var ErrEmbeddedNATSLive = errors.New("another flashsale instance with an embedded NATS server is live on this Redis")

const embeddedNATSKey = "flashsale:embedded-nats"

// renewScript (lua/regrenew.lua) extends a key held by owner; claimScript (lua/regclaim.lua)
// takes it the first time, also from this instance's previous run (the same site);
// dropScript (lua/regdrop.lua) gives it up. renew and claim answer 1 when owner holds it after.
var (
	renewScript = redis.NewScript(lua.RegRenew)
	claimScript = redis.NewScript(lua.RegClaim)
	dropScript  = redis.NewScript(lua.RegDrop)
)

// Registration is an instance's claim, in Redis, that it runs the one embedded NATS server of the
// deployment. It lapses ttl after the instance stops renewing it (stopped, killed or paused).
type Registration struct {
	rdb   redis.UniversalClient
	owner string
	ttl   time.Duration
	held  heldUntil
}

// heldUntil is when a claim in Redis lapses, by this process's monotonic clock (which runs on
// while the process is stopped: an instance paused past its lease finds its claim lapsed the
// moment it runs again, before any renewal).
type heldUntil struct{ until atomic.Int64 } // nanoseconds since monoBase

var monoBase = time.Now()

// renewed records a claim renewed in Redis by a call started at began, for ttl: Redis counts
// the ttl from later than that, so the claim is held at least until began + ttl.
func (h *heldUntil) renewed(began time.Time, ttl time.Duration) {
	h.until.Store(int64(began.Sub(monoBase) + ttl))
}

func (h *heldUntil) drop() { h.until.Store(0) }

func (h *heldUntil) held() bool { return int64(time.Since(monoBase)) < h.until.Load() }

// RegisterEmbeddedNATS claims the registration for owner (which should name the instance: host,
// pid, address), or returns ErrEmbeddedNATSLive with the current holder. site, if not empty, is
// a prefix of owner naming where the embedded server keeps its files (host and data folder): a
// registration left by an earlier run of the same site (killed, so it could not drop it) is
// taken over at once. Two live servers cannot share one site: the second could not open its
// NATS port and JetStream files.
func RegisterEmbeddedNATS(ctx context.Context, rdb redis.UniversalClient, site, owner string, ttl time.Duration) (*Registration, error) {
	r := &Registration{rdb: rdb, owner: owner, ttl: ttl}
	if site != "" && !strings.HasPrefix(owner, site) {
		return nil, errors.New("embedded nats registration: the owner must start with its site")
	}
	began := time.Now()
	n, err := claimScript.Run(ctx, rdb, []string{embeddedNATSKey}, owner, ttl.Milliseconds(), site).Int()
	if err != nil {
		return nil, fmt.Errorf("embedded nats registration: %w", err)
	}
	ok := n == 1
	if !ok {
		holder, _ := rdb.Get(ctx, embeddedNATSKey).Result()
		return nil, fmt.Errorf("%w (%s)", ErrEmbeddedNATSLive, holder)
	}
	r.held.renewed(began, ttl)
	return r, nil
}

// Drop gives the registration up now (nothing if another instance holds it).
func (r *Registration) Drop(ctx context.Context) {
	r.held.drop()
	_ = dropScript.Run(ctx, r.rdb, []string{embeddedNATSKey}, r.owner).Err()
}

// Held tells whether this instance holds the registration now: renewed in Redis less than its
// lease ago (by this process's monotonic clock). An instance that does not hold it must neither
// sell nor judge "the queue has drained": another instance may have started its own embedded
// NATS meanwhile (a second queue).
func (r *Registration) Held() bool { return r.held.held() }

func (r *Registration) renew(ctx context.Context) (bool, error) {
	began := time.Now()
	n, err := renewScript.Run(ctx, r.rdb, []string{embeddedNATSKey}, r.owner, r.ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("embedded nats registration: %w", err)
	}
	if n == 1 {
		r.held.renewed(began, r.ttl)
	} else {
		r.held.drop()
	}
	return n == 1, nil
}

// Keep renews the registration every ttl/3 until ctx ends, then drops it. A lapsed registration
// (the instance paused, or cut off from Redis, past its lease) is taken again at the next
// renewal if nobody took it meanwhile; lost is told when another instance holds it (Held stays
// false until that one drops it).
func (r *Registration) Keep(ctx context.Context, lost func(holder string)) {
	keepRenewing(ctx, r.ttl, func(ctx context.Context) (bool, string, error) {
		ok, err := r.renew(ctx)
		if err != nil || ok {
			return false, "", err
		}
		holder, _ := r.rdb.Get(ctx, embeddedNATSKey).Result()
		return true, holder, nil
	}, r.Drop, lost)
}

// keepRenewing renews a claim every ttl/3 (each renewal bounded by ttl/3) until ctx ends, then
// drops it (with a second of its own). told, if set, hears whom renew found holding what the
// claim is about instead.
func keepRenewing(ctx context.Context, ttl time.Duration, renew func(context.Context) (taken bool, by string, err error),
	drop func(context.Context), told func(by string)) {
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.Background(), time.Second)
			drop(dctx)
			cancel()
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, ttl/3)
		taken, by, err := renew(rctx)
		cancel()
		if err == nil && taken && told != nil {
			told(by)
		}
	}
}

// The lease's keys are global (not per sale); under Redis Cluster they share the tag {reconcile}.
const (
	reconcileLeaseKey = "{reconcile}:flashsale:lease"
	reconcileFenceKey = "{reconcile}:flashsale:fence"
)

// Lease is a time-bound right to run the reconciliation, with a fencing token that grows with
// every new holder: a holder paused past its lease acts with an older token, and what it writes
// is refused where a newer holder wrote already (marklost.lua checks it).
type Lease struct {
	Fence int64
	owner string
	rdb   redis.UniversalClient
}

// acquireScript (lua/lease.lua) takes or renews the lease; it answers the holder's fence, or 0.
var acquireScript = redis.NewScript(lua.Lease)

// AcquireReconcileLease takes (or renews) the reconciliation lease for owner for ttl. It returns
// nil, nil when another instance holds it.
func AcquireReconcileLease(ctx context.Context, rdb redis.UniversalClient, owner string, ttl time.Duration) (*Lease, error) {
	n, err := acquireScript.Run(ctx, rdb, []string{reconcileLeaseKey, reconcileFenceKey}, owner, ttl.Milliseconds()).Int64()
	if err != nil {
		return nil, fmt.Errorf("reconcile lease: %w", err)
	}
	if n == 0 {
		return nil, nil
	}
	return &Lease{Fence: n, owner: owner, rdb: rdb}, nil
}
