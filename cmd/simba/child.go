//go:build unix

package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/simba-go/simba/lease"
)

// forwarded are the signals simba passes on to CMD.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// child is CMD, running in a process group of its own (in the foreground
// of simba's terminal, if simba was).
type child struct {
	cmd   *exec.Cmd
	done  chan struct{} // closed when CMD has exited and been waited for
	state *os.ProcessState
	start time.Time
}

// leaseEnv returns environ with CMD's variables for the lease l set.
func leaseEnv(environ []string, l *lease.Lease) []string {
	env := make([]string, 0, len(environ)+3)
	for _, kv := range environ {
		switch {
		case hasKey(kv, "SIMBA_LOCK"), hasKey(kv, "SIMBA_OWNER"), hasKey(kv, "SIMBA_TOKEN"):
			continue
		}
		env = append(env, kv)
	}
	o := l.Owner()
	return append(env,
		"SIMBA_LOCK="+l.Name(),
		"SIMBA_OWNER="+o.ID,
		"SIMBA_TOKEN="+strconv.FormatUint(l.Token(), 10))
}

func hasKey(kv, key string) bool {
	return len(kv) > len(key) && kv[len(key)] == '=' && kv[:len(key)] == key
}

// startChild starts argv with env and simba's standard streams.
func startChild(argv, env []string, stdin io.Reader, stdout, stderr io.Writer) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	tty, fg := foregroundTTY(stdin)
	if fg {
		cmd.SysProcAttr.Foreground, cmd.SysProcAttr.Ctty = true, tty
	}
	dieWithParent(cmd.SysProcAttr)
	c := &child{cmd: cmd, done: make(chan struct{}), start: time.Now()}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal is sent when the thread that started CMD
		// ends: keep this goroutine on it until CMD has exited.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			if fg {
				takeForeground(tty) // a child that failed to exec may have taken it
			}
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait() // the status is in ProcessState
		if fg {
			takeForeground(tty)
		}
		c.state = cmd.ProcessState
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, fail(execCode(err), "%v", err)
	}
	return c, nil
}

// execCode is the exit code for a CMD that cannot be started: 127 when it
// does not exist, else 126.
func execCode(err error) int {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return codeNotFound
	}
	return codeCannotExec
}

// signal sends sig to CMD's process group.
func (c *child) signal(sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		_ = syscall.Kill(-c.cmd.Process.Pid, s) // fails only when the group is gone
	}
}

// exitCode is CMD's exit status, 128+N when signal N ended it. Call it
// after done is closed.
func (c *child) exitCode() int {
	if ws, ok := c.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return codeSignal + int(ws.Signal())
	}
	return c.state.ExitCode()
}

// stop sends SIGTERM to CMD's group and SIGKILL after grace, and waits for
// CMD to exit; a signal that arrives on sigs meanwhile is forwarded.
func (c *child) stop(grace time.Duration, sigs <-chan os.Signal) {
	c.signal(syscall.SIGTERM)
	kill := time.NewTimer(grace)
	defer kill.Stop()
	for {
		select {
		case <-c.done:
			c.signal(syscall.SIGKILL) // what is left of the group
			return
		case <-kill.C:
			c.signal(syscall.SIGKILL)
		case s := <-sigs:
			c.signal(s)
		}
	}
}

// killBound is how long CMD may take to end after its lease was lost: at
// most grace, and at most half the safety margin, so that CMD is gone
// before the store could grant the lock to anyone else.
func killBound(grace time.Duration, tm timing) time.Duration {
	return min(grace, tm.safety()/2)
}
