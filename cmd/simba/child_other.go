//go:build unix && !linux

package main

import "syscall"

// dieWithParent does nothing where there is no parent-death signal: if simba
// is killed with SIGKILL, CMD runs on without the lock.
func dieWithParent(*syscall.SysProcAttr) {}
