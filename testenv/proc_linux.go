package testenv

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// sysProcAttr asks the kernel to kill the child when its parent goes away, and sets the user the
// child runs as (cred may be nil).
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
}

// The parent-death signal fires when the OS thread that forked the child exits, not the process
// (go.dev/issue/27505). Forking from one goroutine locked to its thread, which never returns,
// makes it mean "when the test process exits".
var (
	spawnOnce  sync.Once
	spawnCalls chan spawnCall
)

type spawnCall struct {
	cmd  *exec.Cmd
	errc chan error
}

// startCmd starts cmd from the spawner thread.
func startCmd(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnCalls = make(chan spawnCall)
		go func() {
			runtime.LockOSThread()
			for c := range spawnCalls {
				c.errc <- c.cmd.Start()
			}
		}()
	})
	errc := make(chan error, 1)
	spawnCalls <- spawnCall{cmd: cmd, errc: errc}
	return <-errc
}
