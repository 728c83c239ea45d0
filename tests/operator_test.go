package tests

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/flashsale/flashsale/internal/app"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/testenv"
)

// /metrics is served on its own (loopback) address, never on the public one.
func TestMetricsOnTheirOwnAddress(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	if r := h.do("GET", "/metrics", "", nil); r.Status != http.StatusNotFound {
		t.Errorf("GET /metrics on the public address: %d, want 404", r.Status)
	}
	// The binary itself: serve, then read both addresses.
	env := mergeEnv(h.env, map[string]string{
		"FLASHSALE_ADDR":         "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)),
		"FLASHSALE_METRICS_ADDR": "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)),
		"FLASHSALE_NATS_URL":     h.app.NATSURL,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, []string{"serve"}, func(k string) string { return env[k] }, io.Discard) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	get := func(url string) (int, string) {
		resp := testenv.EventuallyValue(t, 15*time.Second, "GET "+url, func() (*http.Response, error) { return http.Get(url) })
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	if st, body := get("http://" + env["FLASHSALE_METRICS_ADDR"] + "/metrics"); st != http.StatusOK || !strings.Contains(body, "flashsale_queue_backlog_messages") {
		t.Errorf("metrics address: %d, want 200 with the flashsale metrics", st)
	}
	if st, _ := get("http://" + env["FLASHSALE_ADDR"] + "/metrics"); st != http.StatusNotFound {
		t.Errorf("public address /metrics: %d, want 404", st)
	}
}

// /readyz names the dependency that is down, without addresses or error text.
func TestReadyzNamesWhatIsDown(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	if r := h.do("GET", "/readyz", "", nil); r.Status != http.StatusOK || r.str("status") != "ready" {
		t.Fatalf("readyz: %d %s", r.Status, r.Raw)
	}
	h.redis.Stop(t)
	r := h.do("GET", "/readyz", "", nil)
	h.redis.Start(t)
	down, _ := r.Body["down"].([]any)
	if r.Status != http.StatusServiceUnavailable || len(down) != 1 || down[0] != "redis" {
		t.Errorf("readyz with redis down: %d %s, want 503 naming redis only", r.Status, r.Raw)
	}
	port := h.redis.Addr[strings.LastIndex(h.redis.Addr, ":")+1:]
	for _, leak := range []string{"127.0.0.1", port, "dial", "refused"} {
		if strings.Contains(r.Raw, leak) {
			t.Errorf("readyz tells %q: %s", leak, r.Raw)
		}
	}
}

// The embedded NATS server takes no client without the credential it generated: no local process
// can publish a forged sold-out notice or order.
func TestEmbeddedNATSRequiresItsCredential(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	if nc, err := nats.Connect(h.app.NATSServer.ClientURL(), nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a client without the credential was let in")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Errorf("connect without the credential: %v, want an authorization violation", err)
	}
	tok, err := store.ReadEmbeddedNATSToken(h.natsDir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(h.natsDir, "nats.token")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("nats.token mode = %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	nc, err := nats.Connect(store.EmbeddedNATSURL(h.cfg.NATSPort, tok))
	if err != nil {
		t.Fatalf("connect with the credential: %v", err)
	}
	nc.Close()
}

// An external NATS that authenticates with credentials files (operator mode, JWT + seed): the
// instance connects with FLASHSALE_NATS_CREDS, and sells.
func TestExternalNATSWithCredentialsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k := operatorModeKeys(t, dir)
	opClaims, sysPub, sysJWT, apub, ajwt, credsFile := k.opClaims, k.sysPub, k.sysJWT, k.apub, k.ajwt, k.credsFile
	resolver := &server.MemAccResolver{}
	_ = resolver.Store(sysPub, sysJWT)
	_ = resolver.Store(apub, ajwt)
	port := testenv.FreePort(t)
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: filepath.Join(dir, "js"),
		TrustedOperators: []*jwt.OperatorClaims{opClaims}, AccountResolver: resolver, SystemAccount: sysPub, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(ns.Shutdown)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	if _, err := store.OpenQueue(context.Background(), url, ""); err == nil {
		t.Fatal("the external NATS let a client in without credentials")
	}
	h := newHarness(t, harnessOpts{env: map[string]string{"FLASHSALE_NATS_URL": url, "FLASHSALE_NATS_CREDS": credsFile}})
	s := h.liveSale(3)
	alice := h.token(1, "shopper")
	if r := h.buy(alice, s.items[0], h.purchaseToken(alice, s.sale)); r.Status != http.StatusAccepted {
		t.Fatalf("buy through the external NATS: %d %s", r.Status, r.Raw)
	}
	h.checkInvariants(s)
}

// operatorKeys are the keys of an operator-mode NATS: the operator, its system account, the
// flashsale account and the credentials file of a user of it.
type operatorKeys struct {
	opClaims              *jwt.OperatorClaims
	sysPub, sysJWT        string
	apub, ajwt, credsFile string
}

// operatorModeKeys makes an operator, a system account, an account with JetStream and a user of
// it, whose credentials file it writes in dir.
func operatorModeKeys(t *testing.T, dir string) operatorKeys {
	t.Helper()
	okp, _ := nkeys.CreateOperator()
	opub, _ := okp.PublicKey()
	oc := jwt.NewOperatorClaims(opub)
	sysKP, _ := nkeys.CreateAccount()
	sysPub, _ := sysKP.PublicKey()
	oc.SystemAccount = sysPub
	ojwt, err := oc.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	sysClaims := jwt.NewAccountClaims(sysPub)
	sysJWT, _ := sysClaims.Encode(okp)
	akp, _ := nkeys.CreateAccount()
	apub, _ := akp.PublicKey()
	ac := jwt.NewAccountClaims(apub)
	ac.Limits.JetStreamLimits.DiskStorage = -1
	ac.Limits.JetStreamLimits.MemoryStorage = -1
	ajwt, err := ac.Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	ukp, _ := nkeys.CreateUser()
	upub, _ := ukp.PublicKey()
	uc := jwt.NewUserClaims(upub)
	ujwt, err := uc.Encode(akp)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := ukp.Seed()
	creds, _ := jwt.FormatUserConfig(ujwt, seed)
	credsFile := filepath.Join(dir, "flashsale.creds")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	opClaims, err := jwt.DecodeOperatorClaims(ojwt)
	if err != nil {
		t.Fatal(err)
	}
	return operatorKeys{opClaims: opClaims, sysPub: sysPub, sysJWT: sysJWT, apub: apub, ajwt: ajwt, credsFile: credsFile}
}
