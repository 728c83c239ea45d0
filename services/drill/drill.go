// Package drill is the merchant's fire drill: the benchmark, run from the admin page against a
// scratch copy of the merchant's sale (the same items and quantities, its own {sale:S} keys in
// Redis and rows in Postgres, never the live stock), through the real purchase path over
// loopback HTTP with the writer running as usual, and the answer in plain words: the projected
// sell-out time, the refusal rate, the writer's lag and how many instances the expected crowd
// needs. One drill runs at a time on the whole deployment, never while a real sale is live or
// starts within NotNowWindow (checked at the start and every second while it runs: a drill is
// stopped when a sale comes that close), nor within Config.Cooldown of the merchant's last drill,
// and it removes everything it made, also after an instance stopped in the middle of one (Sweep).
package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale/services/internal/mac"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// The phases of a drill.
const (
	PhasePreparing = "preparing" // the copy is made and loaded into Redis
	PhaseRunning   = "running"   // the shoppers are sent
	PhaseDraining  = "draining"  // waiting for the writer to put every accepted order in Postgres
	PhaseCleaning  = "cleaning"  // the copy's rows and keys are removed
	PhaseDone      = "done"
	PhaseFailed    = "failed"
)

// Config is a drill's environment.
type Config struct {
	// Target is the loopback address of this instance's HTTP server (http://127.0.0.1:PORT).
	Target func() string
	// Secret signs the synthetic shoppers' identity tokens (the instance's JWT secret).
	Secret   []byte
	Instance string // this instance's name, recorded with the drill
	// Workers of the load generator (default 256) and how long a request may wait (default 5s).
	Workers int
	Timeout time.Duration
	// DrainWait bounds the wait for the writer after the shoppers (default 60s).
	DrainWait time.Duration
	// Silent is how long a running drill's instance may go unheard before the drill is taken
	// for abandoned and its data removed (default 15s; the heartbeat is every second).
	Silent time.Duration
	// Cooldown is how long after a merchant's drill ended (done, failed or stopped) the same
	// merchant's next drill is refused (DRILL_NOT_NOW with Retry-After); default DefaultCooldown.
	Cooldown time.Duration
}

// Deps are what a drill uses.
type Deps struct {
	DB     DB
	Stock  Stock
	Loader Loader
	// Flush writes the purchase funnel's counts now, so none lands in Redis after the cleanup.
	Flush func(ctx context.Context) error
	Log   *slog.Logger
	Now   func() time.Time
}

// Drills starts, follows and cleans up fire drills.
type Drills struct {
	cfg  Config
	d    Deps
	cur  atomic.Pointer[running] // the drill this instance runs, if any
	wg   sync.WaitGroup
	stop context.Context
	quit context.CancelFunc
}

// running is the drill this instance runs.
type running struct {
	id       int64
	copyID   atomic.Int64
	secret   string
	phase    atomic.Value // string
	progress atomic.Pointer[progressFn]
}

type progressFn func() (sent, answered int)

func (r *running) counts() (int, int) {
	if f := r.progress.Load(); f != nil {
		return (*f)()
	}
	return 0, 0
}

// New returns the drill service.
func New(cfg Config, d Deps) *Drills {
	if cfg.Workers <= 0 {
		cfg.Workers = 256
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.DrainWait <= 0 {
		cfg.DrainWait = time.Minute
	}
	if cfg.Silent <= 0 {
		cfg.Silent = 15 * time.Second
	}
	if cfg.Cooldown <= 0 {
		cfg.Cooldown = DefaultCooldown
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Flush == nil {
		d.Flush = func(context.Context) error { return nil }
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Drills{cfg: cfg, d: d, stop: ctx, quit: cancel}
}

// Close stops a drill this instance runs (its cleanup gets a few seconds; what it cannot remove,
// the next Sweep does) and waits for it.
func (s *Drills) Close() {
	s.quit()
	s.wg.Wait()
}

// answerFor returns the captcha answer of the drill this instance runs, if saleID is its copy.
func (s *Drills) answerFor(saleID int64) (string, bool) {
	r := s.cur.Load()
	if r == nil || saleID == 0 || r.copyID.Load() != saleID {
		return "", false
	}
	return r.secret, true
}

// View is one drill as the API shows it.
type View struct {
	DrillID        int64
	SaleID         int64
	Phase          string
	Shoppers       int
	Seconds        int
	ExpectedCrowd  int64
	CrowdSource    string
	StartedAt      time.Time
	FinishedAt     *time.Time
	ElapsedSeconds float64
	Sent           int // shoppers sent so far
	Answered       int // shoppers answered so far
	Result         *Result
	Failure        string
}

// Status is a sale's drill page: its last drill (nil: none yet) and, when a drill could not
// start now, why (the code and message Start would answer).
type Status struct {
	Drill      *View
	Blocked    shop.Code
	BlockedWhy string
	// BlockedBy is the sale live or starting soon (DRILL_NOT_NOW), for a page to say in its
	// own language: id, name, start and end; another merchant's only by its start and end (ID 0).
	BlockedBy *shop.Sale
	// NextAt is when the merchant's next drill may start (DRILL_NOT_NOW: the cooldown after
	// their last one), on Postgres's clock.
	NextAt *time.Time
}

// ownSale returns the merchant's sale; another merchant's sale, or a drill copy, is NOT_FOUND.
func (s *Drills) ownSale(ctx context.Context, merchantID, saleID int64) (shop.Sale, error) {
	sale, err := s.d.DB.SaleByID(ctx, saleID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !sale.OwnedBy(merchantID)) {
		return shop.Sale{}, shop.Errorf(shop.CodeNotFound, "no sale %d", saleID)
	}
	if err != nil {
		return shop.Sale{}, shop.Unavailable(err)
	}
	return sale, nil
}

// Status returns a merchant's sale's last drill and whether one could start now.
func (s *Drills) Status(ctx context.Context, merchantID, saleID int64) (Status, error) {
	if _, err := s.ownSale(ctx, merchantID, saleID); err != nil {
		return Status{}, err
	}
	var st Status
	rec, err := s.d.DB.LatestDrill(ctx, saleID)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return Status{}, shop.Unavailable(err)
	default:
		v := s.view(rec)
		st.Drill = &v
	}
	if b, err := s.blockedBy(ctx, merchantID); err != nil {
		var e *shop.Error
		if !errors.As(err, &e) || e.Code == shop.CodeUnavailable || e.Code == shop.CodeInternal {
			return Status{}, err
		}
		st.Blocked, st.BlockedWhy, st.BlockedBy, st.NextAt = e.Code, e.Message, b.sale, b.nextAt
	}
	return st, nil
}

// blocked tells why the merchant's drill cannot start now: one is running (or its data is still
// there), a real sale is live or starts within NotNowWindow, or the merchant's last drill ended
// less than Config.Cooldown ago; nil: it can.
func (s *Drills) blocked(ctx context.Context, merchantID int64) error {
	_, err := s.blockedBy(ctx, merchantID)
	return err
}

// blockage is what a page needs besides the refusal's words: the sale live or starting soon, or
// when the cooldown ends (both nil for another reason).
type blockage struct {
	sale   *shop.Sale
	nextAt *time.Time
}

// blockedBy is blocked, with what blocks it.
func (s *Drills) blockedBy(ctx context.Context, merchantID int64) (blockage, error) {
	run, err := s.d.DB.RunningDrills(ctx)
	if err != nil {
		return blockage{}, shop.Unavailable(err)
	}
	if len(run) > 0 {
		return blockage{}, drillRunning(run[0])
	}
	now := s.d.Now()
	sales, err := s.d.DB.SalesLiveOrStarting(ctx, now, NotNowWindow, 1)
	if err != nil {
		return blockage{}, shop.Unavailable(err)
	}
	if len(sales) > 0 {
		sale := sales[0]
		if !sale.OwnedBy(merchantID) {
			// Another merchant's sale: a merchant learns nothing of it but when it holds the
			// machines (no name, no id).
			sale = shop.Sale{StartsAt: sale.StartsAt, EndsAt: sale.EndsAt}
		}
		return blockage{sale: &sale}, notNow(sale, now)
	}
	last, err := s.d.DB.LastDrillEnd(ctx, merchantID)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return blockage{}, shop.Unavailable(err)
	case last.Ago < s.cfg.Cooldown:
		next := last.At.Add(s.cfg.Cooldown)
		return blockage{nextAt: &next}, coolingDown(last, s.cfg.Cooldown)
	}
	return blockage{}, nil
}

// coolingDown is the refusal of a merchant's drill within cooldown of their last one's end: when
// the next may start, and Retry-After until then.
func coolingDown(last store.DrillEnd, cooldown time.Duration) error {
	const at = "15:04 UTC on 2 Jan"
	left := max(cooldown-last.Ago, time.Second)
	e := shop.Errorf(shop.CodeDrillNotNow, "your last fire drill ended at %s; a merchant runs one drill every %d minutes (a drill loads the machines every sale shares), so the next may start at %s, in %d min",
		last.At.UTC().Format(at), int(cooldown.Minutes()), last.At.Add(cooldown).UTC().Format(at), int((left+time.Minute-1)/time.Minute))
	e.RetryAfter = left
	return e
}

func drillRunning(r store.DrillRecord) error {
	return shop.Errorf(shop.CodeDrillRunning, "a fire drill is running on this deployment (started %s, %d shoppers over %d s); one drill runs at a time, try again when it has ended",
		r.StartedAt.UTC().Format(time.RFC3339), r.Shoppers, r.Seconds)
}

// notNow is the refusal naming the sale that is live or starts soon: the merchant's own by its
// name and id; another merchant's (ID 0) only by when the drill can run, after its end.
func notNow(sale shop.Sale, now time.Time) error {
	const at = "15:04 UTC on 2 Jan"
	if sale.ID == 0 {
		return shop.Errorf(shop.CodeDrillNotNow, "a sale on the machines every sale shares is live or starts within %d minutes: a fire drill cannot run until it has ended, at %s",
			int(NotNowWindow.Minutes()), sale.EndsAt.UTC().Format(at))
	}
	if !now.Before(sale.StartsAt) {
		return shop.Errorf(shop.CodeDrillNotNow, "%q (sale %d) is live until %s: a fire drill shares the machines with it, so it cannot run now",
			sale.Name, sale.ID, sale.EndsAt.UTC().Format(at))
	}
	mins := int(sale.StartsAt.Sub(now).Minutes()) + 1
	return shop.Errorf(shop.CodeDrillNotNow, "%q (sale %d) starts in %d min, at %s: no fire drill within %d minutes of a sale's start, as it shares the machines with the sale",
		sale.Name, sale.ID, mins, sale.StartsAt.UTC().Format(at), int(NotNowWindow.Minutes()))
}

// Start begins a drill of a merchant's sale and returns at once (the drill runs in the
// background; Status follows it). Refused: bad settings (INVALID_INPUT), another drill running
// or one's data still being removed (DRILL_RUNNING), a real sale live or starting soon, or the
// merchant's last drill ended less than Config.Cooldown ago (DRILL_NOT_NOW, with Retry-After).
func (s *Drills) Start(ctx context.Context, merchantID, saleID int64, req Settings) (View, error) {
	in, err := req.resolve()
	if err != nil {
		return View{}, err
	}
	sale, err := s.ownSale(ctx, merchantID, saleID)
	if err != nil {
		return View{}, err
	}
	if left, err := s.Sweep(ctx); err != nil {
		return View{}, shop.Unavailable(err)
	} else if left > 0 {
		if run, err := s.d.DB.RunningDrills(ctx); err == nil && len(run) > 0 {
			return View{}, drillRunning(run[0])
		}
		return View{}, shop.Errorf(shop.CodeDrillRunning, "the data of an interrupted fire drill is still being removed (its last orders are on their way to Postgres); try again in a minute")
	}
	if err := s.blocked(ctx, merchantID); err != nil {
		return View{}, err
	}
	reminders, err := s.d.Stock.Reminders(ctx, saleID)
	if err != nil {
		return View{}, shop.Unavailable(err)
	}
	crowd, source := expectedCrowd(in.crowd, reminders, sale)
	rec, err := s.d.DB.InsertDrill(ctx, store.DrillRecord{SaleID: saleID, MerchantID: merchantID, Phase: PhasePreparing,
		Shoppers: in.shoppers, Seconds: in.seconds, ExpectedCrowd: crowd, CrowdSource: source, Instance: s.cfg.Instance})
	if errors.Is(err, store.ErrConflict) {
		if run, rerr := s.d.DB.RunningDrills(ctx); rerr == nil && len(run) > 0 {
			return View{}, drillRunning(run[0])
		}
		return View{}, shop.Errorf(shop.CodeDrillRunning, "a fire drill is running on this deployment; try again when it has ended")
	}
	if err != nil {
		return View{}, shop.Unavailable(err)
	}
	r := &running{id: rec.ID, secret: mac.Nonce()}
	r.phase.Store(PhasePreparing)
	s.cur.Store(r)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.cur.CompareAndSwap(r, nil)
		s.run(r, sale, rec)
	}()
	return s.view(rec), nil
}

// view is a drill's record as the API shows it, with this instance's live counts when it runs it.
func (s *Drills) view(rec store.DrillRecord) View {
	v := View{DrillID: rec.ID, SaleID: rec.SaleID, Phase: rec.Phase, Shoppers: rec.Shoppers, Seconds: rec.Seconds,
		ExpectedCrowd: rec.ExpectedCrowd, CrowdSource: rec.CrowdSource, StartedAt: rec.StartedAt, FinishedAt: rec.FinishedAt,
		Sent: rec.Sent, Answered: rec.Answered, Failure: rec.Failure}
	if r := s.cur.Load(); r != nil && r.id == rec.ID && rec.FinishedAt == nil {
		v.Phase = r.phase.Load().(string)
		v.Sent, v.Answered = r.counts()
	}
	end := s.d.Now()
	if rec.FinishedAt != nil {
		end = *rec.FinishedAt
	}
	v.ElapsedSeconds = max(0, float64(end.Sub(rec.StartedAt).Milliseconds())/1000)
	if len(rec.Result) > 0 {
		var res Result
		if err := json.Unmarshal(rec.Result, &res); err == nil {
			v.Result = &res
		}
	}
	return v
}

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
