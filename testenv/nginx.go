package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/deploy"
)

// NginxSite is where a rendered copy of deploy/nginx/flashsale.conf points: the instances it
// proxies to, the address it listens on and the folder of its cache.
type NginxSite struct {
	Upstreams []string // "host:port" of each flashsale instance
	Listen    string   // "127.0.0.1:port"
	CacheDir  string
}

var (
	upstreamBlock = regexp.MustCompile(`(?ms)^upstream flashsale \{\n.*?^\}`)
	serverLine    = regexp.MustCompile(`(?m)^([ \t]*)server[ \t]+[^ \t;]+([^;\n]*);[ \t]*\n`)
	listenLine    = regexp.MustCompile(`(?m)^([ \t]*)listen[ \t]+[^;\n]+;`)
	cachePath     = regexp.MustCompile(`(?m)^proxy_cache_path[ \t]+(\S+)`)
)

// RenderNginx returns conf (deploy.NginxConf when empty) with the `server` lines of its
// `upstream flashsale` block replaced by one per upstream (keeping the first line's
// parameters), its one `listen` line by site.Listen and its proxy_cache_path by site.CacheDir.
// It fails when the config no longer has those lines, so that a change to the deployment file
// that the tests could not follow is caught.
func RenderNginx(conf string, site NginxSite) (string, error) {
	if conf == "" {
		conf = deploy.NginxConf
	}
	if len(site.Upstreams) == 0 || site.Listen == "" || site.CacheDir == "" {
		return "", errors.New("nginx: upstreams, listen address and cache dir are required")
	}
	block := upstreamBlock.FindStringIndex(conf)
	if block == nil {
		return "", errors.New("nginx: no `upstream flashsale { ... }` block")
	}
	up := conf[block[0]:block[1]]
	first := serverLine.FindStringSubmatch(up)
	if first == nil {
		return "", errors.New("nginx: no `server` line in the upstream block")
	}
	var servers strings.Builder
	for _, u := range site.Upstreams {
		fmt.Fprintf(&servers, "%sserver %s%s;\n", first[1], u, first[2])
	}
	done := false
	up = serverLine.ReplaceAllStringFunc(up, func(string) string {
		if done {
			return ""
		}
		done = true
		return servers.String()
	})
	conf = conf[:block[0]] + up + conf[block[1]:]
	if n := len(listenLine.FindAllString(conf, -1)); n != 1 {
		return "", fmt.Errorf("nginx: want one `listen` line, found %d", n)
	}
	conf = listenLine.ReplaceAllString(conf, "${1}listen "+site.Listen+";")
	if !cachePath.MatchString(conf) {
		return "", errors.New("nginx: no proxy_cache_path")
	}
	conf = cachePath.ReplaceAllLiteralString(conf, "proxy_cache_path "+site.CacheDir)
	return conf, nil
}

// NginxOptions configure StartNginx.
type NginxOptions struct {
	Dir       string   // required: the config, cache, temporary files, pid file and logs go here
	Upstreams []string // "host:port" of each flashsale instance
	Port      int      // 0: a free port
	Conf      string   // the site config; empty: deploy.NginxConf
	Workers   int      // worker processes; 0: 2
}

// NginxServer is an nginx process started by StartNginx: in the foreground (daemon off), a
// child of this process, with everything it writes under its Dir.
type NginxServer struct {
	Addr     string // "127.0.0.1:port"
	Dir      string
	ErrorLog string // nginx's error log
	proc     *process
}

// URL is the server's base URL, "http://127.0.0.1:port".
func (n *NginxServer) URL() string { return "http://" + n.Addr }

// nginxBin finds Debian's nginx (nginx-light has every module the config needs).
func nginxBin() (string, error) {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx", nil
	}
	return "", errors.New("nginx not found: run `make deps` (Debian package nginx-light)")
}

// writeNginxConf renders the site for opts on port and writes it with a main config around it;
// it returns the main config's path.
func writeNginxConf(opts NginxOptions, port int) (string, error) {
	for _, d := range []string{"cache", "tmp"} {
		if err := os.MkdirAll(filepath.Join(opts.Dir, d), 0o755); err != nil {
			return "", err
		}
	}
	site, err := RenderNginx(opts.Conf, NginxSite{Upstreams: opts.Upstreams,
		Listen: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), CacheDir: filepath.Join(opts.Dir, "cache")})
	if err != nil {
		return "", err
	}
	sitePath := filepath.Join(opts.Dir, "flashsale.conf")
	if err := os.WriteFile(sitePath, []byte(site), 0o644); err != nil {
		return "", err
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = 2
	}
	user := ""
	if os.Geteuid() == 0 {
		// As root the workers would switch to nobody, who cannot enter a test's folders.
		user = "user root root;\n"
	}
	tmp := filepath.Join(opts.Dir, "tmp")
	main := fmt.Sprintf(`# Written by testenv.StartNginx around the site config %[1]s.
%[2]sdaemon off;
master_process on;
worker_processes %[3]d;
worker_shutdown_timeout 2s;
pid %[4]s;
error_log %[5]s warn;
events { worker_connections 4096; }
http {
    default_type application/octet-stream;
    access_log off;
    client_body_temp_path %[6]s/body;
    proxy_temp_path %[6]s/proxy;
    fastcgi_temp_path %[6]s/fastcgi;
    uwsgi_temp_path %[6]s/uwsgi;
    scgi_temp_path %[6]s/scgi;
    include %[1]s;
}
`, sitePath, user, workers, filepath.Join(opts.Dir, "nginx.pid"), filepath.Join(opts.Dir, "error.log"), tmp)
	mainPath := filepath.Join(opts.Dir, "nginx.conf")
	return mainPath, os.WriteFile(mainPath, []byte(main), 0o644)
}

// CheckNginx runs `nginx -t` on the site config of opts (with a main config around it), as a
// deployment's nginx would read it at start. The upstream names must resolve.
func CheckNginx(opts NginxOptions) (string, error) {
	bin, err := nginxBin()
	if err != nil {
		return "", err
	}
	port := opts.Port
	if port == 0 {
		if port, err = freePort(); err != nil {
			return "", err
		}
	}
	mainPath, err := writeNginxConf(opts, port)
	if err != nil {
		return "", err
	}
	out, err := exec.Command(bin, "-t", "-p", opts.Dir, "-c", mainPath, "-e", filepath.Join(opts.Dir, "error.log")).CombinedOutput()
	return string(out), err
}

// nginxStartTimeout bounds how long nginx may take to listen.
const nginxStartTimeout = 15 * time.Second

// StartNginx starts nginx in front of opts.Upstreams with deploy/nginx/flashsale.conf (or
// opts.Conf) rendered for them, and waits until it accepts connections. The process is a child
// of this one (it gets SIGKILL when this process dies); Stop ends it.
func StartNginx(opts NginxOptions) (*NginxServer, error) {
	if opts.Dir == "" {
		return nil, errors.New("nginx: NginxOptions.Dir is required")
	}
	bin, err := nginxBin()
	if err != nil {
		return nil, err
	}
	errLog := filepath.Join(opts.Dir, "error.log")
	// Another process may take a free port before nginx binds it: then try another one.
	for attempt := 1; ; attempt++ {
		port := opts.Port
		if port == 0 {
			if port, err = freePort(); err != nil {
				return nil, err
			}
		}
		mainPath, err := writeNginxConf(opts, port)
		if err != nil {
			return nil, err
		}
		n := &NginxServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Dir: opts.Dir, ErrorLog: errLog}
		n.proc, err = spawn(filepath.Join(opts.Dir, "nginx.out"), opts.Dir, nil, bin, "-p", opts.Dir, "-c", mainPath, "-e", errLog)
		if err != nil {
			return nil, err
		}
		err = n.waitListening()
		if err == nil {
			return n, nil
		}
		n.proc.kill()
		if attempt == 3 || opts.Port != 0 || !strings.Contains(logTail(errLog), "Address already in use") {
			return nil, fmt.Errorf("nginx on %s: %w\n%s", n.Addr, err, logTail(errLog))
		}
	}
}

func (n *NginxServer) waitListening() error {
	deadline := time.Now().Add(nginxStartTimeout)
	for {
		if n.proc.exited() {
			return fmt.Errorf("nginx exited at start: %v", n.proc.err)
		}
		if c, err := net.DialTimeout("tcp", n.Addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nginx not listening after %v", nginxStartTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop stops nginx (SIGTERM: a fast shutdown, open connections are closed) and kills it if it
// has not exited after 10 s.
func (n *NginxServer) Stop() error {
	if n.proc.exited() {
		return nil
	}
	_ = n.proc.cmd.Process.Signal(syscall.SIGTERM)
	return n.proc.wait(10 * time.Second)
}

// Nginx starts nginx in front of upstreams for one test (testing.TB wrapper of StartNginx): its
// folder is a t.TempDir() and it is stopped in t.Cleanup.
func Nginx(t testing.TB, upstreams ...string) *NginxServer {
	t.Helper()
	n, err := StartNginx(NginxOptions{Dir: t.TempDir(), Upstreams: upstreams})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Errorf("testenv: nginx: %v", err)
		}
	})
	return n
}
