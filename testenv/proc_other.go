//go:build !linux

package testenv

import (
	"os/exec"
	"syscall"
)

// sysProcAttr sets the user the child runs as (cred may be nil).
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred}
}

// startCmd starts cmd.
func startCmd(cmd *exec.Cmd) error { return cmd.Start() }
