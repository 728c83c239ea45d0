// Package refs holds the reference servers every flashsale figure is divided by, and starts them
// as child processes of the tool (its own executable, run as "ref-gin" or "ref-redis").
package refs

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/bench/internal/proc"
	"github.com/flashsale/flashsale/bench/internal/target"
	"github.com/flashsale/flashsale/loadgen"
	"github.com/flashsale/flashsale/services/purchase"
	"github.com/flashsale/flashsale/shop"
	"github.com/flashsale/flashsale/store"
)

// Names of the reference servers: the tool's sub-commands and the targets in reports.
const (
	Gin   = "ref-gin"
	Redis = "ref-redis"
)

// The reference servers are the ceilings every flashsale figure is divided by. They serve the
// same two routes as flashsale (so the generator sends byte-for-byte the same requests) from a
// bare Gin engine, with the same http.Server settings:
//
//   - ref-gin answers a purchase with flashsale's SOLD_OUT body and nothing else: the cost of
//     HTTP, Gin and JSON alone, the ceiling of refusing a shopper.
//   - ref-redis runs, per purchase, one EVALSHA of flashsale's own reserve script (lua.Reserve,
//     through store.Stock.Reserve) on an item of its own with a billion units, with a distinct
//     user, order id and token each time: the ceiling of accepting one.
//
// Both answer purchase-token with a constant token of the real token's length. Neither checks
// the JWT: that is part of what flashsale's figures are measured against.

// PprofEnv, set to a loopback address, makes a reference server serve /debug/pprof/ there, to
// profile it under the same load as flashsale (whose profiles are on FLASHSALE_METRICS_ADDR).
const PprofEnv = "FLASHSALE_BENCH_REF_PPROF"

func servePprof(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || !loadgen.IsLoopbackHost(host) {
		return fmt.Errorf("%q: only a loopback address is allowed", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() { _ = http.Serve(ln, mux) }()
	return nil
}

// Token is the constant purchase token the references hand out.
const Token = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA" // 48+1+22, like flashsale's

// ChildEnv marks a process started by the tool as one of its reference servers (the test
// binary checks it in TestMain, since os.Executable is then the test binary).
const ChildEnv = "FLASHSALE_BENCH_CHILD"

// IsChild tells whether this process was started as a reference server.
func IsChild() bool { return os.Getenv(ChildEnv) == "1" }

// Serve runs "ref-gin" or "ref-redis" with its flags until ctx is done (SIGINT or SIGTERM).
func Serve(ctx context.Context, name string, args []string, stderr io.Writer) error {
	addr, redisURL, err := serveFlags(name, args, stderr)
	if err != nil {
		return err
	}
	r, cleanup, err := router(ctx, name, redisURL)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10}
	if pp := os.Getenv(PprofEnv); pp != "" {
		if err := servePprof(pp); err != nil {
			return fmt.Errorf("%s: %s: %w", name, PprofEnv, err)
		}
	}
	err = serveUntil(ctx, srv, ln)
	if cleanup != nil {
		cleanup()
	}
	return err
}

// serveFlags parses a reference server's flags: its listen address, which must be loopback,
// and ref-redis's Redis.
func serveFlags(name string, args []string, stderr io.Writer) (addr, redisURL string, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	a := fs.String("addr", "127.0.0.1:0", "listen address (loopback only)")
	ru := fs.String("redis-url", cmp.Or(os.Getenv("FLASHSALE_REDIS_URL"), target.DefaultRedisURL), "Redis (ref-redis)")
	if err := fs.Parse(args); err != nil {
		return "", "", err
	}
	host, _, err := net.SplitHostPort(*a)
	if err != nil || !loadgen.IsLoopbackHost(host) {
		return "", "", fmt.Errorf("%s: -addr %q: only a loopback address is allowed", name, *a)
	}
	return *a, *ru, nil
}

// router is the reference's routes: readiness, a constant purchase token, and the purchase
// (ref-gin: always sold out; ref-redis: a reservation in Redis, whose client cleanup closes).
func router(ctx context.Context, name, redisURL string) (r *gin.Engine, cleanup func(), err error) {
	gin.SetMode(gin.ReleaseMode)
	r = gin.New()
	r.GET("/readyz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ready"}) })
	r.POST("/api/flash-sales/:saleId/purchase-token", func(c *gin.Context) {
		c.JSON(http.StatusOK, gin.H{"purchaseToken": Token, "expiresAt": time.Now().Add(30 * time.Second).UTC().Format(time.RFC3339Nano)})
	})
	switch name {
	case Gin:
		r.POST("/api/flash-sales/items/:itemId/purchase", func(c *gin.Context) {
			c.JSON(http.StatusGone, gin.H{"error": "SOLD_OUT", "message": "sold out: every unit has been taken"})
		})
	case Redis:
		h, err := newRefReserve(ctx, redisURL)
		if err != nil {
			return nil, nil, err
		}
		cleanup = h.close
		r.POST("/api/flash-sales/items/:itemId/purchase", h.purchase)
	default:
		return nil, nil, fmt.Errorf("unknown reference server %q", name)
	}
	return r, cleanup, nil
}

// serveUntil serves on ln until the server fails or ctx is done, then shuts it down within 2 s.
func serveUntil(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		srv.Shutdown(sctx)
		cancel()
		err = nil
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// refReserve is ref-redis's handler state: its item rotates every 200,000 reservations so the
// buyers set and the in-flight hash it leaves in the shared Redis stay small.
type refReserve struct {
	rdb    interface{ Close() error }
	stock  *store.Stock
	item   atomic.Int64
	n      atomic.Int64
	base   int64
	mu     sync.Mutex
	done   chan struct{}
	wg     sync.WaitGroup
	unlink func(item int64)
}

const refRotateEvery = 200_000

func newRefReserve(ctx context.Context, redisURL string) (*refReserve, error) {
	rdb, err := store.OpenRedis(ctx, redisURL, 128) // the pool size flashsale uses by default
	if err != nil {
		return nil, err
	}
	h := &refReserve{rdb: rdb, stock: store.NewStock(rdb, store.OneShard), done: make(chan struct{}),
		// ids far above flashsale's BIGSERIAL item ids, distinct per process
		base: 1<<42 + int64(os.Getpid())<<12}
	h.unlink = func(item int64) {
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		// each rotation is its own synthetic sale, numbered like its one item
		rdb.Unlink(uctx, store.MetaKey(item), store.StockKey(item, item), store.BuyersKey(item), store.InFlightKey(item))
	}
	h.item.Store(h.base)
	if _, err := h.stock.Load(ctx, refSnapshot(h.base), 0); err != nil {
		rdb.Close()
		return nil, err
	}
	h.wg.Add(1)
	go h.rotate()
	return h, nil
}

// refSnapshot is ref-redis's synthetic sale: one item of a billion units, live for a day.
func refSnapshot(item int64) store.Snapshot {
	now := time.Now()
	return store.Snapshot{SaleID: item, Epoch: 1, Limit: shop.LimitPerItem, StartsAt: now.Add(-time.Hour), EndsAt: now.Add(24 * time.Hour),
		Items: []int64{item}, Left: map[int64]int64{item: 1_000_000_000}}
}

func (h *refReserve) rotate() {
	defer h.wg.Done()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	last := int64(0)
	for {
		select {
		case <-h.done:
			return
		case <-t.C:
		}
		if n := h.n.Load(); n-last >= refRotateEvery {
			last = n
			old := h.item.Load()
			next := old + 1
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := h.stock.Load(ctx, refSnapshot(next), 0)
			cancel()
			if err != nil {
				continue
			}
			h.item.Store(next)
			time.Sleep(time.Second) // let the requests on the old item finish
			h.unlink(old)
		}
	}
}

func (h *refReserve) close() {
	close(h.done)
	h.wg.Wait()
	h.unlink(h.item.Load())
	h.rdb.Close()
}

// purchase handles the "POST /api/flash-sales/items/:itemId/purchase" route of ref-redis.
func (h *refReserve) purchase(c *gin.Context) {
	i := h.n.Add(1)
	item := h.item.Load()
	now := time.Now()
	orderID := purchase.NewOrderID(item, now)
	nonce := strconv.FormatInt(i, 16)
	_, err := h.stock.Reserve(c.Request.Context(), store.Attempt{SaleID: item, ItemID: item, UserID: i, OrderID: orderID,
		Nonce: nonce, TokenExpires: now.Add(5 * time.Second)})
	switch {
	case err == nil:
		c.JSON(http.StatusAccepted, gin.H{"orderId": orderID, "status": "QUEUED"})
	case errors.Is(err, store.ErrSoldOut):
		c.JSON(http.StatusGone, gin.H{"error": "SOLD_OUT", "message": "sold out: every unit has been taken"})
	default:
		c.JSON(http.StatusServiceUnavailable, gin.H{"error": "UNAVAILABLE", "message": err.Error()})
	}
}

// Proc is a reference server the tool started.
type Proc struct {
	Name string
	URL  string
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{}
}

// Start starts a reference server as a child process (this same binary) on a free loopback
// port and waits until it answers.
func Start(ctx context.Context, name, redisURL string) (*Proc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(exe, name, "-addr", addr, "-redis-url", redisURL)
	cmd.Env = append(os.Environ(), ChildEnv+"=1")
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = &lockedWriter{w: out}, &lockedWriter{w: out}
	cmd.SysProcAttr = proc.ChildAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, URL: "http://" + addr, cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	deadline := time.Now().Add(15 * time.Second)
	hc := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited at start: %s", name, bytes.TrimSpace(out.Bytes()))
		default:
		}
		if resp, err := hc.Get(p.URL + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.Stop()
			return nil, fmt.Errorf("%s did not answer on %s: %s", name, addr, bytes.TrimSpace(out.Bytes()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PID is the server's process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Stop asks the server to stop (it cleans its Redis keys) and kills it if it does not.
func (p *Proc) Stop() {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// lockedWriter serialises the child's stdout and stderr into one buffer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
