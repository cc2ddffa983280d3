package tck

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/lease"
)

// The five cases of Simba's TCK (MutexContendServiceSpec), with the
// guarantees simba-go adds to each.

// caseStart: Contend → OnAcquired, Leading; Stop → OnReleased (before Stop
// returns, after OnAcquired's context ended), not Leading, lock free.
func caseStart(e *env) {
	m := e.newManager()
	name := e.name("start")
	c, r := e.contend(m, name)
	a := r.next(e, e.takeover(), "OnAcquired of the only contender")
	if !c.Leading() {
		e.t.Errorf("Leading() = false inside the term")
	}
	e.checkHeld(m, a.l, name)
	if o := c.Owner(); o.ID != m.ID() {
		e.t.Errorf("Contender.Owner().ID = %q, want the leader %q", o.ID, m.ID())
	}

	e.stop(c)
	if !closed(a.ctx.Done()) {
		e.t.Errorf("OnAcquired's context is still live after Stop returned")
	}
	select {
	case rel := <-r.released:
		if rel.prev.ID != m.ID() || rel.prev.Token != a.l.Token() || rel.prev.Name != name {
			e.t.Errorf("OnReleased(%+v), want the ended grant (ID %s, token %d)", rel.prev, m.ID(), a.l.Token())
		}
	default:
		e.t.Errorf("OnReleased was not called before Stop returned")
	}
	if c.Leading() {
		e.t.Errorf("Leading() = true after Stop")
	}
	e.checkEnded(a.l, lease.ErrReleased)
	if o := e.get(m, name); o.ID != "" {
		e.t.Errorf("after Stop, Get names %q (token %d), want a free lock", o.ID, o.Token)
	}
	if err := c.Stop(e.ctx); err != nil {
		e.t.Errorf("second Stop: %v, want nil", err)
	}
	select {
	case <-r.acquired:
		e.t.Errorf("OnAcquired called again after Stop")
	default:
	}
	r.verify(e, m.ID())
}

// caseRestart: the start sequence twice on one Manager; the second grant's
// token is greater.
func caseRestart(e *env) {
	m := e.newManager()
	name := e.name("restart")
	var tokens []uint64
	for round := 1; round <= 2; round++ {
		c, r := e.contend(m, name)
		a := r.next(e, e.takeover(), fmt.Sprintf("OnAcquired in round %d", round))
		if !c.Leading() {
			e.t.Errorf("round %d: Leading() = false inside the term", round)
		}
		tokens = append(tokens, a.l.Token())
		e.stop(c)
		rel := recv(e, r.released, e.prompt(), fmt.Sprintf("OnReleased in round %d", round))
		if rel.prev.Token != a.l.Token() {
			e.t.Errorf("round %d: OnReleased with token %d, want %d", round, rel.prev.Token, a.l.Token())
		}
		if c.Leading() {
			e.t.Errorf("round %d: Leading() = true after Stop", round)
		}
		r.verify(e, fmt.Sprintf("%s in round %d", m.ID(), round))
	}
	if tokens[1] <= tokens[0] {
		e.t.Errorf("tokens of two successive grants: %d then %d, want strictly increasing", tokens[0], tokens[1])
	}
}

// caseGuard: a leader stays the leader through renewals (for 3 ttl, longer
// than ttl + transition) with the same token and a deadline that moves on;
// it renews about every ttl/3, and the renewed grant runs for ttl, then
// transition.
func caseGuard(e *env) {
	m, mt := e.tappedManager()
	raw := e.client()
	name := e.name("guard")
	c, r := e.contend(m, name)
	a := r.next(e, e.takeover(), "OnAcquired")
	token, deadline0 := a.l.Token(), a.l.Deadline()

	from := time.Now()
	select {
	case <-a.ctx.Done():
		e.t.Fatalf("leadership ended while guarded, cause %v", context.Cause(a.ctx))
	case <-time.After(3 * e.ttl):
	}
	e.checkRenewals(mt, name, m.ID(), token, from, time.Now())
	e.checkDeadline("the guarded leader", a.l, mt)

	if !c.Leading() || !a.l.Held() || a.l.Err() != nil {
		e.t.Fatalf("after %v: Leading() = %v, Held() = %v, Err() = %v; want a renewed lease", 3*e.ttl, c.Leading(), a.l.Held(), a.l.Err())
	}
	if a.l.Token() != token || a.l.Owner().Token != token || a.l.Owner().ID != m.ID() {
		e.t.Errorf("after renewals: Token() = %d, Owner() = %+v; want token %d of %s", a.l.Token(), a.l.Owner(), token, m.ID())
	}
	now := time.Now()
	if d := a.l.Deadline(); !d.After(deadline0) || !d.After(now) || d.After(now.Add(e.ttl+e.transition)) {
		e.t.Errorf("Deadline() after renewals is %v from now (first was %v from now); want later than the first, within (0, %v]",
			d.Sub(now), deadline0.Sub(now), e.ttl+e.transition)
	}
	if o := e.get(m, name); o.ID != m.ID() || o.Token != token {
		e.t.Errorf("Get names %q token %d, want %q token %d", o.ID, o.Token, m.ID(), token)
	}
	rec := e.rawGet(raw, name)
	if rec.OwnerID != m.ID() || rec.Token != token || rec.TTL <= 0 {
		e.t.Errorf("store record %+v, want owner %q, token %d, in its ttl", rec, m.ID(), token)
	}
	e.checkRecord("record of a renewed grant", rec)
	if o := c.Owner(); o.ID != m.ID() {
		e.t.Errorf("Contender.Owner().ID = %q, want %q", o.ID, m.ID())
	}
	select {
	case <-r.released:
		e.t.Errorf("OnReleased while still leading")
	default:
	}
	e.stop(c)
	recv(e, r.released, e.prompt(), "OnReleased after Stop")
	if c.Leading() {
		e.t.Errorf("Leading() = true after Stop")
	}
	r.verify(e, m.ID())
}

// caseMultiContend: ten Managers contend for one lock. A counter is
// incremented in OnAcquired (must read 1) and decremented in OnReleased
// (must read 0), also while the Contenders stop: the leader first (its
// callbacks finish their work for a while after its context ended, and the
// next leader must not start before they return), then the others in
// reverse order. At the end of the contention, at a quiet moment that
// comes within the takeover bound, exactly one leads and everyone who
// knows an owner names that one. Half the leaders return from
// OnAcquired at once, half work until their context ends. The followers'
// polls are spread by jitter: they do not all come at the same instant.
func caseMultiContend(e *env) {
	const n = 10
	name := e.name("multi")
	var (
		count      atomic.Int64
		mu         sync.Mutex
		violations []string
		lastToken  uint64
	)
	violate := func(format string, args ...any) {
		mu.Lock()
		violations = append(violations, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	linger := e.ttl / 20 // work a leader finishes after its context ended
	ms := make([]*lease.Manager, n)
	taps := make([]*tap, n)
	cs := make([]*lease.Contender, n)
	stalls := e.watchStalls()
	start := time.Now()
	for i := range n {
		ms[i], taps[i] = e.tappedManager()
		work := i%2 == 0
		c, err := ms[i].Contend(name, lease.Callbacks{
			OnAcquired: func(ctx context.Context, l *lease.Lease) {
				if v := count.Add(1); v != 1 {
					violate("OnAcquired of contender %d: counter is %d, want 1", i, v)
				}
				mu.Lock()
				if l.Token() <= lastToken {
					violations = append(violations, fmt.Sprintf("contender %d leads with token %d after token %d", i, l.Token(), lastToken))
				}
				lastToken = max(lastToken, l.Token())
				mu.Unlock()
				if work {
					<-ctx.Done()
					time.Sleep(linger)
				}
			},
			OnReleased: func(prev lease.Owner) {
				time.Sleep(linger)
				if v := count.Add(-1); v != 0 {
					violate("OnReleased of contender %d: counter is %d, want 0", i, v)
				}
			},
		})
		if err != nil {
			e.t.Fatalf("Contend: %v", err)
		}
		cs[i] = c
	}

	time.Sleep(e.h.MultiContend)

	// The end state is judged at a quiet moment: a machine that stalls a
	// leader past its deadline (a disk that holds an fsync for seconds)
	// makes the lock change hands, and the followers learn of the new owner
	// at their next poll, up to a ttl and a transition later. So the case
	// waits, bounded by the takeover bound, for an instant at which
	// exactly one contender leads and every view names it; only if none
	// comes does it fail, with what it saw last. Overlaps are judged all
	// through, by the callbacks above.
	var (
		leaders []int
		faults  []string
	)
	settled := e.eventually(e.takeover(), func() bool {
		leaders, faults = multiContendState(ms, cs, count.Load())
		return len(faults) == 0
	})
	if !settled {
		for _, f := range faults {
			e.t.Errorf("%v after the contention and %v more: %s", e.h.MultiContend, e.takeover(), f)
		}
	}
	e.checkJitter(polls(taps, name, start.Add((e.ttl+e.transition)/2), time.Now(), false), stalls)

	order := make([]int, 0, n) // the leader first, then as Simba: in reverse order
	if len(leaders) == 1 {
		order = append(order, leaders[0])
	}
	for i := n - 1; i >= 0; i-- {
		if len(leaders) != 1 || i != leaders[0] {
			order = append(order, i)
		}
	}
	for _, i := range order {
		e.stop(cs[i])
	}
	if v := count.Load(); v != 0 {
		e.t.Errorf("after every Stop the counter is %d, want 0", v)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, v := range violations {
		e.t.Errorf("violation: %s", v)
	}
}

// multiContendState returns the contenders of cs that lead and what is
// wrong with the state at the end of caseMultiContend: the counter of
// running leaders is not 1, not exactly one contender leads, two
// contenders see different owners, or the owner seen is not the leader.
func multiContendState(ms []*lease.Manager, cs []*lease.Contender, count int64) (leaders []int, faults []string) {
	if count != 1 {
		faults = append(faults, fmt.Sprintf("the counter is %d, want 1", count))
	}
	for i, c := range cs {
		if c.Leading() {
			leaders = append(leaders, i)
		}
	}
	if len(leaders) != 1 {
		faults = append(faults, fmt.Sprintf("contenders leading: %v, want exactly one", leaders))
	}
	owner := ""
	for i, c := range cs {
		o := c.Owner()
		switch {
		case o.ID == "":
		case owner == "":
			owner = o.ID
		case o.ID != owner:
			faults = append(faults, fmt.Sprintf("contender %d sees owner %q, another sees %q", i, o.ID, owner))
		}
	}
	matches := slices.IndexFunc(ms, func(m *lease.Manager) bool { return m.ID() == owner })
	if owner == "" || matches < 0 {
		faults = append(faults, fmt.Sprintf("the observed owner %q is none of the ten contenders", owner))
	} else if len(leaders) == 1 && leaders[0] != matches {
		faults = append(faults, fmt.Sprintf("the observed owner is contender %d but contender %d leads", matches, leaders[0]))
	}
	return leaders, faults
}
