package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/flashsale/flashsale/testenv"
)

// The cluster set's flashsale instances, started from one binary on the set's engines.

type instance struct {
	addr, metrics, dir, log string
	cmd                     *exec.Cmd
	done                    chan struct{}
}

type instancesService struct {
	cfg   *config
	dir   string
	dsn   string
	redis *redisClusterService
	nats  *natsClusterService
	list  []*instance
}

func (f *instancesService) Name() string { return "flashsale" }

// binary returns the flashsale binary to run: -flashsale, or one built now.
func (f *instancesService) binary(out io.Writer) (string, error) {
	if f.cfg.flashsaleBin != "" {
		return filepath.Abs(f.cfg.flashsaleBin)
	}
	bin := filepath.Join(f.dir, "bin", "flashsale")
	fmt.Fprintln(out, "flashsale: building the binary")
	build := exec.Command("go", "build", "-o", bin, "github.com/flashsale/flashsale")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v (run devenv inside the flashsale repository, or pass -flashsale BINARY)\n%s", err, b)
	}
	return bin, nil
}

// instanceEnv is instance i's environment (0-based): the user's, then the settings a user may
// change (FLASHSALE_CAPTCHA, _PUBLISH_TIMEOUT, _DEMO of the first...) where not set, then those
// that make it part of the set, which win.
func (f *instancesService) instanceEnv(i int, in *instance) []string {
	env := os.Environ()
	defaults := []string{"FLASHSALE_PUBLISH_TIMEOUT=12s"}
	if i == 0 {
		defaults = append(defaults, "FLASHSALE_DEMO=1")
	}
	if f.cfg.bench {
		defaults = append(defaults, "FLASHSALE_PURCHASE_TOKEN_TTL=2m", "FLASHSALE_LOG_LEVEL=warn")
	}
	for _, kv := range defaults {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := os.LookupEnv(name); !ok {
			env = append(env, kv)
		}
	}
	env = append(env,
		"FLASHSALE_ADDR="+in.addr,
		"FLASHSALE_METRICS_ADDR="+in.metrics,
		"FLASHSALE_DATA_DIR="+in.dir,
		"FLASHSALE_DATABASE_URL="+f.dsn,
		"FLASHSALE_REDIS_URL="+f.redis.URL(),
		"FLASHSALE_NATS_URL="+f.nats.URLs(),
		"FLASHSALE_NATS_REPLICAS="+strconv.Itoa(f.nats.nodes),
		"FLASHSALE_TRUSTED_PROXIES=127.0.0.1",
	)
	if i > 0 {
		env = append(env, "FLASHSALE_DEMO=0") // one demo sale, seeded by the first
	}
	if f.cfg.bench {
		env = append(env, "FLASHSALE_RATE_LIMITS=off", "FLASHSALE_CAPTCHA=test")
	}
	return env
}

func (f *instancesService) Up(ctx context.Context, out io.Writer) error {
	bin, err := f.binary(out)
	if err != nil {
		return err
	}
	for i := range f.cfg.instances {
		in := &instance{dir: filepath.Join(f.dir, fmt.Sprintf("flashsale%d", i+1))}
		in.log = filepath.Join(in.dir, "flashsale.log")
		for _, a := range []*string{&in.addr, &in.metrics} {
			p, err := testenv.FreeTCPPort()
			if err != nil {
				return err
			}
			*a = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		}
		if err := os.MkdirAll(in.dir, 0o755); err != nil {
			return err
		}
		logf, err := os.OpenFile(in.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		in.cmd = exec.Command(bin, "serve")
		in.cmd.Env = f.instanceEnv(i, in)
		in.cmd.Stdout, in.cmd.Stderr = logf, logf
		// A process group of its own, so that a Ctrl-C on the terminal reaches devenv only,
		// which stops the instances first; SIGKILL if devenv dies.
		in.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		err = testenv.StartCmd(in.cmd)
		logf.Close()
		if err != nil {
			return fmt.Errorf("start instance %d: %w", i+1, err)
		}
		in.done = make(chan struct{})
		go func(in *instance) { in.cmd.Wait(); close(in.done) }(in)
		f.list = append(f.list, in)
		// The first seeds the demo sale and applies the migrations alone; the others follow.
		if i == 0 {
			if err := f.waitReady(ctx, in); err != nil {
				return err
			}
		}
	}
	for _, in := range f.list[1:] {
		if err := f.waitReady(ctx, in); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "flashsale: %d instances ready\n", len(f.list))
	return nil
}

func (f *instancesService) waitReady(ctx context.Context, in *instance) error {
	exited := func() bool {
		select {
		case <-in.done:
			return true
		default:
			return false
		}
	}
	if !waitFor(ctx, 90*time.Second, func() bool { return exited() || ready(in.addr) }) || exited() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("the instance on %s is not ready\n%s", in.addr, tail(in.log))
	}
	return nil
}

func (f *instancesService) Down(out io.Writer) error {
	if len(f.list) == 0 {
		return nil
	}
	for _, in := range f.list {
		in.cmd.Process.Signal(syscall.SIGTERM)
	}
	var errs []error
	for i, in := range f.list {
		select {
		case <-in.done:
		case <-time.After(20 * time.Second):
			in.cmd.Process.Kill()
			<-in.done
			errs = append(errs, fmt.Errorf("instance %d did not stop within 20 s: killed", i+1))
		}
	}
	f.list = nil
	fmt.Fprintln(out, "flashsale: instances stopped")
	return errors.Join(errs...)
}

func (f *instancesService) Status() (bool, string) {
	if len(f.list) == 0 {
		return false, "stopped"
	}
	return true, fmt.Sprintf("%d instances", len(f.list))
}

func (f *instancesService) Rows() []row {
	var rows []row
	for i, in := range f.list {
		rows = append(rows, row{fmt.Sprintf("flashsale %d", i+1), fmt.Sprintf("http://%s (metrics %s)", in.addr, in.metrics), in.cmd.Process.Pid, in.log})
	}
	return rows
}
