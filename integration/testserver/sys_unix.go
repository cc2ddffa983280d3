//go:build unix && !linux

package testserver

import (
	"syscall"
	"time"
)

// localSupported reports whether local server processes can be run here.
const localSupported = true

// sysProcAttr puts the child in its own process group and runs it as
// uid/gid when uid >= 0. There is no parent-death signal outside Linux:
// servers of a test binary that crashes stay behind.
func sysProcAttr(uid, gid int) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if uid >= 0 {
		a.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	return a
}

// exited cannot tell without reaping here; start-up failures are then
// noticed by the start-up timeout only.
func exited(int) bool { return false }

// signalGroup sends sig to every process in the group led by pid.
func signalGroup(pid int, sig syscall.Signal) error {
	return syscall.Kill(-pid, sig)
}

// processAlive reports whether some process has the given pid.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// Signals that stop and continue a process group.
const (
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
)

// releaseStaleShm is Linux-only; elsewhere a killed PostgreSQL's segment
// stays until reboot (or ipcrm).
func releaseStaleShm(string) {}

// descendants is Linux-only (it reads /proc): none here.
func descendants(int) []int { return nil }

// waitExited is Linux-only: see there.
func waitExited([]int, time.Duration) {}
