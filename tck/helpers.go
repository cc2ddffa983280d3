package tck

import (
	"context"
	"errors"
	"time"

	"github.com/simba-go/simba/lease"
)

// recv waits up to d for a value from ch and fails the case otherwise.
func recv[T any](e *env, ch <-chan T, d time.Duration, what string) T {
	e.t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v, ok := <-ch:
		if !ok {
			e.t.Fatalf("%s: channel closed", what)
		}
		return v
	case <-timer.C:
		e.t.Fatalf("%s: nothing within %v", what, d)
	}
	panic("unreachable")
}

// closed reports whether ch is closed (or has a value) right now.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// acquired is the outcome of an Acquire run in the background.
type acquired struct {
	l   *lease.Lease
	err error
	at  time.Time // when Acquire returned
}

// acquireAsync runs m.Acquire in a goroutine. The goroutine ends when the
// case's Managers are closed at the latest.
func (e *env) acquireAsync(ctx context.Context, m *lease.Manager, name string) <-chan acquired {
	ch := make(chan acquired, 1)
	go func() {
		l, err := m.Acquire(ctx, name)
		ch <- acquired{l: l, err: err, at: time.Now()}
	}()
	return ch
}

// acquire acquires name with m or fails the case.
func (e *env) acquire(m *lease.Manager, name string) *lease.Lease {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, e.takeover())
	defer cancel()
	l, err := m.Acquire(ctx, name)
	if err != nil {
		e.t.Fatalf("Acquire(%q) by %s: %v", name, m.ID(), err)
	}
	return l
}

// granted waits for a background Acquire and fails the case unless it
// succeeded within d.
func (e *env) granted(ch <-chan acquired, d time.Duration, what string) acquired {
	e.t.Helper()
	r := recv(e, ch, d, what)
	if r.err != nil {
		e.t.Fatalf("%s: %v", what, r.err)
	}
	return r
}

// release releases l and fails the case on error.
func (e *env) release(l *lease.Lease) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, e.takeover())
	defer cancel()
	if err := l.Release(ctx); err != nil {
		e.t.Fatalf("Release(%q): %v", l.Name(), err)
	}
}

// releaseUnlessLost releases l, as release does, unless l was lost first:
// then it logs that and reports true. A case that holds many leases
// through many round trips uses it for what it does not judge: a loaded
// machine may stall a holder past its deadline (on ZooKeeper, as little
// as a third of a 2.5 s session less the margin), and a lease then lost
// ends with ErrLost, as it must.
func (e *env) releaseUnlessLost(l *lease.Lease) (lost bool) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, e.takeover())
	defer cancel()
	err := l.Release(ctx)
	switch {
	case err == nil:
		return false
	case errors.Is(err, lease.ErrLost) && errors.Is(l.Err(), lease.ErrLost):
		e.t.Logf("Release(%q): %v: lost before its release (a stalled holder?); not judged", l.Name(), err)
		return true
	}
	e.t.Fatalf("Release(%q): %v", l.Name(), err)
	return false
}

// get returns the owner of name as m sees it, or fails the case.
func (e *env) get(m *lease.Manager, name string) lease.Owner {
	e.t.Helper()
	o, err := m.Get(e.ctx, name)
	if err != nil {
		e.t.Fatalf("Get(%q): %v", name, err)
	}
	if o.Name != name {
		e.t.Errorf("Get(%q).Name = %q", name, o.Name)
	}
	return o
}

// rawGet reads the record of name straight from a store client.
func (e *env) rawGet(s lease.Store, name string) lease.Record {
	e.t.Helper()
	rec, err := s.Get(e.ctx, name)
	if err != nil {
		e.t.Fatalf("Store.Get(%q): %v", name, err)
	}
	return rec
}

// checkRenewals checks that the holder id of token on lock, whose calls t
// logged, sent at least one renewal per ttl/2 between from and to (it
// renews about every ttl/3): a holder that renews only near the end of its
// ttl fails, while a loaded machine that delays each renewal by up to
// ttl/6 passes.
func (e *env) checkRenewals(t *tap, name, id string, token uint64, from, to time.Time) {
	e.t.Helper()
	n := len(t.calls(func(c call) bool {
		return c.op == opRenew && c.mutex == name && c.contender == id && c.token == token &&
			!c.sent.Before(from) && !c.sent.After(to)
	}))
	if want := int(to.Sub(from)/(e.ttl/2)) - 1; n < want {
		e.t.Errorf("the holder sent %d renewals in %v, want at least %d: it must renew about every ttl/3 (%v)",
			n, to.Sub(from), want, e.ttl/3)
	}
}

// checkHeld checks a lease that m holds right now, and the store's view.
func (e *env) checkHeld(m *lease.Manager, l *lease.Lease, name string) {
	e.t.Helper()
	if l.Name() != name {
		e.t.Errorf("Lease.Name() = %q, want %q", l.Name(), name)
	}
	if l.Token() == 0 {
		e.t.Errorf("Lease.Token() = 0: no grant has token 0")
	}
	if !l.Held() || l.Err() != nil || closed(l.Done()) {
		e.t.Errorf("fresh lease of %q: Held() = %v, Err() = %v, Done closed = %v", name, l.Held(), l.Err(), closed(l.Done()))
	}
	if now := time.Now(); !l.Deadline().After(now) || l.Deadline().After(now.Add(e.ttl+e.transition)) {
		e.t.Errorf("Lease.Deadline() is %v from now, want in (0, ttl+transition = %v]", l.Deadline().Sub(now), e.ttl+e.transition)
	}
	if o := l.Owner(); o.ID != m.ID() || o.Token != l.Token() || o.Name != name {
		e.t.Errorf("Lease.Owner() = %+v, want ID %s, token %d, lock %q", o, m.ID(), l.Token(), name)
	}
	if o := e.get(m, name); o.ID != m.ID() || o.Token != l.Token() {
		e.t.Errorf("Get(%q) = owner %q token %d, want %q token %d", name, o.ID, o.Token, m.ID(), l.Token())
	}
}

// checkEnded checks a lease that ended with cause (lease.ErrLost or
// lease.ErrReleased).
func (e *env) checkEnded(l *lease.Lease, cause error) {
	e.t.Helper()
	if !closed(l.Done()) || l.Held() || !errors.Is(l.Err(), cause) || !errors.Is(context.Cause(l.Context()), cause) {
		e.t.Errorf("ended lease of %q: Done closed = %v, Held() = %v, Err() = %v, context cause = %v; want closed, false, %v",
			l.Name(), closed(l.Done()), l.Held(), l.Err(), context.Cause(l.Context()), cause)
	}
}

// eventually waits up to d for cond, checking it every ttl/100.
func (e *env) eventually(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); !cond(); time.Sleep(e.ttl / 100) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}

// stop stops c within the takeover bound and fails the case on error.
func (e *env) stop(c *lease.Contender) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, e.takeover())
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		e.t.Fatalf("Contender.Stop: %v", err)
	}
}

// stopScheduler stops s within the takeover bound and checks Running.
func (e *env) stopScheduler(s *lease.Scheduler) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, e.takeover())
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		e.t.Fatalf("Scheduler.Stop: %v", err)
	}
	if s.Running() {
		e.t.Errorf("Running() = true after Stop")
	}
}

// waitLost waits until the tap t of contender id logged a losing Acquire
// of name: id is then in the store's wait queue, if the store has one.
func (e *env) waitLost(t *tap, name, id string) {
	e.t.Helper()
	e.waitCall(t, e.takeover(), "a losing Acquire of "+id, func(c call) bool {
		return c.op == opAcquire && c.mutex == name && c.contender == id && c.err == nil && !c.rec.Held(id)
	})
}

// slowRelease makes the replies to t's Releases come ttl/10 after the
// store applied them, so that a holder that ends its lease only once the
// store answered would still believe while the next holder is granted.
func (e *env) slowRelease(t *tap) {
	t.set(func(t *tap) { t.delays = map[string]time.Duration{opRelease: e.ttl / 10} })
}

// handOff releases l and waits for w, the Acquire of the Manager id whose
// tap is wt, to be granted: within prompt of the release, and only after
// l's context ended (the released holder stops believing before anyone
// else can be granted).
func (e *env) handOff(l *lease.Lease, w <-chan acquired, wt *tap, id, what string) acquired {
	e.t.Helper()
	two := liveAtGrant(wt, id, l.Name(), l.Context)
	released := time.Now()
	e.release(l)
	r := e.granted(w, e.takeover(), what)
	switch {
	case r.at.Before(released):
		e.t.Errorf("%s: granted %v before the holder released: two holders", what, released.Sub(r.at))
	case r.at.Sub(released) >= e.prompt():
		e.t.Errorf("%s: the hand-off took %v, want < %v (ttl/2): are waiters woken on release? does a waiter that left stay queued?", what, r.at.Sub(released), e.prompt())
	}
	if two.Load() {
		e.t.Errorf("%s: granted while the released lease's context was live: a lease must end before its release is sent", what)
	}
	if r.l.Token() <= l.Token() {
		e.t.Errorf("%s: token %d after %d, want greater", what, r.l.Token(), l.Token())
	}
	return r
}
