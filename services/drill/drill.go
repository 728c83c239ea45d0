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
	"log/slog"
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
