package main

import "syscall"

// childAttr makes a reference server die with the tool, even if the tool is killed.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
