package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

type claimKind int

const (
	claimAcquire claimKind = iota
	claimTry
	claimContend
)

type claimState int

const (
	claimWaiting claimState = iota
	claimDone               // granted or failed
	claimCancelled
)

// A claim is one local request for a mutex: an Acquire or TryAcquire call,
// or one term of a Contender.
type claim struct {
	kind  claimKind
	state claimState  // guarded by the slot's mu
	lease chan *Lease // buffered: the grant
	fail  chan error  // buffered: why there will be no grant
}

func newClaim(kind claimKind) *claim {
	return &claim{kind: kind, lease: make(chan *Lease, 1), fail: make(chan error, 1)}
}

// A slot is the single store contender of one Manager for one mutex. Its
// goroutine (run) is the only one that calls the store for that mutex on
// behalf of the Manager's claims, so a grant is never given to two local
// holders and a renewal never races a release.
type slot struct {
	m    *Manager
	name string
	wake chan struct{} // buffered: the queue changed

	mu      sync.Mutex
	claims  []*claim
	holding bool
}

// progress is what a slot remembers between attempts.
type progress struct {
	errs      int    // consecutive failed store calls
	uncertain bool   // the last Acquire's outcome is unknown
	queued    bool   // the store may have us in its wait queue
	lostToken uint64 // a grant we gave up locally that may still be live
}

func newSlot(m *Manager, name string) *slot {
	return &slot{m: m, name: name, wake: make(chan struct{}, 1)}
}

func (s *slot) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// add queues c. A try claim is refused when the mutex is held or awaited
// locally.
func (s *slot) add(c *claim) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.kind == claimTry && (s.holding || len(s.claims) > 0) {
		return false
	}
	s.claims = append(s.claims, c)
	if len(s.claims) == 1 {
		s.poke()
	}
	return true
}

// cancel withdraws c if it is still waiting.
func (s *slot) cancel(c *claim) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.state != claimWaiting {
		return false
	}
	c.state = claimCancelled
	for i, x := range s.claims {
		if x == c {
			s.claims = append(s.claims[:i], s.claims[i+1:]...)
			break
		}
	}
	if len(s.claims) == 0 {
		s.poke()
	}
	return true
}

// pop takes the first waiting claim, marking it granted; holding is set
// in the same step, so a TryAcquire can never slip in between.
func (s *slot) pop() *claim {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.claims) == 0 {
		return nil
	}
	c := s.claims[0]
	s.claims = s.claims[1:]
	c.state = claimDone
	s.holding = true
	return c
}

// failIf fails every waiting claim for which match is true.
func (s *slot) failIf(err error, match func(*claim) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.claims[:0]
	for _, c := range s.claims {
		if match(c) {
			c.state = claimDone
			c.fail <- err
			continue
		}
		kept = append(kept, c)
	}
	clear(s.claims[len(kept):])
	s.claims = kept
}

func (s *slot) empty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.claims) == 0
}

func (s *slot) setHolding(v bool) {
	s.mu.Lock()
	s.holding = v
	s.mu.Unlock()
}

// retire reports whether the slot may end: no claims. Called with the
// Manager's mu held, so no claim can be added concurrently.
func (s *slot) retire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.claims) == 0
}

func isTry(c *claim) bool      { return c.kind == claimTry }
func anyClaim(*claim) bool     { return true }
func notContend(c *claim) bool { return c.kind != claimContend }

// run is the slot's goroutine: contend while there are claims, hold a
// grant for one claim at a time, clean up and retire when idle.
func (s *slot) run() {
	defer s.m.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var p progress
	var events <-chan Event
	for {
		if s.m.isClosing() {
			s.failIf(ErrClosed, anyClaim)
		}
		if s.empty() {
			cancel() // ends the subscription
			s.cleanup(&p)
			if s.m.retire(s) {
				return
			}
			ctx, cancel = context.WithCancel(context.Background())
			events = nil
			continue
		}
		if events == nil && s.m.watcher != nil && (p.queued || p.errs > 0) {
			// Subscribe once an attempt lost (an uncontended acquire never
			// pays for a subscription) and attempt again at once: a release
			// between the lost attempt and the subscription is seen by the
			// new attempt, later ones by the subscription.
			events, _ = s.m.watcher.Watch(ctx, s.name, s.m.cfg.id)
		}
		select { // changes before this attempt are seen by it
		case <-s.wake:
		default:
		}
		if p.lostToken == 0 { // one an earlier slot of this name left
			p.lostToken = s.m.refused(s.name)
		}
		s.attempt(ctx, &p, &events)
	}
}

// attempt makes one Acquire and acts on its outcome: hold the grant, or
// wait until the next attempt is due.
func (s *slot) attempt(ctx context.Context, p *progress, events *<-chan Event) {
	m, cfg := s.m, &s.m.cfg
	if wait := m.abandoned(s.name); wait > 0 {
		s.wait(wait, events)
		return
	}
	sent := cfg.clock.Now()
	var rec Record
	err := m.call(ctx, func(ctx context.Context) (err error) {
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
		cfg.logger.Warn("acquire failed", "mutex", s.name, "error", err)
		if !s.empty() {
			s.wait(cfg.backoff(p.errs-1), events)
		}
		return
	}
	p.uncertain = false
	m.notifyOwner(ownerOf(s.name, rec))
	if !rec.Held(cfg.id) {
		p.errs = 0
		p.queued = true
		s.failIf(fmt.Errorf("%w: %q is held by %q", ErrNotAcquired, s.name, rec.Owner), isTry)
		if !s.empty() && (*events != nil || m.watcher == nil) {
			s.wait(cfg.waitDelay(rec), events)
		} // else: subscribe, then attempt again at once (run)
		return
	}
	p.queued = false
	if rec.Token == p.lostToken {
		// Our own grant that we already declared lost (or could not
		// release): the holder was told, so it must not come back under the
		// same token. Give it up; until the store confirms, keep refusing it.
		if err := s.release(ctx, rec.Token); err != nil && !errors.Is(err, ErrNotHeld) {
			p.errs++
			s.wait(cfg.backoff(p.errs-1), events)
			return
		}
		p.lostToken = 0
		return
	}
	deadline := cfg.deadline(sent, rec)
	if now := cfg.clock.Now(); !now.Before(deadline) {
		s.deadOnArrival(ctx, p, events, rec, now.Sub(sent))
		return
	}
	p.errs = 0
	c := s.pop()
	if c == nil { // every claimant left during the call
		s.release(ctx, rec.Token)
		return
	}
	l := newLease(s.name, cfg.id, rec, deadline, cfg.clock)
	c.lease <- l
	p.lostToken = s.hold(ctx, l, sent)
}

// deadOnArrival gives back a grant whose deadline passed before its reply
// came, and never retries at once: when the store cut the grant short
// (less than was asked, minus the time the call took), waiting cannot fix
// it and the claims fail with ErrGrantTooShort; a merely late reply is
// retried after a back-off.
func (s *slot) deadOnArrival(ctx context.Context, p *progress, events *<-chan Event, rec Record, took time.Duration) {
	cfg := &s.m.cfg
	if err := s.release(ctx, rec.Token); err != nil && !errors.Is(err, ErrNotHeld) {
		p.lostToken = rec.Token // refuse it if it comes back
	}
	p.errs++
	var err error
	match := isTry
	if asked := cfg.ttl + cfg.transition; rec.Transition+took < asked {
		err = fmt.Errorf("lease: acquire %q: the store granted %v of the %v asked (ttl %v + transition %v), "+
			"nothing after the safety margin %v: %w",
			s.name, rec.Transition, asked, cfg.ttl, cfg.transition, cfg.safety, ErrGrantTooShort)
		match = notContend
	} else {
		err = fmt.Errorf("lease: acquire %q: the reply came %v after the request, past the grant's deadline", s.name, took)
	}
	s.failIf(err, match)
	if !s.empty() {
		cfg.logger.Warn("acquire failed", "mutex", s.name, "error", err)
		s.wait(cfg.backoff(p.errs-1), events)
	}
}

// wait sleeps until the next attempt is due, an event arrives, the queue
// changes or the Manager closes.
func (s *slot) wait(d time.Duration, events *<-chan Event) {
	pause(s.m.cfg.clock, d, events, s.wake, nil, s.m.closing)
}

// release gives up a grant that no local claim holds, best effort.
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

// cleanup leaves the store as if this contender had never come: a grant
// of unknown outcome or given up locally is released, a wait-queue entry
// withdrawn.
func (s *slot) cleanup(p *progress) {
	m := s.m
	ctx := context.Background()
	if p.uncertain {
		var rec Record
		err := m.call(ctx, func(ctx context.Context) (err error) {
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
	*p = progress{}
}
