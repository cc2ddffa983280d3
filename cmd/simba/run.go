//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/simba-go/simba/lease"
)

// releaseTimeout bounds the release and the Manager's close at exit; a
// release that does not complete lets the grant lapse by itself.
const releaseTimeout = 5 * time.Second

// cmdRun implements simba run.
func (c *cli) cmdRun(f *flags) error {
	if err := f.wf.check(f); err != nil {
		return err
	}
	s, err := c.newSession(f, releaseTimeout)
	if err != nil {
		return err
	}
	defer s.Close()
	l, err := c.acquireFor(f.cmd, s.m, s.name, f.wf, s.sigs)
	if err != nil {
		return err
	}
	ch, err := startChild(s.argv, leaseEnv(c.environ, l), c.stdin, c.stdout, c.stderr)
	if err != nil {
		c.release(l)
		return err
	}
	return c.supervise(l, ch, s.grace, s.b.timing, s.sigs)
}

// acquire takes name for simba run, waiting as told; a signal while
// waiting ends simba with 128+N.
func (c *cli) acquire(m *lease.Manager, name string, wait time.Duration, noWait bool, sigs <-chan os.Signal) (*lease.Lease, error) {
	return c.acquireFor("run", m, name, waitFlags{wait: wait, noWait: noWait}, sigs)
}

// acquireFor is acquire for the command cmd (run or lock).
func (c *cli) acquireFor(cmd string, m *lease.Manager, name string, w waitFlags, sigs <-chan os.Signal) (*lease.Lease, error) {
	wait, noWait := w.wait, w.noWait
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if wait > 0 {
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	type result struct {
		l   *lease.Lease
		err error
	}
	res := make(chan result, 1)
	go func() {
		var r result
		if noWait {
			r.l, r.err = m.TryAcquire(ctx, name)
		} else {
			r.l, r.err = m.Acquire(ctx, name)
		}
		res <- r
	}()
	var sig os.Signal
	var r result
	for done := false; !done; {
		select {
		case r = <-res:
			done = true
		case s := <-sigs:
			sig = s
			cancel()
		}
	}
	switch {
	case r.err == nil && sig != nil:
		c.release(r.l) // acquired while being interrupted
		fallthrough
	case sig != nil:
		return nil, fail(codeSignal+int(sig.(syscall.Signal)), "%s: interrupted by %v while waiting for %q", cmd, sig, name)
	case r.err == nil:
		return r.l, nil
	case errors.Is(r.err, lease.ErrGrantTooShort):
		return nil, fail(codeConfig, "%s: %v; lower --ttl and --transition", cmd, r.err)
	case errors.Is(r.err, lease.ErrNotAcquired):
		held := c.holder(m, name)
		if noWait {
			return nil, fail(codeBusy, "%s: %q is held%s", cmd, name, held)
		}
		return nil, fail(codeBusy, "%s: %q not acquired within %v: held%s", cmd, name, wait, held)
	}
	return nil, withCode(codeUnavailable, r.err)
}

// holder describes the owner of name for a message.
func (c *cli) holder(m *lease.Manager, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	o, err := m.Get(ctx, name)
	switch {
	case err != nil:
		return ""
	case o.Free() && o.Transition > 0:
		// A fair hand-off to a waiter, or a store that just restarted.
		return fmt.Sprintf(" back by the store for another %v", o.Transition.Round(time.Millisecond))
	case o.Free():
		return ""
	}
	return fmt.Sprintf(" by %s (token %d)", o.ID, o.Token)
}

// supervise waits for CMD, forwarding signals, and terminates it when the
// lease is lost; it returns CMD's status, or the lease-lost error.
func (c *cli) supervise(l *lease.Lease, ch *child, grace time.Duration, tm timing, sigs <-chan os.Signal) error {
	for running := true; running; {
		select {
		case <-ch.done:
			running = false
		case s := <-sigs:
			ch.signal(s)
		case <-l.Done():
			ch.stop(killBound(grace, tm), sigs)
			return fail(codeLost, "run: lease on %q (token %d) was lost; %s was terminated (%s)", l.Name(), l.Token(), ch.cmd.Path, ch.state)
		}
	}
	if err := c.release(l); errors.Is(err, lease.ErrLost) {
		return fail(codeLost, "run: lease on %q (token %d) was lost before %s exited (%s); its work may not have been exclusive", l.Name(), l.Token(), ch.cmd.Path, ch.state)
	}
	return exitStatus(ch.exitCode())
}

// release releases l; an error other than a lost lease is reported as a
// warning, since the grant lapses by itself after ttl + transition.
func (c *cli) release(l *lease.Lease) error {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	err := l.Release(ctx)
	if err != nil && !errors.Is(err, lease.ErrLost) {
		c.printf("warning: release %q: %v", l.Name(), err)
	}
	return err
}
