//go:build linux

package bench

import "syscall"

// childAttr puts a child process (etcd, a holder) in its own process group
// and kills it when this process dies, so a crashed benchmark leaves nothing
// running.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
