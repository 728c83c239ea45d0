package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale/deploy"
	"github.com/flashsale/flashsale/testenv"
)

// The cluster set's nginx, with deploy/nginx/flashsale.conf in front of the instances.

type nginxService struct {
	cfg       *config
	dir       string
	instances *instancesService
	n         *testenv.NginxServer
}

func (g *nginxService) Name() string { return "nginx" }

// limitReqLine is a `limit_req zone=...` line of the site config: left out with -bench, where
// every shopper comes from one address.
var limitReqLine = regexp.MustCompile(`(?m)^[ \t]*limit_req[ \t]+zone=[^;\n]*;[ \t]*\n`)

// benchNginxConf is the site config without the per-address limits.
func benchNginxConf() (string, error) {
	conf := limitReqLine.ReplaceAllString(deploy.NginxConf, "")
	if conf == deploy.NginxConf {
		return "", errors.New("nginx: -bench: deploy/nginx/flashsale.conf has no `limit_req zone=` line to leave out")
	}
	return conf, nil
}

// preflight refuses, before anything starts, a missing nginx or a port another server holds.
func (g *nginxService) preflight() error {
	if _, err := exec.LookPath("nginx"); err != nil {
		if _, err := os.Stat("/usr/sbin/nginx"); err != nil {
			return errors.New("nginx not found: make cluster installs it (Debian package nginx-light; or make deps-test)")
		}
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(g.cfg.clusterPort))
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("port %d is taken by another server: set CLUSTER_PORT (devenv -cluster-port)", g.cfg.clusterPort)
	}
	return nil
}

func (g *nginxService) Up(ctx context.Context, out io.Writer) error {
	if err := g.preflight(); err != nil {
		return err
	}
	conf := ""
	if g.cfg.bench {
		var err error
		if conf, err = benchNginxConf(); err != nil {
			return err
		}
	}
	var ups []string
	for _, in := range g.instances.list {
		ups = append(ups, in.addr)
	}
	if err := os.MkdirAll(g.dir, 0o755); err != nil {
		return err
	}
	n, err := testenv.StartNginx(testenv.NginxOptions{Dir: g.dir, Upstreams: ups, Port: g.cfg.clusterPort, Conf: conf})
	if err != nil {
		if strings.Contains(err.Error(), "nginx not found") {
			return errors.New("nginx not found: make cluster installs it (Debian package nginx-light; or make deps-test)")
		}
		return err
	}
	g.n = n
	if g.cfg.bench {
		fmt.Fprintln(out, "nginx: -bench: without the limit_req lines (benchmarks only)")
	}
	fmt.Fprintf(out, "nginx: serving on %s in front of %d instances\n", n.URL(), len(ups))
	return nil
}

func (g *nginxService) Down(out io.Writer) error {
	if g.n == nil {
		return nil
	}
	err := g.n.Stop()
	g.n = nil
	fmt.Fprintln(out, "nginx: stopped")
	return err
}

func (g *nginxService) Status() (bool, string) {
	if g.n == nil {
		return false, "stopped"
	}
	return true, "running on " + g.n.URL()
}

func (g *nginxService) Env() []string { return []string{"FLASHSALE_BENCH_URL=" + g.n.URL()} }

func (g *nginxService) Rows() []row {
	return []row{{"nginx", g.n.URL(), g.n.PID(), g.n.ErrorLog}}
}
