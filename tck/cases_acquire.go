package tck

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/lease"
)

// Acquiring, waiting, hand-off, tokens and observing.

// caseTryAcquire: TryAcquire succeeds on a free lock and fails with
// ErrNotAcquired while another Manager, or another goroutine of the same
// Manager, holds it. A failed TryAcquire leaves nothing behind that delays
// a real waiter. Release ends the lease (before the waiter is granted) and
// is idempotent, and once it has returned the same Manager can take the
// lock again at once, each time under a greater token.
func caseTryAcquire(e *env) {
	m1, t1 := e.tappedManager()
	e.slowRelease(t1)
	m2 := e.newManager()
	m3, t3 := e.tappedManager()
	name := e.name("try")
	l1, err := m1.TryAcquire(e.ctx, name)
	if err != nil {
		e.t.Fatalf("TryAcquire of a free lock: %v", err)
	}
	e.checkHeld(m1, l1, name)

	if l, err := m2.TryAcquire(e.ctx, name); !errors.Is(err, lease.ErrNotAcquired) || l != nil {
		e.t.Errorf("TryAcquire by another Manager of a held lock = %v, %v; want nil, ErrNotAcquired", l, err)
	}
	same := make(chan error, 1)
	go func() {
		l, err := m1.TryAcquire(e.ctx, name)
		if l != nil {
			l.Release(context.Background())
			err = errors.New("got a lease the same Manager already holds")
		}
		same <- err
	}()
	if err := recv(e, same, e.prompt(), "TryAcquire from another goroutine of the holder"); !errors.Is(err, lease.ErrNotAcquired) {
		e.t.Errorf("TryAcquire from another goroutine of the holding Manager: %v, want ErrNotAcquired", err)
	}

	// m2's failed attempt must not absorb the hand-off meant for m3.
	w3 := e.acquireAsync(e.ctx, m3, name)
	e.waitLost(t3, name, m3.ID())
	r3 := e.handOff(l1, w3, t3, m3.ID(), "waiter after a failed TryAcquire of another Manager")
	e.checkEnded(l1, lease.ErrReleased)
	if err := l1.Release(e.ctx); err != nil {
		e.t.Errorf("second Release: %v, want nil", err)
	}
	if l, err := m2.TryAcquire(e.ctx, name); !errors.Is(err, lease.ErrNotAcquired) {
		e.t.Errorf("TryAcquire while a third Manager holds the lock = %v, %v; want ErrNotAcquired", l, err)
	}
	e.release(r3.l)
	l2, err := m2.TryAcquire(e.ctx, name)
	if err != nil {
		e.t.Fatalf("TryAcquire after the holder released: %v", err)
	}
	if l2.Token() <= r3.l.Token() || r3.l.Token() <= l1.Token() {
		e.t.Errorf("tokens of three grants: %d, %d, %d; want strictly increasing", l1.Token(), r3.l.Token(), l2.Token())
	}
	e.release(l2)

	// Once Release has returned, the lock is free for the same Manager
	// too, each time under a new token (a free lock with nobody waiting is
	// where a store that deletes a lock's state would restart its tokens).
	last := l2.Token()
	for i := range 20 {
		l, err := m2.TryAcquire(e.ctx, name)
		if err != nil {
			e.t.Fatalf("TryAcquire %d right after the same Manager's Release returned: %v", i+1, err)
		}
		if l.Token() <= last {
			e.t.Errorf("TryAcquire %d right after the same Manager's Release: token %d after %d, want greater", i+1, l.Token(), last)
		}
		last = l.Token()
		e.release(l)
	}
}

// caseCancelWhileWaiting: an Acquire whose context ends while it waits
// returns an error that is both ErrNotAcquired and the context's error,
// and the cancelled waiter never absorbs the next hand-off, whether the
// next waiter is another Manager or another goroutine of the same one.
func caseCancelWhileWaiting(e *env) {
	m1, m2, m3 := e.newManager(), e.newManager(), e.newManager()
	name := e.name("cancel")
	l1 := e.acquire(m1, name)

	timeout := e.ttl / 5
	start := time.Now() // before the deadline is set: the wait is at least timeout
	ctx, cancel := context.WithTimeout(e.ctx, timeout)
	_, err := m2.Acquire(ctx, name)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lease.ErrNotAcquired) {
		e.t.Errorf("Acquire past its deadline: %v, want DeadlineExceeded and ErrNotAcquired", err)
	}
	if d := time.Since(start); d < timeout || d > timeout+e.prompt() {
		e.t.Errorf("Acquire with a %v timeout returned after %v", timeout, d)
	}

	// Another Manager waits behind the one that gives up.
	ctxA, cancelA := context.WithCancel(e.ctx)
	wA := e.acquireAsync(ctxA, m2, name)
	time.Sleep(e.settle())
	wB := e.acquireAsync(e.ctx, m3, name)
	time.Sleep(e.settle())
	cancelA()
	if r := recv(e, wA, e.prompt(), "cancelled Acquire"); !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, lease.ErrNotAcquired) || r.l != nil {
		e.t.Errorf("cancelled Acquire = %v, %v; want nil, Canceled and ErrNotAcquired", r.l, r.err)
	}
	released := time.Now()
	e.release(l1)
	rB := e.granted(wB, e.takeover(), "the waiter behind a cancelled one")
	if d := rB.at.Sub(released); d >= e.prompt() {
		e.t.Errorf("hand-off past a cancelled waiter took %v, want < %v", d, e.prompt())
	}

	// Two goroutines of one Manager wait; the first gives up.
	ctxC, cancelC := context.WithCancel(e.ctx)
	wC := e.acquireAsync(ctxC, m2, name)
	time.Sleep(e.settle())
	wD := e.acquireAsync(e.ctx, m2, name)
	time.Sleep(e.settle())
	cancelC()
	if r := recv(e, wC, e.prompt(), "cancelled Acquire"); !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, lease.ErrNotAcquired) {
		e.t.Errorf("cancelled Acquire of a local waiter = %v, want Canceled and ErrNotAcquired", r.err)
	}
	released = time.Now()
	e.release(rB.l)
	rD := e.granted(wD, e.takeover(), "the local waiter behind a cancelled one")
	if d := rD.at.Sub(released); d >= e.prompt() {
		e.t.Errorf("hand-off to the local waiter took %v, want < %v", d, e.prompt())
	}
	e.release(rD.l)

	// A context that has already ended never acquires.
	name2 := e.name("cancelled")
	ended, cancelE := context.WithCancel(e.ctx)
	cancelE()
	if l, err := m2.Acquire(ended, name2); !errors.Is(err, context.Canceled) || !errors.Is(err, lease.ErrNotAcquired) || l != nil {
		e.t.Errorf("Acquire with an ended context = %v, %v; want nil, Canceled and ErrNotAcquired", l, err)
	}
	if o := e.get(m1, name2); o.ID != "" {
		e.t.Errorf("after an Acquire with an ended context, %q is held by %q", name2, o.ID)
	}
}

// caseTokensIncrease: tokens grow strictly with every grant — several
// Managers, the same Manager twice, a raw grant in between — and stay the
// same across renewals (about one per ttl/3) and an idempotent re-Acquire.
func caseTokensIncrease(e *env) {
	m0, t0 := e.tappedManager()
	ms := []*lease.Manager{m0, e.newManager(), e.newManager()}
	raw := e.client()
	ghost := ghostID()
	name := e.name("tokens")
	var last uint64
	for i, who := range []int{0, 1, 1, -1, 2, 0} {
		var token uint64
		if who < 0 {
			rec, err := raw.Acquire(e.ctx, name, ghost, e.ttl, e.transition)
			if err != nil || rec.OwnerID != ghost {
				e.t.Fatalf("Store.Acquire of a free lock = %+v, %v; want a grant", rec, err)
			}
			again, err := raw.Acquire(e.ctx, name, ghost, e.ttl, e.transition)
			if err != nil || again.OwnerID != ghost || again.Token != rec.Token {
				e.t.Errorf("repeated Store.Acquire by the holder = %+v, %v; want the same grant, token %d", again, err, rec.Token)
			}
			if err := raw.Release(e.ctx, name, ghost, rec.Token); err != nil {
				e.t.Fatalf("Store.Release by the holder: %v", err)
			}
			token = rec.Token
		} else {
			l := e.acquire(ms[who], name)
			if o := e.get(ms[(who+1)%3], name); o.Token != l.Token() {
				e.t.Errorf("Get shows token %d, the lease has %d", o.Token, l.Token())
			}
			e.release(l)
			token = l.Token()
		}
		if token <= last {
			e.t.Errorf("grant %d has token %d after token %d, want strictly increasing", i+1, token, last)
		}
		last = token
	}

	l := e.acquire(ms[0], name)
	if l.Token() <= last {
		e.t.Errorf("grant after the loop has token %d after %d", l.Token(), last)
	}
	from := time.Now()
	time.Sleep(e.ttl + e.transition + e.ttl/2) // several renewals
	e.checkRenewals(t0, name, m0.ID(), l.Token(), from, time.Now())
	if !l.Held() || l.Token() != l.Owner().Token {
		e.t.Fatalf("after renewals: Held() = %v, Owner() = %+v, Token() = %d", l.Held(), l.Owner(), l.Token())
	}
	if o := e.get(ms[1], name); o.ID != ms[0].ID() || o.Token != l.Token() {
		e.t.Errorf("after renewals Get = %q token %d, want %q token %d", o.ID, o.Token, ms[0].ID(), l.Token())
	}
	if rec := e.rawGet(raw, name); rec.OwnerID != ms[0].ID() || rec.Token != l.Token() {
		e.t.Errorf("after renewals the store has %+v, want owner %q token %d", rec, ms[0].ID(), l.Token())
	}
	e.release(l)
}

// caseReleaseWakesWaiter: a release hands the lock to a waiting Manager
// far sooner than its polling would (< ttl/2), then to the other waiting
// Manager, then to a waiting goroutine of the same Manager, each time under
// a new token, and only once the released lease's context has ended. With
// a fair store (Harness.Fair) the Manager that began waiting first is
// served first.
func caseReleaseWakesWaiter(e *env) {
	m1, t1 := e.tappedManager()
	e.slowRelease(t1)
	ms, ts := make([]*lease.Manager, 2), make([]*tap, 2)
	ws := make([]<-chan acquired, 2)
	name := e.name("wake")
	l1 := e.acquire(m1, name)
	for i := range ms {
		ms[i], ts[i] = e.tappedManager()
		ws[i] = e.acquireAsync(e.ctx, ms[i], name)
		e.waitLost(ts[i], name, ms[i].ID()) // in order: the first waits longest
	}

	// Whoever is granted first, the release must end l1 before.
	twos := []*atomic.Bool{liveAtGrant(ts[0], ms[0].ID(), name, l1.Context), liveAtGrant(ts[1], ms[1].ID(), name, l1.Context)}
	released := time.Now()
	e.release(l1)
	var first acquired
	i := 0
	select {
	case first = <-ws[0]:
	case first = <-ws[1]:
		i = 1
	case <-time.After(e.takeover()):
		e.t.Fatalf("no waiter was granted the lock within %v of the release", e.takeover())
	}
	if first.err != nil {
		e.t.Fatalf("waiter %d after the release: %v", i+1, first.err)
	}
	if d := first.at.Sub(released); d >= e.prompt() {
		e.t.Errorf("hand-off to another Manager took %v, want < %v (ttl/2): are waiters woken on release?", d, e.prompt())
	}
	if twos[i].Load() {
		e.t.Errorf("a waiter was granted while the released lease's context was live: a lease must end before its release is sent")
	}
	if e.h.Fair && i != 0 {
		e.t.Errorf("the Manager that began waiting second was served first: the store claims a fair queue (Harness.Fair)")
	}
	if first.l.Token() <= l1.Token() {
		e.t.Errorf("hand-off token %d after %d, want greater", first.l.Token(), l1.Token())
	}

	j := 1 - i
	second := e.handOff(first.l, ws[j], ts[j], ms[j].ID(), "the other waiting Manager")

	local := e.acquireAsync(e.ctx, ms[j], name)
	time.Sleep(e.settle())
	r := e.handOff(second.l, local, ts[j], ms[j].ID(), "a waiting goroutine of the same Manager")
	e.release(r.l)
}

// caseWatch: an observer that does not contend sees the owner change on
// acquire and release, in order, and its channel closes when its context
// ends.
func caseWatch(e *env) {
	obs, m1, m2 := e.newManager(), e.newManager(), e.newManager()
	name := e.name("watch")
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ch, err := obs.Watch(ctx, name)
	if err != nil {
		e.t.Fatalf("Watch: %v", err)
	}
	seen := func(id string, token uint64, what string) {
		e.t.Helper()
		deadline := time.After(e.takeover())
		for {
			select {
			case o, ok := <-ch:
				if !ok {
					e.t.Fatalf("watch channel closed while waiting for %s", what)
				}
				if o.Name != name {
					e.t.Errorf("watched %q, got an owner of %q", name, o.Name)
				}
				if o.ID == id && (token == 0 || o.Token == token) {
					return
				}
			case <-deadline:
				e.t.Fatalf("watch did not report %s within %v", what, e.takeover())
			}
		}
	}
	l1 := e.acquire(m1, name)
	seen(m1.ID(), l1.Token(), "the first owner")
	e.release(l1)
	seen("", 0, "the release")
	l2 := e.acquire(m2, name)
	seen(m2.ID(), l2.Token(), "the second owner")
	cancel()
	deadline := time.After(e.prompt())
	for open := true; open; {
		select {
		case _, open = <-ch:
		case <-deadline:
			e.t.Fatalf("watch channel still open %v after its context ended", e.prompt())
		}
	}
	e.release(l2)
}
