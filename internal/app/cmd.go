// Package app is the flashsale program: its commands (serve, migrate, merchant, token, reconcile,
// config), its settings and the wiring of one instance (App). The root package's main only calls
// Run; the integration tests in tests/ drive the same App.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/faults"
	"github.com/flashsale/flashsale/services/payments"
	"github.com/flashsale/flashsale/services/pipeline"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/web"
)

const usage = `usage: flashsale [command]

commands:
  serve                          serve HTTP (the default)
  migrate                        apply the SQL migrations not applied yet and exit
  migrate status                 list every migration: version, name, applied at or pending
  merchant add NAME [-password P] create a merchant account (a password is generated if omitted)
  token -user ID [-role R]       print a signed JWT for a user id (role shopper or merchant)
  reconcile [-wait D] [-money=false] [SALE_ID]
                                 wait for the order queue to drain, then check every invariant of a
                                 sale (or of every sale not ended over a day ago) across Redis and
                                 Postgres, and its money ledger against the payment provider (captured
                                 = paid orders + refunds + refunded conflicts); prints the report,
                                 exits 1 on a violation or a difference
  verify-draw [-url URL] [-commitment HEX] SALE_ID
                                 read a sale's decided fair-start draw from the shop's public API
                                 and recompute it from its revealed seed (checked against its
                                 commitment); exits 1 on a difference. Needs no secret.
  config                         print every FLASHSALE_* variable with its default
  healthcheck [-timeout D]       GET /readyz on FLASHSALE_ADDR; exit 0 when ready, 1 otherwise
                                 (the container image's HEALTHCHECK)

Settings come from FLASHSALE_* environment variables; see the README.`

// Run is the whole program: it returns instead of exiting so tests can drive it.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	if cmd == "help" || cmd == "-h" || cmd == "--help" {
		fmt.Fprintln(stdout, usage)
		return nil
	}
	if cmd == "config" {
		for _, v := range ConfigVars {
			fmt.Fprintf(stdout, "%s=%s\n", v.Name, v.Default)
		}
		return nil
	}
	if cmd == "healthcheck" {
		return healthcheck(ctx, args, getenv, stdout)
	}
	if cmd == "verify-draw" {
		return verifyDraw(ctx, args, getenv, stdout)
	}
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stdout)
	switch cmd {
	case "serve":
		gcTarget(getenv, log)
		return serve(ctx, cfg, log)
	case "migrate":
		return migrateCmd(ctx, cfg, log, args, stdout)
	case "merchant":
		return merchantCmd(ctx, cfg, log, args, stdout)
	case "token":
		return tokenCmd(cfg, args, stdout)
	case "reconcile":
		return reconcileCmd(ctx, cfg, log, args, stdout)
	}
	return fmt.Errorf("unknown command %q\n%s", cmd, usage)
}

func newLogger(cfg Config, w io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// DefaultGCPercent is the garbage collector's target the server runs with when GOGC is not set:
// the heap may grow to three times what is live before a collection (Go's default is twice).
// In a rush most of the server's allocations are the requests' own, short-lived; collecting
// half as often measured 7% less server CPU in the rush for about 40 MiB more at its peak
// (BENCHMARKS.md). GOGC (and GOMEMLIMIT) set in the environment win.
const DefaultGCPercent = 200

// gcTarget sets DefaultGCPercent unless GOGC is set.
func gcTarget(getenv func(string) string, log *slog.Logger) {
	if v := getenv("GOGC"); v != "" {
		log.Info("garbage collector: GOGC from the environment", "GOGC", v)
		return
	}
	debug.SetGCPercent(DefaultGCPercent)
}

func serve(ctx context.Context, cfg Config, log *slog.Logger) error {
	log.Info("starting flashsale", cfg.logValues()...)
	if !cfg.RateLimits {
		log.Warn("FLASHSALE_RATE_LIMITS=off: every rate limit is off (benchmarks and tests only)")
	}
	if cfg.Fault != nil {
		log.Warn("FLASHSALE_FAULT is set: this process will signal itself at a named step (fault tests only)", "step", cfg.Fault.Step, "action", cfg.Fault.Action, "at", cfg.Fault.At)
	}
	faults.Set(cfg.Fault)
	a, err := New(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer a.Close()
	if cfg.Demo {
		if err := seedDemo(ctx, a, cfg.DemoStartDelay, log); err != nil {
			return fmt.Errorf("demo seed: %w", err)
		}
	}
	a.Start(ctx, true, true)

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Addr, err)
	}
	srv := &http.Server{Handler: a.Handler, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10}
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("serving", "url", "http://"+ln.Addr().String())
	if cfg.MetricsAddr != "off" {
		mln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("listen %s (FLASHSALE_METRICS_ADDR): %w", cfg.MetricsAddr, err)
		}
		msrv := &http.Server{Handler: web.MetricsHandler(a.reg), ReadHeaderTimeout: 5 * time.Second}
		go func() { errc <- msrv.Serve(mln) }()
		defer msrv.Close()
		log.Info("metrics", "url", "http://"+mln.Addr().String()+"/metrics")
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("http shutdown", "err", err)
	}
	return nil
}

func merchantCmd(ctx context.Context, cfg Config, log *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) < 2 || args[0] != "add" {
		return errors.New("usage: flashsale merchant add NAME [-password P]")
	}
	name := args[1]
	fs := flag.NewFlagSet("merchant add", flag.ContinueOnError)
	password := fs.String("password", "", "password (generated if empty)")
	if err := fs.Parse(args[2:]); err != nil {
		return err
	}
	if *password == "" {
		*password = randomPassword()
	}
	db, err := openMigrated(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()
	u, err := auth.New(auth.Config{Secret: []byte(cfg.JWTSecret), TTL: cfg.JWTTTL}, auth.Deps{DB: db, Now: time.Now}).AddUser(ctx, name, *password, auth.RoleMerchant)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "merchant %q added with id %d, password %s\n", u.Username, u.ID, *password)
	return nil
}

// migrateCmd applies the migrations (no argument) or prints where the database stands (status).
func migrateCmd(ctx context.Context, cfg Config, log *slog.Logger, args []string, stdout io.Writer) error {
	switch {
	case len(args) == 0:
		db, err := openMigrated(ctx, cfg, log)
		if err != nil {
			return err
		}
		db.Close()
		fmt.Fprintln(stdout, "migrations applied")
		return nil
	case len(args) == 1 && args[0] == "status":
		db, err := store.OpenDB(ctx, cfg.DatabaseURL, 2)
		if err != nil {
			return err
		}
		defer db.Close()
		states, err := db.MigrationStatus(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "VERSION\tNAME\tAPPLIED AT")
		pending := 0
		for _, m := range states {
			at := "pending"
			if m.Applied {
				at = m.AppliedAt.Format("2006-01-02 15:04:05")
			} else {
				pending++
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\n", m.Version, m.Name, at)
		}
		tw.Flush()
		if pending > 0 {
			fmt.Fprintf(stdout, "%d of %d migrations pending: `flashsale migrate` (or any command that opens the database) applies them\n", pending, len(states))
		} else {
			fmt.Fprintf(stdout, "all %d migrations applied\n", len(states))
		}
		return nil
	}
	return errors.New("usage: flashsale migrate [status]")
}

func tokenCmd(cfg Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	user := fs.String("user", "", "user id")
	role := fs.String("role", auth.RoleShopper, "shopper or merchant")
	if err := fs.Parse(args); err != nil {
		return err
	}
	id, err := strconv.ParseInt(*user, 10, 64)
	if err != nil || id <= 0 || (*role != auth.RoleShopper && *role != auth.RoleMerchant) {
		return errors.New("usage: flashsale token -user ID [-role shopper|merchant]")
	}
	tok, err := auth.New(auth.Config{Secret: []byte(cfg.JWTSecret), TTL: cfg.JWTTTL}, auth.Deps{Now: time.Now}).Issue(auth.Identity{UserID: id, Role: *role})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	return nil
}

// openMigrated opens Postgres and applies the migrations: all the commands that only touch the
// database need (they start no NATS, so they run beside a serving instance).
func openMigrated(ctx context.Context, cfg Config, log *slog.Logger) (*store.DB, error) {
	db, err := store.OpenDB(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		return nil, err
	}
	if err := db.Migrate(ctx, log); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// ErrViolations makes the reconcile command exit 1 after printing its report.
var ErrViolations = errors.New("reconcile: invariants violated (see the report above)")

// reconcileCmd prints the reconciliation report. It connects to Redis, Postgres and the NATS the
// instances use (FLASHSALE_NATS_URL, or the embedded server of a running instance on
// 127.0.0.1:FLASHSALE_NATS_PORT) without starting anything.
func reconcileCmd(ctx context.Context, cfg Config, log *slog.Logger, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	wait := fs.Duration("wait", 30*time.Second, "how long to wait for the order queue to drain")
	checkMoney := fs.Bool("money", true, "also check the money ledger against the payment provider (one lookup per checkout)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	saleIDs, err := reconcileArgs(fs)
	if err != nil {
		return err
	}
	rdb, err := store.OpenRedis(ctx, cfg.RedisURL, 4)
	if err != nil {
		return err
	}
	defer rdb.Close()
	db, err := store.OpenDB(ctx, cfg.DatabaseURL, 4)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := waitForQueue(ctx, cfg, *wait, stdout); err != nil {
		return err
	}
	if saleIDs == nil {
		if saleIDs, err = recentSales(ctx, db); err != nil {
			return err
		}
		if len(saleIDs) == 0 {
			fmt.Fprintln(stdout, "no sale ended less than a day ago: nothing to reconcile")
			return nil
		}
	}
	stock := store.NewStock(rdb, db.StockShardsCached)
	rec := pipeline.NewReconciler(db, stock, nil, log, cfg.OrphanAge).Thorough()
	provider, _, err := newProvider(cfg)
	if err != nil {
		return err
	}
	money := payments.New(paymentsConfig(cfg), payments.Deps{Provider: provider, Log: log})
	ok := true
	for _, id := range saleIDs {
		saleOK, err := reconcileSale(ctx, rec, money, *checkMoney, db, id, stdout)
		if err != nil {
			return err
		}
		ok = ok && saleOK
	}
	if !ok {
		return ErrViolations
	}
	fmt.Fprintln(stdout, "reconcile: every invariant holds")
	return nil
}

// reconcileSale prints one sale's invariant report and, with checkMoney, its money ledger
// (what the provider captured for the sale's orders = the paid orders + the refunded late
// payments + the conflicts); it reports whether both hold.
func reconcileSale(ctx context.Context, rec *pipeline.Reconciler, money *payments.Payments, checkMoney bool, db *store.DB, saleID int64, stdout io.Writer) (bool, error) {
	rep, err := rec.Report(ctx, saleID)
	if err != nil {
		return false, err
	}
	rep.Write(stdout)
	if !checkMoney {
		return rep.OK(), nil
	}
	l, err := money.Ledger(ctx, db, saleID)
	if err != nil {
		return false, err
	}
	l.Write(stdout)
	return rep.OK() && l.OK(), nil
}

// reconcileArgs reads the one optional SALE_ID (nil: every recent sale).
func reconcileArgs(fs *flag.FlagSet) ([]int64, error) {
	if fs.NArg() > 1 {
		return nil, errors.New("usage: flashsale reconcile [-wait D] [-money=false] [SALE_ID]")
	}
	if fs.NArg() == 0 {
		return nil, nil
	}
	id, err := strconv.ParseInt(fs.Arg(0), 10, 64)
	if err != nil || id <= 0 {
		return nil, fmt.Errorf("reconcile: SALE_ID %q is not a sale id", fs.Arg(0))
	}
	return []int64{id}, nil
}

// waitForQueue waits up to wait for the order queue the instances use to drain, and says how it
// found it.
func waitForQueue(ctx context.Context, cfg Config, wait time.Duration, stdout io.Writer) error {
	natsURL := cfg.NATSURL
	if natsURL == "" {
		token, err := store.ReadEmbeddedNATSToken(cfg.DataDir)
		if err != nil {
			return fmt.Errorf("reconcile needs the order queue: %w (or set FLASHSALE_NATS_URL)", err)
		}
		natsURL = store.EmbeddedNATSURL(cfg.NATSPort, token)
	}
	q, err := store.OpenQueue(ctx, natsURL, cfg.NATSCreds)
	if err != nil {
		return fmt.Errorf("reconcile needs the order queue to know it has drained: %w", err)
	}
	defer q.Close()
	deadline := time.Now().Add(wait)
	for {
		backlog, err := q.Backlog(ctx)
		if err != nil {
			return err
		}
		if backlog == 0 {
			fmt.Fprintln(stdout, "order queue: drained")
			return nil
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(stdout, "order queue: %d messages not written after %s: the counts below may move\n", backlog, wait)
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// recentSales lists the sales not ended over a day ago.
func recentSales(ctx context.Context, db *store.DB) ([]int64, error) {
	var ids []int64
	err := db.EachSaleEndingAfter(ctx, time.Now().Add(-24*time.Hour), func(page []shop.Sale) error {
		for _, s := range page {
			ids = append(ids, s.ID)
		}
		return nil
	})
	return ids, err
}
