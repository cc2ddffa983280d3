package tck

import (
	"context"
	"errors"
	"time"

	"github.com/simba-go/simba/lease"
)

// A slow store, and a grant that ends behind its holder's back.

// caseSlowStore: a holder whose every reply comes back late (the store
// applies each call at once, its answer arrives a little more than the
// safety margin later, within the call's timeout) keeps its lease and its
// leadership through 3 ttl of renewals, and its deadline never lies more
// than ttl + transition after the sending of the newest call that
// succeeded: a deadline counts from when a call was sent, never from when
// its reply came. Its release still reaches a waiter promptly.
//
// A store that limits its grants may tell its holder less than asked
// (lease.GrantLimiter): a lease it loses because its deadline passed
// before a renewal sent at the last reply could come back is not judged.
func caseSlowStore(e *env) {
	m, mt := e.tappedManager(lease.WithCallTimeout(e.ttl))
	mt.set(func(t *tap) { t.delay = e.slowReply() })
	w, wt := e.tappedManager()
	lockName, leadName := e.name("lock"), e.name("lead")

	l := e.acquire(m, lockName)
	c, r := e.contend(m, leadName)
	a := r.next(e, e.takeover(), "OnAcquired on a slow store")
	waiting := e.acquireAsync(e.ctx, w, lockName)
	for end := time.Now().Add(3 * e.ttl); time.Now().Before(end); time.Sleep(e.ttl / 20) {
		if !l.Held() || a.ctx.Err() != nil {
			if why, ok := e.noRoom(mt, l, a.l); ok {
				e.t.Skipf("on a slow store: %s: not judged", why)
			}
			e.t.Fatalf("on a slow store: lease Held() = %v (Err %v), leader's context Err = %v; want both kept by renewals",
				l.Held(), l.Err(), context.Cause(a.ctx))
		}
		e.checkDeadline("lease on a slow store", l, mt)
		e.checkDeadline("leadership on a slow store", a.l, mt)
		if e.t.Failed() {
			break
		}
	}
	e.handOff(l, waiting, wt, w.ID(), "waiter for a lease released on a slow store")
	e.stop(c)
	r.verify(e, m.ID())
}

// caseRevokedLease: a grant ended behind its holder's back (released by
// another client with the holder's id and token, as an operator or a store
// that lost its data could) is noticed at the holder's next renewal: the
// store answers ErrNotHeld, the lease ends with ErrLost at once, long
// before its deadline, and the holder never renews that grant again.
// Another Manager was granted the lock meanwhile.
func caseRevokedLease(e *env) {
	m, mt := e.tappedManager()
	other := e.newManager()
	raw := e.client()
	name := e.name("revoked")
	l := e.acquire(m, name)
	if err := raw.Release(e.ctx, name, m.ID(), l.Token()); err != nil {
		e.t.Fatalf("Store.Release with the holder's id and token: %v", err)
	}
	lo := e.acquire(other, name)
	refused := e.refusedRenewal(mt, name, m.ID(), l.Token())
	if !e.eventually(e.prompt(), func() bool { return closed(l.Done()) }) {
		e.t.Errorf("the lease is still live %v after the store refused its renewal (its deadline is %v after that): ErrNotHeld must end it at once",
			e.prompt(), l.Deadline().Sub(refused.returned))
	}
	e.checkEnded(l, lease.ErrLost)
	if err := l.Release(e.ctx); !errors.Is(err, lease.ErrLost) {
		e.t.Errorf("Release of a revoked lease: %v, want ErrLost", err)
	}
	e.checkNoRenewalAfter(mt, refused)
	if o := e.get(other, name); o.ID != other.ID() || o.Token != lo.Token() || !lo.Held() {
		e.t.Errorf("after the revoked holder's renewal: Get = %q token %d, Held() = %v; want %q token %d held",
			o.ID, o.Token, lo.Held(), other.ID(), lo.Token())
	}
	e.release(lo)
}

// caseRevokedLeader: a leader whose grant is ended behind its back loses
// leadership at its next renewal (its context ends, OnReleased runs), never
// renews that grant again, contends again and, alone, leads again under a
// greater token.
func caseRevokedLeader(e *env) {
	m, mt := e.tappedManager()
	raw := e.client()
	name := e.name("revoked")
	c, r := e.contend(m, name)
	a := r.next(e, e.takeover(), "OnAcquired")
	if err := raw.Release(e.ctx, name, m.ID(), a.l.Token()); err != nil {
		e.t.Fatalf("Store.Release with the leader's id and token: %v", err)
	}
	refused := e.refusedRenewal(mt, name, m.ID(), a.l.Token())
	e.checkNoRenewalAfter(mt, refused)
	rel := recv(e, r.released, e.prompt(), "OnReleased after the store refused the leader's renewal")
	if rel.prev.Token != a.l.Token() || !errors.Is(a.l.Err(), lease.ErrLost) {
		e.t.Errorf("OnReleased(%+v), lease Err() = %v; want token %d, ErrLost", rel.prev, a.l.Err(), a.l.Token())
	}
	again := r.next(e, e.takeover(), "OnAcquired of the revoked leader, contending again")
	if again.l.Token() <= a.l.Token() {
		e.t.Errorf("the revoked leader leads again with token %d after %d, want greater", again.l.Token(), a.l.Token())
	}
	e.stop(c)
	r.verify(e, m.ID())
}

// refusedRenewal waits for a renewal of id's grant with token that the
// store refused with ErrNotHeld, and returns it.
func (e *env) refusedRenewal(t *tap, name, id string, token uint64) call {
	e.t.Helper()
	return e.waitCall(t, e.ttl, "a renewal of the revoked grant", func(c call) bool {
		return c.op == opRenew && c.mutex == name && c.contender == id && c.token == token && errors.Is(c.err, lease.ErrNotHeld)
	})
}

// checkNoRenewalAfter waits ttl/2 (a renewal period and more) and checks
// that no renewal of refused's grant was sent after refused came back.
func (e *env) checkNoRenewalAfter(t *tap, refused call) {
	e.t.Helper()
	time.Sleep(e.ttl / 2)
	if n := len(t.calls(func(c call) bool {
		return c.op == opRenew && c.mutex == refused.mutex && c.contender == refused.contender &&
			c.token == refused.token && c.sent.After(refused.returned)
	})); n > 0 {
		e.t.Errorf("the holder renewed its grant %d more times after the store answered ErrNotHeld: the lease is lost, it must stop", n)
	}
}
