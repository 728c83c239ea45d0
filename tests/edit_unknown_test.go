package tests

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/lua"
	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/testenv"
)

// adjustMute is a TCP proxy in front of Redis that, while armed, forwards every call of the
// adjust script but never its reply: the connection closes after Redis ran it (EOF), as when a
// link drops at that moment, on every resend too. Everything else passes.
type adjustMute struct {
	ln    net.Listener
	sha   []byte
	armed atomic.Bool
	muted atomic.Int64
}

func newAdjustMute(t *testing.T, rs *testenv.RedisServer) *adjustMute {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	// Loaded up front, so the app's EVALSHA names the script by its hash.
	sha, err := rdb.ScriptLoad(context.Background(), lua.Adjust).Result()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &adjustMute{ln: ln, sha: []byte(sha)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c, rs.Addr)
		}
	}()
	return p
}

func (p *adjustMute) serve(c net.Conn, target string) {
	defer c.Close()
	s, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer s.Close()
	var mute atomic.Bool
	go func() {
		defer s.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if p.armed.Load() && bytes.Contains(buf[:n], p.sha) {
					mute.Store(true)
					p.muted.Add(1)
				}
				if _, err := s.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if mute.Load() {
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

// A merchant's edit whose Redis step never answers (Redis may have taken it): the edit is
// refused (503) and rolled back in Postgres, and the sale fails closed (marked lost) instead of
// keeping in Redis an edit Postgres lacks; the keeper rebuilds it from Postgres, which has the
// old quantity, and the books balance. Once on a sale of one shard, once on three shards.
func TestEditWithUnknownRedisOutcomeFailsClosed(t *testing.T) {
	t.Parallel()
	for _, k := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d shards", k), func(t *testing.T) {
			rs := testenv.Redis(t)
			proxy := newAdjustMute(t, rs)
			h := newHarness(t, harnessOpts{redisURL: "redis://" + proxy.ln.Addr().String() + "/0"})
			h.redis = rs
			s := h.createSaleWith(map[string]any{"stockShards": k}, time.Now().Add(-time.Second), 9)
			item := s.items[0]
			merchant := h.token(9000, auth.RoleMerchant)
			alice := h.token(1, auth.RoleShopper)
			if r := h.buy(alice, item, h.purchaseToken(alice, s.sale)); r.Status != http.StatusAccepted {
				t.Fatalf("buy: %d %s", r.Status, r.Raw)
			}
			h.drain(s)
			levels := func() int64 { return sum(h.shardLevels(s, k, item)) }
			if got := levels(); got != 8 {
				t.Fatalf("stock before the edit = %d, want 8", got)
			}
			for _, q := range []int{4, 14} { // a decrease, then an increase
				st0, err := h.app.Stock.State(context.Background(), s.sale)
				if err != nil || !st0.Loaded || st0.Lost {
					t.Fatalf("before the edit to %d: %+v, %v", q, st0, err)
				}
				proxy.armed.Store(true)
				r := h.patchSale(merchant, s.sale, map[string]any{"items": []map[string]any{{"itemId": fmt.Sprint(item), "quantity": q}}})
				proxy.armed.Store(false)
				if r.Status != http.StatusServiceUnavailable {
					t.Fatalf("edit to %d whose redis step never answers: %d %s, want 503", q, r.Status, r.Raw)
				}
				if proxy.muted.Load() == 0 {
					t.Fatalf("the proxy muted no adjust call")
				}
				if got := h.sqlInt(`SELECT quantity FROM items WHERE id = ?`, item); got != 9 {
					t.Errorf("postgres quantity after the refused edit = %d, want 9 (rolled back)", got)
				}
				if st, err := h.app.Stock.State(context.Background(), s.sale); err != nil || (!st.Lost && st.Epoch == st0.Epoch) {
					t.Errorf("after an edit of unknown outcome: state %+v, %v; want the sale marked lost (or already rebuilt)", st, err)
				}
				// The keeper rebuilds it from Postgres: the old quantity's units, and it sells.
				testenv.Eventually(t, 20*time.Second, "rebuilt after the edit of unknown outcome", func() error {
					st, err := h.app.Stock.State(context.Background(), s.sale)
					if err == nil && st.Loaded && !st.Lost && st.Epoch > st0.Epoch && levels() == 8 {
						return nil
					}
					return fmt.Errorf("state %+v %v, levels %v", st, err, h.shardLevels(s, k, item))
				})
			}
			bob := h.token(2, auth.RoleShopper)
			if r := h.buy(bob, item, h.purchaseToken(bob, s.sale)); r.Status != http.StatusAccepted {
				t.Fatalf("buy after the rebuild: %d %s", r.Status, r.Raw)
			}
			h.checkInvariants(s)
		})
	}
}
