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
	pos      uint64 // the queue position recorded (0: none yet)
	closedAt *time.Time
	decided  int
}

func (f *fakeDB) DrawsDue(context.Context, time.Time) ([]int64, error) { return []int64{1}, nil }
func (f *fakeDB) DrawDecided(context.Context, int64) (bool, error)     { return f.closedAt != nil, nil }
func (f *fakeDB) DrawQueuePosition(_ context.Context, _ int64, pos uint64) (uint64, error) {
	if f.pos == 0 {
		f.pos = pos
	}
	return f.pos, nil
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

type fakeQueue struct{ last, done uint64 }

func (q *fakeQueue) Position(context.Context) (uint64, error)       { return q.last, nil }
func (q *fakeQueue) WrittenThrough(context.Context) (uint64, error) { return q.done, nil }

// The draw is decided once the window has passed on every shard by the publish timeout (and a
// second), and the writers have passed the queue's position then, whatever Redis's shards list as
// entries (a failover may have dropped some that are queued).
func TestCloserDecidesOnlyWhenReady(t *testing.T) {
	end := time.UnixMilli(1_000_000)
	const publish = 2 * time.Second
	after := end.Add(publish + settle)
	shard := func(now time.Time, entries ...string) store.DrawShard {
		return store.DrawShard{Held: true, Now: now, WindowEnd: end, Entries: entries}
	}
	cases := []struct {
		name       string
		shards     []store.DrawShard
		recorded   uint64 // a position recorded before (another instance's)
		last, done uint64
		decide     bool
	}{
		{"window open on one shard", []store.DrawShard{shard(after), shard(end.Add(-time.Millisecond))}, 0, 5, 5, false},
		{"a shard not loaded", []store.DrawShard{shard(after), {}}, 0, 5, 5, false},
		{"window passed, publishes may still be answered", []store.DrawShard{shard(end.Add(publish))}, 0, 5, 5, false},
		{"writers behind the position", []store.DrawShard{shard(after, "a"), shard(after, "b")}, 0, 9, 8, false},
		{"writers through the position", []store.DrawShard{shard(after, "a"), shard(after, "b")}, 0, 9, 9, true},
		{"redis lists no entry, the queue holds some", []store.DrawShard{{Held: true, Now: after, WindowEnd: end, EntryLost: true}}, 0, 12, 11, false},
		{"the position recorded first is the one waited for", []store.DrawShard{shard(after)}, 20, 9, 19, false},
		{"past the recorded position", []store.DrawShard{shard(after)}, 20, 30, 20, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := &fakeDB{pos: tc.recorded}
			st := &fakeStock{shards: tc.shards}
			c := New(Config{PublishTimeout: publish}, db, st, &fakeQueue{tc.last, tc.done}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now)
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
	db := &fakeDB{closedAt: &closed, decided: 1}
	st := &fakeStock{shards: []store.DrawShard{{Held: true, Now: end.Add(2 * time.Second), WindowEnd: end, Entries: []string{"gone"}}}}
	c := New(Config{PublishTimeout: time.Minute}, db, st, &fakeQueue{9, 2}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Now)
	if err := c.Close(context.Background(), 1); err != nil || st.applied != 1 {
		t.Fatalf("Close of a decided draw: %v (applied %d), want applied", err, st.applied)
	}
}
