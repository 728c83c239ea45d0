package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
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
	rdb     *redis.Client
	db      *store.DB
	queue   *store.Queue
	stock   *store.Stock
	pub     *store.GroupPublisher
	metrics *services.Metrics
	reg     *prometheus.Registry

	auth      *services.Auth
	sales     *services.Sales
	purchases *services.Purchases
	soldOut   *services.SoldOut
	writer    *services.Writer
	keeper    *services.Keeper
	handler   http.Handler

	cancels []context.CancelFunc
	wg      sync.WaitGroup
}

// newApp connects to Redis, Postgres and NATS (starting the embedded one if no URL is given),
// applies the migrations and builds the services and the router. It starts no background work.
func newApp(ctx context.Context, cfg config, log *slog.Logger) (_ *app, err error) {
	a := &app{cfg: cfg, log: log, now: time.Now}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	natsURL := cfg.NATSURL
	if natsURL == "" {
		a.natsSrv, err = store.StartNATS(cfg.DataDir, cfg.NATSPort, cfg.NATSSync == "always")
		if err != nil {
			return nil, err
		}
		natsURL = a.natsSrv.ClientURL()
		log.Info("embedded nats started", "url", natsURL, "store", cfg.DataDir, "sync", cfg.NATSSync)
	}
	if a.queue, err = store.OpenQueue(ctx, natsURL); err != nil {
		return nil, err
	}
	if a.rdb, err = store.OpenRedis(ctx, cfg.RedisURL, cfg.RedisPool); err != nil {
		return nil, err
	}
	if a.db, err = store.OpenDB(ctx, cfg.DatabaseURL, cfg.DBMaxConns); err != nil {
		return nil, err
	}
	if err = a.db.Migrate(ctx, log); err != nil {
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
	a.auth = services.NewAuth(a.db, secret, cfg.JWTTTL, a.now)
	a.sales = services.NewSales(a.db, a.stock, log, a.now)
	if a.soldOut, err = services.NewSoldOut(a.queue.Conn(), time.Second, log, a.now); err != nil {
		return nil, err
	}
	a.purchases = services.NewPurchases(services.PurchaseConfig{
		TokenTTL: cfg.TokenTTL, PayWindow: cfg.PayWindow, SlowPublish: cfg.OrphanAge / 3, SigningSecret: secret,
	}, a.sales, a.stock, a.db, a.pub, captcha, a.soldOut,
		services.NewLimiter(a.rdb, cfg.RateLimits, log, a.now), a.metrics, log, a.now)
	a.writer = services.NewWriter(services.WriterConfig{Workers: cfg.WriterWorkers, Batch: cfg.WriterBatch, PayWindow: cfg.PayWindow},
		a.queue, a.db, a.stock, a.soldOut, a.metrics, log)
	a.keeper = services.NewKeeper(services.KeeperConfig{Interval: cfg.KeeperInterval, OrphanAge: cfg.OrphanAge},
		a.db, a.stock, a.queue, a.soldOut, a.metrics, log, a.now)

	api := &handlers.API{Accounts: a.auth, Catalog: a.sales, Shop: a.purchases, Log: log, Now: a.now,
		SecureCookie: cfg.Env == "production", SessionTTL: cfg.JWTTTL}
	pages := &handlers.Pages{Catalog: a.sales, Log: log, Now: a.now}
	a.handler = web.NewRouter(web.Config{Log: log, Verifier: a.auth, API: api, Pages: pages, Registry: a.reg,
		Ready: a.ready, TrustedProxies: cfg.TrustedProxies})
	return a, nil
}

// ready reports whether Redis, Postgres and NATS answer.
func (a *app) ready() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var errs []error
	if err := a.rdb.Ping(ctx).Err(); err != nil {
		errs = append(errs, fmt.Errorf("redis: %w", err))
	}
	if sqlDB, err := a.db.Gorm().DB(); err != nil || sqlDB.PingContext(ctx) != nil {
		errs = append(errs, errors.New("postgres unreachable"))
	}
	if !a.queue.Conn().IsConnected() {
		errs = append(errs, errors.New("nats disconnected"))
	}
	return errors.Join(errs...)
}

// start runs the writer and the keeper in the background until close.
func (a *app) start(ctx context.Context, writer, keeper bool) {
	ctx, cancel := context.WithCancel(ctx)
	a.cancels = append(a.cancels, cancel)
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
func (a *app) close() {
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
