package main

import "syscall"

// dieWithParent makes the kernel send CMD SIGKILL if simba dies (SIGKILL,
// a crash) without ending it: CMD must not run on without the lock.
func dieWithParent(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
