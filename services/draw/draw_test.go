package draw

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/flashsale/flashsale/store"
)

// The engines are faked here: the rule under test is when a draw may be decided. The decision
// and the apply on real Redis and Postgres are tests/draw_test.go's.

type fakeDB struct {
	written  map[string]bool
	closedAt *time.Time
	decided  int
}

func (f *fakeDB) DrawsDue(context.Context, time.Time) ([]int64, error) { return []int64{1}, nil }
func (f *fakeDB) DrawDecided(context.Context, int64) (bool, error)     { return f.closedAt != nil, nil }
func (f *fakeDB) EntriesWritten(_ context.Context, ids []string) (int, error) {
	n := 0
	for _, id := range ids {
		if f.written[id] {
			n++
		}
	}
	return n, nil
}
func (f *fakeDB) CloseDraw(context.Context, int64) (store.Decision, bool, error) {
	f.decided++
	now := time.Now()
	f.closedAt = &now
	return store.Decision{}, f.decided == 1, nil
}

type fakeStock struct {
	shards  []store.DrawShard
	applied int
}

func (f *fakeStock) DrawShards(context.Context, int64) ([]store.DrawShard, error) {
	return f.shards, nil
}
func (f *fakeStock) ApplyDraw(context.Context, int64, store.Decision) (int, int, error) {
	f.applied++
	for i := range f.shards {
		f.shards[i].Drawn = true
	}
	return len(f.shards), 0, nil
}

type fakeQueue struct{ backlog uint64 }

func (q fakeQueue) Backlog(context.Context) (uint64, error) { return q.backlog, nil }

func TestCloserDecidesOnlyWhenReady(t *testing.T) {
	end := time.UnixMilli(1_000_000)
	shard := func(now time.Time, entries ...string) store.DrawShard {
		return store.DrawShard{Held: true, Now: now, WindowEnd: end, Entries: entries}
	}
	grace := 10 * time.Second
	cases := []struct {
		name    string
		shards  []store.DrawShard
		written []string
		backlog uint64
		decide  bool
	}{
		{"window open on one shard", []store.DrawShard{shard(end), shard(end.Add(-time.Millisecond))}, nil, 0, false},
		{"a shard not loaded", []store.DrawShard{shard(end), {}}, nil, 0, false},
		{"every entry written", []store.DrawShard{shard(end, "a"), shard(end, "b")}, []string{"a", "b"}, 0, true},
		{"an entry on its way, within the grace", []store.DrawShard{shard(end.Add(grace/2), "a", "b")}, []string{"a"}, 0, false},
		{"an entry missing after the grace, the queue not drained", []store.DrawShard{shard(end.Add(grace), "a", "b")}, []string{"a"}, 3, false},
		{"an entry missing after the grace, the queue drained", []store.DrawShard{shard(end.Add(grace), "a", "b")}, []string{"a"}, 0, true},
		{"entries lost from redis, within the grace", []store.DrawShard{{Held: true, Now: end.Add(time.Second), WindowEnd: end, EntryLost: true}}, nil, 0, false},
		{"entries lost from redis, after the grace, drained", []store.DrawShard{{Held: true, Now: end.Add(grace), WindowEnd: end, EntryLost: true}}, nil, 0, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := &fakeDB{written: map[string]bool{}}
			for _, id := range tc.written {
				db.written[id] = true
			}
			st := &fakeStock{shards: tc.shards}
			c := New(Config{Grace: grace}, db, st, fakeQueue{tc.backlog}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now)
			err := c.Close(context.Background(), 1)
			if tc.decide {
				if err != nil || db.decided != 1 || st.applied != 1 {
					t.Fatalf("Close: %v (decided %d, applied %d), want decided and applied once", err, db.decided, st.applied)
				}
				// applied everywhere: a second close does nothing
				if err := c.Close(context.Background(), 1); err != nil || db.decided != 1 || st.applied != 1 {
					t.Fatalf("second Close: %v (decided %d, applied %d), want nothing more", err, db.decided, st.applied)
				}
				return
			}
			if !errors.Is(err, ErrNotReady) || db.decided != 0 || st.applied != 0 {
				t.Fatalf("Close: %v (decided %d, applied %d), want ErrNotReady and nothing done", err, db.decided, st.applied)
			}
		})
	}
}

// A draw decided in Postgres (an instance died before applying it) is applied without the ready
// check: the decision is taken, whatever Redis holds now.
func TestCloserAppliesADecidedDraw(t *testing.T) {
	end := time.UnixMilli(1_000_000)
	closed := end.Add(time.Second)
	db := &fakeDB{written: map[string]bool{}, closedAt: &closed, decided: 1}
	st := &fakeStock{shards: []store.DrawShard{{Held: true, Now: end.Add(2 * time.Second), WindowEnd: end, Entries: []string{"gone"}}}}
	c := New(Config{Grace: time.Minute}, db, st, fakeQueue{7}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now)
	if err := c.Close(context.Background(), 1); err != nil || st.applied != 1 {
		t.Fatalf("Close of a decided draw: %v (applied %d), want applied", err, st.applied)
	}
}
