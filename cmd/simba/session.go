//go:build unix

package main

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"time"

	"github.com/simba-go/simba/lease"
)

// session is what run and elect share: the lock's name, CMD, the signals
// simba receives, the open store and a Manager on it.
type session struct {
	name   string
	argv   []string
	grace  time.Duration
	sigs   chan os.Signal
	b      *backend
	m      *lease.Manager
	ending time.Duration // bounds the Manager's Close (the release) at exit
	ob     *observer     // serves --listen, or nil
}

// newSession parses run's and elect's shared arguments, catches the signals
// to forward, and opens the store. Close it.
func (c *cli) newSession(f *flags, ending time.Duration) (*session, error) {
	name, argv, err := nameAndCommand(f)
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath(argv[0]); err != nil { // before taking the lock
		return nil, fail(execCode(err), "%s: %v", f.cmd, err)
	}
	s := &session{name: name, argv: argv, grace: f.tf.grace, sigs: make(chan os.Signal, 8), ending: ending}
	return s, c.openSession(f, s, forwarded)
}

// openSession opens the store and a Manager on it for s with the flags'
// timings, and catches sigs on s.sigs; on failure it closes s.
func (c *cli) openSession(f *flags, s *session, sigs []os.Signal) error {
	tm, err := f.tf.timing(f)
	if err != nil {
		return err
	}
	level, err := f.of.level(f)
	if err != nil {
		return err
	}
	t, err := c.storeTarget(f.store)
	if err != nil {
		return err
	}
	if s.ob, err = f.of.observer(f); err != nil {
		return err
	}
	signal.Notify(s.sigs, sigs...)
	if s.b, err = c.open(context.Background(), t, tm, forLeases); err != nil {
		s.Close()
		return err
	}
	log := c.logger(level)
	opts := append([]lease.Option{lease.WithLogger(log)}, s.b.opts...)
	if s.m, err = lease.NewManager(s.b.store, append(opts, s.ob.options()...)...); err != nil {
		s.Close()
		return fail(codeUsage, "%s: %v", f.cmd, err)
	}
	if err := s.ob.serve(s.m, s.b.timing, log); err != nil {
		s.Close()
		return withCode(codeSoftware, err)
	}
	return nil
}

// Close closes the Manager (releasing what it holds, bounded by ending) and
// the store, and stops catching signals.
func (s *session) Close() {
	if s.m != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.ending)
		defer cancel()
		_ = s.m.Close(ctx)
	}
	if s.b != nil {
		s.b.Close()
	}
	s.ob.Close()
	signal.Stop(s.sigs)
}
