package drill

// A drill as it runs: the copy exercised by the crowd, the heartbeat that stops it, the
// writer watched, and the copy cleaned up afterwards and at start (Sweep).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// run is one drill, start to end, on this instance: copy, load, send, drain, measure, clean.
// Every second while it prepares, runs or drains, the heartbeat also looks again for a real sale
// live or starting within NotNowWindow (one created, moved or resumed meanwhile, or the drill's
// own minutes bringing a start that close): the drill is then stopped and cleaned up as any
// other, and ends failed with the reason.
func (s *Drills) run(r *running, sale shop.Sale, rec store.DrillRecord) {
	ctx, stop := context.WithCancelCause(s.stop)
	defer stop(nil)
	log := s.d.Log.With("drill", rec.ID, "sale", sale.ID)
	hbDone := make(chan struct{})
	hbStop := make(chan struct{})
	go s.heartbeat(ctx, stop, r, log, hbStop, hbDone)
	res, runErr := s.exercise(ctx, r, sale, rec)
	var stopped *stoppedError
	if cause := context.Cause(ctx); runErr != nil && errors.As(cause, &stopped) {
		runErr = stopped // what stopped it, not the step it stopped in
	}
	// the cleanup runs even when the instance is closing, for a few seconds
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	r.phase.Store(PhaseCleaning)
	sent, answered := r.counts()
	_ = s.d.DB.DrillProgress(cctx, r.id, PhaseCleaning, sent, answered)
	var cleanErr error
	if id := r.copyID.Load(); id != 0 {
		if cleanErr = s.cleanWhenDrained(cctx, id, sale.StockShards); cleanErr == nil {
			_ = s.d.DB.SetDrillCopy(cctx, r.id, 0)
		}
	}
	close(hbStop)
	<-hbDone
	phase, failure := PhaseDone, ""
	var body []byte
	switch {
	case runErr != nil:
		phase, failure = PhaseFailed, runErr.Error()
	case cleanErr != nil:
		phase, failure = PhaseFailed, "the drill ran but its copy could not be removed yet (the next drill, or a restart, removes it): "+cleanErr.Error()
	}
	if res != nil {
		body, _ = json.Marshal(res)
	}
	if cleanErr != nil {
		log.Warn("fire drill: copy not removed yet", "copy", r.copyID.Load(), "err", cleanErr)
	}
	if _, err := s.d.DB.FinishDrill(cctx, r.id, phase, body, failure); err != nil {
		log.Error("fire drill: end not recorded", "err", err)
	}
	log.Info("fire drill ended", "phase", phase, "failure", failure)
}

// heartbeat records the drill's progress every second ("this instance still runs it") and, until
// its cleanup, looks again for a real sale near (recheck, which stops the drill); it returns when
// quit is closed, closing done.
func (s *Drills) heartbeat(ctx context.Context, stop context.CancelCauseFunc, r *running, log *slog.Logger, quit <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case <-t.C:
			phase := r.phase.Load().(string)
			sent, answered := r.counts()
			if err := s.d.DB.DrillProgress(context.WithoutCancel(ctx), r.id, phase, sent, answered); err != nil {
				log.Warn("fire drill: progress not recorded", "err", err)
			}
			if phase != PhaseCleaning && ctx.Err() == nil {
				s.recheck(ctx, stop, log)
			}
		}
	}
}

// stoppedError is why a running drill was stopped: a real sale became live or came within
// NotNowWindow.
type stoppedError struct{ why error }

func (e *stoppedError) Error() string { return "stopped: " + e.why.Error() }

// recheck stops the drill (its context, with the reason) when a real sale is live or starts
// within NotNowWindow. A failed look stops nothing: the next second looks again.
func (s *Drills) recheck(ctx context.Context, stop context.CancelCauseFunc, log *slog.Logger) {
	now := s.d.Now()
	sales, err := s.d.DB.SalesLiveOrStarting(ctx, now, NotNowWindow, 1)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("fire drill: could not look for a sale starting soon", "err", err)
		}
		return
	}
	if len(sales) > 0 {
		log.Warn("fire drill stopped: a sale is live or starts soon", "live_or_starting", sales[0].ID)
		stop(&stoppedError{why: notNow(sales[0], now)})
	}
}

// cleanupDrainWait bounds how long a drill's own cleanup waits for the copy's last reservations
// to reach Postgres (a drill stopped in the middle leaves some on their way); past it, or while
// the instance closes, the copy is left to Sweep.
const cleanupDrainWait = 10 * time.Second

// cleanWhenDrained is cleanCopy, tried again while the copy's reservations are on their way.
func (s *Drills) cleanWhenDrained(ctx context.Context, copyID int64, shards int) error {
	deadline := time.Now().Add(cleanupDrainWait)
	for {
		err := s.cleanCopy(ctx, copyID, shards)
		if !errors.Is(err, errNotDrained) || s.stop.Err() != nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// exercise makes the copy, sends the crowd and waits for the writer; it returns the result (nil
// if the drill could not measure anything).
func (s *Drills) exercise(ctx context.Context, r *running, sale shop.Sale, rec store.DrillRecord) (*Result, error) {
	cp, err := s.d.DB.CreateDrillCopy(ctx, copyOf(sale, s.d.Now(), rec.Seconds))
	if err != nil {
		return nil, fmt.Errorf("copy of the sale: %w", err)
	}
	r.copyID.Store(cp.ID)
	if err := s.d.DB.SetDrillCopy(ctx, r.id, cp.ID); err != nil {
		return nil, fmt.Errorf("copy of the sale: %w", err)
	}
	if _, err := s.d.Loader.LoadFirst(ctx, cp.ID); err != nil {
		return nil, fmt.Errorf("loading the copy into Redis: %w", err)
	}
	r.phase.Store(PhaseRunning)
	_ = s.d.DB.DrillProgress(ctx, r.id, PhaseRunning, 0, 0)
	w := s.watch(ctx, cp)
	defer w.stop()
	m, err := s.crowd(ctx, r, cp, rec)
	if err != nil {
		return nil, err
	}
	r.phase.Store(PhaseDraining)
	_ = s.d.DB.DrillProgress(ctx, r.id, PhaseDraining, m.Shoppers, m.Shoppers)
	m.WriterLag, m.WriterDrained = w.lag(ctx, cp, m.Accepted, m.lastAcceptAt, s.cfg.DrainWait)
	m.ExpectedCrowd, m.CrowdSource = rec.ExpectedCrowd, rec.CrowdSource
	res := judge(m.Measure)
	if !m.WriterDrained {
		return &res, fmt.Errorf("the writer had not written every accepted order after %s", s.cfg.DrainWait)
	}
	return &res, ctx.Err()
}

// copyOf is the scratch copy of a sale: the same items, quantities, prices and terms, live from
// now for the drill and a margin, its own per-shopper rate limit, and no per-address limit to
// speak of (the drill's shoppers all come from the loopback address; a real crowd does not).
func copyOf(sale shop.Sale, now time.Time, seconds int) shop.Sale {
	lim := sale.RateLimits()
	lim.IPPerSecond = 1_000_000_000
	name := "Fire drill: " + sale.Name
	if len(name) > 200 {
		name = strings.ToValidUTF8(name[:200], "")
	}
	cp := shop.Sale{MerchantID: sale.MerchantID, Name: name, StartsAt: now.Add(-time.Second),
		EndsAt: now.Add(time.Duration(seconds)*time.Second + 10*time.Minute), PaymentWindowSeconds: sale.PaymentWindowSeconds,
		PurchaseLimit: sale.PurchaseLimit, Currency: sale.Currency, StockShards: max(sale.StockShards, 1), Limits: &lim, DrillOf: sale.ID}
	for _, it := range sale.Items {
		cp.Items = append(cp.Items, shop.Item{Name: it.Name, PriceCents: it.PriceCents, Quantity: it.Quantity, ImageURL: it.ImageURL})
	}
	return cp
}

// orderWatch counts the copy's orders in Postgres every 20 ms from the first shopper on, noting
// when each count was first seen, so the writer's lag is read off the moment Postgres first held
// every accepted order, even while the crowd was still being refused.
type orderWatch struct {
	db    DB
	stock Stock
	mu    sync.Mutex
	seen  []orderCount
	quit  chan struct{}
	done  chan struct{}
}

type orderCount struct {
	at time.Time
	n  int64
}

const watchEvery = 20 * time.Millisecond

func (s *Drills) watch(ctx context.Context, cp shop.Sale) *orderWatch {
	w := &orderWatch{db: s.d.DB, stock: s.d.Stock, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(watchEvery)
		defer t.Stop()
		for {
			w.sample(ctx, cp.ID)
			select {
			case <-w.quit:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *orderWatch) sample(ctx context.Context, saleID int64) {
	n, err := w.db.OrdersOfSaleCount(ctx, saleID)
	if err != nil {
		return
	}
	now := time.Now()
	w.mu.Lock()
	if len(w.seen) == 0 || w.seen[len(w.seen)-1].n != n {
		w.seen = append(w.seen, orderCount{at: now, n: n})
	}
	w.mu.Unlock()
}

// firstAt returns when a count of at least n was first seen.
func (w *orderWatch) firstAt(n int64) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.seen {
		if c.n >= n {
			return c.at, true
		}
	}
	return time.Time{}, false
}

func (w *orderWatch) stop() {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	<-w.done
}

// lag waits (at most wait) until Postgres holds every accepted order of the copy and Redis has
// none of its reservations in flight; it returns how long after the last accepted purchase
// Postgres first held them all, and whether it did.
func (w *orderWatch) lag(ctx context.Context, cp shop.Sale, accepted int64, lastAccept time.Time, wait time.Duration) (time.Duration, bool) {
	deadline := time.Now().Add(wait)
	for {
		if at, ok := w.firstAt(accepted); ok {
			if f, err := w.stock.InFlightCount(ctx, cp.ID, cp.StockShards); err == nil && f == 0 {
				if accepted == 0 || lastAccept.IsZero() {
					return 0, true
				}
				return max(0, at.Sub(lastAccept)), true
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Since(lastAccept), false
		}
		time.Sleep(watchEvery)
	}
}

// Sweep ends the drills whose instance stopped in the middle (no heartbeat for Config.Silent)
// and removes every drill copy no running drill uses. It returns how many copies it could not
// remove yet (reservations of theirs still on their way to Postgres).
func (s *Drills) Sweep(ctx context.Context) (int, error) {
	if _, err := s.d.DB.AbandonDrills(ctx, s.cfg.Silent, "interrupted: the instance running it stopped before the drill ended; its data was removed"); err != nil {
		return 0, err
	}
	// The copies first, then the drills running: a drill started between the two reads has a
	// copy this pass did not list, so it cannot be taken for a leftover.
	copies, err := s.d.DB.DrillCopies(ctx)
	if err != nil {
		return 0, err
	}
	run, err := s.d.DB.RunningDrills(ctx)
	if err != nil {
		return 0, err
	}
	if len(run) > 0 || s.cur.Load() != nil {
		// A drill runs (here or on another instance): its copy may exist before its row names
		// it, so no copy is touched until it has ended; the others count as left.
		inUse := map[int64]bool{}
		for _, r := range run {
			inUse[r.CopySaleID] = true
		}
		left := 0
		for _, id := range copies {
			if !inUse[id] {
				left++
			}
		}
		return max(0, left-1), nil // one unnamed copy may be the running drill's own
	}
	left := 0
	for _, id := range copies {
		sale, err := s.d.DB.SaleByID(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if err := s.cleanCopy(ctx, id, sale.StockShards); err != nil {
			s.d.Log.Warn("fire drill: a copy left by an interrupted drill is not removed yet", "copy", id, "err", err)
			left++
		}
	}
	return left, nil
}

// errNotDrained: a copy still has reservations on their way to Postgres; removing its rows now
// would leave the writer orders of items that no longer exist.
var errNotDrained = errors.New("reservations of the copy are still on their way to Postgres")

// cleanCopy removes a drill copy: its rows in Postgres (orders, items, the sale), then its keys
// in Redis, and those again a moment later (a funnel flush or a keeper pass that read the copy
// before it was gone may write a key after the first sweep).
func (s *Drills) cleanCopy(ctx context.Context, copyID int64, shards int) error {
	n, err := s.d.Stock.InFlightCount(ctx, copyID, shards)
	if err != nil {
		return err
	}
	if n > 0 {
		return errNotDrained
	}
	if err := s.d.Flush(ctx); err != nil {
		s.d.Log.Warn("fire drill: funnel flush before the cleanup", "err", err)
	}
	if err := s.d.DB.DeleteDrillCopy(ctx, copyID); err != nil {
		return err
	}
	if _, err := s.d.Stock.DeleteSaleKeys(ctx, copyID); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-time.After(1200 * time.Millisecond):
	}
	if _, err := s.d.Stock.DeleteSaleKeys(context.WithoutCancel(ctx), copyID); err != nil {
		return err
	}
	return nil
}
