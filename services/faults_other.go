//go:build !unix

package services

import "os"

// signalSelf has no SIGSTOP here; kill ends the process at once, without deferred code.
func signalSelf(stop bool) {
	if !stop {
		os.Exit(137)
	}
}
