//go:build !linux

package main

import "syscall"

// childAttr: no parent-death signal outside Linux; the tool stops its children itself.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
