package tck

import (
	"context"
	"errors"
	"time"

	"go.uber.org/goleak"

	"github.com/simba-go/simba/lease"
)

// Abandoned grants, stale calls and the Manager's lifecycle.

// caseTakeoverAfterAbandon: a grant that is never renewed (a raw Acquire by
// a contender no Manager runs, as left by a crashed holder) stays its
// holder's during its transition, even while it is read (Get changes
// nothing), and is taken over by one of six waiting Managers no sooner
// than ttl + transition and within ttl + transition + jitter + slack,
// under a greater token; the waiters' polls are spread by jitter; the
// abandoned holder's late renew and release then change nothing.
func caseTakeoverAfterAbandon(e *env) {
	raw := e.client()
	ghost, other := ghostID(), ghostID()
	name := e.name("abandon")
	span := e.ttl + e.transition
	sent := time.Now()
	rec, err := raw.Acquire(e.ctx, name, ghost, e.ttl, e.transition)
	if err != nil || rec.Owner != ghost || rec.Token == 0 {
		e.t.Fatalf("Store.Acquire of a free mutex = %+v, %v; want a grant with a token", rec, err)
	}
	e.checkRecord("record of a new grant", rec)

	const n = 6
	ctx, cancel := context.WithTimeout(e.ctx, 2*e.takeover())
	defer cancel()
	type won struct {
		i int
		acquired
	}
	wins := make(chan won, n)
	ms, taps := make([]*lease.Manager, n), make([]*tap, n)
	for i := range n {
		ms[i], taps[i] = e.tappedManager()
		go func() {
			l, err := ms[i].Acquire(ctx, name)
			wins <- won{i, acquired{l: l, err: err, at: time.Now()}}
		}()
	}
	if o := e.get(ms[0], name); o.ID != ghost || o.Token != rec.Token {
		e.t.Errorf("Get = %q token %d, want the abandoned grant %q token %d", o.ID, o.Token, ghost, rec.Token)
	}
	e.checkGetChangesNothing(raw, name, ghost, rec.Token)

	// In the grant's transition only its holder may renew: nobody takes it.
	time.Sleep(e.ttl + e.transition/2 - time.Since(sent))
	early, err := raw.Acquire(e.ctx, name, other, e.ttl, e.transition)
	switch answered := time.Since(sent); {
	case answered >= span:
		e.t.Logf("an Acquire meant for the holder's transition was answered %v after the grant, past ttl + transition: not judged", answered)
	case err != nil || early.Owner != ghost:
		e.t.Errorf("Store.Acquire during the holder's transition = %+v, %v; want the holder %q to keep it", early, err, ghost)
	}
	raw.Release(e.ctx, name, other, 0) // leave the wait queue

	w := recv(e, wins, 2*e.takeover(), "a takeover of an abandoned mutex")
	if w.err != nil {
		e.t.Fatalf("Acquire of an abandoned mutex: %v", w.err)
	}
	l, took := w.l, w.at.Sub(sent)
	if took < span-span/20 {
		e.t.Errorf("took over %v after the grant, before its ttl + transition (%v) ended", took, span)
	}
	if took > e.takeover() {
		e.t.Errorf("takeover took %v, want at most ttl + transition + 1s jitter + ttl = %v", took, e.takeover())
	}
	if l.Token() <= rec.Token {
		e.t.Errorf("takeover token %d, abandoned grant had %d; want greater", l.Token(), rec.Token)
	}

	// Every waiter polls once around the transition end: spread by jitter.
	from := sent.Add(span / 2)
	e.eventually(e.takeover(), func() bool {
		for _, t := range taps {
			if len(polls([]*tap{t}, name, from, time.Now(), true)) == 0 {
				return false
			}
		}
		return true
	})
	e.checkJitter(polls(taps, name, from, time.Now(), true))
	cancel()
	for range n - 1 {
		if r := recv(e, wins, e.prompt(), "a waiter whose Acquire was cancelled"); r.err == nil {
			e.t.Errorf("a second waiter (%s) was granted the mutex while %s holds it", ms[r.i].ID(), ms[w.i].ID())
			e.release(r.l)
		}
	}

	if _, err := raw.Renew(e.ctx, name, ghost, rec.Token, e.ttl, e.transition); !errors.Is(err, lease.ErrNotHeld) {
		e.t.Errorf("late Renew of the abandoned grant: %v, want ErrNotHeld", err)
	}
	if err := raw.Release(e.ctx, name, ghost, rec.Token); !errors.Is(err, lease.ErrNotHeld) {
		e.t.Errorf("late Release of the abandoned grant: %v, want ErrNotHeld", err)
	}
	m := ms[w.i]
	if o := e.get(m, name); o.ID != m.ID() || o.Token != l.Token() || !l.Held() {
		e.t.Errorf("after the late calls Get = %q token %d, Held() = %v; want %q token %d held",
			o.ID, o.Token, l.Held(), m.ID(), l.Token())
	}
	e.release(l)
}

// caseStaleRenewRelease: renew and release with an old token, another
// contender's id or a future token fail with ErrNotHeld and leave the
// current owner alone; a renew after the grant's transition ended never
// re-acquires, even with nobody else around; losing an Acquire is not an
// error.
func caseStaleRenewRelease(e *env) {
	raw := e.client()
	m := e.newManager()
	ghost, other := ghostID(), ghostID()
	name := e.name("stale")
	old, err := raw.Acquire(e.ctx, name, ghost, e.ttl, e.transition)
	if err != nil || old.Owner != ghost {
		e.t.Fatalf("Store.Acquire of a free mutex = %+v, %v", old, err)
	}
	if err := raw.Release(e.ctx, name, ghost, old.Token); err != nil {
		e.t.Fatalf("Store.Release by the holder: %v", err)
	}
	if err := raw.Release(e.ctx, name, ghost, old.Token); !errors.Is(err, lease.ErrNotHeld) {
		e.t.Errorf("second Store.Release of one grant: %v, want ErrNotHeld", err)
	}
	l := e.acquire(m, name)
	if l.Token() <= old.Token {
		e.t.Errorf("new grant token %d after %d", l.Token(), old.Token)
	}

	type call struct {
		what      string
		contender string
		token     uint64
	}
	for _, c := range []call{
		{"the previous holder with its old token", ghost, old.Token},
		{"the owner's id with an old token", m.ID(), old.Token},
		{"the owner's id with a future token", m.ID(), l.Token() + 1},
		{"another contender with the current token", other, l.Token()},
	} {
		rec, err := raw.Renew(e.ctx, name, c.contender, c.token, e.ttl, e.transition)
		if !errors.Is(err, lease.ErrNotHeld) {
			e.t.Errorf("Renew by %s: %v, want ErrNotHeld", c.what, err)
		} else if rec.Owner != "" && (rec.Owner != m.ID() || rec.Token != l.Token()) {
			e.t.Errorf("Renew by %s reports owner %q token %d, want %q token %d", c.what, rec.Owner, rec.Token, m.ID(), l.Token())
		}
		if err := raw.Release(e.ctx, name, c.contender, c.token); !errors.Is(err, lease.ErrNotHeld) {
			e.t.Errorf("Release by %s: %v, want ErrNotHeld", c.what, err)
		}
	}
	if br, ok := raw.(lease.BatchRenewer); ok {
		res, err := br.RenewMany(e.ctx, []lease.RenewRequest{
			{Mutex: name, Contender: ghost, Token: old.Token, TTL: e.ttl, Transition: e.transition},
		})
		if err != nil || len(res) != 1 || !errors.Is(res[0].Err, lease.ErrNotHeld) {
			e.t.Errorf("RenewMany of a stale grant = %+v, %v; want one result with ErrNotHeld", res, err)
		}
	}
	lost, err := raw.Acquire(e.ctx, name, other, e.ttl, e.transition)
	if err != nil || lost.Owner != m.ID() || lost.Token != l.Token() {
		e.t.Errorf("Store.Acquire of a held mutex = %+v, %v; want no error and the current owner %q token %d", lost, err, m.ID(), l.Token())
	}
	if err := raw.Release(e.ctx, name, other, 0); !errors.Is(err, lease.ErrNotHeld) { // withdraw from the queue
		e.t.Errorf("Store.Release with token 0: %v, want ErrNotHeld", err)
	}
	if o := e.get(m, name); o.ID != m.ID() || o.Token != l.Token() || !l.Held() || l.Err() != nil {
		e.t.Errorf("after stale calls: Get = %q token %d, Held() = %v, Err() = %v; want %q token %d, held",
			o.ID, o.Token, l.Held(), l.Err(), m.ID(), l.Token())
	}
	e.release(l)

	// A renew after the transition ended never re-acquires.
	name2 := e.name("late")
	short, transition := e.ttl/5, e.ttl/10
	g, err := raw.Acquire(e.ctx, name2, ghost, short, transition)
	if err != nil || g.Owner != ghost {
		e.t.Fatalf("Store.Acquire of a free mutex = %+v, %v", g, err)
	}
	time.Sleep(short + transition + e.ttl/5)
	if _, err := raw.Renew(e.ctx, name2, ghost, g.Token, e.ttl, e.transition); !errors.Is(err, lease.ErrNotHeld) {
		e.t.Errorf("Renew after the transition ended: %v, want ErrNotHeld", err)
	}
	if rec := e.rawGet(raw, name2); rec.Owner != "" {
		e.t.Errorf("after a late Renew the store has %+v, want a free mutex", rec)
	}
	again, err := raw.Acquire(e.ctx, name2, ghost, e.ttl, e.transition)
	if err != nil || again.Owner != ghost || again.Token <= g.Token {
		e.t.Errorf("Acquire after the grant lapsed = %+v, %v; want a new grant with a token above %d", again, err, g.Token)
	}
	if err := raw.Release(e.ctx, name2, ghost, again.Token); err != nil {
		e.t.Errorf("Store.Release by the holder: %v", err)
	}
}

// caseCloseReleases: Close ends the Manager's leases and leadership (before
// it returns) and hands them to waiters at once, but only after the lease's
// context ended and the leader's callbacks returned (its OnAcquired works on
// for ttl/10 after its context ended); afterwards the Manager refuses work
// with ErrClosed.
func caseCloseReleases(e *env) {
	m1, t1 := e.tappedManager()
	e.slowRelease(t1)
	m2, t2 := e.tappedManager()
	lockName, leadName := e.name("lock"), e.name("lead")
	l1 := e.acquire(m1, lockName)
	c1, r1 := e.contendLinger(m1, leadName, e.ttl/10)
	a1 := r1.next(e, e.takeover(), "OnAcquired of the first Manager")
	w2 := e.acquireAsync(e.ctx, m2, lockName)
	e.waitLost(t2, lockName, m2.ID())
	two := liveAtGrant(t2, m2.ID(), lockName, l1.Context)
	c2, r2 := e.contend(m2, leadName)
	if !e.eventually(e.prompt(), func() bool { return r2.lastOwner().ID == m1.ID() }) {
		e.t.Errorf("the follower's OnOwner reported %+v, want the leader %s", r2.lastOwner(), m1.ID())
	}
	time.Sleep(e.settle())

	closing := time.Now()
	ctx, cancel := context.WithTimeout(e.ctx, e.takeover())
	defer cancel()
	if err := m1.Close(ctx); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	e.checkEnded(l1, lease.ErrReleased)
	if !closed(a1.ctx.Done()) || c1.Leading() || r1.releases() != 1 {
		e.t.Errorf("after Close: OnAcquired context done = %v, Leading() = %v, OnReleased calls = %d; want true, false, 1",
			closed(a1.ctx.Done()), c1.Leading(), r1.releases())
	}
	r := e.granted(w2, e.takeover(), "waiter for the closed Manager's lease")
	if d := r.at.Sub(closing); d >= e.prompt() {
		e.t.Errorf("the lease of a closed Manager reached a waiter after %v, want < %v", d, e.prompt())
	}
	if two.Load() {
		e.t.Errorf("the waiter was granted the closed Manager's lease while its context was live: a lease must end before its release is sent")
	}
	a2 := r2.next(e, e.takeover(), "OnAcquired of the other Manager")
	if d := a2.at.Sub(closing); d >= e.prompt() {
		e.t.Errorf("leadership of a closed Manager reached the next contender after %v, want < %v", d, e.prompt())
	}
	if rel := r1.lastRelease(); rel.at.IsZero() || a2.at.Before(rel.at) {
		e.t.Errorf("the next leader's OnAcquired ran %v before the closed leader's OnReleased (or there was none): Close must release only once the callbacks returned",
			rel.at.Sub(a2.at))
	}
	if !c2.Leading() {
		e.t.Errorf("the other Manager does not lead after the leader closed")
	}
	if !e.eventually(e.prompt(), func() bool { return r2.lastOwner().ID == m2.ID() }) {
		e.t.Errorf("the new leader's OnOwner reported %+v, want itself", r2.lastOwner())
	}

	other := e.name("after")
	if _, err := m1.Acquire(e.ctx, other); !errors.Is(err, lease.ErrClosed) {
		e.t.Errorf("Acquire after Close: %v, want ErrClosed", err)
	}
	if _, err := m1.TryAcquire(e.ctx, other); !errors.Is(err, lease.ErrClosed) {
		e.t.Errorf("TryAcquire after Close: %v, want ErrClosed", err)
	}
	if _, err := m1.Contend(other, lease.Callbacks{OnAcquired: func(context.Context, *lease.Lease) {}}); !errors.Is(err, lease.ErrClosed) {
		e.t.Errorf("Contend after Close: %v, want ErrClosed", err)
	}
	if _, err := m1.Watch(e.ctx, other); !errors.Is(err, lease.ErrClosed) {
		e.t.Errorf("Watch after Close: %v, want ErrClosed", err)
	}
	if _, err := lease.Schedule(m1, other, lease.FixedDelay(e.ttl), func(context.Context) error { return nil }); !errors.Is(err, lease.ErrClosed) {
		e.t.Errorf("Schedule after Close: %v, want ErrClosed", err)
	}
	if err := m1.Close(ctx); err != nil {
		e.t.Errorf("second Close: %v, want nil", err)
	}
	if err := l1.Release(ctx); err != nil {
		e.t.Errorf("Release of a lease that Close released: %v, want nil", err)
	}
	e.release(r.l)
	e.stop(c2)
	r1.verify(e, m1.ID())
	r2.verify(e, m2.ID())
}

// caseNoGoroutineLeak: Managers that acquired, waited, contended, watched
// and scheduled leave no goroutine behind once closed — they and their
// stores, whose Close (when they have one) may end what a store keeps for
// later waiters — even with watch contexts still live and an Acquire still
// waiting at Close (which then fails with ErrClosed).
func caseNoGoroutineLeak(e *env) {
	lockName, leadName, jobName := e.name("lock"), e.name("lead"), e.name("job")
	clients := []lease.Store{e.client(), e.client(), e.client()}
	for _, s := range clients { // let clients start what they start on first use
		e.rawGet(s, lockName)
	}
	snapshot := goleak.IgnoreCurrent()

	m1, m2, obs := e.manager(clients[0]), e.manager(clients[1]), e.manager(clients[2])
	l1 := e.acquire(m1, lockName)
	_, r1 := e.contend(m1, leadName)
	r1.next(e, e.takeover(), "OnAcquired")
	_, _ = e.contend(m2, leadName)
	waiting := e.acquireAsync(e.ctx, m2, lockName)
	ran := make(chan struct{}, 1)
	if _, err := lease.Schedule(m1, jobName, lease.FixedDelay(e.ttl/4), func(context.Context) error {
		select {
		case ran <- struct{}{}:
		default:
		}
		return nil
	}); err != nil {
		e.t.Fatalf("Schedule: %v", err)
	}
	recv(e, ran, e.takeover(), "scheduled work")
	watches := make([]<-chan lease.Owner, 0, 2)
	for _, m := range []*lease.Manager{obs, m2} {
		ch, err := m.Watch(e.ctx, lockName) // e.ctx stays live past Close
		if err != nil {
			e.t.Fatalf("Watch: %v", err)
		}
		watches = append(watches, ch)
	}
	time.Sleep(e.settle())

	ctx, cancel := context.WithTimeout(e.ctx, 2*e.takeover())
	defer cancel()
	for _, m := range []*lease.Manager{m2, m1, obs} {
		if err := m.Close(ctx); err != nil {
			e.t.Errorf("Close: %v", err)
		}
	}
	if r := recv(e, waiting, e.prompt(), "Acquire waiting at Close"); !errors.Is(r.err, lease.ErrClosed) {
		e.t.Errorf("Acquire waiting at Close returned %v, %v; want ErrClosed", r.l, r.err)
	}
	for _, ch := range watches {
		deadline := time.After(e.prompt())
		for open := true; open; {
			select {
			case _, open = <-ch:
			case <-deadline:
				e.t.Fatalf("Watch channel still open %v after Close", e.prompt())
			}
		}
	}
	e.checkEnded(l1, lease.ErrReleased)
	for _, s := range clients { // a store's Close ends what it keeps for later waiters
		if c, ok := s.(interface{ Close() error }); ok {
			if err := c.Close(); err != nil {
				e.t.Errorf("store Close: %v", err)
			}
		}
	}
	if err := goleak.Find(append([]goleak.Option{snapshot}, e.h.LeakOptions...)...); err != nil {
		e.t.Errorf("goroutines left after Close: %v", err)
	}
}
