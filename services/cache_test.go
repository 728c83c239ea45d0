package services

import (
	"errors"
	"testing"
	"time"
)

func TestTTLCache(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c := newTTLCache[int](5*time.Second, 2, func() time.Time { return now })
	loads := 0
	load := func(v int, err error) func() (int, error) {
		return func() (int, error) { loads++; return v, err }
	}
	if got, err := c.get(1, load(10, nil)); got != 10 || err != nil {
		t.Fatalf("first get = %d, %v; want 10", got, err)
	}
	if got, _ := c.get(1, load(11, nil)); got != 10 || loads != 1 {
		t.Errorf("within ttl: got %d after %d loads, want the cached 10 after 1", got, loads)
	}
	now = now.Add(6 * time.Second)
	if got, err := c.get(1, load(0, errors.New("postgres down"))); got != 10 || err != nil {
		t.Errorf("failed reload: got %d, %v; want the stale 10 and no error", got, err)
	}
	if _, err := c.get(2, load(0, errors.New("postgres down"))); err == nil {
		t.Errorf("failed first load: want the error")
	}
	if got, _ := c.get(1, load(12, nil)); got != 12 {
		t.Errorf("expired and reloadable: got %d, want 12", got)
	}
	c.get(2, load(20, nil))
	c.get(3, load(30, nil))
	c.get(4, load(40, nil)) // past max: everything is forgotten first
	if len(c.m) != 1 {
		t.Errorf("entries after passing max = %d, want 1", len(c.m))
	}
}
