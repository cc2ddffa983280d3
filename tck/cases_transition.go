package tck

import (
	"errors"
	"time"

	"github.com/simba-go/simba/lease"
)

// One grant's timings, through raw Store calls (lease/store.go).
//
// A store answers a call at some instant of its clock between the call's
// sending and its reply, and this process sees both. So a grant made by a
// call sent at s lasts until at least s + ttl + transition, and a call
// whose reply came before then was answered while the grant lived. Each
// check below holds for any store on any machine; when the machine is so
// slow that a call meant for a window was answered outside it, the check
// is not judged (and the case says so), never failed.

// caseTransition: a new grant reports ttl, then transition (or, from a
// store that limits its grants, what it surely keeps); Get changes
// nothing; during the transition another contender loses, and Renew or
// Release with a wrong token fail and leave the grant alone; the holder's
// Renew in its transition runs the grant for ttl, then transition, from
// the server's now (another contender still loses after ttl); the holder's
// Acquire extends its grant under the same token; once the transition has
// passed without renewal, a late Renew fails without reviving the grant and
// another contender is granted with a greater token.
func caseTransition(e *env) {
	raw := e.client()
	holder, other := ghostID(), ghostID()
	name := e.name("transition")
	span := e.ttl + e.transition

	s0 := time.Now()
	g, err := raw.Acquire(e.ctx, name, holder, e.ttl, e.transition)
	r0 := time.Now()
	if err != nil || g.OwnerID != holder || g.Token == 0 {
		e.t.Fatalf("Store.Acquire of a free lock = %+v, %v; want a grant with a token", g, err)
	}
	e.checkGrant("record of a new grant", raw, g, s0, r0)
	e.checkGetChangesNothing(raw, name, holder, g.Token)

	// In the transition: only the holder, with its token, counts.
	sleepUntil(r0.Add(e.ttl + e.transition/4))
	if lost, ok := e.answered(s0.Add(span), func() (lease.Record, error) {
		return raw.Acquire(e.ctx, name, other, e.ttl, e.transition)
	}); ok && (lost.OwnerID != holder || lost.Token != g.Token) {
		e.t.Errorf("Store.Acquire by another contender in the holder's transition = %+v; want the holder %q token %d", lost, holder, g.Token)
	}
	raw.Release(e.ctx, name, other, 0) // leave the wait queue
	if _, err := raw.Renew(e.ctx, name, holder, g.Token+1, e.ttl, e.transition); !errors.Is(err, lease.ErrNotHeld) {
		e.t.Errorf("Renew by the holder with a wrong token: %v, want ErrNotHeld", err)
	}
	if err := raw.Release(e.ctx, name, holder, g.Token+1); !errors.Is(err, lease.ErrNotHeld) {
		e.t.Errorf("Release by the holder with a wrong token: %v, want ErrNotHeld", err)
	}
	s1 := time.Now()
	rn, err := raw.Renew(e.ctx, name, holder, g.Token, e.ttl, e.transition)
	r1 := time.Now()
	if r1.After(s0.Add(span)) {
		e.t.Skipf("the holder's Renew in its transition was answered %v after the grant, past ttl + transition: too slow to go on", r1.Sub(s0))
	}
	if err != nil || rn.OwnerID != holder || rn.Token != g.Token {
		e.t.Fatalf("Renew by the holder in its transition = %+v, %v; want the grant (token %d) renewed", rn, err, g.Token)
	}
	e.checkGrant("record of a renewal in the transition", raw, rn, s1, r1)

	// The renewal holds past its ttl: ttl + transition from its now.
	sleepUntil(r1.Add(e.ttl + e.transition/2))
	if lost, ok := e.answered(s1.Add(span), func() (lease.Record, error) {
		return raw.Acquire(e.ctx, name, other, e.ttl, e.transition)
	}); ok && (lost.OwnerID != holder || lost.Token != g.Token) {
		e.t.Errorf("Store.Acquire by another contender ttl + transition/2 after the holder's renewal = %+v; want the holder %q token %d: a renewal runs the grant for ttl, then transition",
			lost, holder, g.Token)
	}
	raw.Release(e.ctx, name, other, 0)
	s2 := time.Now()
	again, err := raw.Acquire(e.ctx, name, holder, e.ttl, e.transition)
	r2 := time.Now()
	if r2.Before(s1.Add(span)) && (err != nil || again.OwnerID != holder || again.Token != g.Token) {
		e.t.Errorf("Store.Acquire by the holder of its live grant = %+v, %v; want the same grant, token %d, extended", again, err, g.Token)
	} else if err == nil && again.OwnerID == holder && again.Token == g.Token {
		e.checkGrant("record of the holder's Acquire of its live grant", raw, again, s2, r2)
	}
	last := g.Token
	if err == nil && again.OwnerID == holder {
		last = again.Token
	}

	// Lapsed: a late Renew never revives the grant; anyone may take it.
	sleepUntil(r2.Add(span + e.ttl/10))
	if _, err := raw.Renew(e.ctx, name, holder, last, e.ttl, e.transition); !errors.Is(err, lease.ErrNotHeld) {
		e.t.Errorf("Renew after the transition ended: %v, want ErrNotHeld", err)
	}
	taken, err := raw.Acquire(e.ctx, name, other, e.ttl, e.transition)
	if err != nil || taken.OwnerID != other || taken.Token <= last {
		e.t.Errorf("Store.Acquire by another contender after the grant lapsed = %+v, %v; want a grant with a token above %d", taken, err, last)
	} else if err := raw.Release(e.ctx, name, other, taken.Token); err != nil {
		e.t.Errorf("Store.Release by the new holder: %v", err)
	}
}

// answered runs call and returns its record when its reply came before
// by, so that the store answered it before then; otherwise it logs that
// the answer came too late to judge. An error fails the case.
func (e *env) answered(by time.Time, call func() (lease.Record, error)) (lease.Record, bool) {
	e.t.Helper()
	rec, err := call()
	if err != nil {
		e.t.Errorf("store call: %v", err)
		return rec, false
	}
	if late := time.Since(by); late > 0 {
		e.t.Logf("a store call was answered %v past the window it was meant for: not judged", late)
		return rec, false
	}
	return rec, true
}

// sleepUntil sleeps until t.
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }
