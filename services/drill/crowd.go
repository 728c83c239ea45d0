package drill

import (
	"context"
	"fmt"
	"time"

	"github.com/flashsale/flashsale/loadgen"
	"github.com/flashsale/flashsale/loadgen/hist"
	"github.com/flashsale/flashsale/loadgen/tokens"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// crowdMeasure is what the crowd saw, and when (on this machine's clock) the last purchase was
// accepted: the writer's lag counts from there.
type crowdMeasure struct {
	Measure
	lastAcceptAt time.Time
}

// crowd sends the drill's shoppers at the copy through the public API over loopback HTTP, with
// the open-loop load generator the benchmark uses (loadgen): each shopper asks for a purchase token
// (answering the drill's own challenge) and buys, arrivals spread evenly over the drill's
// seconds whatever the answers, the crowd spread evenly over the items.
func (s *Drills) crowd(ctx context.Context, r *running, cp shop.Sale, rec store.DrillRecord) (crowdMeasure, error) {
	target := s.cfg.Target()
	if _, err := loadgen.LoopbackAddr(target); err != nil {
		return crowdMeasure{}, fmt.Errorf("the drill's target: %w", err)
	}
	n := rec.Shoppers
	users := tokens.Minter{Secret: s.cfg.Secret, TTL: time.Hour}.Shoppers(ShopperBase+rec.ID<<20, n)
	pool, err := loadgen.NewPool("raw", target, min(s.cfg.Workers, n), s.cfg.Timeout)
	if err != nil {
		return crowdMeasure{}, err
	}
	defer pool.Close()
	if err := pool.Warm(false); err != nil {
		return crowdMeasure{}, fmt.Errorf("connecting to %s: %w", target, err)
	}
	itemIDs := make([]int64, len(cp.Items))
	for i, it := range cp.Items {
		itemIDs[i] = it.ID
	}
	window := time.Duration(rec.Seconds) * time.Second
	ph := &loadgen.Phase{
		Name:     "fire drill",
		Base:     time.Now().Add(50 * time.Millisecond),
		Offsets:  loadgen.Schedule(n, window, "uniform", uint64(rec.ID)),
		Deadline: window + s.cfg.Timeout + 5*time.Second,
		Do: loadgen.ShopperFlowWith(loadgen.TokenBody(ChallengeID, r.secret), users, loadgen.TokenPath(cp.ID),
			loadgen.PurchasePaths(itemIDs), 0, nil, nil),
		OnStats: func(st *loadgen.Stats) {
			f := progressFn(func() (int, int) { return int(st.Scheduled()), int(st.Done()) })
			r.progress.Store(&f)
		},
	}
	st := pool.Run(ctx, ph, nil)
	if err := ctx.Err(); err != nil {
		return crowdMeasure{}, fmt.Errorf("stopped: the instance is shutting down")
	}
	return measure(st, n, rec.Seconds, cp), nil
}

// measure reads the generator's statistics as the drill's figures.
func measure(st *loadgen.Stats, n, seconds int, cp shop.Sale) crowdMeasure {
	m := crowdMeasure{Measure: Measure{Shoppers: n, Seconds: seconds, LastAccept: -1}}
	for _, it := range cp.Items {
		m.Units += int64(it.Quantity)
	}
	var all, served hist.Snap
	for c := loadgen.Class(0); c < loadgen.NumClasses; c++ {
		k := st.Count(loadgen.KindArrival, c)
		snap := st.Latency(loadgen.KindArrival, c)
		all.Merge(snap)
		switch c {
		case loadgen.Class202:
			m.Accepted += k
			served.Merge(snap)
		case loadgen.Class5xx, loadgen.ClassTimeout, loadgen.ClassNetErr:
			m.Errors += k
		default:
			m.Refused += k
			served.Merge(snap)
		}
	}
	m.P50, m.P99 = all.Quantile(0.50), all.Quantile(0.99)
	m.ServedFast = int64(served.AtMost(FastAnswer))
	if st.Count(loadgen.KindPurchase, loadgen.Class202) > 0 {
		last := time.Duration(st.LastAt(loadgen.KindPurchase, loadgen.Class202))
		m.LastAccept = last
		m.lastAcceptAt = st.Base().Add(last)
	}
	return m
}
