//go:build unix

package testserver

import "syscall"

// reaperAttr starts the reaper in a session of its own, without a
// parent-death signal: it must outlive this process.
func reaperAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setsid: true} }
