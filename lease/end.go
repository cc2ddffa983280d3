package lease

import (
	"context"
	"errors"
	"time"
)

// How a held lease ends: released (releaseLease), lost at its deadline
// (lose), refused by the store (refused), or abandoned by a Stop whose
// context ended (abandon). Each cancels the lease's context before
// anything else can happen, takes it out of the timers, and frees the
// slot for the claims that wait.

// releaseLease releases l, which its caller has marked ending, in the
// caller's goroutine: the context is cancelled first, then the store is
// asked (with a few retries while the grant could be live). A grant whose
// release failed is remembered and given back by a worker. A late release
// (l's deadline had passed: the timers had not yet ended it) ends a lost
// lease: its context's cause is ErrLost, and it counts as lost, though the
// grant is still given back here. So does a release the store answers
// with ErrNotHeld only once the deadline has passed (the process stalled
// while the release was on its way, and the grant lapsed meanwhile),
// unless the lease's context was made: its cause, ErrReleased, was told
// before the release was sent, and stays.
func (s *slot) releaseLease(ctx context.Context, l *Lease, late bool) error {
	cause := ErrReleased
	if late {
		cause = ErrLost
	}
	m := s.m
	l.cancel(cause)
	s.mu.Lock()
	s.busy = true // nobody else is busy while a lease is held
	s.mu.Unlock()
	err := s.releaseHeld(ctx, l)
	if !late && errors.Is(err, ErrNotHeld) && !m.cfg.clock.Now().Before(l.Deadline()) && l.lapsed() {
		late = true // not ours to end any more: it lapsed
	}
	s.mu.Lock()
	s.lease, s.busy = nil, false
	if err != nil && !errors.Is(err, ErrNotHeld) {
		s.p.lostToken = l.token
	}
	if err == nil && m.obs.on && len(s.claims) > 0 {
		s.seenFree(m.cfg.clock.Now(), wakeLocal) // a local waiter's hand-off starts
	}
	l.mu.Lock()
	l.ended(err)
	l.mu.Unlock()
	s.mu.Unlock()
	switch {
	case late:
		m.lost(l, causeDeadline, "")
	case err == nil || errors.Is(err, ErrNotHeld):
		m.obs.holding(s.name, -1)
		m.logReleased(l, err)
	default:
		m.obs.holding(s.name, -1)
	}
	if err == nil {
		m.noteReleased(s.name, l.token, l.waited)
		m.notifyOwner(Owner{Name: s.name})
	}
	s.next(false)
	return err
}

// releaseHeld releases a held grant, retrying an unknown outcome a few
// times while the grant could still be live and ctx lasts. A retry that
// finds the grant gone before the lease's deadline, which it cannot have
// outlived on the server, means an earlier attempt whose reply was lost
// (a timeout, a dropped connection) ended it: that is a release, not
// [ErrNotHeld].
func (s *slot) releaseHeld(ctx context.Context, l *Lease) error {
	cfg := &s.m.cfg
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var c *callCtx
		if attempt == 0 {
			c = &l.releaseCall
		}
		err = s.releaseIn(c, ctx, l.token)
		if attempt > 0 && errors.Is(err, ErrNotHeld) && cfg.clock.Now().Before(l.Deadline()) {
			return nil
		}
		if err == nil || errors.Is(err, ErrNotHeld) || ctx.Err() != nil || !cfg.clock.Now().Before(l.Deadline()) {
			return err
		}
		var none <-chan Event
		if !pause(cfg.clock, cfg.backoff(attempt), &none, nil, ctx.Done(), nil) {
			return err
		}
	}
	return err
}

// release gives up a grant (token 0: only withdraws from the queue), best
// effort.
func (s *slot) release(ctx context.Context, token uint64) error {
	return s.releaseIn(nil, ctx, token)
}

// releaseIn is release with its call's context in c (see startCall).
func (s *slot) releaseIn(c *callCtx, ctx context.Context, token uint64) error {
	m := s.m
	if token != 0 {
		m.noteGivenUp(s.name, token)
	}
	err := m.callIn(c, ctx, opRelease, func(ctx context.Context) error {
		return m.store.Release(ctx, s.name, m.cfg.id, token)
	})
	if err != nil && !errors.Is(err, ErrNotHeld) {
		m.logReleaseFailed(s.name, token, err)
	}
	return err
}

// lose ends l at its deadline, from the timers' goroutine: no renewal was
// confirmed in time. Its grant may still be live on the store, so the slot
// gives it back (or, if a claim waits, refuses it) before granting again.
func (l *Lease) lose(now time.Time) {
	s := l.s
	if !s.lockLive(l) {
		return
	}
	if now.Before(l.deadline) { // renewed meanwhile
		l.mu.Unlock()
		s.mu.Unlock()
		return
	}
	s.endLocked(l, ErrLost, l.token)
	s.m.lost(l, causeDeadline, "")
	s.next(true)
}

// refused ends l because a renewal found another grant current (of
// owner, if the store named it): it is lost, and nothing of ours is left
// to release. It reports whether it ended l.
func (l *Lease) refused(owner string) bool {
	s := l.s
	if !s.lockLive(l) {
		return false
	}
	s.endLocked(l, ErrLost, 0)
	s.m.lost(l, causeNotHeld, owner)
	s.next(true)
	return true
}

// abandon ends l without releasing it, for a Stop whose context ended
// while a callback still runs under it: the grant is left to lapse, and
// like a lost one it is never handed out again (attempts wait until it
// could have lapsed, and give it back if the store still has it).
func (l *Lease) abandon() {
	s := l.s
	l.mu.Lock()
	if l.state >= leaseEnding {
		l.mu.Unlock()
		return
	}
	until := l.deadline.Add(s.m.cfg.safety)
	l.mu.Unlock()
	s.m.abandon(s.name, until) // before the slot is free: no attempt may precede it
	if !s.lockLive(l) {
		return
	}
	s.endLocked(l, ErrReleased, l.token)
	s.m.lost(l, causeStopped, "")
	s.next(false)
}

// lockLive locks s and l, in that order, and reports whether l is still
// held or draining; if not, it unlocks both.
func (s *slot) lockLive(l *Lease) bool {
	s.mu.Lock()
	l.mu.Lock()
	if l.state < leaseEnding {
		return true
	}
	l.mu.Unlock()
	s.mu.Unlock()
	return false
}

// endLocked ends the live lease l of s without a server-side end: its
// context is cancelled with cause first, it leaves the timers, and the
// slot is free, remembering lost (a token that may still be live, or 0).
// It unlocks l and s, which lockLive locked.
func (s *slot) endLocked(l *Lease, cause error, lost uint64) {
	l.cancel(cause)
	s.m.timers.unschedule(l)
	l.ended(nil)
	l.mu.Unlock()
	s.lease = nil
	if lost != 0 {
		s.p.lostToken = lost
	}
	s.mu.Unlock()
}

// lost records that l ended without a release, for cause (owner: the
// owner the store reported, if any). Called with no lock held.
func (m *Manager) lost(l *Lease, c cause, owner string) {
	m.obs.holding(l.name, -1)
	m.obs.loss(l.name, c)
	m.logLost(l.name, l.token, c, owner)
}
