package testserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Time limits for local processes.
const (
	startTimeout = 60 * time.Second // until a started server serves
	// probeTimeout is a readiness probe's first time limit, doubled after
	// each probe that ran out of it, up to maxProbeTimeout.
	probeTimeout    = time.Second
	maxProbeTimeout = 8 * time.Second
	stopTimeout     = 15 * time.Second // graceful stop, then SIGKILL
)

// errAddrInUse marks a start that failed because another process took the
// port between our probe and the server's bind; callers retry on a new port.
var errAddrInUse = errors.New("address already in use")

type procState = int32

const (
	stopped procState = iota
	running
	paused
)

// procSpec says how to run and probe one server process.
type procSpec struct {
	path     string
	args     []string
	dir      string         // working directory
	logPath  string         // stdout and stderr, appended across restarts
	uid, gid int            // run as this user when uid >= 0
	stopSig  syscall.Signal // graceful stop; SIGTERM when zero
	env      []string       // added to this process's environment
	ready    func(ctx context.Context) error
}

// Process is one server of a test: its address and, for a private server
// started by this package, control over its process (all processes of its
// process group) for fault tests.
//
// Control methods are safe for concurrent use and keep the address: a
// stopped server comes back on the same port. For servers this package does
// not own (environment, container, shared) they return an error wrapping
// [ErrNotControllable] and change nothing.
type Process struct {
	name   string
	addr   string
	reason string // why it is not controllable; empty when it is

	mu      sync.Mutex // serialises control; state is also read without it
	spec    procSpec
	cmd     *exec.Cmd
	logFrom int64        // size of the log when the current run started
	state   atomic.Int32 // procState
}

// detached returns a Process that only knows its address.
func detached(name, addr, reason string) *Process {
	return &Process{name: name, addr: addr, reason: reason}
}

// newProcess returns a stopped, controllable process.
func newProcess(name, addr string, spec procSpec) *Process {
	if spec.stopSig == 0 {
		spec.stopSig = syscall.SIGTERM
	}
	return &Process{name: name, addr: addr, spec: spec}
}

// Addr returns the server's host:port (always 127.0.0.1 for local servers).
func (p *Process) Addr() string { return p.addr }

// String names the server and its address, for messages.
func (p *Process) String() string { return p.name + " " + p.addr }

// isUp reports whether the process runs (paused or not).
func (p *Process) isUp() bool { return p.state.Load() != stopped }

func (p *Process) controllable() error {
	if p.reason != "" {
		return fmt.Errorf("%w: %s at %s: %s", ErrNotControllable, p.name, p.addr, p.reason)
	}
	return nil
}

// Start starts a stopped server and waits until it serves requests. It does
// nothing when the server runs, and fails on a paused one.
func (p *Process) Start() error {
	if err := p.controllable(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.state.Load() {
	case running:
		return nil
	case paused:
		return fmt.Errorf("testserver: start %s: paused, call Resume", p)
	}
	return p.start()
}

// Stop stops the server gracefully (SIGTERM; SIGINT, a fast shutdown, for
// PostgreSQL), resuming it first when paused, and waits for it to exit
// (SIGKILL after 15 s). It does nothing when the server is stopped.
func (p *Process) Stop() error {
	if err := p.controllable(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stop(p.spec.stopSig)
}

// Kill kills every process of the server with SIGKILL, as in a crash, and
// waits for it to exit. It does nothing when the server is stopped.
func (p *Process) Kill() error {
	if err := p.controllable(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stop(syscall.SIGKILL)
}

// Restart stops the server gracefully and starts it again on the same port.
// What survives depends on the server: Redis runs without persistence and
// comes back empty; PostgreSQL, MariaDB and ZooKeeper keep their data.
func (p *Process) Restart() error {
	if err := p.controllable(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.stop(p.spec.stopSig); err != nil {
		return err
	}
	return p.start()
}

// restartWith stops the server with sig, after before (when not nil) ran
// under the control lock, and starts it again with extra arguments after
// its usual ones for this start only.
func (p *Process) restartWith(sig syscall.Signal, before func() error, extra ...string) error {
	if err := p.controllable(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state.Load() != running {
		return fmt.Errorf("%w: %s (or paused)", ErrNotRunning, p)
	}
	if before != nil {
		if err := before(); err != nil {
			return err
		}
	}
	if err := p.stop(sig); err != nil {
		return err
	}
	args := p.spec.args
	p.spec.args = append(slices.Clip(args), extra...)
	defer func() { p.spec.args = args }()
	return p.start()
}

// Pause freezes every process of the server (SIGSTOP): connections stay
// open, requests get no answer. It does nothing when already paused.
func (p *Process) Pause() error {
	return p.signal(sigStop, running, paused)
}

// Resume continues a paused server (SIGCONT). It does nothing when the
// server runs.
func (p *Process) Resume() error {
	return p.signal(sigCont, paused, running)
}

func (p *Process) signal(sig syscall.Signal, from, to procState) error {
	if err := p.controllable(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.state.Load() {
	case to:
		return nil
	case stopped:
		return fmt.Errorf("%w: %s", ErrNotRunning, p)
	}
	if err := signalGroup(p.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("testserver: signal %s: %w", p, err)
	}
	p.state.Store(to)
	return nil
}

// start runs the process and waits until it is ready; p.mu is held.
func (p *Process) start() error {
	log, err := os.OpenFile(p.spec.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("testserver: start %s: %w", p, err)
	}
	p.logFrom = 0
	if st, err := log.Stat(); err == nil {
		p.logFrom = st.Size()
	}
	cmd := exec.Command(p.spec.path, p.spec.args...)
	cmd.Dir = p.spec.dir
	if len(p.spec.env) > 0 {
		cmd.Env = append(os.Environ(), p.spec.env...)
	}
	cmd.Stdout, cmd.Stderr = log, log // *os.File: no copying goroutines
	cmd.SysProcAttr = sysProcAttr(p.spec.uid, p.spec.gid)
	err = cmd.Start()
	_ = log.Close() // the child has its own descriptor
	if err != nil {
		return fmt.Errorf("testserver: start %s: %w", p, err)
	}
	p.cmd = cmd
	p.state.Store(running)
	if err := p.waitReady(); err != nil {
		_ = p.stop(syscall.SIGKILL)
		return err
	}
	return nil
}

// waitReady polls the readiness probe until it passes, the process exits or
// startTimeout passes. A probe gets probeTimeout, doubled after each probe
// that ran out of time up to maxProbeTimeout: a server that serves but
// answers a new connection slowly (a PostgreSQL backend starting under
// libfaketime at load 20) is ready, not down.
func (p *Process) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	delay, timeout := 10*time.Millisecond, probeTimeout
	var last error
	for {
		if exited(p.cmd.Process.Pid) {
			werr := p.cmd.Wait()
			p.state.Store(stopped)
			tail := p.logTail()
			if strings.Contains(tail, "in use") { // every server says "Address already in use"
				return fmt.Errorf("testserver: %s exited at start (%v): %w\n%s", p, werr, errAddrInUse, tail)
			}
			return fmt.Errorf("testserver: %s exited at start (%v); log %s:\n%s", p, werr, p.spec.logPath, tail)
		}
		probe, cancelProbe := context.WithTimeout(ctx, timeout) // short: exits are checked between probes
		last = p.spec.ready(probe)
		slow := probe.Err() != nil
		cancelProbe()
		if last == nil {
			return nil
		}
		if slow {
			timeout = min(2*timeout, maxProbeTimeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("testserver: %s not ready after %v (last probe: %v); log %s:\n%s",
				p, startTimeout, last, p.spec.logPath, p.logTail())
		case <-time.After(delay):
		}
		delay = min(delay*2, 100*time.Millisecond)
	}
}

// stop sends sig and waits for the process to exit; p.mu is held.
func (p *Process) stop(sig syscall.Signal) error {
	if p.state.Load() == stopped {
		return nil
	}
	pid := p.cmd.Process.Pid
	kids := descendants(pid) // before any signal: a dead parent's children are re-parented
	if sig == syscall.SIGKILL {
		_ = signalGroup(pid, sig)
	} else {
		_ = p.cmd.Process.Signal(sig)
		if p.state.Load() == paused {
			_ = signalGroup(pid, sigCont)
		}
	}
	done := make(chan struct{})
	go func() {
		_ = p.cmd.Wait() // exit status of a signalled server is no news
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(stopTimeout):
		_ = signalGroup(pid, syscall.SIGKILL)
		<-done
	}
	_ = signalGroup(pid, syscall.SIGKILL) // stragglers of the group, if any
	waitExited(kids, stopTimeout)
	p.state.Store(stopped)
	return nil
}

// logTail returns the end of what the current run wrote to the log.
func (p *Process) logTail() string {
	f, err := os.Open(p.spec.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	const n = 3000
	if st, err := f.Stat(); err == nil {
		_, _ = f.Seek(max(st.Size()-n, p.logFrom), io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// retryPorts calls start up to three times while it fails with errAddrInUse
// (a free port taken by another process before the server bound it).
func retryPorts(start func() error) error {
	var err error
	for range 3 {
		if err = start(); !errors.Is(err, errAddrInUse) {
			return err
		}
	}
	return err
}
