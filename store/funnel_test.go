package store_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/services/catalog"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// Two instances' flushes add up in one sale's funnel; the series is per second, capped, and the
// keys expire.
func TestFunnelFlushAddsUpAndCaps(t *testing.T) {
	s, rdb := newStock(t)
	ctx := context.Background()
	fs := store.FunnelStore{Keep: 10 * time.Second, TTL: time.Hour}
	const sale = 31
	t0 := int64(1_800_000_000)
	// A fresh Redis has no script cached: the first flush loads it (NOSCRIPT) and runs again.
	rdb.ScriptFlush(ctx)
	flush := funnelFlusher(t, s, fs)
	flush(store.FunnelDelta{SaleID: sale, At: t0, Accepted: 2, Refused: map[string]int64{"soldOut": 3}},
		store.FunnelDelta{SaleID: sale + 1, At: t0, Accepted: 1})
	flush(store.FunnelDelta{SaleID: sale, At: t0, Accepted: 1, Refused: map[string]int64{"soldOut": 1, "captcha": 2}}) // another instance, same second
	flush(store.FunnelDelta{SaleID: sale, At: t0 + 1, Refused: map[string]int64{"paused": 1}})

	c, series, err := s.Funnel(ctx, sale, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Accepted != 3 || c.Refused["soldOut"] != 4 || c.Refused["captcha"] != 2 || c.Refused["paused"] != 1 || len(c.Refused) != 3 {
		t.Errorf("totals %+v; want 3 accepted, refused soldOut 4, captcha 2, paused 1", c)
	}
	want := []store.SeriesPoint{{T: t0, Accepted: 3, Refused: 6}, {T: t0 + 1, Refused: 1}}
	if len(series) != len(want) || series[0] != want[0] || series[1] != want[1] {
		t.Errorf("series %+v, want %+v", series, want)
	}
	if _, series, _ := s.Funnel(ctx, sale, t0+1); len(series) != 1 || series[0].T != t0+1 {
		t.Errorf("series since t0+1 = %+v", series)
	}
	if c, _, _ := s.Funnel(ctx, sale+1, 0); c.Accepted != 1 || len(c.Refused) != 0 {
		t.Errorf("the other sale's totals %+v", c)
	}
	resentFlushAddsNothing(t, s, rdb, flush, sale+1, t0)
	seriesKeepsItsSecondsAndExpires(t, s, rdb, flush, sale, t0)
	// A sale never counted reads as zero.
	if c, series, err := s.Funnel(ctx, 999, 0); err != nil || c.Accepted != 0 || len(series) != 0 {
		t.Errorf("an uncounted sale: %+v %+v %v", c, series, err)
	}
}

// funnelFlusher flushes deltas to s (a failure fails the test).
func funnelFlusher(t *testing.T, s *store.Stock, fs store.FunnelStore) func(ds ...store.FunnelDelta) {
	return func(ds ...store.FunnelDelta) {
		t.Helper()
		if err := s.FlushFunnel(context.Background(), ds, fs); err != nil {
			t.Fatal(err)
		}
	}
}

// resentFlushAddsNothing: a flush sent again under the same id (its answer was lost) adds nothing
// the second time (sale counted 1 accepted at t0 before).
func resentFlushAddsNothing(t *testing.T, s *store.Stock, rdb redis.UniversalClient, flush func(...store.FunnelDelta), sale, t0 int64) {
	t.Helper()
	ctx := context.Background()
	again := store.FunnelDelta{ID: "i1.7", SaleID: sale, At: t0, Accepted: 5, Refused: map[string]int64{"soldOut": 1}}
	flush(again)
	flush(again, store.FunnelDelta{ID: "i1.8", SaleID: sale, At: t0, Accepted: 1})
	if c, series, _ := s.Funnel(ctx, sale, 0); c.Accepted != 7 || c.Refused["soldOut"] != 1 || len(series) != 1 || series[0].Accepted != 7 {
		t.Errorf("a resent flush: totals %+v, series %+v; want 7 accepted (1+5+1), 1 sold out", c, series)
	}
	if ttl, _ := rdb.TTL(ctx, "{sale:"+strconv.FormatInt(sale, 10)+"}:fl:i1.7").Result(); ttl <= 0 || ttl > store.FunnelFlushMarkTTL {
		t.Errorf("the flush id's mark expires in %v, want within %v", ttl, store.FunnelFlushMarkTTL)
	}
}

// seriesKeepsItsSecondsAndExpires: eleven seconds on, the first second falls out of the series
// (not out of the totals), and the keys expire within their TTL.
func seriesKeepsItsSecondsAndExpires(t *testing.T, s *store.Stock, rdb redis.UniversalClient, flush func(...store.FunnelDelta), sale, t0 int64) {
	t.Helper()
	ctx := context.Background()
	flush(store.FunnelDelta{SaleID: sale, At: t0 + 11, Accepted: 1})
	c, series, _ := s.Funnel(ctx, sale, 0)
	if c.Accepted != 4 || len(series) != 2 || series[0].T != t0+1 || series[1].T != t0+11 {
		t.Errorf("after the cap: totals %+v, series %+v; want 4 accepted, seconds t0+1 and t0+11", c, series)
	}
	if n, _ := rdb.ZCard(ctx, store.SeriesIndexKey(sale)).Result(); n != 2 {
		t.Errorf("series index holds %d seconds, want 2", n)
	}
	if n, _ := rdb.HLen(ctx, store.SeriesKey(sale)).Result(); n != 2 { // r:t0+1, a:t0+11
		t.Errorf("series hash holds %d fields, want 2", n)
	}
	for _, k := range []string{store.FunnelKey(sale), store.SeriesKey(sale), store.SeriesIndexKey(sale)} {
		if ttl, _ := rdb.TTL(ctx, k).Result(); ttl <= 0 || ttl > time.Hour {
			t.Errorf("%s TTL = %v, want up to an hour", k, ttl)
		}
	}
}

// muteProxy forwards a Redis connection and, while armed, drops every reply: Redis runs what it
// is sent, and the client hears nothing (a reply lost on the way back).
type muteProxy struct {
	ln     net.Listener
	target string
	armed  atomic.Bool
	muted  atomic.Int64 // bytes of replies dropped
}

func newMuteProxy(t *testing.T, target string) *muteProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &muteProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *muteProxy) serve(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { _, _ = io.Copy(up, c) }()
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			if p.armed.Load() {
				p.muted.Add(int64(n))
			} else if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// The funnel's flush whose reply is lost after Redis ran it (the client timed out) is counted
// once, end to end on a real Redis: the instance keeps the deltas, sends them again with the
// next flush under the same ids, and funnel.lua adds each id once (before the flush ids, the
// second flush added the first one's counts again).
func TestFunnelFlushRunInRedisWithItsReplyLostCountsOnce(t *testing.T) {
	proxy, stock, look := newMutedStock(t)
	now := time.Unix(1_800_000_000, 0)
	f := catalog.NewFunnel(stock, slog.New(slog.DiscardHandler), func() time.Time { return now })
	const sale = 41
	flush := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return f.Flush(ctx)
	}
	accepted := func() int64 {
		c, _, err := look.Funnel(context.Background(), sale, 0)
		if err != nil {
			t.Fatal(err)
		}
		return c.Accepted + c.Refused[catalog.RefusedSoldOut]
	}

	// A first flush loads the script, so the next one runs it at once.
	f.Record(sale, nil)
	if err := flush(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	// Three more; Redis runs the flush, its reply is dropped, the client gives up.
	f.Record(sale, nil)
	f.Record(sale, nil)
	f.Record(sale, &shop.Error{Code: shop.CodeSoldOut})
	proxy.armed.Store(true)
	if err := flush(300 * time.Millisecond); err == nil {
		t.Fatal("a flush without a reply reported no error")
	}
	deadline := time.Now().Add(5 * time.Second)
	for accepted() != 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := accepted(); n != 4 || proxy.muted.Load() == 0 {
		t.Fatalf("after the muted flush Redis counts %d requests, muted %d bytes: want the flush run in Redis (1 + 3) and its reply dropped", n, proxy.muted.Load())
	}
	proxy.armed.Store(false)
	// The next flush carries the lost one again, and two new requests.
	now = now.Add(time.Second)
	f.Record(sale, nil)
	f.Record(sale, nil)
	if err := flush(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if n := accepted(); n != 6 {
		t.Errorf("the funnel counts %d requests, want 6 (1, the lost flush's 3 once, 2 more); 9 is the lost flush added twice", n)
	}
}

// newMutedStock starts a Redis and returns a proxy to it that can drop its replies, a Stock
// through the proxy and another Stock straight on the Redis (to look).
func newMutedStock(t *testing.T) (*muteProxy, *store.Stock, *store.Stock) {
	t.Helper()
	rs := testenv.Redis(t)
	proxy := newMuteProxy(t, rs.Addr)
	rdb, err := store.OpenRedis(context.Background(), "redis://"+proxy.ln.Addr().String()+"/0", 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	direct, err := store.OpenRedis(context.Background(), rs.URL(), 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	return proxy, store.NewStock(rdb, store.OneShard), store.NewStock(direct, store.OneShard)
}
