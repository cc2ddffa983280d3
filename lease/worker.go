package lease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// run is a worker goroutine, counted by the Manager's WaitGroup.
func (s *slot) run() {
	defer s.m.wg.Done()
	s.work(true)
}

// work is a slot's worker: busy with the slot, it contends for the
// waiting claims and hands a grant to the first; it ends once it has done
// so (the lease then needs no goroutine; the next worker starts when it
// ends), or once no claim is left and it has cleaned up. counted says
// whether it runs in a goroutine the Manager's WaitGroup counts (see next).
func (s *slot) work(counted bool) {
	s.mu.Lock()
	delay := s.p.delay
	s.p.delay = 0
	s.mu.Unlock()
	if delay > 0 { // a failed attempt of a caller came just before
		var none <-chan Event
		s.wait(delay, &none)
	}
	for s.serve(counted) {
	}
}

// serve contends for the claims until a grant is handed out or no claim is
// left; then it cleans up and reports whether claims came meanwhile.
func (s *slot) serve(counted bool) bool {
	m := s.m
	ctx, cancel := context.WithCancel(context.Background()) // the subscription's
	defer cancel()
	var events <-chan Event
	deaf := false // the last Watch failed: poll, as without a Watcher
	for {
		if m.isClosing() {
			s.failIf(ErrClosed, anyClaim)
		}
		if s.empty() {
			cancel() // ends the subscription
			s.cleanup()
			return !s.idle(counted)
		}
		if events == nil && m.watcher != nil && (s.p.queued || s.p.errs > 0 || m.wasContended(s.name)) {
			// Subscribe once an attempt lost (an uncontended acquire never
			// pays for a subscription) and attempt again at once: a release
			// between the lost attempt and the subscription is seen by the
			// new attempt, later ones by the subscription. A name whose
			// last grant here, released lately, came after a lost attempt
			// is subscribed to before the first attempt: under contention
			// that attempt then waits (a store with a queue queues it) and
			// saves the second.
			var err error
			events, err = m.watcher.Watch(ctx, s.name, m.cfg.id)
			deaf = err != nil || events == nil
		}
		select { // changes before this attempt are seen by it
		case <-s.wake:
		default:
		}
		if s.p.lostToken == 0 { // one this slot's clean-up (or an earlier slot) left
			s.p.lostToken = m.refused(s.name)
		}
		if s.attempt(ctx, &events, deaf) {
			return false
		}
	}
}

// idle stops being busy if no claim waits, and reports whether it did.
func (s *slot) idle(counted bool) bool {
	s.mu.Lock()
	if len(s.claims) > 0 {
		s.mu.Unlock()
		return false
	}
	s.busy = false
	s.mu.Unlock()
	s.next(counted)
	return true
}

// attempt makes one Acquire and acts on its outcome: hand the grant to the
// first claim (reporting true), or wait until the next attempt is due.
// deaf says the last subscription failed: a lost attempt then waits as if
// the store could not push, instead of attempting again at once.
func (s *slot) attempt(ctx context.Context, events *<-chan Event, deaf bool) bool {
	m, cfg, p := s.m, &s.m.cfg, &s.p
	if wait := m.abandoned(s.name); wait > 0 {
		s.wait(wait, events)
		return false
	}
	sent := cfg.clock.Now()
	var rec Record
	err := m.call(ctx, opAcquire, func(ctx context.Context) (err error) {
		rec, err = m.store.Acquire(ctx, s.name, cfg.id, cfg.ttl, cfg.transition)
		return err
	})
	if err != nil {
		p.uncertain = true
		p.errs++
		match := isTry
		if errors.Is(err, ErrStoreSetup) {
			match = notContend // waiting cannot fix it: tell the caller now
		}
		s.failIf(fmt.Errorf("lease: acquire %q: %w", s.name, err), match)
		m.logAcquireFailed(s.name, err)
		if !s.empty() {
			s.wait(cfg.backoff(p.errs-1), events)
		}
		return false
	}
	p.uncertain = false
	m.notifyOwner(ownerOf(s.name, rec))
	if !rec.Held(cfg.id) {
		p.errs = 0
		p.queued = true
		s.failIf(fmt.Errorf("%w: %q is held by %q", ErrNotAcquired, s.name, rec.OwnerID), isTry)
		if m.obs.on { // free at the owner's transition end, unless released earlier
			s.seenFree(sent.Add(rec.Transition), wakePoll)
		}
		if !s.empty() && (*events != nil || m.watcher == nil || deaf) {
			d := cfg.waitDelay(rec)
			m.logWaiting(s.name, rec.OwnerID, d)
			s.wait(d, events)
		} // else: subscribe, then attempt again at once (work)
		return false
	}
	waited := p.queued
	p.queued = false
	if stale := rec.Token != p.lostToken; !stale || m.wasReleased(s.name, rec.Token, sent) {
		// Our own grant that we already declared lost, could not release
		// or released (and the store forgot it: released.go): the holder
		// was told, so it must not come back under the same token. Give it
		// up; until the store confirms, keep refusing it.
		if err := s.release(ctx, rec.Token); err != nil && !errors.Is(err, ErrNotHeld) {
			p.lostToken = rec.Token
			p.errs++
			s.wait(cfg.backoff(p.errs-1), events)
			return false
		}
		p.lostToken = 0
		if stale { // the store went back in its history: do not hammer it
			p.errs++
			s.wait(cfg.backoff(p.errs-1), events)
		}
		return false
	}
	deadline := cfg.deadline(sent, rec)
	now := cfg.clock.Now()
	if !now.Before(deadline) {
		s.deadOnArrival(ctx, events, rec, now.Sub(sent))
		return false
	}
	p.errs = 0
	return s.grant(ctx, rec, sent, now, deadline, waited)
}

// grant hands a fresh grant to the first waiting claim, unless every
// claimant left during the call or the Manager is closing: then the grant
// is given back.
func (s *slot) grant(ctx context.Context, rec Record, sent, recv, deadline time.Time, waited bool) bool {
	s.mu.Lock()
	if len(s.claims) == 0 || s.m.isClosing() {
		s.mu.Unlock()
		s.release(ctx, rec.Token)
		return false
	}
	c := s.claims[0]
	s.claims[0] = nil
	s.claims = s.claims[1:]
	c.state = claimDone
	l := newLease(nil, s, rec, sent, recv, deadline)
	l.waited = waited
	s.lease, s.busy, s.acquiring = l, false, false
	freed, by := s.p.freed, s.p.freedBy
	s.p.freed = 0
	s.mu.Unlock()
	if freed > 0 {
		if gap := s.m.cfg.clock.Now().Sub(s.m.started) - freed; gap >= 0 {
			s.m.obs.handoff(s.name, by, gap)
		}
	}
	s.m.gained(l)
	c.lease <- l
	return true
}

// deadOnArrival gives back a grant whose deadline passed before its reply
// came, and never retries at once: when the store cut the grant short
// (less than was asked, minus the time the call took), waiting cannot fix
// it and the claims fail with ErrGrantTooShort; a merely late reply is
// retried after a back-off.
func (s *slot) deadOnArrival(ctx context.Context, events *<-chan Event, rec Record, took time.Duration) {
	cfg, p := &s.m.cfg, &s.p
	if err := s.release(ctx, rec.Token); err != nil && !errors.Is(err, ErrNotHeld) {
		p.lostToken = rec.Token // refuse it if it comes back
	}
	p.errs++
	err := s.tooShort(rec, took)
	match := notContend
	if !errors.Is(err, ErrGrantTooShort) {
		match = isTry
	}
	s.failIf(err, match)
	if !s.empty() {
		s.m.logAcquireFailed(s.name, err)
		s.wait(cfg.backoff(p.errs-1), events)
	}
}

// tooShort describes a grant that was dead on arrival, took after its
// request: ErrGrantTooShort when the store cut it below what was asked,
// else a late reply. A store that reports a grant limit leaving room after
// the safety margin ([GrantLimiter]) cut it for a moment only (what surely
// remains of a ZooKeeper session dips under load): that is retried too.
func (s *slot) tooShort(rec Record, took time.Duration) error {
	cfg := &s.m.cfg
	if gl, ok := s.m.store.(GrantLimiter); ok {
		if limit := gl.MaxGrant(); limit > cfg.safety {
			return fmt.Errorf("lease: acquire %q: the store granted %v, nothing after the safety margin %v, "+
				"though its limit is %v; trying again", s.name, rec.Transition, cfg.safety, limit)
		}
	}
	if asked := cfg.ttl + cfg.transition; rec.Transition+took < asked {
		return fmt.Errorf("lease: acquire %q: the store granted %v of the %v asked (ttl %v + transition %v), "+
			"nothing after the safety margin %v: %w",
			s.name, rec.Transition, asked, cfg.ttl, cfg.transition, cfg.safety, ErrGrantTooShort)
	}
	return fmt.Errorf("lease: acquire %q: the reply came %v after the request, past the grant's deadline", s.name, took)
}

// wait sleeps until the next attempt is due, an event arrives, the claims
// change or the Manager closes. With metrics on, a release event marks
// when the lock was seen free (the hand-off gap); a closed events
// channel is set to nil, and polling goes on, as in pause.
func (s *slot) wait(d time.Duration, events *<-chan Event) {
	m := s.m
	if !m.obs.on {
		pause(m.cfg.clock, d, events, s.wake, nil, m.closing)
		return
	}
	t := m.cfg.clock.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C():
		case <-s.wake:
		case <-m.closing:
		case e, ok := <-*events:
			if !ok {
				*events = nil
				continue
			}
			if e.OwnerID == "" {
				s.seenFree(m.cfg.clock.Now(), wakeEvent)
			}
		}
		return
	}
}

// cleanup leaves the store as if this contender had never come: a grant
// of unknown outcome or given up locally is released, a wait-queue entry
// withdrawn.
func (s *slot) cleanup() {
	m, p := s.m, &s.p
	ctx := context.Background()
	if p.uncertain {
		var rec Record
		err := m.call(ctx, opGet, func(ctx context.Context) (err error) {
			rec, err = m.store.Get(ctx, s.name)
			return err
		})
		if err == nil && rec.Held(m.cfg.id) {
			p.lostToken = rec.Token
		}
	}
	switch {
	case p.lostToken != 0 && m.abandoned(s.name) > 0:
		// An abandoned callback may still run under it: let it lapse, and
		// refuse it if a later slot is granted it again.
		m.keepRefusing(s.name, p.lostToken)
	case p.lostToken != 0:
		if err := s.release(ctx, p.lostToken); err != nil && !errors.Is(err, ErrNotHeld) {
			m.keepRefusing(s.name, p.lostToken)
		}
	case p.queued || p.uncertain:
		s.release(ctx, 0)
	}
	s.mu.Lock()
	s.p = progress{}
	s.mu.Unlock()
}
