//go:build linux

package chaos

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/testenv"
)

// proc is one child process the suite started, its exit awaited in the background.
type proc struct {
	name   string
	cmd    *exec.Cmd
	log    string
	done   chan struct{}
	state  *os.ProcessState
	exitAt time.Time
}

func startProc(t *testing.T, name, logPath string, env []string, bin string, args ...string) *proc {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := testenv.StartCmd(cmd); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		p.state = cmd.ProcessState
		p.exitAt = time.Now()
		close(p.done)
	}()
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// killedBy reports whether the process has exited by signal sig.
func (p *proc) killedBy(sig syscall.Signal) bool {
	if !p.exited() {
		return false
	}
	ws, ok := p.state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// stopped reports whether the process is in the stopped state (SIGSTOP).
func (p *proc) stopped() bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndex(s, ")")
	return i >= 0 && i+2 < len(s) && s[i+2] == 'T'
}

func (p *proc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

// kill sends SIGKILL (a stopped process dies too) and waits for the exit.
func (p *proc) kill() {
	if p.exited() {
		return
	}
	p.signal(syscall.SIGKILL)
	<-p.done
}

func logTail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "--- " + path + "\n" + strings.Join(lines, "\n")
}

// natsServer is a standalone nats-server with JetStream, fsync on every write.
type natsServer struct {
	port    int
	dir     string
	conf    string
	proc    *proc
	bin     string
	maxFile string // JetStream max_file_store ("" = unlimited)
	tmpfs   string // the store's directory when it is a tmpfs of its own (mountTmpfs), else ""
}

// storeDir is the JetStream store directory.
func (n *natsServer) storeDir() string { return filepath.Join(n.dir, "js") }

// mountTmpfs puts the JetStream store on a tmpfs of the given size (a real, small disk that
// fills), unmounted in t.Cleanup after the server is killed. It needs root (mount(2)); it
// reports whether the mount succeeded, and the caller falls back to a store limit otherwise.
func (n *natsServer) mountTmpfs(t *testing.T, size string) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Logf("nats store: not root, no tmpfs")
		return false
	}
	dir := n.storeDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size="+size); err != nil {
		t.Logf("nats store: mount tmpfs: %v", err)
		return false
	}
	n.tmpfs = dir
	t.Cleanup(func() {
		if n.proc != nil {
			n.proc.kill()
		}
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("nats store: umount %s: %v", dir, err)
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	return true
}

// growTmpfs resizes the store's tmpfs (frees space) without touching its files.
func (n *natsServer) growTmpfs(size string) error {
	return syscall.Mount("tmpfs", n.tmpfs, "tmpfs", syscall.MS_REMOUNT|syscall.MS_NOSUID|syscall.MS_NODEV, "size="+size)
}

func (n *natsServer) url() string { return "nats://127.0.0.1:" + strconv.Itoa(n.port) }

func (n *natsServer) start(t *testing.T) {
	t.Helper()
	limit := ""
	if n.maxFile != "" {
		limit = "\n  max_file_store: " + n.maxFile
	}
	conf := fmt.Sprintf("listen: 127.0.0.1:%d\nserver_name: chaos\njetstream {\n  store_dir: %q\n  sync_interval: always%s\n}\n",
		n.port, n.storeDir(), limit)
	if err := os.WriteFile(n.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	n.proc = startProc(t, "nats-server", filepath.Join(n.dir, "nats.log"), os.Environ(), n.bin, "-c", n.conf)
	err := testenv.Poll(20*time.Second, testenv.PollInterval, func() error {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", n.port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if n.proc.exited() {
			t.Fatalf("nats-server did not start: it exited\n%s", logTail(filepath.Join(n.dir, "nats.log"), 20))
		}
		return err
	})
	if err != nil {
		t.Fatalf("nats-server did not start: %v\n%s", err, logTail(filepath.Join(n.dir, "nats.log"), 20))
	}
}
