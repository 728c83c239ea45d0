package app

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale/services/faults"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/web"
)

// DevJWTSecret is the development default of FLASHSALE_JWT_SECRET (stated in the README, so
// anyone can sign tokens with it): the server refuses it in production and on any address but
// loopback.
const DevJWTSecret = "flashsale-dev-secret-do-not-use-in-production"

// MinJWTSecret is the shortest FLASHSALE_JWT_SECRET taken, in bytes: RFC 7518 (3.2) wants an
// HS256 key at least as long as the hash's output.
const MinJWTSecret = 32

// config is every setting of the binary, read from FLASHSALE_* variables with defaults.
type Config struct {
	Env               string
	Addr              string
	MetricsAddr       string
	DatabaseURL       string
	RedisURL          string
	RedisPool         int
	DBMaxConns        int
	WriterDBConns     int
	NATSURL           string
	NATSCreds         string
	NATSPort          int
	NATSSync          string
	NATSReplicas      int
	DataDir           string
	JWTSecret         string
	JWTTTL            time.Duration
	Captcha           string
	CaptchaTTL        time.Duration
	RateLimits        bool
	PayWindow         time.Duration
	TokenTTL          time.Duration
	Demo              bool
	DemoStartDelay    time.Duration
	LogLevel          string
	LogFormat         string
	WriterBatch       int
	WriterWorkers     int
	PublishParallel   int
	PublishBatch      int
	PublishTimeout    time.Duration
	OrphanAge         time.Duration
	KeeperInterval    time.Duration
	ReconcileInterval time.Duration
	WarmAhead         time.Duration
	StockShards       int // the stock shards of a sale created without stockShards
	WriterAckWait     time.Duration
	WriterLinger      time.Duration
	// ClockSkew shifts this instance's clock (tests only: FLASHSALE_CLOCK_SKEW, refused in
	// production), to show that the decisions instances must agree on use Redis's or Postgres's clock.
	ClockSkew time.Duration
	// BeforeRedisLoad runs in every load of a sale into Redis, between its Postgres snapshot and
	// the load (tests only: no setting sets it).
	BeforeRedisLoad func(saleID int64)
	TrustedProxies  []string
	// Fault is FLASHSALE_FAULT (tests only, refused in production): see services/faults/faults.go.
	Fault *faults.Spec

	Payments            string // simulated or stripe
	PaymentsNamed       bool   // FLASHSALE_PAYMENTS was set, not left to its default
	StripeTestMode      bool   // FLASHSALE_STRIPE_TEST_MODE: test-mode keys asked for by name
	StripeSecretKey     string
	StripeWebhookSecret string
	StripeAPIURL        string // "" is Stripe's; tests point it at stripe-mock
	PaymentTimeout      time.Duration
	PaymentReconcile    time.Duration
	PublicURL           string // where shoppers reach the shop; "" is each request's own address
}

// ConfigVar documents one variable; the README's table is checked against this list.
type ConfigVar struct {
	Name, Default, Help string
}

var ConfigVars = []ConfigVar{
	{"FLASHSALE_ENV", "development", "`development` or `production`; production refuses the test captcha, `RATE_LIMITS=off`, the development JWT secret, `DEMO=1`, `NATS_SYNC=interval` and `TRUSTED_PROXIES` that trust every address, and sets Secure `__Host-` cookies and HSTS"},
	{"FLASHSALE_ADDR", "127.0.0.1:8080", "HTTP listen address"},
	{"FLASHSALE_METRICS_ADDR", "127.0.0.1:9090", "listen address of `/metrics` (Prometheus), kept off the public address; `off` serves none"},
	{"FLASHSALE_DATABASE_URL", "postgres://postgres@127.0.0.1:5433/flashsale?sslmode=disable", "Postgres, the source of truth"},
	{"FLASHSALE_DB_MAX_CONNS", "16", "Postgres connection pool size of the HTTP routes and background jobs"},
	{"FLASHSALE_WRITER_DB_CONNS", "4", "the writer's own Postgres connection pool (apart from `DB_MAX_CONNS`, so the public routes can never starve it), raised to `WRITER_WORKERS` if below"},
	{"FLASHSALE_REDIS_URL", "redis://127.0.0.1:6380/0", "Redis holding stock, buyers and reservations in flight: `redis://` (or `rediss://`) for one Redis, `redis-cluster://host1:port1,host2:port2,...` (or `rediss-cluster://`) for a Redis Cluster, through any of the seed nodes listed"},
	{"FLASHSALE_REDIS_POOL", "128", "Redis connection pool size (per node of a Redis Cluster)"},
	{"FLASHSALE_NATS_URL", "", "external NATS (JetStream) URL; empty starts an embedded server"},
	{"FLASHSALE_NATS_CREDS", "", "NATS credentials file (user JWT and seed) for the external NATS of `FLASHSALE_NATS_URL`; the embedded server instead requires the credential it generates in `FLASHSALE_DATA_DIR/nats.token`"},
	{"FLASHSALE_NATS_PORT", "4222", "loopback port of the embedded NATS server (-1 picks a free one)"},
	{"FLASHSALE_NATS_REPLICAS", "1", "copies JetStream keeps of the order and dead-letter streams and the writer's consumer, each on another server of a NATS cluster (1 to 5; 3 survives one server's loss); an existing stream is rescaled to it; more than 1 needs an external cluster in `FLASHSALE_NATS_URL`"},
	{"FLASHSALE_NATS_SYNC", "always", "embedded JetStream fsync: `always` (an acknowledged order survives a crash) or `interval` (every 2 min, unsafe)"},
	{"FLASHSALE_DATA_DIR", ".data", "where the embedded NATS keeps its JetStream files"},
	{"FLASHSALE_JWT_SECRET", DevJWTSecret, "HS256 secret of the identity tokens and purchase tokens, at least 32 bytes; the development default is published, so it is refused in production and unless `FLASHSALE_ADDR` is a loopback address"},
	{"FLASHSALE_JWT_TTL", "24h", "lifetime of a login token and its cookie"},
	{"FLASHSALE_CAPTCHA", "image", "captcha provider: `image` (six distorted digits, checked once, bound to user and sale) or `test` (the answer `test` passes)"},
	{"FLASHSALE_CAPTCHA_TTL", "5m", "how long an image captcha can be answered"},
	{"FLASHSALE_RATE_LIMITS", "on", "`off` turns every rate limit off (benchmarks, tests)"},
	{"FLASHSALE_PAY_WINDOW", "10m", "payment window of a sale created without `paymentWindowSeconds`, counted from when its order is written (PENDING)"},
	{"FLASHSALE_PURCHASE_TOKEN_TTL", "30s", "how long a purchase token is valid"},
	{"FLASHSALE_DEMO", "0", "`1` seeds the demo merchant, shoppers and a sale at start"},
	{"FLASHSALE_DEMO_START_DELAY", "2m", "how long after launch the demo sale starts"},
	{"FLASHSALE_LOG_LEVEL", "info", "debug, info, warn or error"},
	{"FLASHSALE_LOG_FORMAT", "text", "`text` or `json`"},
	{"FLASHSALE_WRITER_BATCH", "200", "queue messages the writer fetches per Postgres transaction"},
	{"FLASHSALE_WRITER_WORKERS", "3", "batches the writer writes concurrently"},
	{"FLASHSALE_WRITER_LINGER", "5ms", "when the writer finds fewer queue messages than a full batch, it waits this long for more before writing them (fewer, larger Postgres transactions; `0s` writes at once); it delays an order's arrival in Postgres by at most this (by `WRITER_ACK_WAIT` if the instance dies meanwhile, as for any batch a dying writer holds), never a purchase's answer"},
	{"FLASHSALE_WRITER_ACK_WAIT", "5s", "a writer that dies holding a batch delays it this long at most (another instance's writer takes it over); a live one keeps its batch with in-progress acks"},
	{"FLASHSALE_PUBLISH_PARALLEL", "2", "JetStream writes in flight at once (group commit)"},
	{"FLASHSALE_PUBLISH_BATCH", "512", "most reservations acknowledged by one JetStream write"},
	{"FLASHSALE_PUBLISH_TIMEOUT", "5s", "how long a purchase waits for its PubAck before answering 503 (under 2m, the order stream's duplicate window; 10–15s on a NATS cluster, whose leader election takes 4–9s)"},
	{"FLASHSALE_ORPHAN_AGE", "45s", "a reservation that never reached the queue returns to stock after this"},
	{"FLASHSALE_KEEPER_INTERVAL", "2s", "how often warm-up, payment expiry, unit returns and orphan recovery run"},
	{"FLASHSALE_RECONCILE_INTERVAL", "5s", "how often the instance holding the lease reconciles Redis with Postgres"},
	{"FLASHSALE_WARM_AHEAD", "10m", "a sale's stock is loaded into Redis this long before its start (at once for a sale created or edited closer to it; the merchant's warm button forces it earlier)"},
	{"FLASHSALE_STOCK_SHARDS", "1", "a new sale's stock is split into this many Redis shards (1–64; fixed per sale at its creation, the admin API's `stockShards` overrides it): more than 1 spreads a hot sale over several Redis Cluster slots"},
	{"FLASHSALE_TRUSTED_PROXIES", "", "comma-separated IP addresses or CIDR ranges of the proxies whose X-Forwarded-For is believed; an entry that is neither (a host name, an address with a port) is refused at start; in production, so is a list that trusts every IPv4 or every IPv6 address (`0.0.0.0/0`, `::/0`, or ranges that add up to one)"},
	{"FLASHSALE_FAULT", "", "test only, refused in production: `STEP:kill` or `STEP:stop`, optionally `@N` (the N-th time), makes the process SIGKILL or SIGSTOP itself at a named step (`after-reserve`, `after-puback`, `writer-before-commit`, `writer-after-commit`, `lease-held`); see RELIABILITY.md"},
	{"FLASHSALE_PAYMENTS", "simulated", "payment provider: `simulated` (a page of the shop stands in for the provider's; no money moves; refused in production, and on an address other than loopback unless set by name) or `stripe` (Stripe Checkout, see DEPLOYMENT.md)"},
	{"FLASHSALE_STRIPE_SECRET_KEY", "", "with `PAYMENTS=stripe`: the Stripe secret key (`sk_live_…` or a restricted `rk_live_…`; a test-mode key only with `STRIPE_TEST_MODE=on`); required"},
	{"FLASHSALE_STRIPE_TEST_MODE", "off", "with `PAYMENTS=stripe`: `on` takes Stripe's test-mode keys (`sk_test_…`, `rk_test_…`: test cards, no real money) and refuses live ones; `off` refuses test keys in production, where test cards would buy real goods"},
	{"FLASHSALE_STRIPE_WEBHOOK_SECRET", "", "with `PAYMENTS=stripe`: the signing secret (`whsec_…`) of the webhook endpoint `/api/payments/stripe/webhook`; required"},
	{"FLASHSALE_STRIPE_API_URL", "", "with `PAYMENTS=stripe`: Stripe's API address; empty is Stripe's own (tests point it at stripe-mock)"},
	{"FLASHSALE_PAYMENT_TIMEOUT", "5s", "how long one call to the payment provider may take (opening a checkout, expiring one, a refund, a lookup): a slow provider holds neither a shopper's click nor the payments keeper longer"},
	{"FLASHSALE_PAYMENT_RECONCILE_INTERVAL", "30s", "how often the payments reconciler asks the provider about checkouts whose outcome may not have reached the shop (a lost webhook), and how old an open checkout must be before it is asked about"},
	{"FLASHSALE_PUBLIC_URL", "", "the shop's address as shoppers reach it (`https://shop.example.com`): the payment provider sends them back to their order page there; empty uses each request's own address; required in production with `PAYMENTS=stripe`"},
	{"FLASHSALE_CLOCK_SKEW", "0s", "test only, refused in production: this instance's clock runs ahead (or behind, negative) by this much"},
}

// LoadConfig reads the configuration from getenv (ConfigVars: names, defaults), checking every
// value and how they go together; every mistake is named in the error.
func LoadConfig(getenv func(string) string) (Config, error) {
	r := &envReader{getenv: getenv}
	c := r.read()
	checkQueue(r, c)
	checkValues(r, c)
	checkPayments(r, c)
	checkSecret(r, c)
	if c.Env == "production" {
		checkProduction(r, c)
	}
	return c, errors.Join(r.errs...)
}

// envReader reads the variables of ConfigVars, a default for each one unset, and collects the
// mistakes.
type envReader struct {
	getenv func(string) string
	errs   []error
}

func (r *envReader) fail(err error) { r.errs = append(r.errs, err) }

func (r *envReader) get(name string) string {
	if v := r.getenv(name); v != "" {
		return v
	}
	for _, cv := range ConfigVars {
		if cv.Name == name {
			return cv.Default
		}
	}
	return ""
}

func (r *envReader) dur(name string) time.Duration {
	d, err := time.ParseDuration(r.get(name))
	if err != nil || d <= 0 {
		r.fail(fmt.Errorf("%s=%q: want a positive duration such as 30s", name, r.get(name)))
	}
	return d
}

func (r *envReader) num(name string, lo int) int {
	n, err := strconv.Atoi(r.get(name))
	if err != nil || n < lo {
		r.fail(fmt.Errorf("%s=%q: want an integer >= %d", name, r.get(name), lo))
	}
	return n
}

func (r *envReader) onOff(name string) bool {
	switch strings.ToLower(r.get(name)) {
	case "on", "1", "true", "yes":
		return true
	case "off", "0", "false", "no":
		return false
	}
	r.fail(fmt.Errorf("%s=%q: want on or off", name, r.get(name)))
	return false
}

// read reads every variable into a Config.
func (r *envReader) read() Config {
	c := Config{
		Env: r.get("FLASHSALE_ENV"), Addr: r.get("FLASHSALE_ADDR"), MetricsAddr: r.get("FLASHSALE_METRICS_ADDR"), DatabaseURL: r.get("FLASHSALE_DATABASE_URL"),
		RedisURL: r.get("FLASHSALE_REDIS_URL"), NATSURL: r.get("FLASHSALE_NATS_URL"), NATSCreds: r.get("FLASHSALE_NATS_CREDS"), NATSSync: r.get("FLASHSALE_NATS_SYNC"),
		DataDir: r.get("FLASHSALE_DATA_DIR"), JWTSecret: r.get("FLASHSALE_JWT_SECRET"), Captcha: r.get("FLASHSALE_CAPTCHA"),
		LogLevel: r.get("FLASHSALE_LOG_LEVEL"), LogFormat: r.get("FLASHSALE_LOG_FORMAT"),
		RedisPool: r.num("FLASHSALE_REDIS_POOL", 1), DBMaxConns: r.num("FLASHSALE_DB_MAX_CONNS", 2), WriterDBConns: r.num("FLASHSALE_WRITER_DB_CONNS", 1),
		NATSPort: r.num("FLASHSALE_NATS_PORT", -1), NATSReplicas: r.num("FLASHSALE_NATS_REPLICAS", 1), WriterBatch: r.num("FLASHSALE_WRITER_BATCH", 1), WriterWorkers: r.num("FLASHSALE_WRITER_WORKERS", 1),
		PublishParallel: r.num("FLASHSALE_PUBLISH_PARALLEL", 1), PublishBatch: r.num("FLASHSALE_PUBLISH_BATCH", 1),
		JWTTTL: r.dur("FLASHSALE_JWT_TTL"), CaptchaTTL: r.dur("FLASHSALE_CAPTCHA_TTL"), PayWindow: r.dur("FLASHSALE_PAY_WINDOW"), TokenTTL: r.dur("FLASHSALE_PURCHASE_TOKEN_TTL"),
		DemoStartDelay: r.dur("FLASHSALE_DEMO_START_DELAY"), PublishTimeout: r.dur("FLASHSALE_PUBLISH_TIMEOUT"),
		OrphanAge: r.dur("FLASHSALE_ORPHAN_AGE"), KeeperInterval: r.dur("FLASHSALE_KEEPER_INTERVAL"),
		ReconcileInterval: r.dur("FLASHSALE_RECONCILE_INTERVAL"), WriterAckWait: r.dur("FLASHSALE_WRITER_ACK_WAIT"),
		WarmAhead: r.dur("FLASHSALE_WARM_AHEAD"), StockShards: r.num("FLASHSALE_STOCK_SHARDS", 1),
		RateLimits: r.onOff("FLASHSALE_RATE_LIMITS"), Demo: r.onOff("FLASHSALE_DEMO"),
	}
	if p := r.get("FLASHSALE_TRUSTED_PROXIES"); p != "" {
		for _, s := range strings.Split(p, ",") {
			if s = strings.TrimSpace(s); s != "" { // a stray comma is not an entry
				c.TrustedProxies = append(c.TrustedProxies, s)
			}
		}
		if err := web.CheckTrustedProxies(c.TrustedProxies); err != nil {
			r.fail(err)
		}
	}
	var err error
	if c.Fault, err = faults.Parse(r.get("FLASHSALE_FAULT")); err != nil {
		r.fail(err)
	}
	if c.ClockSkew, err = time.ParseDuration(r.get("FLASHSALE_CLOCK_SKEW")); err != nil {
		r.fail(fmt.Errorf("FLASHSALE_CLOCK_SKEW=%q: want a duration such as 2s or -2s", r.get("FLASHSALE_CLOCK_SKEW")))
	}
	c.WriterLinger, _ = time.ParseDuration(r.get("FLASHSALE_WRITER_LINGER")) // checked by checkQueue
	c.Payments, c.StripeSecretKey, c.StripeWebhookSecret = r.get("FLASHSALE_PAYMENTS"), r.get("FLASHSALE_STRIPE_SECRET_KEY"), r.get("FLASHSALE_STRIPE_WEBHOOK_SECRET")
	c.StripeAPIURL, c.PublicURL = r.get("FLASHSALE_STRIPE_API_URL"), r.get("FLASHSALE_PUBLIC_URL")
	c.PaymentsNamed, c.StripeTestMode = r.getenv("FLASHSALE_PAYMENTS") != "", r.onOff("FLASHSALE_STRIPE_TEST_MODE")
	c.PaymentTimeout, c.PaymentReconcile = r.dur("FLASHSALE_PAYMENT_TIMEOUT"), r.dur("FLASHSALE_PAYMENT_RECONCILE_INTERVAL")
	return c
}

// checkQueue checks the NATS settings together.
func checkQueue(r *envReader, c Config) {
	if c.NATSCreds != "" && c.NATSURL == "" {
		r.fail(errors.New("FLASHSALE_NATS_CREDS is for an external NATS: set FLASHSALE_NATS_URL too (the embedded server uses its own generated credential)"))
	}
	if c.NATSReplicas > store.MaxReplicas {
		r.fail(fmt.Errorf("FLASHSALE_NATS_REPLICAS=%q: want 1 to %d", r.get("FLASHSALE_NATS_REPLICAS"), store.MaxReplicas))
	}
	if c.NATSReplicas > 1 && c.NATSURL == "" {
		r.fail(fmt.Errorf("FLASHSALE_NATS_REPLICAS=%d needs a NATS cluster: the embedded NATS is one server and keeps one copy; set FLASHSALE_NATS_URL to the cluster's servers (nats://a:4222,nats://b:4222,nats://c:4222)", c.NATSReplicas))
	}
	if c.PublishTimeout >= store.DedupeWindow {
		r.fail(fmt.Errorf("FLASHSALE_PUBLISH_TIMEOUT=%q: want under %s, the order stream's duplicate window (a publish resent later could be stored twice)", r.get("FLASHSALE_PUBLISH_TIMEOUT"), store.DedupeWindow))
	}
	if _, err := time.ParseDuration(r.get("FLASHSALE_WRITER_LINGER")); err != nil || c.WriterLinger < 0 || c.WriterLinger > time.Second {
		r.fail(fmt.Errorf("FLASHSALE_WRITER_LINGER=%q: want a duration from 0s to 1s, such as 5ms", r.get("FLASHSALE_WRITER_LINGER")))
	}
	if c.WriterAckWait < time.Second {
		r.fail(fmt.Errorf("FLASHSALE_WRITER_ACK_WAIT=%q: want at least 1s", r.get("FLASHSALE_WRITER_ACK_WAIT")))
	}
}

// checkValues checks the values each variable may take.
func checkValues(r *envReader, c Config) {
	if c.StockShards > shop.MaxStockShards {
		r.fail(fmt.Errorf("FLASHSALE_STOCK_SHARDS=%q: want 1 to %d", r.get("FLASHSALE_STOCK_SHARDS"), shop.MaxStockShards))
	}
	if c.PayWindow < time.Second || c.PayWindow > 24*time.Hour {
		r.fail(fmt.Errorf("FLASHSALE_PAY_WINDOW=%q: want between 1s and 24h", r.get("FLASHSALE_PAY_WINDOW")))
	}
	if c.Env != "development" && c.Env != "production" {
		r.fail(fmt.Errorf("FLASHSALE_ENV=%q: want development or production", c.Env))
	}
	if c.NATSSync != "always" && c.NATSSync != "interval" {
		r.fail(fmt.Errorf("FLASHSALE_NATS_SYNC=%q: want always or interval", c.NATSSync))
	}
	if c.Captcha != "test" && c.Captcha != "image" {
		r.fail(fmt.Errorf("FLASHSALE_CAPTCHA=%q: want image or test", c.Captcha))
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		r.fail(fmt.Errorf("FLASHSALE_LOG_FORMAT=%q: want text or json", c.LogFormat))
	}
}

// checkPayments checks the payment provider's settings.
func checkPayments(r *envReader, c Config) {
	switch c.Payments {
	case "simulated":
		if c.Env == "production" {
			r.fail(errors.New("FLASHSALE_PAYMENTS=simulated is refused when FLASHSALE_ENV=production: anyone could mark an order paid without paying; set FLASHSALE_PAYMENTS=stripe (DEPLOYMENT.md)"))
		} else if !c.PaymentsNamed && !loopbackAddr(c.Addr) {
			r.fail(fmt.Errorf("FLASHSALE_ADDR=%q is not a loopback address and FLASHSALE_PAYMENTS is not set: its default, the simulated provider, lets anyone mark an order paid without paying. Set FLASHSALE_PAYMENTS=stripe, or FLASHSALE_PAYMENTS=simulated to ask for free payments by name (a demo)", c.Addr))
		}
	case "stripe":
		if c.StripeSecretKey == "" {
			r.fail(errors.New("FLASHSALE_PAYMENTS=stripe needs FLASHSALE_STRIPE_SECRET_KEY (the secret key from the Stripe dashboard, Developers → API keys)"))
		}
		if c.StripeWebhookSecret == "" {
			r.fail(errors.New("FLASHSALE_PAYMENTS=stripe needs FLASHSALE_STRIPE_WEBHOOK_SECRET (the signing secret of the webhook endpoint /api/payments/stripe/webhook)"))
		}
		if c.Env == "production" && c.PublicURL == "" {
			r.fail(errors.New("FLASHSALE_PAYMENTS=stripe in production needs FLASHSALE_PUBLIC_URL (https://your-shop): Stripe sends shoppers back to their order page there"))
		}
		checkStripeMode(r, c)
	default:
		r.fail(fmt.Errorf("FLASHSALE_PAYMENTS=%q: want simulated or stripe", c.Payments))
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			r.fail(fmt.Errorf("FLASHSALE_PUBLIC_URL=%q: want the shop's scheme and host, such as https://shop.example.com", c.PublicURL))
		} else if c.Env == "production" && u.Scheme != "https" {
			r.fail(fmt.Errorf("FLASHSALE_PUBLIC_URL=%q: want https in production", c.PublicURL))
		}
	}
}

// checkStripeMode matches the key's mode with FLASHSALE_STRIPE_TEST_MODE: a test-mode key takes
// test cards, so in production it is taken only when test mode is asked for by name, and a live
// key is never taken in test mode (its payments are real).
func checkStripeMode(r *envReader, c Config) {
	key := c.StripeSecretKey
	test := strings.HasPrefix(key, "sk_test_") || strings.HasPrefix(key, "rk_test_")
	live := strings.HasPrefix(key, "sk_live_") || strings.HasPrefix(key, "rk_live_")
	switch {
	case key == "":
	case test && !c.StripeTestMode && c.Env == "production":
		r.fail(errors.New("FLASHSALE_STRIPE_SECRET_KEY is a test-mode key (sk_test_/rk_test_), refused when FLASHSALE_ENV=production: Stripe's test cards would buy real goods. Use the live key (sk_live_… or rk_live_…), or set FLASHSALE_STRIPE_TEST_MODE=on to run a test-mode shop"))
	case live && c.StripeTestMode:
		r.fail(errors.New("FLASHSALE_STRIPE_TEST_MODE=on with a live key in FLASHSALE_STRIPE_SECRET_KEY (sk_live_/rk_live_): test mode takes Stripe's test-mode keys only"))
	case !test && !live && c.Env == "production":
		r.fail(errors.New("FLASHSALE_STRIPE_SECRET_KEY is not a Stripe secret key (sk_live_…, rk_live_…, or sk_test_…/rk_test_… with FLASHSALE_STRIPE_TEST_MODE=on)"))
	}
}

// placeholderWords are the stand-in values the repository ships (deploy/flashsale.env.example,
// the docs' examples): a setting holding one was never set for real.
var placeholderWords = []string{"replace-me", "replace-with-at-least", "…"}

// placeholderSettings are the secrets and addresses checked for placeholders in production.
var placeholderSettings = []string{"FLASHSALE_JWT_SECRET", "FLASHSALE_STRIPE_SECRET_KEY", "FLASHSALE_STRIPE_WEBHOOK_SECRET",
	"FLASHSALE_DATABASE_URL", "FLASHSALE_REDIS_URL", "FLASHSALE_NATS_URL", "FLASHSALE_PUBLIC_URL"}

// checkPlaceholders refuses, in production, a setting that still holds an example value: a
// secret anyone can read in this repository (the webhook's would let anyone forge a payment), or
// the example shop's address (example.com, .org and .net are reserved and never real).
func checkPlaceholders(r *envReader) {
	for _, name := range placeholderSettings {
		v := strings.ToLower(r.getenv(name))
		if v == "" {
			continue
		}
		for _, w := range placeholderWords {
			if strings.Contains(v, w) {
				r.fail(fmt.Errorf("%s holds the placeholder %q from the repository's examples, refused when FLASHSALE_ENV=production: set it to your own value", name, w))
				break
			}
		}
	}
	if u, err := url.Parse(r.getenv("FLASHSALE_PUBLIC_URL")); err == nil {
		host := strings.ToLower(u.Hostname())
		for _, d := range []string{"example.com", "example.org", "example.net"} {
			if host == d || strings.HasSuffix(host, "."+d) {
				r.fail(fmt.Errorf("FLASHSALE_PUBLIC_URL=%q is the documentation's example address, refused when FLASHSALE_ENV=production: set the address shoppers reach your shop at", r.getenv("FLASHSALE_PUBLIC_URL")))
			}
		}
	}
}

// checkSecret checks the JWT secret: long enough, and the published development one only on a
// loopback address.
func checkSecret(r *envReader, c Config) {
	if len(c.JWTSecret) < MinJWTSecret {
		r.fail(fmt.Errorf("FLASHSALE_JWT_SECRET must be at least %d bytes (it has %d; RFC 7518 wants an HS256 key as long as the hash): generate one with `openssl rand -base64 48`", MinJWTSecret, len(c.JWTSecret)))
	}
	if c.JWTSecret == DevJWTSecret && c.Env != "production" && !loopbackAddr(c.Addr) {
		r.fail(fmt.Errorf("FLASHSALE_ADDR=%q is not a loopback address, and FLASHSALE_JWT_SECRET is the development default, which is published: anyone could sign a merchant's token. Set FLASHSALE_JWT_SECRET to a secret of your own (at least %d bytes), or listen on 127.0.0.1", c.Addr, MinJWTSecret))
	}
}

// checkProduction refuses in production what is for development and tests only.
func checkProduction(r *envReader, c Config) {
	if c.Captcha == "test" {
		r.fail(errors.New("FLASHSALE_CAPTCHA=test is refused when FLASHSALE_ENV=production"))
	}
	if !c.RateLimits {
		r.fail(errors.New("FLASHSALE_RATE_LIMITS=off is refused when FLASHSALE_ENV=production"))
	}
	if c.JWTSecret == DevJWTSecret {
		r.fail(errors.New("set FLASHSALE_JWT_SECRET: the development secret is refused when FLASHSALE_ENV=production"))
	}
	if c.Demo {
		r.fail(errors.New("FLASHSALE_DEMO=1 is refused when FLASHSALE_ENV=production: it creates a merchant with a known password"))
	}
	if c.NATSSync != "always" {
		r.fail(errors.New("FLASHSALE_NATS_SYNC=interval is refused when FLASHSALE_ENV=production: an acknowledged order could be lost in a crash"))
	}
	if c.Fault != nil {
		r.fail(errors.New("FLASHSALE_FAULT is refused when FLASHSALE_ENV=production: it makes the process kill or stop itself (fault tests only)"))
	}
	if c.ClockSkew != 0 {
		r.fail(errors.New("FLASHSALE_CLOCK_SKEW is refused when FLASHSALE_ENV=production: it is for fault tests only"))
	}
	if every := everyAddressTrusted(c.TrustedProxies); len(every) > 0 {
		r.fail(fmt.Errorf("FLASHSALE_TRUSTED_PROXIES=%q trusts every %s address, refused when FLASHSALE_ENV=production: any client could then write the address it likes in X-Forwarded-For, "+
			"and so dodge the per-address rate limits (logins, purchases) or spend another address's; list only your proxies' addresses or ranges (such as 172.28.0.10 or 10.0.0.0/24)",
			strings.Join(c.TrustedProxies, ","), strings.Join(every, " address and every ")))
	}
	checkPlaceholders(r)
}

// everyAddressTrusted names the address families ("IPv4", "IPv6") of which the trusted proxies
// cover every address, whether in one entry (0.0.0.0/0, ::/0, ::ffff:0:0/96) or in several
// (0.0.0.0/1 and 128.0.0.0/1). The families are as gin matches a client's address: an IPv4
// address (or an IPv4-mapped IPv6 one) against the IPv4 entries and the IPv4-mapped ranges of
// /96 or longer, any other against the other IPv6 entries. An entry that is not an address or a
// range is left out (web.CheckTrustedProxies names it).
func everyAddressTrusted(proxies []string) []string {
	var v4, v6 []netip.Prefix
	for _, p := range proxies {
		var pre netip.Prefix
		if strings.Contains(p, "/") {
			var err error
			if pre, err = netip.ParsePrefix(p); err != nil {
				continue
			}
		} else {
			a, err := netip.ParseAddr(p)
			if err != nil {
				continue
			}
			pre = netip.PrefixFrom(a.WithZone(""), a.BitLen())
		}
		switch a := pre.Addr(); {
		case a.Is4():
			v4 = append(v4, pre.Masked())
		case a.Is4In6() && pre.Bits() >= 96:
			v4 = append(v4, netip.PrefixFrom(a.Unmap(), pre.Bits()-96).Masked())
		default:
			v6 = append(v6, pre.Masked())
		}
	}
	// An IPv6 client is never in ::ffff:0:0/96 as gin sees it (such an address is an IPv4 one).
	v6 = append(v6, netip.MustParsePrefix("::ffff:0:0/96"))
	var every []string
	if coversAll(v4, netip.IPv4Unspecified()) {
		every = append(every, "IPv4")
	}
	if coversAll(v6, netip.IPv6Unspecified()) {
		every = append(every, "IPv6")
	}
	return every
}

// coversAll reports whether the masked ranges ps (of one family) together hold every address
// from first, the family's lowest, to its highest.
func coversAll(ps []netip.Prefix, first netip.Addr) bool {
	slices.SortFunc(ps, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	next := first // the lowest address not yet covered
	for _, p := range ps {
		if next.Less(p.Addr()) {
			return false // a gap before p
		}
		if last := lastAddr(p); !last.Less(next) {
			if next = last.Next(); !next.IsValid() {
				return true // last is the family's highest address
			}
		}
	}
	return false
}

// lastAddr is the highest address of the range p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// loopbackAddr reports whether the listen address addr (host:port) takes connections from this
// machine only: a loopback IP (127.0.0.0/8, ::1) or localhost. An empty host, 0.0.0.0 or :: is
// every interface; any other name could resolve to a public address.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
}

// logValues lists the settings for the start-up log, secrets masked.
func (c Config) logValues() []any {
	mask := func(s string) string {
		if s == "" {
			return ""
		}
		return "****"
	}
	return []any{"env", c.Env, "addr", c.Addr, "database", maskURL(c.DatabaseURL), "redis", maskURL(c.RedisURL),
		"nats", map[bool]string{true: "embedded", false: maskURL(c.NATSURL)}[c.NATSURL == ""], "nats_sync", c.NATSSync, "nats_replicas", c.NATSReplicas,
		"data_dir", c.DataDir, "jwt_secret", mask(c.JWTSecret), "captcha", c.Captcha, "rate_limits", c.RateLimits,
		"pay_window", c.PayWindow, "token_ttl", c.TokenTTL, "demo", c.Demo, "payments", c.Payments, "public_url", c.PublicURL}
}

// maskURL hides a password in a URL, or in each URL of a comma-separated NATS server list.
func maskURL(s string) string {
	if strings.Count(s, "://") > 1 {
		parts := strings.Split(s, ",")
		for i, p := range parts {
			parts[i] = maskURL(p)
		}
		return strings.Join(parts, ",")
	}
	at := strings.LastIndex(s, "@")
	scheme := strings.Index(s, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return s
	}
	userinfo := s[scheme+3 : at]
	if u, _, ok := strings.Cut(userinfo, ":"); ok {
		return s[:scheme+3] + u + ":****" + s[at:]
	}
	if strings.HasPrefix(s, "nats") || strings.HasPrefix(s, "tls") {
		return s[:scheme+3] + "****" + s[at:] // a NATS token
	}
	return s
}
