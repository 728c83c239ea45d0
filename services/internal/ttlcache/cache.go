package ttlcache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale/shop"
)

// Cache remembers values loaded by key for a short time, so the start-second crowd does not
// reach Postgres (or Redis):
//
//   - concurrent misses of one key share one load, and that load runs detached from the caller
//     that started it (context.WithoutCancel, with the cache's own timeout): a caller that
//     disconnects leaves, the others still get the value;
//   - a failed reload serves the stale value for up to staleFor (a stale entry beats an outage);
//   - past max entries it forgets the least recently used one (approximately: an entry read
//     since it last moved gets a second chance), never everything;
//   - values that say "there is no such id" (absent) are remembered too, so a repeated unknown
//     id costs no query, but in their own, smaller LRU (a flood of unknown ids can never push
//     the known ones out) and for their own, shorter time (AbsentTTL: an id unknown now may
//     be a sale created a moment later).
type Cache[K comparable, V any] struct {
	cfg Config[V]
	now func() time.Time

	// A hit takes only the read lock and marks its entry used; eviction gives a used entry a
	// second chance (moved to the front, mark cleared) before dropping the least recent unused
	// one. So the hot path (every purchase looks its item up) never serialises on a write lock.
	mu       sync.RWMutex
	m        map[K]*list.Element // of *entry[K, V], in lru or absentLRU
	lru      list.List           // known values, most recently used first
	absentLR list.List           // absent values, most recently used first
	calls    map[K]*loadCall[V]  // loads in flight
}

// Config sizes a Cache.
type Config[V any] struct {
	TTL         time.Duration // how long a value is served without a reload
	Max         int           // most values kept (least recently used forgotten first)
	MaxAbsent   int           // most absent values kept, apart from Max
	Absent      func(V) bool  // nil: no value is absent
	AbsentTTL   time.Duration // how long an absent value is served without a reload; 0: TTL
	StaleFor    time.Duration // past TTL, how long a value is still served when its reload fails
	LoadTimeout time.Duration // the limit of one shared load; 0: DefaultLoadTimeout
}

// DefaultLoadTimeout bounds a shared load when its cache does not say otherwise.
const DefaultLoadTimeout = 5 * time.Second

type entry[K comparable, V any] struct {
	key    K
	v      V
	loaded time.Time
	absent bool
	used   atomic.Bool // read since it last moved in its list
}

type loadCall[V any] struct {
	done chan struct{}
	v    V
	err  error
}

func New[K comparable, V any](cfg Config[V], now func() time.Time) *Cache[K, V] {
	if cfg.Max < 1 {
		cfg.Max = 1
	}
	if cfg.MaxAbsent < 1 {
		cfg.MaxAbsent = 1
	}
	if cfg.LoadTimeout <= 0 {
		cfg.LoadTimeout = DefaultLoadTimeout
	}
	if cfg.AbsentTTL <= 0 {
		cfg.AbsentTTL = cfg.TTL
	}
	return &Cache[K, V]{cfg: cfg, now: now, m: map[K]*list.Element{}, calls: map[K]*loadCall[V]{}}
}

// Fresh returns the value of key when the cache holds it within its TTL: Get's hit, also for a
// caller on the hot path that builds its load only on a miss (a load closure escapes: one
// allocation a call, hit or not).
func (c *Cache[K, V]) Fresh(key K) (V, bool) {
	now := c.now()
	c.mu.RLock()
	if el, ok := c.m[key]; ok {
		e := el.Value.(*entry[K, V])
		if now.Sub(e.loaded) < c.ttlOf(e) {
			e.markUsed()
			c.mu.RUnlock()
			return e.v, true
		}
	}
	c.mu.RUnlock()
	var zero V
	return zero, false
}

// markUsed marks the entry read, writing the shared flag only when it changes: every purchase
// reads the same few entries, and a store on each would bounce their cache line between cores.
func (e *entry[K, V]) markUsed() {
	if !e.used.Load() {
		e.used.Store(true)
	}
}

// Get returns the value of key, calling load when it is missing or older than the TTL. load
// reports an absent id as a value (so it is remembered too) and only failures as errors; it runs
// with a context of its own, detached from ctx, and may outlive this call. A caller whose ctx
// ends while waiting gets ctx's error; the load goes on for the others.
func (c *Cache[K, V]) Get(ctx context.Context, key K, load func(context.Context) (V, error)) (V, error) {
	if v, ok := c.Fresh(key); ok {
		return v, nil // a hit takes only the read lock
	}
	now := c.now()
	c.mu.Lock()
	var stale *V
	if el, ok := c.m[key]; ok {
		e := el.Value.(*entry[K, V])
		if now.Sub(e.loaded) < c.ttlOf(e) {
			e.markUsed()
			c.mu.Unlock()
			return e.v, nil
		}
		if now.Sub(e.loaded) < c.ttlOf(e)+c.cfg.StaleFor {
			v := e.v
			stale = &v
		}
	}
	call, ok := c.calls[key]
	if !ok {
		call = &loadCall[V]{done: make(chan struct{})}
		c.calls[key] = call
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.LoadTimeout)
		go func() {
			defer cancel()
			c.run(key, call, now, func() (V, error) { return load(lctx) })
		}()
	}
	c.mu.Unlock()

	select {
	case <-call.done:
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
	if call.err != nil {
		if stale != nil {
			return *stale, nil
		}
		var zero V
		return zero, call.err
	}
	return call.v, nil
}

// run does one shared load and remembers its value.
func (c *Cache[K, V]) run(key K, call *loadCall[V], started time.Time, load func() (V, error)) {
	defer close(call.done)
	defer func() {
		c.mu.Lock()
		delete(c.calls, key)
		c.mu.Unlock()
	}()
	func() {
		defer func() {
			if r := recover(); r != nil {
				call.err = fmt.Errorf("cache load panicked: %v", r)
			}
		}()
		call.v, call.err = load()
	}()
	if call.err != nil {
		return
	}
	c.put(key, call.v, started)
}

// put stores a value, evicting the least recently used entries of its kind past their bound.
func (c *Cache[K, V]) put(key K, v V, loaded time.Time) {
	absent := c.cfg.Absent != nil && c.cfg.Absent(v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[key]; ok {
		c.listOf(el.Value.(*entry[K, V])).Remove(el)
		delete(c.m, key)
	}
	e := &entry[K, V]{key: key, v: v, loaded: loaded, absent: absent}
	l, bound := &c.lru, c.cfg.Max
	if absent {
		l, bound = &c.absentLR, c.cfg.MaxAbsent
	}
	c.m[key] = l.PushFront(e)
	for l.Len() > bound {
		old := l.Back()
		oe := old.Value.(*entry[K, V])
		if oe.used.Swap(false) {
			l.MoveToFront(old) // read since it last moved: a second chance
			continue
		}
		l.Remove(old)
		delete(c.m, oe.key)
	}
}

// ttlOf is how long an entry is served without a reload.
func (c *Cache[K, V]) ttlOf(e *entry[K, V]) time.Duration {
	if e.absent {
		return c.cfg.AbsentTTL
	}
	return c.cfg.TTL
}

func (c *Cache[K, V]) listOf(e *entry[K, V]) *list.List {
	if e.absent {
		return &c.absentLR
	}
	return &c.lru
}

// Len returns the numbers of known and absent values held.
func (c *Cache[K, V]) Len() (known, absent int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.lru.Len(), c.absentLR.Len()
}

// OrUnavailable keeps a service error as it is and makes any other (a caller's context ending
// while it waited for a shared load, a load's own timeout) UNAVAILABLE.
func OrUnavailable(err error) error {
	var e *shop.Error
	if err == nil || errors.As(err, &e) {
		return err
	}
	return shop.Unavailable(err)
}

// Peek returns key's value if held, however old, without loading it.
func (c *Cache[K, V]) Peek(key K) (V, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if el, ok := c.m[key]; ok {
		return el.Value.(*entry[K, V]).v, true
	}
	var zero V
	return zero, false
}

// Forget drops key's value, if held.
func (c *Cache[K, V]) Forget(key K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[key]; ok {
		c.listOf(el.Value.(*entry[K, V])).Remove(el)
		delete(c.m, key)
	}
}
