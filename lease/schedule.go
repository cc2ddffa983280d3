package lease

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// A Trigger says when scheduled work runs: [FixedRate] or [FixedDelay].
type Trigger struct {
	period  time.Duration
	rate    bool
	initial time.Duration
}

// FixedRate runs work every period, measured from the start of one run to
// the start of the next; a run that overruns its period is followed at
// once by the next, never by two at a time.
func FixedRate(period time.Duration) Trigger { return Trigger{period: period, rate: true} }

// FixedDelay runs work, waits period after it returns, and runs it again.
func FixedDelay(period time.Duration) Trigger { return Trigger{period: period} }

// WithInitialDelay returns a copy of t whose first run, in each term of
// leadership, starts d after leadership begins (default: at once).
func (t Trigger) WithInitialDelay(d time.Duration) Trigger {
	t.initial = d
	return t
}

func (t Trigger) validate() error {
	if t.period <= 0 {
		return fmt.Errorf("%w: schedule period %v is not positive", ErrInvalidArgument, t.period)
	}
	if t.initial < 0 {
		return fmt.Errorf("%w: initial delay %v is negative", ErrInvalidArgument, t.initial)
	}
	return nil
}

// A Scheduler runs work periodically, only while its Manager leads the
// schedule's lock: at most one process runs it at a time.
type Scheduler struct {
	c       *Contender
	running atomic.Bool
}

// Schedule starts contending for the lock name and, in every term of
// leadership, runs work as trig says. work's ctx is cancelled when
// leadership ends; the next leader starts only after work has returned
// (on Stop) or after the lease has expired (on loss). An error returned by
// work is logged and the schedule goes on.
func Schedule(m *Manager, name string, trig Trigger, work func(ctx context.Context) error) (*Scheduler, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil manager", ErrInvalidArgument)
	}
	if work == nil {
		return nil, fmt.Errorf("%w: nil work", ErrInvalidArgument)
	}
	if err := trig.validate(); err != nil {
		return nil, err
	}
	s := &Scheduler{}
	c, err := m.Contend(name, Callbacks{
		OnAcquired: func(ctx context.Context, l *Lease) { s.lead(ctx, m, l, trig, work) },
	})
	if err != nil {
		return nil, err
	}
	s.c = c
	s.running.Store(true)
	return s, nil
}

// Running reports whether the Scheduler is started and not stopped.
func (s *Scheduler) Running() bool { return s.running.Load() }

// Leading reports whether this process currently runs the schedule.
func (s *Scheduler) Leading() bool { return s.c.Leading() }

// Stop ends the schedule: it cancels a running work's ctx, waits for it to
// return (bounded by ctx), and releases the lock. Stop is idempotent.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.running.Store(false)
	return s.c.Stop(ctx)
}

// lead runs work for one term of leadership.
func (s *Scheduler) lead(ctx context.Context, m *Manager, l *Lease, trig Trigger, work func(context.Context) error) {
	clk := m.cfg.clock
	next := clk.Now().Add(trig.initial)
	for {
		if d := next.Sub(clk.Now()); d > 0 {
			t := clk.NewTimer(d)
			select {
			case <-t.C():
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		start := clk.Now()
		if err := work(ctx); err != nil {
			m.logWorkFailed(l, err)
		}
		if trig.rate {
			next = start.Add(trig.period)
		} else {
			next = clk.Now().Add(trig.period)
		}
	}
}
