package lease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Acquire blocks until this Manager holds the lock name for the caller,
// then returns the held Lease. Waiters of one Manager are served in order.
//
// When ctx ends first, Acquire returns an error that wraps both
// [ErrNotAcquired] and ctx.Err(). After Close it returns [ErrClosed].
func (m *Manager) Acquire(ctx context.Context, name string) (*Lease, error) {
	return m.observedClaim(ctx, name, claimAcquire)
}

// TryAcquire makes one attempt to acquire the lock name. When someone
// else holds it (another process, or another goroutine of this Manager, or
// when goroutines of this Manager already wait for it), it returns an error
// wrapping [ErrNotAcquired]. Other errors mean the store could not be asked;
// the outcome is then cleaned up in the background.
func (m *Manager) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	return m.observedClaim(ctx, name, claimTry)
}

// observedClaim is claimLease, timed for the metrics when they are on.
func (m *Manager) observedClaim(ctx context.Context, name string, kind claimKind) (*Lease, error) {
	if !m.obs.on {
		return m.claimLease(ctx, name, kind)
	}
	start := time.Now()
	l, err := m.claimLease(ctx, name, kind)
	m.obs.acquired(ctx, name, kind, start, err)
	return l, err
}

// gained records a lease granted, before its holder gets it; no lock is
// held.
func (m *Manager) gained(l *Lease) {
	m.obs.holding(l.name, 1)
	m.logAcquired(l)
}

func (m *Manager) claimLease(ctx context.Context, name string, kind claimKind) (*Lease, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(ErrNotAcquired, err)
	}
	// A name whose last grant here came after a lost attempt is likely
	// contended: its worker subscribes before the first attempt (worker.go).
	contended := kind != claimTry && m.watcher != nil && m.wasContended(name)
	m.life.RLock()
	if m.closed {
		m.life.RUnlock()
		return nil, ErrClosed
	}
	s := m.slotFor(name)
	if kind == claimTry && (s.lease != nil || len(s.claims) > 0 || s.acquiring) {
		s.mu.Unlock()
		m.life.RUnlock()
		return nil, fmt.Errorf("%w: %q is held or awaited by this manager", ErrNotAcquired, name)
	}
	if s.lease != nil || s.busy || s.p.errs > 0 || s.p.dirty() || s.abandoned() || contended {
		// Someone holds or awaits it locally, or the store may hold
		// something of ours, or the name is likely contended: wait in line
		// for a worker.
		c := m.newClaim(kind)
		s.add(c)
		s.mu.Unlock()
		m.life.RUnlock()
		return s.waitClaim(ctx, c)
	}
	// Idle: this caller makes the attempt itself, in its own goroutine.
	s.busy, s.acquiring = true, true
	spare := s.spare
	s.spare = nil
	m.wg.Add(1) // Close waits for the attempt (and what it starts)
	s.mu.Unlock()
	m.life.RUnlock()
	l, c, err := s.acquireNow(ctx, kind, spare)
	m.wg.Done()
	if c != nil {
		return s.waitClaim(ctx, c)
	}
	return l, err
}

// acquireNow is one Acquire in the caller's goroutine, which is busy with
// the idle slot s: it returns the lease when granted, an error when the
// claim fails, or, when an Acquire must wait (the lock is taken, or the
// store failed), a claim first in line that a worker now serves. l, when
// not nil, is an unused lease made with the slot (see newSlot).
func (s *slot) acquireNow(ctx context.Context, kind claimKind, l *Lease) (*Lease, *claim, error) {
	m, cfg := s.m, &s.m.cfg
	sent := cfg.clock.Now()
	if l == nil {
		l = new(Lease) // used if granted; made now to hold the call's context
	}
	call := m.startCall(&l.acquireCall, ctx)
	rec, err := m.store.Acquire(call, s.name, cfg.id, cfg.ttl, cfg.transition)
	call.end()
	m.called(opAcquire, call, err)
	if err != nil {
		err = fmt.Errorf("lease: acquire %q: %w", s.name, err)
		if ctx.Err() == nil { // else the caller ended it, and gets the error
			m.logAcquireFailed(s.name, err)
		}
		s.mu.Lock()
		s.p.uncertain = true
		s.p.errs++
		switch {
		case ctx.Err() != nil:
			return s.giveUp(nil, errors.Join(ErrNotAcquired, ctx.Err()))
		case kind == claimTry || errors.Is(err, ErrStoreSetup):
			return s.giveUp(nil, err)
		}
		s.p.delay = cfg.backoff(s.p.errs - 1)
		return s.waitInLine(kind)
	}
	m.notifyOwner(ownerOf(s.name, rec))
	if !rec.Held(cfg.id) {
		s.mu.Lock()
		s.p.queued = true
		if m.obs.on { // free at the owner's transition end, unless released earlier
			s.seenFree(sent.Add(rec.Transition), wakePoll)
		}
		if kind == claimTry {
			return s.giveUp(nil, fmt.Errorf("%w: %q is held by %q", ErrNotAcquired, s.name, rec.OwnerID))
		}
		return s.waitInLine(kind) // the worker subscribes and tries again at once
	}
	if m.wasReleased(s.name, rec.Token, sent) {
		// A grant of ours this Manager released, which the store forgot
		// (released.go): a worker gives it back and tries again.
		s.mu.Lock()
		s.p.lostToken = rec.Token
		if kind == claimTry {
			return s.giveUp(nil, fmt.Errorf("%w: %q: the store handed back grant %d, released before",
				ErrNotAcquired, s.name, rec.Token))
		}
		return s.waitInLine(kind)
	}
	deadline := cfg.deadline(sent, rec)
	now := cfg.clock.Now()
	if !now.Before(deadline) {
		err := s.tooShort(rec, now.Sub(sent))
		rerr := s.release(ctx, rec.Token)
		s.mu.Lock()
		if rerr != nil && !errors.Is(rerr, ErrNotHeld) {
			s.p.lostToken = rec.Token
		}
		s.p.errs++
		if kind == claimTry || errors.Is(err, ErrGrantTooShort) {
			return s.giveUp(nil, err)
		}
		s.p.delay = cfg.backoff(s.p.errs - 1)
		return s.waitInLine(kind)
	}
	s.mu.Lock()
	if m.isClosing() {
		s.p.lostToken = rec.Token // a worker gives it back
		return s.giveUp(nil, ErrClosed)
	}
	l = newLease(l, s, rec, sent, now, deadline)
	s.lease, s.busy, s.acquiring = l, false, false
	s.mu.Unlock()
	m.gained(l)
	return l, nil, nil
}

// giveUp ends the caller's attempt with err: it stops being busy and lets
// next decide (a worker cleans up what the attempt left). s.mu is held; it
// is unlocked.
func (s *slot) giveUp(l *Lease, err error) (*Lease, *claim, error) {
	s.busy, s.acquiring = false, false
	s.mu.Unlock()
	s.next(true)
	return l, nil, err
}

// waitInLine turns the caller's attempt into a claim first in line and
// hands the slot to a worker. s.mu is held; it is unlocked.
func (s *slot) waitInLine(kind claimKind) (*Lease, *claim, error) {
	c := s.m.newClaim(kind)
	s.claims = append(s.claims, nil)
	copy(s.claims[1:], s.claims)
	s.claims[0] = c
	s.acquiring = false
	s.busy = false
	s.startWorker()
	s.mu.Unlock()
	return nil, c, nil
}

// enqueue adds c to the local queue of name, making sure a worker serves
// it.
func (m *Manager) enqueue(name string, c *claim) (*slot, error) {
	m.life.RLock()
	defer m.life.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	s := m.slotFor(name)
	defer s.mu.Unlock()
	s.add(c)
	return s, nil
}

// slotFor returns the slot of name, making it if needed, with its lock
// held; a new slot starts by refusing a grant an earlier one could not
// release. The shard's lock is held only to find the slot: one retired
// meanwhile is found again.
func (m *Manager) slotFor(name string) *slot {
	sh := m.shardOf(name)
	var fresh *slot // made outside the shard's lock, used if none is there
	for {
		sh.mu.Lock()
		s := sh.slots[name]
		if s == nil && fresh != nil {
			s, fresh = fresh, nil
			_, s.p.lostToken = m.refusalsFor(name, true)
			sh.slots[name] = s
		}
		sh.mu.Unlock()
		if s == nil {
			fresh = newSlot(m, name)
			continue
		}
		s.mu.Lock()
		if !s.retired {
			return s
		}
		s.mu.Unlock()
	}
}

// abandoned reports whether an abandoned grant of the slot's lock must
// still be left to lapse. s.mu is held: a grant abandoned before the slot
// was seen free is recorded by now.
func (s *slot) abandoned() bool {
	wait, _ := s.m.refusalsFor(s.name, false)
	return wait > 0
}

// waitClaim waits for c to be granted or failed, or for ctx to end.
func (s *slot) waitClaim(ctx context.Context, c *claim) (*Lease, error) {
	select {
	case l := <-c.lease:
		s.m.obs.waited(s.name, c, outAcquired)
		return l, nil
	case err := <-c.fail:
		s.m.obs.waited(s.name, c, outcomeOf(ctx, err))
		return nil, err
	case <-ctx.Done():
	}
	s.m.obs.waited(s.name, c, outCanceled)
	if s.cancel(c) {
		return nil, errors.Join(ErrNotAcquired, ctx.Err())
	}
	// Granted (or failed) at the same moment: give a grant straight back.
	select {
	case l := <-c.lease:
		_ = l.stop(context.Background())
	case <-c.fail:
	}
	return nil, errors.Join(ErrNotAcquired, ctx.Err())
}
