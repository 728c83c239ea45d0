package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/handlers"
	"github.com/flashsale/flashsale/services"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/web"
)

// app is one flashsale instance with every dependency built in plain sight.
type app struct {
	cfg     config
	log     *slog.Logger
	now     func() time.Time
	natsSrv *server.Server // nil with an external NATS
	natsReg *store.Registration
	natsURL string // how this instance reaches NATS, credential included
	rdb     *redis.Client
	db      *store.DB
	writeDB *store.DB // the writer's own pool: the public routes can never starve it
	queue   *store.Queue
	stock   *store.Stock
	pub     *store.GroupPublisher
	metrics *services.Metrics
	reg     *prometheus.Registry

	auth      *services.Auth
	sales     *services.Sales
	purchases *services.Purchases
	soldOut   *services.SoldOut
	loader    *services.Loader
	returns   *services.Returns
	reconcile *services.Reconciler
	writer    *services.Writer
	keeper    *services.Keeper
	funnel    *services.Funnel
	handler   http.Handler

	cancels    []context.CancelFunc
	wg         sync.WaitGroup
	closeOnce  sync.Once
	funnelOnce sync.Once // one funnel flusher however often start runs
}

// newApp connects to Redis, Postgres and NATS (starting the embedded one if no URL is given),
// applies the migrations and builds the services and the router. It starts no background work.
func newApp(ctx context.Context, cfg config, log *slog.Logger) (_ *app, err error) {
	a := &app{cfg: cfg, log: log, now: time.Now}
	if cfg.clockSkew != 0 {
		a.now = func() time.Time { return time.Now().Add(cfg.clockSkew) }
	}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	if a.rdb, err = store.OpenRedis(ctx, cfg.RedisURL, cfg.RedisPool); err != nil {
		return nil, err
	}
	site, instance := instanceName(cfg)
	natsURL := cfg.NATSURL
	if natsURL == "" {
		// One embedded NATS per deployment: a second one would be a second queue, and each
		// instance's jobs would judge "the queue has drained" by its own.
		a.natsReg, err = store.RegisterEmbeddedNATS(ctx, a.rdb, site, instance, embeddedNATSLease)
		if err != nil {
			if errors.Is(err, store.ErrEmbeddedNATSLive) {
				return nil, fmt.Errorf("%w: instances sharing a Redis must share one NATS: start a NATS server (or use the first instance's) and set FLASHSALE_NATS_URL on every instance", err)
			}
			return nil, err
		}
		token, err := store.EmbeddedNATSToken(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		a.natsSrv, err = store.StartNATS(cfg.DataDir, cfg.NATSPort, cfg.NATSSync == "always", token)
		if err != nil {
			return nil, err
		}
		natsURL = store.EmbeddedNATSURL(a.natsSrv.Addr().(*net.TCPAddr).Port, token)
		log.Info("embedded nats started", "url", a.natsSrv.ClientURL(), "credential", cfg.DataDir+"/nats.token", "store", cfg.DataDir, "sync", cfg.NATSSync)
	}
	a.natsURL = natsURL
	if a.queue, err = store.OpenQueue(ctx, natsURL, cfg.NATSCreds); err != nil {
		return nil, err
	}
	if a.db, err = store.OpenDB(ctx, cfg.DatabaseURL, cfg.DBMaxConns); err != nil {
		return nil, err
	}
	if err = a.db.Migrate(ctx, log); err != nil {
		return nil, err
	}
	if a.writeDB, err = store.OpenDB(ctx, cfg.DatabaseURL, max(cfg.WriterDBConns, cfg.WriterWorkers)); err != nil {
		return nil, err
	}

	a.reg = prometheus.NewRegistry()
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.metrics = services.NewMetrics(a.reg)
	a.stock = store.NewStock(a.rdb)
	a.pub = store.NewGroupPublisher(a.queue, cfg.PublishParallel, cfg.PublishBatch, cfg.PublishTimeout, a.metrics.ObservePublish)

	secret := []byte(cfg.JWTSecret)
	var captcha services.Captcha = services.ImageCaptcha{Store: store.NewChallenges(a.rdb, cfg.CaptchaTTL)}
	if cfg.Captcha == "test" {
		captcha = services.TestCaptcha{}
	}
	limiter := services.NewLimiter(a.rdb, cfg.RateLimits, log, a.now)
	a.auth = services.NewAuth(a.db, secret, cfg.JWTTTL, a.now).With(services.AuthOptions{
		Redis: a.rdb, Limiter: limiter, Captcha: captcha, Log: log})
	if a.soldOut, err = services.NewSoldOut(a.queue.Conn(), time.Second, log, a.now); err != nil {
		return nil, err
	}
	a.loader = services.NewLoader(a.db, a.stock, a.soldOut, a.metrics, log, cfg.TokenTTL)
	a.returns = services.NewReturns(a.db, a.stock, a.soldOut, a.metrics, log)
	a.reconcile = services.NewReconciler(a.db, a.stock, a.metrics, log, cfg.OrphanAge)
	a.sales = services.NewSales(a.db, a.stock, a.loader, a.reconcile, cfg.PayWindow, log, a.now)
	a.sales.SetWarmAhead(cfg.WarmAhead)
	a.purchases = services.NewPurchases(services.PurchaseConfig{
		TokenTTL: cfg.TokenTTL, SlowPublish: cfg.OrphanAge / 3, SigningSecret: secret,
	}, a.sales, a.stock, a.db, a.pub, captcha, a.soldOut,
		limiter, a.returns, a.metrics, log, a.now)
	a.queue.SetAckWait(cfg.WriterAckWait)
	a.writer = services.NewWriter(services.WriterConfig{Workers: cfg.WriterWorkers, Batch: cfg.WriterBatch, AckWait: cfg.WriterAckWait},
		a.queue, a.writeDB, a.stock, a.soldOut, a.metrics, log)
	// The writer's recent throughput, shared with the purchase service for a QUEUED order's
	// estimated wait (services/queue_wait.go).
	writerRate := services.NewThroughput(cfg.WriterWorkers, nil)
	a.writer.SetThroughput(writerRate)
	a.purchases.SetQueueWait(services.NewQueueWait(a.stock, writerRate))
	// The purchase funnel of the merchant's live view: counted in memory, flushed to Redis once a
	// second (start), so the purchase path makes no extra Redis call.
	a.funnel = services.NewFunnel(a.stock, log, a.now)
	a.purchases.SetFunnel(a.funnel)
	a.sales.SetQueue(a.queue)
	a.keeper = services.NewKeeper(services.KeeperConfig{Interval: cfg.KeeperInterval, OrphanAge: cfg.OrphanAge,
		ReconcileInterval: cfg.ReconcileInterval, Instance: instance, RebuildDelay: cfg.PublishTimeout + time.Second,
		WarmAhead: cfg.WarmAhead},
		a.db, a.stock, a.queue, a.loader, a.returns, a.reconcile, a.soldOut, a.metrics, log, a.now)

	api := &handlers.API{Accounts: a.auth, Catalog: a.sales, Shop: a.purchases, Orders: a.sales, Admin: a.sales, Live: a.sales, Log: log, Now: a.now,
		SecureCookie: cfg.Env == "production", SessionTTL: cfg.JWTTTL}
	pages := &handlers.Pages{Catalog: a.sales, Log: log, Now: a.now}
	a.handler = web.NewRouter(web.Config{Log: log, Verifier: a.auth, API: api, Pages: pages, Registry: a.reg,
		Ready: a.ready, TrustedProxies: cfg.TrustedProxies, Production: cfg.Env == "production"})
	return a, nil
}

// ready names the dependencies that do not answer (Redis, Postgres, NATS), each checked at once
// with its own second; the reasons go to the log, not to the caller.
func (a *app) ready() []string {
	check := func(name string, ping func(context.Context) error) <-chan string {
		c := make(chan string, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if err := ping(ctx); err != nil {
				a.log.Warn("readiness: "+name+" does not answer", "err", err)
				c <- name
				return
			}
			c <- ""
		}()
		return c
	}
	checks := []<-chan string{
		check("redis", func(ctx context.Context) error { return a.rdb.Ping(ctx).Err() }),
		check("postgres", func(ctx context.Context) error {
			sqlDB, err := a.db.Gorm().DB()
			if err != nil {
				return err
			}
			return sqlDB.PingContext(ctx)
		}),
		check("nats", func(context.Context) error {
			if !a.queue.Conn().IsConnected() {
				return errors.New("disconnected")
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

// instanceName names this process in Redis (registration, lease): its site (host and data
// folder, where an embedded NATS keeps its files), then pid, address and a random tag.
func instanceName(cfg config) (site, name string) {
	host, _ := os.Hostname()
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		dir = cfg.DataDir
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	site = fmt.Sprintf("%s:%s|", host, dir)
	return site, fmt.Sprintf("%spid %d addr %s #%x", site, os.Getpid(), cfg.Addr, b)
}

// start runs the writer and the keeper in the background until close, flushes the purchase
// funnel's counts once a second, and keeps the embedded NATS registration alive.
func (a *app) start(ctx context.Context, writer, keeper bool) {
	ctx, cancel := context.WithCancel(ctx)
	a.cancels = append(a.cancels, cancel)
	if a.natsReg != nil {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.natsReg.Keep(ctx, func(holder string) {
				a.log.Error("another instance took the embedded NATS registration; instances sharing a Redis must share one NATS (FLASHSALE_NATS_URL)", "holder", holder)
			})
		}()
	}
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
			if err := a.writer.Run(ctx); err != nil {
				a.log.Error("writer stopped", "err", err)
			}
		}()
	}
	if keeper {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.keeper.Run(ctx)
		}()
	}
}

// close stops the background work and closes every connection, in reverse order of creation.
func (a *app) close() { a.closeOnce.Do(a.closeAll) }

func (a *app) closeAll() {
	for _, cancel := range a.cancels {
		cancel()
	}
	a.wg.Wait()
	if a.pub != nil {
		a.pub.Close()
	}
	if a.db != nil {
		a.db.Close()
	}
	if a.writeDB != nil {
		a.writeDB.Close()
	}
	if a.rdb != nil {
		a.rdb.Close()
	}
	if a.queue != nil {
		a.queue.Close()
	}
	if a.natsSrv != nil {
		a.natsSrv.Shutdown()
		a.natsSrv.WaitForShutdown()
	}
}
