//go:build !linux

package proc

import "syscall"

// ChildAttr: no parent-death signal outside Linux; the tool stops its children itself.
func ChildAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
