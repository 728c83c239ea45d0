package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// FunnelKey is the Redis hash of a sale's purchase funnel totals, summed over every instance
// (field -> count: "accepted" and "refused:REASON").
func FunnelKey(saleID int64) string { return saleTag(saleID) + ":funnel" }

// SeriesKey is the Redis hash of a sale's per-second series: "a:T" accepted and "r:T" refused in
// the Unix second T.
func SeriesKey(saleID int64) string { return saleTag(saleID) + ":series" }

// SeriesIndexKey is the Redis sorted set of the seconds SeriesKey holds (score and member T), so
// the series can be capped.
func SeriesIndexKey(saleID int64) string { return saleTag(saleID) + ":seriesidx" }

// FunnelFieldAccepted is the funnel hash's field of accepted purchases; a refusal's field is
// FunnelRefusedPrefix followed by its reason.
const (
	FunnelFieldAccepted = "accepted"
	FunnelRefusedPrefix = "refused:"
)

// FunnelDelta is what one instance counted for one sale since its last flush.
type FunnelDelta struct {
	ID       string // the flush's id: a delta sent again with the same id is added once ("" = no check)
	SaleID   int64
	At       int64            // the Unix second the counts go to in the series
	Accepted int64            // purchases answered 202
	Refused  map[string]int64 // reason -> refusals
}

// RefusedTotal sums the refusals of every reason.
func (d FunnelDelta) RefusedTotal() int64 {
	n := int64(0)
	for _, v := range d.Refused {
		n += v
	}
	return n
}

// FunnelFlushMarkTTL is how long Redis remembers a flush id (lua/funnel.lua): a delta resent
// later than this would be added twice, so the sender gives up on it sooner (catalog.Funnel).
const FunnelFlushMarkTTL = 15 * time.Minute

func funnelFlushKey(saleID int64, id string) string { return saleTag(saleID) + ":fl:" + id }

// FunnelStore is how long a sale's funnel keeps its series and its keys.
type FunnelStore struct {
	Keep time.Duration // the series holds this much before its latest second
	TTL  time.Duration // the keys expire this long after the last flush
}

// FunnelNotTaken is FlushFunnel's error when Redis did not take some of the deltas: NotTaken
// lists them (the others were added), so the caller keeps only those for the next flush. On a
// Redis Cluster the sales of one flush live on several nodes, and one node failing leaves the
// others' deltas added.
type FunnelNotTaken struct {
	NotTaken []FunnelDelta
	Err      error
}

func (e *FunnelNotTaken) Error() string {
	return fmt.Sprintf("funnel flush: %d of the sales' counts not taken: %v", len(e.NotTaken), e.Err)
}

func (e *FunnelNotTaken) Unwrap() error { return e.Err }

// FlushFunnel adds each delta to its sale's totals and series, one script call per sale, all in
// one round trip (one per node of a Redis Cluster). It returns a *FunnelNotTaken naming the
// deltas Redis did not take.
func (s *Stock) FlushFunnel(ctx context.Context, deltas []FunnelDelta, fs FunnelStore) error {
	if len(deltas) == 0 {
		return nil
	}
	noScript, notTaken, err := funnelFailed(deltas, s.sendFunnel(ctx, deltas, fs))
	if len(noScript) > 0 {
		// Not cached in this Redis (or on this node) yet, or flushed: load it (on every node of a
		// cluster) and run those again.
		if lerr := s.funnel.Load(ctx, s.rdb).Err(); lerr != nil {
			return &FunnelNotTaken{NotTaken: append(notTaken, noScript...), Err: lerr}
		}
		again, other, aerr := funnelFailed(noScript, s.sendFunnel(ctx, noScript, fs))
		notTaken = append(append(notTaken, again...), other...)
		if aerr != nil {
			err = aerr
		} else if len(again) > 0 {
			err = errors.New("NOSCRIPT after loading the script")
		}
	}
	if len(notTaken) > 0 {
		return &FunnelNotTaken{NotTaken: notTaken, Err: err}
	}
	return nil
}

// sendFunnel runs the funnel script for each of ds, in one pipeline.
func (s *Stock) sendFunnel(ctx context.Context, ds []FunnelDelta, fs FunnelStore) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(ds))
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, d := range ds {
			keys, args := funnelCall(d, fs)
			cmds[i] = s.funnel.EvalSha(ctx, p, keys, args...)
		}
		return nil
	})
	return cmds
}

// funnelCall is the funnel script's keys and arguments for one delta.
func funnelCall(d FunnelDelta, fs FunnelStore) ([]string, []any) {
	keys := []string{FunnelKey(d.SaleID), SeriesKey(d.SaleID), SeriesIndexKey(d.SaleID)}
	if d.ID != "" {
		keys = append(keys, funnelFlushKey(d.SaleID, d.ID))
	}
	args := []any{d.At, int64(fs.Keep / time.Second), int64(fs.TTL / time.Second), d.Accepted, d.RefusedTotal()}
	if d.Accepted != 0 {
		args = append(args, FunnelFieldAccepted, d.Accepted)
	}
	for reason, n := range d.Refused {
		if n != 0 {
			args = append(args, FunnelRefusedPrefix+reason, n)
		}
	}
	return keys, args
}

// funnelFailed splits ds by its commands' outcome: those refused with NOSCRIPT (the script ran
// nowhere for them), and those that failed otherwise (err: the last such failure).
func funnelFailed(ds []FunnelDelta, cmds []*redis.Cmd) (noScript, other []FunnelDelta, err error) {
	for i, c := range cmds {
		switch e := c.Err(); {
		case e == nil:
		case redis.HasErrorPrefix(e, "NOSCRIPT"):
			noScript = append(noScript, ds[i])
		default:
			other, err = append(other, ds[i]), e
		}
	}
	return noScript, other, err
}

// FunnelCounts are a sale's funnel totals over every instance.
type FunnelCounts struct {
	Accepted int64
	Refused  map[string]int64 // reason -> refusals
}

// SeriesPoint is one second of a sale's series.
type SeriesPoint struct {
	T        int64 // Unix seconds
	Accepted int64
	Refused  int64
}

// Funnel reads a sale's funnel totals and its series (the seconds at or after `since` that had a
// request, oldest first), in one round trip.
func (s *Stock) Funnel(ctx context.Context, saleID int64, since int64) (FunnelCounts, []SeriesPoint, error) {
	var totals, series *redis.MapStringStringCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		totals = p.HGetAll(ctx, FunnelKey(saleID))
		series = p.HGetAll(ctx, SeriesKey(saleID))
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return FunnelCounts{}, nil, fmt.Errorf("funnel(sale %d): %w", saleID, err)
	}
	out := FunnelCounts{Refused: map[string]int64{}}
	for f, v := range totals.Val() {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		switch {
		case f == FunnelFieldAccepted:
			out.Accepted = n
		case strings.HasPrefix(f, FunnelRefusedPrefix):
			out.Refused[strings.TrimPrefix(f, FunnelRefusedPrefix)] = n
		}
	}
	points := map[int64]*SeriesPoint{}
	for f, v := range series.Val() {
		kind, sec, ok := strings.Cut(f, ":")
		if !ok {
			continue
		}
		t, err1 := strconv.ParseInt(sec, 10, 64)
		n, err2 := strconv.ParseInt(v, 10, 64)
		if err1 != nil || err2 != nil || t < since {
			continue
		}
		pt := points[t]
		if pt == nil {
			pt = &SeriesPoint{T: t}
			points[t] = pt
		}
		switch kind {
		case "a":
			pt.Accepted += n
		case "r":
			pt.Refused += n
		}
	}
	list := make([]SeriesPoint, 0, len(points))
	for _, pt := range points {
		list = append(list, *pt)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].T < list[j].T })
	return out, list, nil
}
