//go:build linux

package testserver

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// localSupported reports whether local server processes can be run here.
const localSupported = true

// sysProcAttr puts the child in its own process group (so that Pause, Resume
// and Kill reach every process of a server, e.g. PostgreSQL's backends),
// kills it when the test binary dies, and runs it as uid/gid when uid >= 0.
//
// Pdeathsig is tied to the OS thread that started the child: Go never ends a
// thread unless a goroutine locked to it (runtime.LockOSThread) exits, so
// this only misfires in tests that do exactly that.
func sysProcAttr(uid, gid int) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if uid >= 0 {
		a.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	return a
}

// exited reports whether the child pid has exited, without reaping it (so
// that exec.Cmd.Wait still collects it).
func exited(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if err != nil {
		return err == unix.ECHILD
	}
	return info.Signo == int32(syscall.SIGCHLD)
}

// signalGroup sends sig to every process in the group led by pid and to
// all its descendants, parents first: PostgreSQL makes each backend the
// leader of a group of its own, out of reach of a group signal.
func signalGroup(pid int, sig syscall.Signal) error {
	before := descendants(pid) // a killed parent's children are re-parented at once
	err := syscall.Kill(-pid, sig)
	for _, c := range append(before, descendants(pid)...) { // and those forked meanwhile
		_ = syscall.Kill(c, sig)
	}
	return err
}

// descendants lists the live descendants of pid, parents before children,
// from /proc.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, ppid, ok := procStat(p); ok {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, children[p]...)
		queue = append(queue, children[p]...)
	}
	return out
}

// waitExited waits, up to timeout, until none of pids runs any more
// (gone, or a zombie: its memory, and its attachment to PostgreSQL's
// shared memory, are released at exit, not when it is reaped). A killed
// server's processes, re-parented when their parent died, may still be
// exiting when the leader has been reaped; a new server started on the
// same data meanwhile refuses to run ("pre-existing shared memory block
// is still in use").
func waitExited(pids []int, timeout time.Duration) {
	end := time.Now().Add(timeout)
	for _, pid := range pids {
		for notExited(pid) && time.Now().Before(end) {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// notExited reports whether pid is a process that has not exited.
func notExited(pid int) bool {
	state, _, ok := procStat(pid)
	return ok && state != "Z" && state != "X"
}

// procStat reads the state and parent of process pid from /proc.
func procStat(pid int) (state string, ppid int, ok bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	// pid (comm) state ppid …; comm may contain spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0], ppid, err == nil
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

// releaseStaleShm removes the small System V shared memory segment that a
// killed PostgreSQL leaves behind (its key and id are on line 7 of
// postmaster.pid), once no process is attached to it.
func releaseStaleShm(pidFile string) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 7 {
		return
	}
	f := strings.Fields(lines[6])
	if len(f) != 2 {
		return
	}
	key, err1 := strconv.ParseUint(f[0], 10, 32)
	id, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return
	}
	var d unix.SysvShmDesc
	if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &d); err != nil {
		return
	}
	if uint32(d.Perm.Key) != uint32(key) || d.Nattch != 0 {
		return
	}
	_, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil)
}
