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
// release failed is remembered and given back by a worker.
func (s *slot) releaseLease(ctx context.Context, l *Lease) error {
	m := s.m
	l.cancel(ErrReleased)
	s.mu.Lock()
	s.busy = true // nobody else is busy while a lease is held
	s.mu.Unlock()
	err := s.releaseHeld(ctx, l)
	s.mu.Lock()
	s.lease, s.busy = nil, false
	if err != nil && !errors.Is(err, ErrNotHeld) {
		s.p.lostToken = l.token
	}
	l.mu.Lock()
	l.ended(err)
	l.mu.Unlock()
	s.mu.Unlock()
	if err == nil {
		m.notifyOwner(Owner{Mutex: s.name})
	}
	s.next(false)
	return err
}

// releaseHeld releases a held grant, retrying an unknown outcome a few
// times while the grant could still be live and ctx lasts.
func (s *slot) releaseHeld(ctx context.Context, l *Lease) error {
	cfg := &s.m.cfg
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		err = s.release(ctx, l.token)
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
	m := s.m
	err := m.call(ctx, func(ctx context.Context) error {
		return m.store.Release(ctx, s.name, m.cfg.id, token)
	})
	if err != nil && !errors.Is(err, ErrNotHeld) {
		m.cfg.logger.Warn("release failed", "mutex", s.name, "token", token, "error", err)
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
	told := l.ctx.Err() == nil // not already released by a Stop
	s.endLocked(l, ErrLost, l.token)
	if told {
		s.m.cfg.logger.Warn("lease lost: no renewal confirmed before the deadline", "mutex", l.name, "token", l.token)
	}
	s.next(true)
}

// refused ends l because a renewal found another grant current: it is
// lost, and nothing of ours is left to release. It reports whether it
// ended l.
func (l *Lease) refused() bool {
	s := l.s
	if !s.lockLive(l) {
		return false
	}
	s.endLocked(l, ErrLost, 0)
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
