package store_test

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"net"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/lua"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// replyDropper is a TCP proxy in front of a Redis: a request that matches is forwarded and run,
// but its reply never reaches the client, whose connection closes instead (EOF), as when a
// connection drops between Redis running a command and the client reading its answer. go-redis
// then sends the command again on a new connection.
type replyDropper struct {
	addr    string
	match   []byte       // a request containing these bytes has its reply dropped...
	skip    atomic.Int64 // ...once this many of them went through (each counts it down)...
	drops   atomic.Int64 // ...while this is above 0 (each drop counts it down); -1: always
	matched atomic.Int64 // requests seen that contain match
}

func newReplyDropper(t *testing.T, redisAddr string, match []byte) *replyDropper {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p := &replyDropper{addr: l.Addr().String(), match: match}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r, err := net.Dial("tcp", redisAddr)
			if err != nil {
				c.Close()
				continue
			}
			var dropNext atomic.Bool
			go p.forwardRequests(c, r, &dropNext)
			go p.forwardReplies(r, c, &dropNext)
		}
	}()
	return p
}

// forwardRequests forwards the client's requests (c) to Redis (r), and has the reply to a
// request that matches dropped (dropNext) when its turn has come.
func (p *replyDropper) forwardRequests(c, r net.Conn, dropNext *atomic.Bool) {
	defer r.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if bytes.Contains(buf[:n], p.match) {
				p.matched.Add(1)
				if p.skip.Add(-1) >= 0 {
					// let through
				} else if d := p.drops.Load(); d < 0 || (d > 0 && p.drops.CompareAndSwap(d, d-1)) {
					dropNext.Store(true) // before Redis can answer
				}
			}
			if _, err := r.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// forwardReplies forwards Redis's replies (r) to the client (c), until one is to be dropped:
// then it closes the client's connection instead.
func (p *replyDropper) forwardReplies(r, c net.Conn, dropNext *atomic.Bool) {
	defer c.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if dropNext.Load() {
				return // the reply is lost: the client reads EOF
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// adjustThroughDropper starts a Redis, a Stock on it (sales of k shards) and a second Stock
// reaching the same Redis through a replyDropper that matches the adjust script's calls.
func adjustThroughDropper(t *testing.T, k int) (direct *store.Stock, rdb redis.UniversalClient, proxied *store.Stock, p *replyDropper) {
	t.Helper()
	rs := testenv.Redis(t)
	ctx := context.Background()
	rdb, err := store.OpenRedis(ctx, rs.URL(), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	// Loaded up front, so the proxied client's EVALSHA names the script by its hash.
	sha, err := rdb.ScriptLoad(ctx, lua.Adjust).Result()
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha1.Sum([]byte(lua.Adjust)); sha != hex.EncodeToString(sum[:]) {
		t.Fatalf("script hash %s", sha)
	}
	p = newReplyDropper(t, rs.Addr, []byte(sha))
	prdb, err := store.OpenRedis(ctx, "redis://"+p.addr+"/0", 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prdb.Close() })
	direct, proxied = store.NewStock(rdb, kShards(k)), store.NewStock(prdb, kShards(k))
	return direct, rdb, proxied, p
}

func shardsLost(t *testing.T, rdb redis.UniversalClient, sale int64, k int) []bool {
	t.Helper()
	out := make([]bool, k)
	for sh := range k {
		v, err := rdb.HGet(context.Background(), store.MetaKeyOf(sale, sh), "lost").Result()
		if err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		out[sh] = v == "1"
	}
	return out
}

func sum(xs []int64) int64 {
	n := int64(0)
	for _, x := range xs {
		n += x
	}
	return n
}

// An edit whose reply was lost after Redis ran it is sent again by go-redis: the second run
// finds the edit's mark and changes nothing (K = 1).
func TestAdjustResentAppliesOnce(t *testing.T) {
	s, rdb, ps, p := adjustThroughDropper(t, 1)
	ctx := context.Background()
	const sale, item = 91, 910
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, 10), 0)

	p.drops.Store(1)
	r, err := ps.Adjust(ctx, store.Adjustment{SaleID: sale, Stock: []store.StockAdjust{{ItemID: item, Delta: 3}}})
	if err != nil || !r.Applied {
		t.Fatalf("adjust +3 with its reply lost once = %+v, %v; want applied", r, err)
	}
	if got := p.matched.Load(); got != 2 {
		t.Fatalf("the adjust script was sent %d times, want 2 (the first reply lost, then resent)", got)
	}
	if got := stockOf(t, rdb, sale, item); got != 13 {
		t.Errorf("stock after +3 = %d, want 13 (a resend applied the edit twice?)", got)
	}
	p.drops.Store(1)
	r, err = ps.Adjust(ctx, store.Adjustment{SaleID: sale, Meta: map[string]string{"paused": "1"},
		Stock: []store.StockAdjust{{ItemID: item, Delta: -4}}})
	if err != nil || !r.Applied {
		t.Fatalf("adjust -4 with its reply lost once = %+v, %v; want applied", r, err)
	}
	if got := stockOf(t, rdb, sale, item); got != 9 {
		t.Errorf("stock after -4 = %d, want 9", got)
	}
	if st := stateOf(t, s, sale); st.Lost {
		t.Errorf("an edit applied once marked the sale lost: %+v", st)
	}
	if p, _ := s.Paused(ctx, sale); !p {
		t.Errorf("the edit's pause is not in meta")
	}
	// The mark is in the sale's slot and expires.
	keys := allKeys(t, rdb)
	marks := 0
	for _, k := range keys {
		if len(k) > len("{sale:91}:adj:") && k[:len("{sale:91}:adj:")] == "{sale:91}:adj:" {
			marks++
			if ttl := rdb.TTL(ctx, k).Val(); ttl <= 0 {
				t.Errorf("edit mark %s has no expiry (TTL %v)", k, ttl)
			}
		}
	}
	if marks != 2 {
		t.Errorf("edit marks in %v: %d, want 2", keys, marks)
	}
}

// An edit step whose outcome stays unknown (no reply, however often it is sent) fails the sale
// closed: Redis may hold the edit while Postgres rolls it back, so the sale is marked lost and
// rebuilt from Postgres. Redis took the step at most once.
func TestAdjustUnknownOutcomeMarksTheSaleLost(t *testing.T) {
	s, rdb, ps, p := adjustThroughDropper(t, 1)
	ctx := context.Background()
	const sale, item = 92, 920
	mustLoad(t, s, snapshot(t, s, sale, shop.LimitPerSale, item, 10), 0)

	p.drops.Store(-1)
	r, err := ps.Adjust(ctx, store.Adjustment{SaleID: sale, Stock: []store.StockAdjust{{ItemID: item, Delta: -2}}})
	p.drops.Store(0)
	if err == nil || r.Applied {
		t.Fatalf("adjust without any reply = %+v, %v; want an error", r, err)
	}
	if p.matched.Load() < 2 {
		t.Fatalf("the adjust script was sent %d times, want it resent", p.matched.Load())
	}
	if got := stockOf(t, rdb, sale, item); got != 8 {
		t.Errorf("stock after a -2 sent %d times = %d, want 8 (applied once)", p.matched.Load(), got)
	}
	if st := stateOf(t, s, sale); !st.Lost {
		t.Errorf("state after an edit step of unknown outcome = %+v, want lost (fail closed)", st)
	}
}

// Sharded: each step of an edit (a decrease taken from a shard, each shard's part of the
// increase) is applied once however often it is sent.
func TestAdjustShardedResentAppliesOnce(t *testing.T) {
	const k = 3
	s, rdb, ps, p := adjustThroughDropper(t, k)
	ctx := context.Background()
	const sale, item = 93, 930
	snap := snapshot(t, s, sale, shop.LimitPerSale, item, 12)
	snap.Shards = k
	mustLoad(t, s, snap, 0) // [4 4 4]

	// -6 takes two steps (4 from one shard, 2 from another), +3 one per shard.
	for _, c := range []struct{ delta, step int64 }{{-6, 0}, {-6, 1}, {3, 0}, {3, 1}, {3, 2}} {
		before := sum(levelsOf(t, rdb, sale, k, item))
		p.skip.Store(c.step)
		p.drops.Store(1)
		p.matched.Store(0)
		r, err := ps.Adjust(ctx, store.Adjustment{SaleID: sale, Stock: []store.StockAdjust{{ItemID: item, Delta: c.delta}}})
		if err != nil || !r.Applied {
			t.Fatalf("edit %+d, reply of step %d lost: %+v, %v; want applied", c.delta, c.step, r, err)
		}
		if p.drops.Load() != 0 {
			t.Fatalf("edit %+d: no reply of step %d was dropped (%d sent)", c.delta, c.step, p.matched.Load())
		}
		if got := sum(levelsOf(t, rdb, sale, k, item)); got != before+c.delta {
			t.Errorf("edit %+d with the reply of step %d lost: %d units, want %d (levels %v)", c.delta, c.step, got, before+c.delta, levelsOf(t, rdb, sale, k, item))
		}
		if lost := shardsLost(t, rdb, sale, k); lost[0] || lost[1] || lost[2] {
			t.Fatalf("an edit applied once marked shards lost: %v", lost)
		}
	}
}

// Sharded: a step of unknown outcome fails the whole sale closed, in the decrease phase and in
// the increase phase's first shard alike.
func TestAdjustShardedUnknownOutcomeMarksTheSaleLost(t *testing.T) {
	const k = 3
	for _, c := range []struct {
		name        string
		delta, step int64
	}{
		{"decrease, its first step", -6, 0},
		{"decrease, its second step", -6, 1},
		{"increase, shard 0", 3, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, rdb, ps, p := adjustThroughDropper(t, k)
			ctx := context.Background()
			const sale, item = 94, 940
			snap := snapshot(t, s, sale, shop.LimitPerSale, item, 12)
			snap.Shards = k
			mustLoad(t, s, snap, 0) // [4 4 4]
			p.skip.Store(c.step)
			p.drops.Store(-1)
			r, err := ps.Adjust(ctx, store.Adjustment{SaleID: sale, Stock: []store.StockAdjust{{ItemID: item, Delta: c.delta}}})
			p.drops.Store(0)
			if err == nil || r.Applied {
				t.Fatalf("adjust %+d with no reply from step %d = %+v, %v; want an error", c.delta, c.step, r, err)
			}
			for sh, lost := range shardsLost(t, rdb, sale, k) {
				if !lost {
					t.Errorf("shard %d not marked lost after an edit step of unknown outcome", sh)
				}
			}
		})
	}
}
