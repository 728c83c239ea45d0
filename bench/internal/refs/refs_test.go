package refs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/testenv"
)

func TestMain(m *testing.M) {
	// Start runs this test binary as the reference server: serve it here instead of testing.
	if IsChild() && len(os.Args) > 1 {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM) // Stop sends SIGTERM
		err := Serve(ctx, os.Args[1], os.Args[2:], os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	testenv.Main(m)
}

// post sends an empty POST and returns the status and the decoded JSON body.
func post(t *testing.T, url string) (int, map[string]string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"captchaId":"bench","answer":"test"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]string{}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("POST %s: %d %s: %v", url, resp.StatusCode, b, err)
	}
	return resp.StatusCode, out
}

func TestGinReference(t *testing.T) {
	p, err := Start(context.Background(), Gin, "redis://127.0.0.1:1/0")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if p.PID() <= 0 || p.PID() == os.Getpid() {
		t.Errorf("PID %d: want a child process", p.PID())
	}
	if st, body := post(t, p.URL+"/api/flash-sales/5/purchase-token"); st != 200 || body["purchaseToken"] != Token || body["expiresAt"] == "" {
		t.Errorf("token: %d %v", st, body)
	}
	if st, body := post(t, p.URL+"/api/flash-sales/items/6/purchase"); st != 410 || body["error"] != "SOLD_OUT" {
		t.Errorf("purchase: %d %v, want 410 SOLD_OUT", st, body)
	}
}

// TestRedisReference: each purchase reserves a unit through flashsale's own script, with a new
// order id each time; stopping the server removes its keys.
func TestRedisReference(t *testing.T) {
	rs := testenv.Redis(t)
	p, err := Start(context.Background(), Redis, rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range 3 {
		st, body := post(t, p.URL+"/api/flash-sales/items/6/purchase")
		if st != 202 || body["orderId"] == "" || seen[body["orderId"]] {
			t.Fatalf("purchase: %d %v, want 202 with a new order id", st, body)
		}
		seen[body["orderId"]] = true
	}
	opt, err := redis.ParseURL(rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx := context.Background()
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n == 0 {
		t.Fatalf("keys while serving: %d, %v: want the reference's sale", n, err)
	}
	p.Stop()
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys { // the used tokens' nonces expire by themselves
		if ttl, err := rdb.PTTL(ctx, k).Result(); err != nil || ttl <= 0 {
			t.Errorf("key %s left after Stop without an expiry (%v, %v)", k, ttl, err)
		}
	}
}

func TestServeRefuses(t *testing.T) {
	ctx := context.Background()
	if err := Serve(ctx, Gin, []string{"-addr", "10.0.0.1:80"}, io.Discard); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("a non-loopback address: %v, want refused", err)
	}
	if err := Serve(ctx, "ref-other", []string{"-addr", "127.0.0.1:0"}, io.Discard); err == nil {
		t.Error("an unknown reference: no error")
	}
}
