package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/handlers"
	"github.com/flashsale/flashsale/services/auth"
	"github.com/flashsale/flashsale/services/captcha"
	"github.com/flashsale/flashsale/services/catalog"
	"github.com/flashsale/flashsale/services/draw"
	"github.com/flashsale/flashsale/services/drill"
	"github.com/flashsale/flashsale/services/limits"
	"github.com/flashsale/flashsale/services/metrics"
	"github.com/flashsale/flashsale/services/payments"
	"github.com/flashsale/flashsale/services/payments/stripepay"
	"github.com/flashsale/flashsale/services/pipeline"
	"github.com/flashsale/flashsale/services/purchase"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/web"
)

// app is one flashsale instance with every dependency built in plain sight.
type App struct {
	cfg        Config
	Log        *slog.Logger
	now        func() time.Time
	NATSServer *server.Server // nil with an external NATS
	natsReg    *store.Registration
	presence   *store.QueuePresence // this instance on its queue, beside the others (queueguard.go)
	guard      queueGuard
	NATSURL    string // how this instance reaches NATS, credential included
	Redis      redis.UniversalClient
	DB         *store.DB
	writeDB    *store.DB // the writer's own pool: the public routes can never starve it
	Queue      *store.Queue
	Stock      *store.Stock
	pub        *store.GroupPublisher
	Metrics    *metrics.Metrics
	reg        *prometheus.Registry

	Auth      *auth.Auth
	sales     *catalog.Sales
	purchases *purchase.Purchases
	SoldOut   *purchase.SoldOut
	Loader    *pipeline.Loader
	returns   *pipeline.Returns
	reconcile *pipeline.Reconciler
	Writer    *pipeline.Writer
	keeper    *pipeline.Keeper
	draws     *draw.Closer
	Payments  *payments.Payments
	funnel    *catalog.Funnel
	drills    *drill.Drills
	target    atomic.Value // string: the loopback address the fire drill sends its shoppers to
	Handler   http.Handler

	cancels    []context.CancelFunc
	wg         sync.WaitGroup
	closeOnce  sync.Once
	funnelOnce sync.Once // one funnel flusher however often start runs
}

// New connects to Redis, Postgres and NATS (starting the embedded one if no URL is given),
// applies the migrations and builds the services and the router. It starts no background work.
func New(ctx context.Context, cfg Config, log *slog.Logger) (_ *App, err error) {
	a := &App{cfg: cfg, Log: log, now: time.Now}
	if cfg.ClockSkew != 0 {
		a.now = func() time.Time { return time.Now().Add(cfg.ClockSkew) }
	}
	defer func() {
		if err != nil {
			a.Close()
		}
	}()
	if a.Redis, err = store.OpenRedis(ctx, cfg.RedisURL, cfg.RedisPool); err != nil {
		return nil, err
	}
	site, instance, err := instanceName(cfg)
	if err != nil {
		return nil, err
	}
	if err = a.openQueue(ctx, site, instance); err != nil {
		return nil, err
	}
	if a.DB, err = store.OpenDB(ctx, cfg.DatabaseURL, cfg.DBMaxConns); err != nil {
		return nil, err
	}
	if err = a.DB.Migrate(ctx, log); err != nil {
		return nil, err
	}
	if a.writeDB, err = store.OpenDB(ctx, cfg.DatabaseURL, max(cfg.WriterDBConns, cfg.WriterWorkers)); err != nil {
		return nil, err
	}

	if err := a.build(instance); err != nil {
		return nil, err
	}
	return a, nil
}

// openQueue connects to NATS (starting the embedded server when no URL is given, under the one
// registration a deployment may hold) and joins this instance to the deployment's one queue.
func (a *App) openQueue(ctx context.Context, site, instance string) (err error) {
	cfg, log := a.cfg, a.Log
	natsURL := cfg.NATSURL
	if natsURL == "" {
		// One embedded NATS per deployment: a second one would be a second queue, and each
		// instance's jobs would judge "the queue has drained" by its own.
		a.natsReg, err = store.RegisterEmbeddedNATS(ctx, a.Redis, site, instance, embeddedNATSLease)
		if err != nil {
			if errors.Is(err, store.ErrEmbeddedNATSLive) {
				return fmt.Errorf("%w: instances sharing a Redis must share one NATS: start a NATS server (or use the first instance's) and set FLASHSALE_NATS_URL on every instance", err)
			}
			return err
		}
		token, err := store.EmbeddedNATSToken(cfg.DataDir)
		if err != nil {
			return err
		}
		a.NATSServer, err = store.StartNATS(cfg.DataDir, cfg.NATSPort, cfg.NATSSync == "always", token)
		if err != nil {
			return err
		}
		natsURL = store.EmbeddedNATSURL(a.NATSServer.Addr().(*net.TCPAddr).Port, token)
		log.Info("embedded nats started", "url", a.NATSServer.ClientURL(), "credential", cfg.DataDir+"/nats.token", "store", cfg.DataDir, "sync", cfg.NATSSync)
	}
	a.NATSURL = natsURL
	if cfg.NATSReplicas > 1 && cfg.PublishTimeout < 10*time.Second {
		log.Warn("a replicated stream elects a new leader 4 to 9 s after a NATS server dies; purchases waiting longer than FLASHSALE_PUBLISH_TIMEOUT meanwhile answer 503: consider 10s or more",
			"publish_timeout", cfg.PublishTimeout, "nats_replicas", cfg.NATSReplicas)
	}
	if a.Queue, err = store.OpenQueue(ctx, natsURL, cfg.NATSCreds, store.WithReplicas(cfg.NATSReplicas), store.WithLog(log),
		store.WithAckWait(cfg.WriterAckWait)); err != nil {
		return err
	}
	// Every instance on this Redis must hand its orders to one queue: one on an external NATS
	// beside a live one with an embedded NATS (or the reverse, or two external NATS) is refused.
	queueID, err := a.Queue.Identity(ctx)
	if err != nil {
		return err
	}
	if a.presence, err = store.JoinQueue(ctx, a.Redis, queueID, instance, embeddedNATSLease); err != nil {
		if errors.Is(err, store.ErrAnotherQueue) {
			return fmt.Errorf("%w: instances sharing a Redis must share one NATS: set FLASHSALE_NATS_URL on every instance to the same NATS (or to the first instance's embedded one)", err)
		}
		return err
	}
	a.guard = queueGuard{presence: a.presence, reg: a.natsReg}
	claimsCtx, stopClaims := context.WithCancel(context.Background())
	a.cancels = append(a.cancels, stopClaims)
	a.keepQueueClaims(claimsCtx)
	return nil
}

// build makes the services and the router of a connected instance, each complete when made.
func (a *App) build(instance string) error {
	cfg, log := a.cfg, a.Log
	a.reg = prometheus.NewRegistry()
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.Metrics = metrics.New(a.reg)
	a.Stock = store.NewStock(a.Redis, a.DB.StockShardsCached)
	a.pub = store.NewGroupPublisher(a.Queue, cfg.PublishParallel, cfg.PublishBatch, cfg.PublishTimeout, a.Metrics.ObservePublish)
	notices := a.Queue.Notices()
	var err error
	if a.SoldOut, err = purchase.NewSoldOut(notices, time.Second, log, a.now); err != nil {
		return err
	}
	a.buildPipeline(instance)
	provider, webhooks, err := newProvider(cfg) // before the catalog, which asks its minimum charge
	if err != nil {
		return err
	}
	if a.sales, err = catalog.NewSales(catalog.Config{PayWindow: cfg.PayWindow, WarmAhead: cfg.WarmAhead, StockShards: cfg.StockShards,
		CursorSecret: []byte(cfg.JWTSecret)},
		catalog.Deps{DB: a.DB, Stock: a.Stock, Loader: a.Loader, Reconcile: a.reconcile, Queue: guardedQueue{Queue: a.Queue, guard: a.guard},
			Notices: notices, Prices: provider, Log: log, Now: a.now}); err != nil {
		return err
	}
	// The purchase funnel of the merchant's live view: counted in memory, flushed to Redis once a
	// second (start), so the purchase path makes no extra Redis call.
	a.funnel = catalog.NewFunnel(a.Stock, log, a.now)
	limiter := limits.NewLimiter(store.NewRateLimiter(a.Redis), limits.Config{On: cfg.RateLimits, Log: log, Now: a.now, Known: store.NewKnownLogins(a.Redis)})
	a.buildDrills(instance)
	challenges := drill.Captcha{Inner: a.captcha(), Drills: a.drills, IsCopy: func(ctx context.Context, saleID int64) bool {
		s, err := a.sales.CachedRow(ctx, saleID)
		return err == nil && s.DrillOf != 0
	}}
	a.Auth = auth.New(auth.Config{Secret: []byte(cfg.JWTSecret), TTL: cfg.JWTTTL}, auth.Deps{DB: a.DB, Now: a.now,
		Revoked: store.NewRevocations(a.Redis), Limiter: limiter, Captcha: challenges, Log: log})
	a.purchases = purchase.NewPurchases(purchase.PurchaseConfig{
		TokenTTL: cfg.TokenTTL, SlowPublish: cfg.OrphanAge / 3, SigningSecret: []byte(cfg.JWTSecret),
	}, purchase.Deps{Catalog: a.sales, Stock: a.Stock, DB: a.DB, Publisher: guardedPublisher{Publisher: a.pub, guard: a.guard},
		Captcha: challenges, SoldOut: a.SoldOut, Limiter: limiter, Returns: a.returns, Funnel: a.funnel,
		WriterRate: a.Writer.Throughput(), Draws: a.draws, Metrics: a.Metrics, Log: log, Now: a.now})
	a.Payments = payments.New(paymentsConfig(cfg), payments.Deps{Provider: provider, Webhooks: webhooks, DB: a.DB,
		Queued: a.purchases, Returns: a.returns, Metrics: a.Metrics, Log: a.Log, Now: a.now})
	a.Handler = a.router(limiter)
	return nil
}

func paymentsConfig(cfg Config) payments.Config {
	return payments.Config{PublicURL: cfg.PublicURL, Interval: cfg.KeeperInterval, CallTimeout: cfg.PaymentTimeout,
		ReconcileEvery: cfg.PaymentReconcile}
}

// newProvider is the configured payment provider and, for a real one, its webhooks' parser.
func newProvider(cfg Config) (payments.Provider, payments.EventParser, error) {
	if cfg.Payments == "stripe" {
		p, err := stripepay.New(stripepay.Config{SecretKey: cfg.StripeSecretKey, WebhookSecret: cfg.StripeWebhookSecret, APIBase: cfg.StripeAPIURL})
		if err != nil {
			return nil, nil, err
		}
		return p, p, nil
	}
	return payments.NewSimulated([]byte(cfg.JWTSecret)), nil, nil
}

// buildDrills makes the merchant's fire drill: its shoppers go to this instance's own HTTP server
// over loopback (DrillTarget), with identity tokens signed by the instance's secret.
func (a *App) buildDrills(instance string) {
	cfg := a.cfg
	a.target.Store(loopbackURL(cfg.Addr))
	a.drills = drill.New(drill.Config{Target: a.DrillTarget, Secret: []byte(cfg.JWTSecret), Instance: instance},
		drill.Deps{DB: a.DB, Stock: a.Stock, Loader: a.Loader, Flush: a.funnel.Flush, Log: a.Log, Now: a.now})
}

// DrillTarget is the address the fire drill sends its shoppers to: this instance's listen
// address on loopback (FLASHSALE_ADDR), unless SetDrillTarget changed it.
func (a *App) DrillTarget() string { return a.target.Load().(string) }

// SetDrillTarget points the fire drill at another loopback address of this instance (the tests'
// httptest server).
func (a *App) SetDrillTarget(url string) { a.target.Store(url) }

// loopbackURL is the loopback URL of a listen address: a wildcard or loopback host becomes
// 127.0.0.1 (or [::1]); another host is kept (the drill then refuses it: loopback only).
func loopbackURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	switch host {
	case "", "0.0.0.0", "localhost":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// captcha is the purchase path's and the registration's captcha: images kept in Redis, or the
// fixed test challenge (FLASHSALE_CAPTCHA=test).
func (a *App) captcha() captcha.Captcha {
	if a.cfg.Captcha == "test" {
		return captcha.Test{}
	}
	return captcha.Image{Store: store.NewChallenges(a.Redis, a.cfg.CaptchaTTL)}
}

// buildPipeline makes the loader, the unit returns, the reconciliation, the writer and the keeper.
func (a *App) buildPipeline(instance string) {
	cfg, log := a.cfg, a.Log
	a.Loader = pipeline.NewLoader(pipeline.LoaderConfig{TokenTTL: cfg.TokenTTL, RebuildDelay: rebuildDelay(cfg), BeforeRedisLoad: cfg.BeforeRedisLoad},
		a.DB, a.Stock, a.SoldOut, a.Metrics, log)
	a.returns = pipeline.NewReturns(a.DB, a.Stock, a.SoldOut, a.Metrics, log)
	a.reconcile = pipeline.NewReconciler(a.DB, a.Stock, a.Metrics, log, cfg.OrphanAge)
	a.Writer = pipeline.NewWriter(pipeline.WriterConfig{Workers: cfg.WriterWorkers, Batch: cfg.WriterBatch, AckWait: cfg.WriterAckWait, Linger: cfg.WriterLinger},
		a.Queue, a.writeDB, a.Stock, a.SoldOut, a.Metrics, log)
	a.draws = draw.New(draw.Config{PublishTimeout: cfg.PublishTimeout}, a.DB, a.Stock, guardedQueue{Queue: a.Queue, guard: a.guard}, a.Metrics, log, a.now)
	a.keeper = pipeline.NewKeeper(pipeline.KeeperConfig{Interval: cfg.KeeperInterval, OrphanAge: cfg.OrphanAge,
		ReconcileInterval: cfg.ReconcileInterval, Instance: instance, RebuildDelay: rebuildDelay(cfg), WarmAhead: cfg.WarmAhead},
		pipeline.KeeperDeps{DB: a.DB, Stock: a.Stock, Queue: guardedQueue{Queue: a.Queue, guard: a.guard}, Loader: a.Loader,
			Returns: a.returns, Reconcile: a.reconcile, Draws: a.draws, SoldOut: a.SoldOut, Metrics: a.Metrics, Log: log, Now: a.now})
}

// router is the HTTP side: the API, the pages, metrics and the health checks.
func (a *App) router(reads *limits.Limiter) http.Handler {
	cfg, log := a.cfg, a.Log
	api := &handlers.API{Accounts: a.Auth, Catalog: a.sales, Purchases: a.purchases, Orders: a.sales, Admin: a.sales, Live: a.sales, Reminders: a.sales, Draws: a.sales, Payments: a.Payments, Drills: a.drills, Log: log, Now: a.now,
		SecureCookie: cfg.Env == "production", SessionTTL: cfg.JWTTTL, Reads: reads}
	pages := &handlers.Pages{Catalog: a.sales, Past: a.sales, Payments: a.Payments, Log: log, Now: a.now, SecureCookie: cfg.Env == "production", Reads: reads, PublicURL: cfg.PublicURL}
	return web.NewRouter(web.Config{Log: log, Verifier: a.Auth, API: api, Pages: pages, Registry: a.reg,
		Ready: a.ready, TrustedProxies: cfg.TrustedProxies, Production: cfg.Env == "production"})
}

// ready names the dependencies that do not answer (Redis, Postgres, NATS), each checked at once
// with its own second; the reasons go to the log, not to the caller.
func (a *App) ready() []string {
	check := func(name string, ping func(context.Context) error) <-chan string {
		c := make(chan string, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if err := ping(ctx); err != nil {
				a.Log.Warn("readiness: "+name+" does not answer", "err", err)
				c <- name
				return
			}
			c <- ""
		}()
		return c
	}
	checks := []<-chan string{
		check("redis", func(ctx context.Context) error { return a.Redis.Ping(ctx).Err() }),
		check("postgres", func(ctx context.Context) error {
			return a.DB.Ping(ctx)
		}),
		check("nats", func(context.Context) error { return a.Queue.Connected() }),
		check("queue registration", func(context.Context) error {
			if !a.guard.held() {
				return errQueueNotHeld
			}
			return nil
		}),
	}
	down := []string{}
	for _, c := range checks {
		if name := <-c; name != "" {
			down = append(down, name)
		}
	}
	return down
}

// embeddedNATSLease is how long the registration of an embedded NATS outlives its instance.
const embeddedNATSLease = 6 * time.Second

// instanceName names this process in Redis (registration, lease, queue presence): its site,
// then pid, address and a random tag. The site names the data folder where an embedded NATS keeps
// its files: a random id kept in the folder (site.id, made at the first start), with host and
// path for people. Host and path alone are not unique (two machines, or containers, with the same
// host name and data path would each take the other's registration over as "its previous run").
func instanceName(cfg Config) (site, name string, err error) {
	host, _ := os.Hostname()
	dir, aerr := filepath.Abs(cfg.DataDir)
	if aerr != nil {
		dir = cfg.DataDir
	}
	id, err := siteID(dir)
	if err != nil {
		return "", "", err
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	site = fmt.Sprintf("site %s %s:%s|", id, host, dir)
	return site, fmt.Sprintf("%spid %d addr %s #%x", site, os.Getpid(), cfg.Addr, b), nil
}

// siteID returns the random id of the data folder dir, made and kept there at the first call.
func siteID(dir string) (string, error) {
	path := filepath.Join(dir, "site.id")
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); len(id) == 32 {
			return id, nil
		}
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(b[:])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("data folder %s: %w", dir, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("data folder %s: %w", dir, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("data folder %s: %w", dir, err)
	}
	return id, nil
}

// Start runs the writer and the keeper in the background until close and flushes the purchase
// funnel's counts once a second. (The queue presence and the embedded NATS registration are kept
// alive from New on.)
func (a *App) Start(ctx context.Context, writer, keeper bool) {
	ctx, cancel := context.WithCancel(ctx)
	a.cancels = append(a.cancels, cancel)
	a.funnelOnce.Do(func() {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.funnel.Run(ctx)
		}()
	})
	if writer {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			if err := a.Writer.Run(ctx); err != nil {
				a.Log.Error("writer stopped", "err", err)
			}
		}()
	}
	if keeper {
		a.wg.Add(3)
		go func() {
			defer a.wg.Done()
			a.sweepDrills(ctx) // a drill an instance stopped in the middle of leaves nothing behind
		}()
		go func() {
			defer a.wg.Done()
			a.keeper.Run(ctx)
		}()
		go func() {
			defer a.wg.Done()
			a.Payments.Run(ctx) // checkouts of ended orders expired, late payments refunded
		}()
	}
}

// sweepDrills removes what fire drills interrupted by a stopped instance (or whose own cleanup
// failed) left behind: at start, then every minute, and every 5 s while a copy still has orders
// on their way to Postgres. (An instance restarted within the heartbeat's silence finds the
// drill it was running still "running" at start; a later pass ends it.)
func (a *App) sweepDrills(ctx context.Context) {
	for {
		wait := time.Minute
		left, err := a.drills.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			a.Log.Warn("fire drill sweep", "err", err)
		}
		if err != nil || left > 0 {
			wait = 5 * time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// KeeperPass runs one pass of the keeper (warm-up, payment expiry, unit returns, orphans,
// reconciliation) now: for tests of an instance started without its keeper.
func (a *App) KeeperPass(ctx context.Context) error { return a.keeper.Once(ctx) }

// close stops the background work and closes every connection, in reverse order of creation.
func (a *App) Close() { a.closeOnce.Do(a.closeAll) }

func (a *App) closeAll() {
	if a.drills != nil {
		a.drills.Close() // a drill in progress stops and removes its copy while the connections are open
	}
	for _, cancel := range a.cancels {
		cancel()
	}
	a.wg.Wait()
	if a.natsReg != nil && a.Redis != nil {
		// Dropped by its keeper already, unless the instance never got that far (a refused start).
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		a.natsReg.Drop(ctx)
		cancel()
	}
	if a.pub != nil {
		a.pub.Close()
	}
	if a.DB != nil {
		a.DB.Close()
	}
	if a.writeDB != nil {
		a.writeDB.Close()
	}
	if a.Redis != nil {
		a.Redis.Close()
	}
	if a.Queue != nil {
		a.Queue.Close()
	}
	if a.NATSServer != nil {
		a.NATSServer.Shutdown()
		a.NATSServer.WaitForShutdown()
	}
}

// rebuildDelay is how long a sale Redis lost waits before its rebuild, however it is asked for
// (the keeper, the merchant's Warm): the publishes on their way at the loss land meanwhile.
func rebuildDelay(cfg Config) time.Duration { return cfg.PublishTimeout + time.Second }
