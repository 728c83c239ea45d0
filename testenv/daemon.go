package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// spawnProc starts a server process with its output appended to logPath. A test's server
// (detached false) gets SIGKILL if this process dies first, so a crashed or timed-out test leaves
// no server behind. A detached server (the persistent services of `make services`) runs in a
// session of its own, away from the terminal's Ctrl-C, and outlives this process.
func spawnProc(logPath, dir string, cred *syscall.Credential, detached bool, name string, args ...string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	if detached {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setsid: true}
		err = cmd.Start()
	} else {
		cmd.SysProcAttr = sysProcAttr(cred)
		err = startCmd(cmd)
	}
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// PIDAlive reports whether the process exists and is not a zombie (a daemon's orphan may stay
// unreaped for a while after it exited).
func PIDAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	st, ok := pidState(pid)
	if !ok {
		if _, serr := os.Stat("/proc/self/stat"); serr == nil {
			return false // a system with /proc: the process is gone
		}
		err := syscall.Kill(pid, 0)
		return err == nil || errors.Is(err, syscall.EPERM)
	}
	return st != 'Z' && st != 'X'
}

// pidState is the process's state letter in /proc (R, S, T stopped, Z zombie...); ok false when
// it cannot be read.
func pidState(pid int) (byte, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, false
	}
	return b[i+2], true
}

// signalStop sends SIGSTOP or SIGCONT and returns once the kernel shows the process stopped
// (or no longer stopped): a signal is delivered asynchronously, so a test acting right after
// kill(2) could still find the process running. Other signals, and systems without /proc,
// return at once.
func signalStop(p *os.Process, sig syscall.Signal) error {
	if err := p.Signal(sig); err != nil {
		return err
	}
	if sig != syscall.SIGSTOP && sig != syscall.SIGCONT {
		return nil
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, ok := pidState(p.Pid)
		if !ok || (st == 'T') == (sig == syscall.SIGSTOP) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d: still in state %c 5 s after %v", p.Pid, st, sig)
		}
		time.Sleep(time.Millisecond)
	}
}

// pidCmdline returns the process's command line, its arguments separated by NUL bytes and one
// NUL at the end ("" when unknown).
func pidCmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return string(b)
}

// pidComm returns the process's name ("" when unknown).
func pidComm(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b))
}

// readPID reads the pid on the first line of a pid file (0 when none).
func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

// waitGone waits up to d for the process to exit.
func waitGone(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for PIDAlive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}
