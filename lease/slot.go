package lease

import (
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

// A claim is one local request for a lock that waits: an Acquire or
// TryAcquire call that found the slot busy or the lock taken, or one
// term of a Contender.
type claim struct {
	kind  claimKind
	state claimState  // guarded by the slot's mu
	lease chan *Lease // buffered: the grant
	fail  chan error  // buffered: why there will be no grant
	since time.Time   // when it began to wait (zero without metrics)
}

func (m *Manager) newClaim(kind claimKind) *claim {
	c := &claim{kind: kind, lease: make(chan *Lease, 1), fail: make(chan error, 1)}
	if m.obs.on {
		c.since = time.Now()
	}
	return c
}

// A slot is the single store contender of one Manager for one lock. At
// most one goroutine at a time makes its acquire, release and clean-up
// store calls (it is busy), so a grant is never given to two local holders:
// the caller itself for an uncontended Acquire or a Release, a worker
// goroutine for claims that wait. A held lease needs no goroutine: the
// Manager's timers renew it. A slot leaves the Manager's registry once
// nothing of it is left.
type slot struct {
	m    *Manager
	name string

	mu        sync.Mutex
	claims    []*claim
	lease     *Lease        // the local holder, or nil
	busy      bool          // a goroutine makes the slot's store calls
	retired   bool          // out of the registry: a caller must look again
	acquiring bool          // ... to acquire for a caller
	wake      chan struct{} // buffered: the claims changed (made for a worker)
	p         progress      // guarded by mu, used by the busy goroutine
}

// progress is what a slot remembers between store calls.
type progress struct {
	errs      int           // consecutive failed attempts
	uncertain bool          // the last Acquire's outcome is unknown
	queued    bool          // the store may have us in its wait queue
	freedBy   wake          // how the lock was seen free (metrics)
	lostToken uint64        // a grant we gave up locally that may still be live
	delay     time.Duration // a worker taking over waits this long first
	freed     time.Duration // when it was, from the Manager's start; 0: not seen
}

// seenFree notes that the lock was seen free at, for the hand-off gap
// of the waiter that gets it next.
func (s *slot) seenFree(at time.Time, w wake) {
	s.p.freed, s.p.freedBy = max(at.Sub(s.m.started), 1), w
}

// dirty reports whether the store may hold something of ours that no
// lease stands for: a grant to give back or a queue entry to withdraw.
func (p *progress) dirty() bool { return p.lostToken != 0 || p.queued || p.uncertain }

func (s *slot) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// add queues c behind the other claims and makes sure a worker serves
// them once no lease is held and nobody else is busy. s.mu is held, and
// the Manager's life lock is read-locked with the Manager open (or the
// caller is counted: see startWorker).
func (s *slot) add(c *claim) {
	s.claims = append(s.claims, c)
	switch {
	case s.busy:
		if len(s.claims) == 1 && s.wake != nil {
			s.poke()
		}
	case s.lease == nil:
		s.startWorker()
	}
}

// startWorker makes a goroutine busy with the slot's claims and clean-up.
// s.mu is held, and the caller either read-locks the Manager's life lock
// while it is not closed or runs in a goroutine its WaitGroup counts.
func (s *slot) startWorker() {
	s.busy = true
	if s.wake == nil {
		s.wake = make(chan struct{}, 1)
	}
	s.m.wg.Add(1)
	go s.run()
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
	if len(s.claims) == 0 && s.wake != nil {
		s.poke()
	}
	return true
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

func isTry(c *claim) bool      { return c.kind == claimTry }
func anyClaim(*claim) bool     { return true }
func notContend(c *claim) bool { return c.kind != claimContend }

// next decides what follows once nobody is busy with the slot (the caller
// stopped being busy, or its lease ended): a worker for the waiting claims
// or for clean-up, or leaving the registry. counted says that the caller
// runs in a goroutine the Manager's WaitGroup counts; otherwise, once the
// Manager is closed, the work is done in the caller's goroutine.
func (s *slot) next(counted bool) {
	m := s.m
	m.life.RLock()
	sh := m.shardOf(s.name)
	sh.mu.Lock()
	s.mu.Lock()
	inline := false
	switch {
	case s.lease != nil || s.busy:
		// A holder, or someone busy: they decide when they are done.
	case len(s.claims) > 0 || s.p.dirty():
		if counted || !m.closed {
			s.startWorker()
		} else {
			s.busy, inline = true, true
		}
	default:
		if sh.slots[s.name] == s {
			delete(sh.slots, s.name)
		}
		s.retired = true
	}
	s.mu.Unlock()
	sh.mu.Unlock()
	m.life.RUnlock()
	if inline {
		s.work(false)
	}
}
