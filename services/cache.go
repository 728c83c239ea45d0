package services

import (
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// ttlCache remembers values loaded by id for ttl, so the start-second crowd does not reach
// Postgres: concurrent misses share one load, a failed reload serves the stale value (a stale
// entry beats an outage), and past max entries it forgets everything rather than grow.
type ttlCache[V any] struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu sync.RWMutex
	m  map[int64]ttlEntry[V]
	sf singleflight.Group
}

type ttlEntry[V any] struct {
	v      V
	loaded time.Time
}

func newTTLCache[V any](ttl time.Duration, max int, now func() time.Time) *ttlCache[V] {
	return &ttlCache[V]{ttl: ttl, max: max, now: now, m: map[int64]ttlEntry[V]{}}
}

// get returns the value of id, calling load when it is missing or older than ttl. load reports
// an absent id as a value (so it is remembered too) and only failures as errors.
func (c *ttlCache[V]) get(id int64, load func() (V, error)) (V, error) {
	now := c.now()
	c.mu.RLock()
	e, ok := c.m[id]
	c.mu.RUnlock()
	if ok && now.Sub(e.loaded) < c.ttl {
		return e.v, nil
	}
	v, err, _ := c.sf.Do(strconv.FormatInt(id, 10), func() (any, error) { return load() })
	if err != nil {
		if ok {
			return e.v, nil
		}
		var zero V
		return zero, err
	}
	c.mu.Lock()
	if len(c.m) > c.max {
		clear(c.m)
	}
	c.m[id] = ttlEntry[V]{v: v.(V), loaded: now}
	c.mu.Unlock()
	return v.(V), nil
}
