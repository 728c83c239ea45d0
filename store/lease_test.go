package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// natsKey is the registration's key in Redis (embeddedNATSKey in lease.go).
const natsKey = "flashsale:embedded-nats"

// newRedis starts a real redis-server for the test and returns a client on it.
func newRedis(t *testing.T) redis.UniversalClient {
	t.Helper()
	rs := testenv.Redis(t)
	rdb, err := store.OpenRedis(context.Background(), rs.URL(), 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func register(t *testing.T, rdb redis.UniversalClient, owner string, ttl time.Duration) *store.Registration {
	t.Helper()
	r, err := store.RegisterEmbeddedNATS(context.Background(), rdb, "", owner, ttl)
	if err != nil || r == nil {
		t.Fatalf("register %s = %v, %v; want registered", owner, r, err)
	}
	return r
}

func refused(t *testing.T, rdb redis.UniversalClient, owner, holder string, ttl time.Duration) {
	t.Helper()
	r, err := store.RegisterEmbeddedNATS(context.Background(), rdb, "", owner, ttl)
	if !errors.Is(err, store.ErrEmbeddedNATSLive) || r != nil {
		t.Fatalf("register %s while %s holds it = %v, %v; want ErrEmbeddedNATSLive", owner, holder, r, err)
	}
	if !strings.Contains(err.Error(), holder) {
		t.Errorf("error %q does not name the holder %s", err, holder)
	}
}

// keep runs reg.Keep until the returned stop is called (or the test ends); stop waits for Keep
// to return.
func keep(t *testing.T, reg *store.Registration, lost func(string)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		reg.Keep(ctx, lost)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	return stop
}

// The embedded NATS registration: one live holder per Redis, renewed while kept, dropped when the
// holder stops, lapsed when it stops renewing.
func TestRegisterEmbeddedNATSKeepAndDrop(t *testing.T) {
	t.Parallel()
	rdb := newRedis(t)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	a := register(t, rdb, "host-a:1", ttl)
	refused(t, rdb, "host-b:2", "host-a:1", ttl)

	// Kept past several ttls: held all along, never lapsing between renewals.
	stop := keep(t, a, func(h string) { t.Errorf("lost callback while holding (holder %q)", h) })
	for deadline := time.Now().Add(3 * ttl); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if v, err := rdb.Get(ctx, natsKey).Result(); err != nil || v != "host-a:1" {
			t.Fatalf("registration while kept = %q, %v; want host-a:1", v, err)
		}
	}
	refused(t, rdb, "host-b:2", "host-a:1", ttl)

	// The same owner (a restart under the same name) renews it.
	register(t, rdb, "host-a:1", ttl)

	// Dropped when Keep's context ends: the next instance registers at once.
	stop()
	if n, _ := rdb.Exists(ctx, natsKey).Result(); n != 0 {
		t.Errorf("registration still there after Keep returned")
	}
	register(t, rdb, "host-b:2", ttl)
	refused(t, rdb, "host-a:1", "host-b:2", ttl)
}

func TestRegisterEmbeddedNATSLapses(t *testing.T) {
	t.Parallel()
	rdb := newRedis(t)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	a := register(t, rdb, "a", ttl)
	// A renewal by the same owner extends it past the first ttl.
	time.Sleep(ttl * 2 / 3)
	register(t, rdb, "a", ttl)
	time.Sleep(ttl * 2 / 3)
	refused(t, rdb, "b", "a", ttl)
	// Then not renewed any more: a killed or paused instance.
	pttl, err := rdb.PTTL(ctx, natsKey).Result()
	if err != nil || pttl <= 0 || pttl > ttl {
		t.Errorf("registration ttl = %v, %v; want in (0, %v]", pttl, err, ttl)
	}
	time.Sleep(ttl + 100*time.Millisecond)
	if n, _ := rdb.Exists(ctx, natsKey).Result(); n != 0 {
		t.Fatalf("registration still there %v after its last renewal", ttl+100*time.Millisecond)
	}
	register(t, rdb, "b", time.Minute)

	// The lapsed holder finds out at its next renewal, and its drop leaves the new holder alone.
	var mu sync.Mutex
	var told []string
	got := make(chan struct{}, 1)
	stop := keep(t, a, func(h string) {
		mu.Lock()
		told = append(told, h)
		mu.Unlock()
		select {
		case got <- struct{}{}:
		default:
		}
	})
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Errorf("the lapsed holder was not told it lost the registration")
	}
	stop()
	mu.Lock()
	if len(told) == 0 || told[0] != "b" {
		t.Errorf("lost callback told %v, want the new holder b", told)
	}
	mu.Unlock()
	if v, err := rdb.Get(ctx, natsKey).Result(); err != nil || v != "b" {
		t.Errorf("registration after the old holder stopped = %q, %v; want b", v, err)
	}
	refused(t, rdb, "c", "b", ttl)
}

func TestAcquireReconcileLease(t *testing.T) {
	t.Parallel()
	rdb := newRedis(t)
	ctx := context.Background()
	const ttl = 400 * time.Millisecond
	acquire := leaseAcquirer(t, rdb, ttl)

	a := acquire("a")
	if a == nil || a.Fence < 1 {
		t.Fatalf("first lease = %+v, want a fence >= 1", a)
	}
	if b := acquire("b"); b != nil {
		t.Errorf("second owner got %+v while a holds the lease, want nil", b)
	}
	// Renewed by its holder, with the same fence, and extended: it outlives the first ttl.
	for range 3 {
		time.Sleep(ttl / 2)
		if again := acquire("a"); again == nil || again.Fence != a.Fence {
			t.Fatalf("renewal = %+v, want fence %d", again, a.Fence)
		}
	}
	if b := acquire("b"); b != nil {
		t.Errorf("second owner got %+v while a keeps renewing, want nil", b)
	}
	lapsedLeaseTakesAHigherFence(t, acquire, ttl, a)

	// Both lease keys share one cluster slot.
	if testenv.KeySlot("{reconcile}:flashsale:lease") != testenv.KeySlot("{reconcile}:flashsale:fence") {
		t.Errorf("the lease keys are in different slots")
	}
	keys, _ := rdb.Keys(ctx, "*").Result()
	for _, k := range keys {
		if testenv.KeySlot(k) != testenv.KeySlot("reconcile") {
			t.Errorf("lease key %q outside the {reconcile} slot", k)
		}
	}
}

// leaseAcquirer takes or renews the reconciliation lease for an owner, for ttl (nil: another
// owner holds it; a failure fails the test).
func leaseAcquirer(t *testing.T, rdb redis.UniversalClient, ttl time.Duration) func(owner string) *store.Lease {
	return func(owner string) *store.Lease {
		t.Helper()
		l, err := store.AcquireReconcileLease(context.Background(), rdb, owner, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

// lapsedLeaseTakesAHigherFence: once a's lease lapsed, the next holder gets a strictly higher
// fence and the old one is shut out; even the same owner, after its own lease lapsed, gets a new
// fence; owners with the separator in their names are told apart.
func lapsedLeaseTakesAHigherFence(t *testing.T, acquire func(string) *store.Lease, ttl time.Duration, a *store.Lease) {
	t.Helper()
	time.Sleep(ttl + 100*time.Millisecond)
	b := acquire("b")
	if b == nil || b.Fence <= a.Fence {
		t.Fatalf("lease after a lapsed = %+v, want a fence above %d", b, a.Fence)
	}
	if again := acquire("a"); again != nil {
		t.Errorf("the old holder got %+v while b holds the lease, want nil", again)
	}
	time.Sleep(ttl + 100*time.Millisecond)
	b2 := acquire("b")
	if b2 == nil || b2.Fence <= b.Fence {
		t.Errorf("b's lease after its own lapsed = %+v, want a fence above %d", b2, b.Fence)
	}
	time.Sleep(ttl + 100*time.Millisecond)
	c := acquire("host|1")
	if c == nil || acquire("host|1").Fence != c.Fence || acquire("host") != nil {
		t.Errorf("owner with a '|' in its name: lease %+v", c)
	}
}

// The fencing tokens protect the sale: a paused holder's late mark, with its old fence, is refused
// once the newer holder has acted.
func TestReconcileLeaseFencesMarkLost(t *testing.T) {
	t.Parallel()
	s, rdb := newStock(t)
	ctx := context.Background()
	const ttl = 200 * time.Millisecond
	mustLoad(t, s, snapshot(t, s, 80, shop.LimitPerSale, 1, 5), 0)
	old, err := store.AcquireReconcileLease(ctx, rdb, "old", ttl)
	if err != nil || old == nil {
		t.Fatal(old, err)
	}
	time.Sleep(ttl + 100*time.Millisecond) // old pauses past its lease
	cur, err := store.AcquireReconcileLease(ctx, rdb, "new", time.Minute)
	if err != nil || cur == nil || cur.Fence <= old.Fence {
		t.Fatalf("new lease = %+v, %v; want a fence above %d", cur, err, old.Fence)
	}
	if ok, err := s.MarkLost(ctx, 80, cur.Fence, ""); !ok || err != nil {
		t.Fatalf("mark by the current holder = %v, %v", ok, err)
	}
	if ok, err := s.MarkLost(ctx, 80, old.Fence, ""); ok || err != nil {
		t.Errorf("late mark by the old holder = %v, %v; want refused", ok, err)
	}
}

// A registration left by a killed run of the same site (host and data folder) is taken over at
// once by the next run; another site still waits for it to lapse.
func TestRegisterEmbeddedNATSSameSiteTakesOver(t *testing.T) {
	t.Parallel()
	_, rdb := newStock(t)
	ctx := context.Background()
	site := "host:/data/a|"
	if _, err := store.RegisterEmbeddedNATS(ctx, rdb, site, site+"pid 1", time.Minute); err != nil {
		t.Fatal(err)
	}
	// pid 1 was killed: its registration is still there for a minute.
	if _, err := store.RegisterEmbeddedNATS(ctx, rdb, "host:/data/b|", "host:/data/b|pid 3", time.Minute); !errors.Is(err, store.ErrEmbeddedNATSLive) {
		t.Errorf("another site while the first is registered: %v, want ErrEmbeddedNATSLive", err)
	}
	if _, err := store.RegisterEmbeddedNATS(ctx, rdb, site, site+"pid 2", time.Minute); err != nil {
		t.Errorf("the same site's next run: %v, want it to take over", err)
	}
	if v, _ := rdb.Get(ctx, "flashsale:embedded-nats").Result(); v != site+"pid 2" {
		t.Errorf("holder = %q, want the new run", v)
	}
	if _, err := store.RegisterEmbeddedNATS(ctx, rdb, site, "elsewhere|pid 4", time.Minute); err == nil {
		t.Error("an owner outside its site was accepted")
	}
}
