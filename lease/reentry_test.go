package lease_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/simba-go/simba/lease"
)

// windDown is how long a callback keeps working after it resigned.
const windDown = 2 * time.Second

// insideCall is how a Stop or Close called from inside a callback went.
type insideCall struct {
	took     time.Duration // until the call returned
	err      error
	returned time.Time // when the callback that made it returned
}

// callFromInside makes the call (bounded by an hour), winds the callback
// down, and reports on res just before the callback returns.
func callFromInside(res chan<- insideCall, call func(context.Context) error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(bg, time.Hour)
	defer cancel()
	err := call(ctx)
	took := time.Since(start)
	time.Sleep(windDown)
	res <- insideCall{took: took, err: err, returned: time.Now()}
}

// A reentry case starts, on m, a leader of "job" that resigns from inside
// one of its own callbacks through call. self is closed once the leader's
// handles are set.
type reentryCase struct {
	name string
	// start makes the leader; its callbacks call callFromInside once.
	start func(m *lease.Manager, res chan<- insideCall) error
	// releasedOnReturn: the grant is released when that callback returns
	// (otherwise it was released before, or by the leader itself).
	releasedOnReturn bool
}

// contendOnce contends for "job" with cb built by mk, which gets the
// Contender once Contend has returned it.
func contendOnce(m *lease.Manager, mk func(self func() *lease.Contender) lease.Callbacks) error {
	var c atomic.Pointer[lease.Contender]
	ready := make(chan struct{})
	self := func() *lease.Contender { <-ready; return c.Load() }
	got, err := m.Contend("job", mk(self))
	if err != nil {
		return err
	}
	c.Store(got)
	close(ready)
	return nil
}

var reentryCases = []reentryCase{
	{"Contender.Stop from OnAcquired", func(m *lease.Manager, res chan<- insideCall) error {
		return contendOnce(m, func(self func() *lease.Contender) lease.Callbacks {
			return lease.Callbacks{OnAcquired: func(ctx context.Context, l *lease.Lease) {
				callFromInside(res, self().Stop)
			}}
		})
	}, true},
	{"Manager.Close from OnAcquired", func(m *lease.Manager, res chan<- insideCall) error {
		return contendOnce(m, func(func() *lease.Contender) lease.Callbacks {
			return lease.Callbacks{OnAcquired: func(ctx context.Context, l *lease.Lease) {
				callFromInside(res, m.Close)
			}}
		})
	}, true},
	{"Contender.Stop from OnReleased", func(m *lease.Manager, res chan<- insideCall) error {
		return contendOnce(m, func(self func() *lease.Contender) lease.Callbacks {
			return lease.Callbacks{
				OnAcquired: func(ctx context.Context, l *lease.Lease) { _ = l.Release(ctx) },
				OnReleased: func(lease.Owner) { callFromInside(res, self().Stop) },
			}
		})
	}, false},
	{"Manager.Close from OnReleased", func(m *lease.Manager, res chan<- insideCall) error {
		return contendOnce(m, func(func() *lease.Contender) lease.Callbacks {
			return lease.Callbacks{
				OnAcquired: func(ctx context.Context, l *lease.Lease) { _ = l.Release(ctx) },
				OnReleased: func(lease.Owner) { callFromInside(res, m.Close) },
			}
		})
	}, false},
	{"Contender.Stop from OnOwner", func(m *lease.Manager, res chan<- insideCall) error {
		var once atomic.Bool
		return contendOnce(m, func(self func() *lease.Contender) lease.Callbacks {
			return lease.Callbacks{
				OnAcquired: func(ctx context.Context, l *lease.Lease) { <-ctx.Done() },
				OnOwner: func(o lease.Owner) {
					if o.ID == m.ID() && once.CompareAndSwap(false, true) {
						callFromInside(res, self().Stop)
					}
				},
			}
		})
	}, false},
	{"Manager.Close from OnOwner", func(m *lease.Manager, res chan<- insideCall) error {
		var once atomic.Bool
		return contendOnce(m, func(func() *lease.Contender) lease.Callbacks {
			return lease.Callbacks{
				OnAcquired: func(ctx context.Context, l *lease.Lease) { <-ctx.Done() },
				OnOwner: func(o lease.Owner) {
					if o.ID == m.ID() && once.CompareAndSwap(false, true) {
						callFromInside(res, m.Close)
					}
				},
			}
		})
	}, false},
	{"Scheduler.Stop from work", func(m *lease.Manager, res chan<- insideCall) error {
		var s atomic.Pointer[lease.Scheduler]
		ready := make(chan struct{})
		var once atomic.Bool
		got, err := lease.Schedule(m, "job", lease.FixedDelay(time.Second), func(ctx context.Context) error {
			if once.CompareAndSwap(false, true) {
				<-ready
				callFromInside(res, s.Load().Stop)
			}
			return nil
		})
		if err != nil {
			return err
		}
		s.Store(got)
		close(ready)
		return nil
	}, true},
}

// TestStopFromInsideACallback (issue 14 item 3, S16): a leader that
// resigns from inside its own callback (Contender.Stop, Manager.Close,
// Scheduler.Stop) gets its call back at once instead of waiting for the
// callback that makes it, and the lock is released once the callback
// returns, not left to lapse. Nothing keeps running afterwards.
func TestStopFromInsideACallback(t *testing.T) {
	for _, tc := range reentryCases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRecorder()
				a := newMgr(t, watching(r), "a")
				b := newMgr(t, watching(r), "b")
				res := make(chan insideCall, 1)
				if err := tc.start(a, res); err != nil {
					t.Fatal(err)
				}
				synctest.Wait() // a leads, b waits behind it
				granted := make(chan time.Time, 1)
				go func() {
					l, err := b.Acquire(bg, "job")
					if err != nil {
						close(granted) // b was closed: the test already failed
						return
					}
					granted <- time.Now()
					_ = l.Release(bg)
				}()
				got := <-res
				if got.err != nil || got.took >= time.Second {
					t.Fatalf("%s returned %v after %v, want nil at once", tc.name, got.err, got.took)
				}
				at, ok := <-granted
				if !ok {
					t.Fatal("b was never granted the lock")
				}
				if tc.releasedOnReturn {
					if at.Before(got.returned) {
						t.Errorf("b granted %v before the callback returned", got.returned.Sub(at))
					}
					if d := at.Sub(got.returned); d >= time.Second {
						t.Errorf("b granted %v after the callback returned, want at once (a release, not a lapse)", d)
					}
				}
				time.Sleep(tTTL + tTransition)
				if o := r.Inspect("job"); o.Owner != "" {
					t.Errorf("a stopped leader contends again: the store says %+v", o)
				}
			})
		})
	}
}
