package proc

import "syscall"

// ChildAttr makes a child process (a reference server, a server under test) die with the tool, even if the tool is killed.
func ChildAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
