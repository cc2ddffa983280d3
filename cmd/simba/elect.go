//go:build unix

package main

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/simba-go/simba/internal/backoff"
	"github.com/simba-go/simba/lease"
)

// Back-off before contending again after CMD exited by itself while leading.
const (
	minRestart   = time.Second
	maxRestart   = 30 * time.Second
	stableRunFor = time.Minute // a CMD that ran this long starts the back-off over
)

// cmdElect implements simba elect.
func (c *cli) cmdElect(f *flags) error {
	s, err := c.newSession(f, f.tf.grace+releaseTimeout)
	if err != nil {
		return err
	}
	defer s.Close()
	e := &elector{cli: c, session: s, exited: make(chan exit, 1)}
	return e.loop()
}

// elector runs CMD while its contender leads.
type elector struct {
	*cli
	*session
	exited chan exit // CMD exited by itself, or could not start

	mu  sync.Mutex
	cur *child // CMD while it runs
}

// loop contends, and resigns and contends again after CMD exits by itself,
// until SIGINT or SIGTERM.
func (e *elector) loop() error {
	restarts := 0 // since CMD last ran stableRunFor
	for {
		cont, err := e.m.Contend(e.name, lease.Callbacks{OnAcquired: e.lead})
		if err != nil {
			return withCode(codeUsage, err)
		}
		var x exit
	leading:
		for {
			select {
			case s := <-e.sigs:
				if s == syscall.SIGINT || s == syscall.SIGTERM {
					e.stop(cont)
					return nil
				}
				e.forward(s)
			case x = <-e.exited:
				break leading
			}
		}
		e.stop(cont)
		if x.err != nil {
			return x.err
		}
		if x.ran >= stableRunFor {
			restarts = 0
		}
		pause := backoff.Exp(minRestart, maxRestart, restarts)
		e.printf("elect: resigned %q; contending again in %v", e.name, pause)
		wait := time.NewTimer(pause)
		for waiting := true; waiting; {
			select {
			case s := <-e.sigs:
				if s == syscall.SIGINT || s == syscall.SIGTERM {
					wait.Stop()
					return nil
				}
			case <-wait.C:
				waiting = false
			}
		}
		restarts++
	}
}

// lead is OnAcquired: it runs CMD until it exits or leadership ends.
func (e *elector) lead(ctx context.Context, l *lease.Lease) {
	e.printf("elect: leading %q (token %d); starting %s", l.Name(), l.Token(), e.argv[0])
	ch, err := startChild(e.argv, leaseEnv(e.environ, l), e.stdin, e.stdout, e.stderr)
	if err != nil {
		e.report(exit{err: err})
		return
	}
	e.mu.Lock()
	e.cur = ch
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.cur = nil
		e.mu.Unlock()
	}()
	select {
	case <-ch.done:
		e.printf("elect: %s exited (%s) while leading %q", e.argv[0], ch.state, l.Name())
		e.report(exit{ran: time.Since(ch.start)})
	case <-ctx.Done():
		bound, why := e.grace, "resigned"
		if errors.Is(context.Cause(ctx), lease.ErrLost) {
			bound, why = killBound(e.grace, e.b.timing), "lost"
		}
		ch.stop(bound, nil)
		e.printf("elect: leadership of %q (token %d) %s; %s stopped (%s)", l.Name(), l.Token(), why, e.argv[0], ch.state)
	}
}

// exit is how CMD ended while leading: by itself after running for ran,
// or it could not start (err).
type exit struct {
	ran time.Duration
	err error
}

// report tells loop that CMD ended while leading.
func (e *elector) report(x exit) {
	select {
	case e.exited <- x:
	default:
	}
}

// forward passes sig to CMD, if it runs.
func (e *elector) forward(sig os.Signal) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur != nil {
		e.cur.signal(sig)
	}
}

// stop ends the contender: CMD gets SIGTERM (SIGKILL after grace), then the
// lock is released.
func (e *elector) stop(cont *lease.Contender) {
	ctx, cancel := context.WithTimeout(context.Background(), e.grace+releaseTimeout)
	defer cancel()
	if err := cont.Stop(ctx); err != nil {
		e.printf("warning: resign %q: %v", e.name, err)
	}
}
