package app

import (
	"context"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestConfig(t *testing.T) {
	for _, group := range []struct {
		name  string
		cases []configCase
	}{
		{"production and development", productionConfigCases},
		{"fault hooks", faultHookConfigCases},
		{"settings", settingConfigCases},
		{"secret and address", secretConfigCases},
		{"trusted proxies", trustedProxyConfigCases},
	} {
		t.Run(group.name, func(t *testing.T) { checkConfigCases(t, group.cases) })
	}
}

// configCase is an environment and the error LoadConfig must answer it with.
type configCase struct {
	name    string
	env     map[string]string
	wantErr string // empty: no error
}

// checkConfigCases loads each case's environment and checks the error, or its absence.
func checkConfigCases(t *testing.T, cases []configCase) {
	for _, c := range cases {
		_, err := LoadConfig(func(k string) string { return c.env[k] })
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: got error %v, want none", c.name, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: got error %v, want one mentioning %q", c.name, err, c.wantErr)
		}
	}
}

// prodOK is a production environment LoadConfig takes.
var prodOK = map[string]string{"FLASHSALE_ENV": "production", "FLASHSALE_JWT_SECRET": "a-production-secret-of-some-length",
	"FLASHSALE_PAYMENTS": "stripe", "FLASHSALE_STRIPE_SECRET_KEY": "sk_live_x", "FLASHSALE_STRIPE_WEBHOOK_SECRET": "whsec_x", "FLASHSALE_PUBLIC_URL": "https://shop.flashsale.test"}

// withEnv is base with the pairs of kv set.
func withEnv(base map[string]string, kv ...string) map[string]string {
	m := map[string]string{}
	for k, v := range base {
		m[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// productionConfigCases: production refuses what is for development only.
var productionConfigCases = []configCase{
	{"defaults", nil, ""},
	{"production with its own secret", prodOK, ""},
	{"production refuses the test captcha", withEnv(prodOK, "FLASHSALE_CAPTCHA", "test"), "FLASHSALE_CAPTCHA=test is refused"},
	{"production refuses rate limits off", withEnv(prodOK, "FLASHSALE_RATE_LIMITS", "off"), "FLASHSALE_RATE_LIMITS=off is refused"},
	{"production refuses the development secret", map[string]string{"FLASHSALE_ENV": "production"}, "development secret is refused"},
	{"production refuses the demo seed", withEnv(prodOK, "FLASHSALE_DEMO", "1"), "FLASHSALE_DEMO=1 is refused"},
	{"production refuses the simulated payments", withEnv(prodOK, "FLASHSALE_PAYMENTS", "simulated"), "FLASHSALE_PAYMENTS=simulated is refused"},
	{"stripe needs its secret key", withEnv(prodOK, "FLASHSALE_STRIPE_SECRET_KEY", ""), "needs FLASHSALE_STRIPE_SECRET_KEY"},
	{"stripe needs its webhook secret", withEnv(prodOK, "FLASHSALE_STRIPE_WEBHOOK_SECRET", ""), "needs FLASHSALE_STRIPE_WEBHOOK_SECRET"},
	{"stripe in production needs the public address", withEnv(prodOK, "FLASHSALE_PUBLIC_URL", ""), "needs FLASHSALE_PUBLIC_URL"},
	{"the public address is https in production", withEnv(prodOK, "FLASHSALE_PUBLIC_URL", "http://shop.example.com"), "want https in production"},
	{"the public address is a scheme and host", withEnv(nil, "FLASHSALE_PUBLIC_URL", "shop.example.com/x"), "want the shop's scheme and host"},
	{"an unknown provider", withEnv(nil, "FLASHSALE_PAYMENTS", "paypal"), "want simulated or stripe"},
	{"stripe in development without a public address", withEnv(nil, "FLASHSALE_PAYMENTS", "stripe", "FLASHSALE_STRIPE_SECRET_KEY", "sk_test_x", "FLASHSALE_STRIPE_WEBHOOK_SECRET", "whsec_x"), ""},
	{"production refuses interval fsync", withEnv(prodOK, "FLASHSALE_NATS_SYNC", "interval"), "FLASHSALE_NATS_SYNC=interval is refused"},
	{"production refuses a fault hook", withEnv(prodOK, "FLASHSALE_FAULT", "after-reserve:kill"), "FLASHSALE_FAULT is refused"},
	{"production refuses a clock skew", withEnv(prodOK, "FLASHSALE_CLOCK_SKEW", "2s"), "FLASHSALE_CLOCK_SKEW is refused"},
	// The placeholders the repository ships (deploy/flashsale.env.example, the docs), each named.
	{"production refuses the example webhook secret", withEnv(prodOK, "FLASHSALE_STRIPE_WEBHOOK_SECRET", "whsec_replace-me"), "FLASHSALE_STRIPE_WEBHOOK_SECRET holds the placeholder"},
	{"production refuses the example key", withEnv(prodOK, "FLASHSALE_STRIPE_SECRET_KEY", "sk_live_replace-me"), "FLASHSALE_STRIPE_SECRET_KEY holds the placeholder"},
	{"production refuses the docs' key", withEnv(prodOK, "FLASHSALE_STRIPE_SECRET_KEY", "sk_live_…"), "FLASHSALE_STRIPE_SECRET_KEY holds the placeholder"},
	{"production refuses the example JWT secret", withEnv(prodOK, "FLASHSALE_JWT_SECRET", "replace-with-at-least-32-random-characters"), "FLASHSALE_JWT_SECRET holds the placeholder"},
	{"production refuses the example database password", withEnv(prodOK, "FLASHSALE_DATABASE_URL", "postgres://flashsale:replace-me@db/flashsale"), "FLASHSALE_DATABASE_URL holds the placeholder"},
	{"production refuses the example address", withEnv(prodOK, "FLASHSALE_PUBLIC_URL", "https://shop.example.com"), "FLASHSALE_PUBLIC_URL=\"https://shop.example.com\" is the documentation's example"},
	// Test mode only by name; live keys never in test mode.
	{"production refuses a test key", withEnv(prodOK, "FLASHSALE_STRIPE_SECRET_KEY", "sk_test_x"), "FLASHSALE_STRIPE_SECRET_KEY is a test-mode key"},
	{"production refuses a restricted test key", withEnv(prodOK, "FLASHSALE_STRIPE_SECRET_KEY", "rk_test_x"), "FLASHSALE_STRIPE_TEST_MODE=on"},
	{"production takes a test key in test mode", withEnv(prodOK, "FLASHSALE_STRIPE_SECRET_KEY", "sk_test_x", "FLASHSALE_STRIPE_TEST_MODE", "on"), ""},
	{"production takes a restricted live key", withEnv(prodOK, "FLASHSALE_STRIPE_SECRET_KEY", "rk_live_x"), ""},
	{"test mode refuses a live key", withEnv(prodOK, "FLASHSALE_STRIPE_TEST_MODE", "on"), "FLASHSALE_STRIPE_TEST_MODE=on with a live key"},
	{"production refuses a key that is no key", withEnv(prodOK, "FLASHSALE_STRIPE_SECRET_KEY", "pk_live_x"), "is not a Stripe secret key"},
	{"development takes a test key", map[string]string{"FLASHSALE_PAYMENTS": "stripe", "FLASHSALE_STRIPE_SECRET_KEY": "sk_test_x", "FLASHSALE_STRIPE_WEBHOOK_SECRET": "whsec_x"}, ""},
	// The simulated provider on a public address only by name.
	{"the default simulated provider on every interface", map[string]string{"FLASHSALE_ADDR": "0.0.0.0:8080", "FLASHSALE_JWT_SECRET": "a-development-secret-of-some-length"}, "FLASHSALE_PAYMENTS is not set"},
	{"the simulated provider on every interface by name", map[string]string{"FLASHSALE_ADDR": "0.0.0.0:8080", "FLASHSALE_JWT_SECRET": "a-development-secret-of-some-length", "FLASHSALE_PAYMENTS": "simulated"}, ""},
	{"the default simulated provider on loopback", map[string]string{"FLASHSALE_ADDR": "127.0.0.1:8080"}, ""},
	{"development allows a fault hook", map[string]string{"FLASHSALE_FAULT": "writer-after-commit:kill@3"}, ""},
	{"development allows a clock skew", map[string]string{"FLASHSALE_CLOCK_SKEW": "-2s"}, ""},
}

// faultHookConfigCases: FLASHSALE_FAULT is read strictly.
var faultHookConfigCases = []configCase{
	{"unknown fault step", map[string]string{"FLASHSALE_FAULT": "before-lunch:kill"}, "unknown step"},
	{"unknown fault action", map[string]string{"FLASHSALE_FAULT": "after-reserve:explode"}, "kill or stop"},
	{"bad fault occurrence", map[string]string{"FLASHSALE_FAULT": "after-reserve:kill@0"}, "positive integer"},
}

// settingConfigCases: every other setting is checked for its kind and bounds.
var settingConfigCases = []configCase{
	{"bad clock skew", map[string]string{"FLASHSALE_CLOCK_SKEW": "soon"}, "FLASHSALE_CLOCK_SKEW"},
	{"writer linger off", map[string]string{"FLASHSALE_WRITER_LINGER": "0s"}, ""},
	{"writer linger negative", map[string]string{"FLASHSALE_WRITER_LINGER": "-1ms"}, "FLASHSALE_WRITER_LINGER"},
	{"writer linger too long", map[string]string{"FLASHSALE_WRITER_LINGER": "2s"}, "FLASHSALE_WRITER_LINGER"},
	{"writer linger not a duration", map[string]string{"FLASHSALE_WRITER_LINGER": "soon"}, "FLASHSALE_WRITER_LINGER"},
	{"development allows interval fsync", map[string]string{"FLASHSALE_NATS_SYNC": "interval"}, ""},
	{"publish timeout past the duplicate window", map[string]string{"FLASHSALE_PUBLISH_TIMEOUT": "2m"}, "duplicate window"},
	{"publish timeout for a NATS cluster", map[string]string{"FLASHSALE_PUBLISH_TIMEOUT": "15s"}, ""},
	{"payment window over a day", map[string]string{"FLASHSALE_PAY_WINDOW": "25h"}, "FLASHSALE_PAY_WINDOW"},
	{"credentials file without an external NATS", map[string]string{"FLASHSALE_NATS_CREDS": "/etc/nats/user.creds"}, "FLASHSALE_NATS_CREDS is for an external NATS"},
	{"unknown env", map[string]string{"FLASHSALE_ENV": "staging"}, "FLASHSALE_ENV"},
	{"bad duration", map[string]string{"FLASHSALE_PAY_WINDOW": "ten minutes"}, "FLASHSALE_PAY_WINDOW"},
	{"negative duration", map[string]string{"FLASHSALE_PURCHASE_TOKEN_TTL": "-1s"}, "FLASHSALE_PURCHASE_TOKEN_TTL"},
	{"bad number", map[string]string{"FLASHSALE_WRITER_BATCH": "0"}, "FLASHSALE_WRITER_BATCH"},
	{"bad switch", map[string]string{"FLASHSALE_RATE_LIMITS": "maybe"}, "FLASHSALE_RATE_LIMITS"},
	{"unknown captcha", map[string]string{"FLASHSALE_CAPTCHA": "recaptcha"}, "FLASHSALE_CAPTCHA"},
}

// secretConfigCases: the JWT secret's length, and where the development secret may listen.
var secretConfigCases = []configCase{
	{"short secret", map[string]string{"FLASHSALE_JWT_SECRET": "short"}, "at least 32 bytes"},
	// Issue 18, item 8: RFC 7518 wants 32 bytes for HS256, and the published development
	// secret is taken only on loopback.
	{"31-byte secret", map[string]string{"FLASHSALE_JWT_SECRET": strings.Repeat("s", 31)}, "at least 32 bytes"},
	{"31-byte secret in production", withEnv(prodOK, "FLASHSALE_JWT_SECRET", strings.Repeat("s", 31)), "at least 32 bytes"},
	{"32-byte secret", map[string]string{"FLASHSALE_JWT_SECRET": strings.Repeat("s", 32)}, ""},
	{"development secret on every interface", map[string]string{"FLASHSALE_ADDR": "0.0.0.0:8080"}, "not a loopback address"},
	{"development secret on every interface, no host", map[string]string{"FLASHSALE_ADDR": ":8080"}, "not a loopback address"},
	{"development secret on every IPv6 interface", map[string]string{"FLASHSALE_ADDR": "[::]:8080"}, "not a loopback address"},
	{"development secret on a private address", map[string]string{"FLASHSALE_ADDR": "10.1.2.3:8080"}, "not a loopback address"},
	{"development secret on a host name", map[string]string{"FLASHSALE_ADDR": "shop.example.com:8080"}, "not a loopback address"},
	{"development secret on a malformed address", map[string]string{"FLASHSALE_ADDR": "8080"}, "not a loopback address"},
	{"development secret on IPv4-mapped 0.0.0.0", map[string]string{"FLASHSALE_ADDR": "[::ffff:0.0.0.0]:8080"}, "not a loopback address"},
	{"development secret on 127.0.0.1", map[string]string{"FLASHSALE_ADDR": "127.0.0.1:8080"}, ""},
	{"development secret on 127.0.0.2", map[string]string{"FLASHSALE_ADDR": "127.0.0.2:0"}, ""},
	{"development secret on ::1", map[string]string{"FLASHSALE_ADDR": "[::1]:8080"}, ""},
	{"development secret on localhost", map[string]string{"FLASHSALE_ADDR": "localhost:8080"}, ""},
	{"own secret on every interface", map[string]string{"FLASHSALE_ADDR": "0.0.0.0:8080", "FLASHSALE_JWT_SECRET": strings.Repeat("s", 32), "FLASHSALE_PAYMENTS": "simulated"}, ""},
	{"production on every interface", withEnv(prodOK, "FLASHSALE_ADDR", "0.0.0.0:8080"), ""},
}

// trustedProxyConfigCases: FLASHSALE_TRUSTED_PROXIES is addresses and ranges only.
var trustedProxyConfigCases = []configCase{
	// Issue 18, item 10: a trusted proxy that gin cannot read is refused, by name.
	{"trusted proxies by address and range", map[string]string{"FLASHSALE_TRUSTED_PROXIES": "172.28.0.10, 10.0.0.0/8,::1,2001:db8::/32"}, ""},
	{"trusted proxies with a stray comma", map[string]string{"FLASHSALE_TRUSTED_PROXIES": "172.28.0.10,"}, ""},
	{"trusted proxy by host name", map[string]string{"FLASHSALE_TRUSTED_PROXIES": "127.0.0.1,nginx"}, `"nginx" is neither an IP address nor a CIDR range`},
	{"trusted proxy with a port", map[string]string{"FLASHSALE_TRUSTED_PROXIES": "172.28.0.10:80"}, `"172.28.0.10:80"`},
	{"trusted proxy range out of bounds", map[string]string{"FLASHSALE_TRUSTED_PROXIES": "10.0.0.0/33"}, `"10.0.0.0/33"`},
	{"trusted proxy address out of bounds", map[string]string{"FLASHSALE_TRUSTED_PROXIES": "10.0.0.256"}, `"10.0.0.256"`},
	// A list that trusts every address of a family lets any client write its own address in
	// X-Forwarded-For (and so pick its rate-limit buckets): refused in production, by name.
	{"production refuses trusting every IPv4 address", withEnv(prodOK, "FLASHSALE_TRUSTED_PROXIES", "0.0.0.0/0"), "FLASHSALE_TRUSTED_PROXIES=\"0.0.0.0/0\" trusts every IPv4 address"},
	{"production refuses trusting every IPv6 address", withEnv(prodOK, "FLASHSALE_TRUSTED_PROXIES", "::/0"), "FLASHSALE_TRUSTED_PROXIES=\"::/0\" trusts every IPv6 address"},
	{"production refuses both", withEnv(prodOK, "FLASHSALE_TRUSTED_PROXIES", "0.0.0.0/0,::/0"), "trusts every IPv4 address and every IPv6 address"},
	{"production refuses every address among others", withEnv(prodOK, "FLASHSALE_TRUSTED_PROXIES", "172.28.0.10, 0.0.0.0/0"), `FLASHSALE_TRUSTED_PROXIES="172.28.0.10,0.0.0.0/0" trusts every IPv4 address`},
	{"production refuses every address in two halves", withEnv(prodOK, "FLASHSALE_TRUSTED_PROXIES", "128.0.0.0/1,10.0.0.1,0.0.0.0/1"), "trusts every IPv4 address"},
	{"production refuses every address in pieces", withEnv(prodOK, "FLASHSALE_TRUSTED_PROXIES", "0.0.0.0/2,64.0.0.0/2,128.0.0.0/3,160.0.0.0/3,192.0.0.0/2"), "trusts every IPv4 address"},
	{"production refuses every IPv4 address written as IPv6", withEnv(prodOK, "FLASHSALE_TRUSTED_PROXIES", "::ffff:0:0/96"), "trusts every IPv4 address"},
	{"production refuses every IPv6 address in halves", withEnv(prodOK, "FLASHSALE_TRUSTED_PROXIES", "::/1,8000::/1"), "trusts every IPv6 address"},
	{"production refuses every address, overlapping", withEnv(prodOK, "FLASHSALE_TRUSTED_PROXIES", "0.0.0.0/1,64.0.0.0/2,100.0.0.0/8,128.0.0.0/1"), "trusts every IPv4 address"},
	{"production takes real proxies", withEnv(prodOK, "FLASHSALE_TRUSTED_PROXIES", "172.28.0.10,10.0.0.0/8,2001:db8::/32,::1"), ""},
	{"production takes half of every address", withEnv(prodOK, "FLASHSALE_TRUSTED_PROXIES", "0.0.0.0/1,::/1"), ""},
	{"production takes all IPv4 addresses but the highest", withEnv(prodOK, "FLASHSALE_TRUSTED_PROXIES", allBut("255.255.255.255/32")), ""},
	{"production takes all IPv4 addresses but the lowest", withEnv(prodOK, "FLASHSALE_TRUSTED_PROXIES", allBut("0.0.0.0/32")), ""},
	{"production takes all IPv4 addresses but one", withEnv(prodOK, "FLASHSALE_TRUSTED_PROXIES", allBut("10.1.2.3/32")), ""},
	{"production refuses the same with the one address too", withEnv(prodOK, "FLASHSALE_TRUSTED_PROXIES", allBut("10.1.2.3/32")+",10.1.2.3"), "trusts every IPv4 address"},
	{"production refuses every IPv6 address but the IPv4-mapped ones (IPv4 addresses to gin)", withEnv(prodOK, "FLASHSALE_TRUSTED_PROXIES", allBut("::ffff:0:0/96")), "trusts every IPv6 address"},
	{"production takes all IPv6 addresses but one", withEnv(prodOK, "FLASHSALE_TRUSTED_PROXIES", allBut("2001:db8::1/128")), ""},
	{"development takes every address", map[string]string{"FLASHSALE_TRUSTED_PROXIES": "0.0.0.0/0,::/0"}, ""},
}

// allBut is a FLASHSALE_TRUSTED_PROXIES list of every address of p's family but those of p: for
// each bit of p's prefix, the range that agrees with p up to that bit and differs in it.
func allBut(p string) string {
	pre := netip.MustParsePrefix(p)
	var out []string
	for i := range pre.Bits() {
		b := pre.Addr().AsSlice()
		b[i/8] ^= 0x80 >> (i % 8)
		a, _ := netip.AddrFromSlice(b)
		out = append(out, netip.PrefixFrom(a, i+1).Masked().String())
	}
	return strings.Join(out, ",")
}

// Issue 18, item 10: a bad FLASHSALE_TRUSTED_PROXIES entry stops the server before it serves
// (gin would trust only the entries before it, and every shopper behind the proxy would share
// its rate-limit buckets); empty entries are dropped, the others kept in order.
func TestServeRefusesBadTrustedProxy(t *testing.T) {
	// Nothing to reach should the list be taken: serve would then fail on Postgres instead.
	env := map[string]string{"FLASHSALE_TRUSTED_PROXIES": "172.28.0.10,proxy.internal,10.0.0.0/8",
		"FLASHSALE_DATABASE_URL": "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1", "FLASHSALE_REDIS_URL": "redis://127.0.0.1:1/0",
		"FLASHSALE_ADDR": "127.0.0.1:0", "FLASHSALE_METRICS_ADDR": "off", "FLASHSALE_NATS_PORT": "-1", "FLASHSALE_DATA_DIR": t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := Run(ctx, []string{"serve"}, func(k string) string { return env[k] }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `"proxy.internal"`) {
		t.Fatalf("serve with a host name among the trusted proxies: %v, want an error naming it", err)
	}
	cfg, err := LoadConfig(func(k string) string {
		return map[string]string{"FLASHSALE_TRUSTED_PROXIES": " 172.28.0.10 ,, 10.0.0.0/8 ,"}[k]
	})
	if err != nil || !slices.Equal(cfg.TrustedProxies, []string{"172.28.0.10", "10.0.0.0/8"}) {
		t.Fatalf("trusted proxies %q, %v; want [172.28.0.10 10.0.0.0/8]", cfg.TrustedProxies, err)
	}
}

func TestMaskURL(t *testing.T) {
	cases := map[string]string{
		"nats://s3cr3ttoken@127.0.0.1:4222":    "nats://****@127.0.0.1:4222",
		"postgres://u:secret@h:5432/db":        "postgres://u:****@h:5432/db",
		"redis://127.0.0.1:6380/0":             "redis://127.0.0.1:6380/0",
		"postgres://postgres@127.0.0.1:5433/x": "postgres://postgres@127.0.0.1:5433/x",
	}
	for in, want := range cases {
		if got := maskURL(in); got != want {
			t.Errorf("maskURL(%q) = %q, want %q", in, got, want)
		}
	}
}
