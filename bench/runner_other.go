//go:build !linux

package bench

import "syscall"

// childAttr returns nil: only Linux can tie a child's life to this process.
func childAttr() *syscall.SysProcAttr { return nil }
