//go:build unix

package faults

import (
	"os"
	"syscall"
)

// signalSelf sends this process SIGSTOP (stop) or SIGKILL.
func signalSelf(stop bool) {
	sig := syscall.SIGKILL
	if stop {
		sig = syscall.SIGSTOP
	}
	_ = syscall.Kill(os.Getpid(), sig)
}
