package tck

import (
	"context"
	"errors"
	"time"

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
	stalls := e.watchStalls()
	sent := time.Now()
	rec, err := raw.Acquire(e.ctx, name, ghost, e.ttl, e.transition)
	if err != nil || rec.OwnerID != ghost || rec.Token == 0 {
		e.t.Fatalf("Store.Acquire of a free lock = %+v, %v; want a grant with a token", rec, err)
	}
	e.checkGrant("record of a new grant", raw, rec, sent, time.Now())

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
	case err != nil || early.OwnerID != ghost:
		e.t.Errorf("Store.Acquire during the holder's transition = %+v, %v; want the holder %q to keep it", early, err, ghost)
	}
	raw.Release(e.ctx, name, other, 0) // leave the wait queue

	w := recv(e, wins, 2*e.takeover(), "a takeover of an abandoned lock")
	if w.err != nil {
		e.t.Fatalf("Acquire of an abandoned lock: %v", w.err)
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
	e.checkJitter(polls(taps, name, from, time.Now(), true), stalls)
	cancel()
	for range n - 1 {
		if r := recv(e, wins, e.prompt(), "a waiter whose Acquire was cancelled"); r.err == nil {
			e.t.Errorf("a second waiter (%s) was granted the lock while %s holds it", ms[r.i].ID(), ms[w.i].ID())
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
	if err != nil || old.OwnerID != ghost {
		e.t.Fatalf("Store.Acquire of a free lock = %+v, %v", old, err)
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
		} else if rec.OwnerID != "" && (rec.OwnerID != m.ID() || rec.Token != l.Token()) {
			e.t.Errorf("Renew by %s reports owner %q token %d, want %q token %d", c.what, rec.OwnerID, rec.Token, m.ID(), l.Token())
		}
		if err := raw.Release(e.ctx, name, c.contender, c.token); !errors.Is(err, lease.ErrNotHeld) {
			e.t.Errorf("Release by %s: %v, want ErrNotHeld", c.what, err)
		}
	}
	if br, ok := raw.(lease.BatchRenewer); ok {
		res, err := br.RenewMany(e.ctx, []lease.RenewRequest{
			{Name: name, Contender: ghost, Token: old.Token, TTL: e.ttl, Transition: e.transition},
		})
		if err != nil || len(res) != 1 || !errors.Is(res[0].Err, lease.ErrNotHeld) {
			e.t.Errorf("RenewMany of a stale grant = %+v, %v; want one result with ErrNotHeld", res, err)
		}
	}
	lost, err := raw.Acquire(e.ctx, name, other, e.ttl, e.transition)
	if err != nil || lost.OwnerID != m.ID() || lost.Token != l.Token() {
		e.t.Errorf("Store.Acquire of a held lock = %+v, %v; want no error and the current owner %q token %d", lost, err, m.ID(), l.Token())
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
	if err != nil || g.OwnerID != ghost {
		e.t.Fatalf("Store.Acquire of a free lock = %+v, %v", g, err)
	}
	time.Sleep(short + transition + e.ttl/5)
	if _, err := raw.Renew(e.ctx, name2, ghost, g.Token, e.ttl, e.transition); !errors.Is(err, lease.ErrNotHeld) {
		e.t.Errorf("Renew after the transition ended: %v, want ErrNotHeld", err)
	}
	if rec := e.rawGet(raw, name2); rec.OwnerID != "" {
		e.t.Errorf("after a late Renew the store has %+v, want a free lock", rec)
	}
	again, err := raw.Acquire(e.ctx, name2, ghost, e.ttl, e.transition)
	if err != nil || again.OwnerID != ghost || again.Token <= g.Token {
		e.t.Errorf("Acquire after the grant lapsed = %+v, %v; want a new grant with a token above %d", again, err, g.Token)
	}
	if err := raw.Release(e.ctx, name2, ghost, again.Token); err != nil {
		e.t.Errorf("Store.Release by the holder: %v", err)
	}
}
