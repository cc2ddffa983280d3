package lease

import (
	"sync"
	"time"
)

// The words of the implementation, for a contributor (the protocol's
// public words are in the package documentation's glossary):
//
//   - slot: the Manager's single store contender for one name (type
//     slot). All local callers of that name go through it, so the store
//     sees one contender per Manager, and at most one goroutine (the one
//     that is busy: the caller itself, or a worker) makes its store calls.
//     A slot leaves the Manager's registry (retired) once it holds no
//     lease, has no claim and nothing to clean up.
//   - claim: one local request that waits for a grant of the slot (type
//     claim): an Acquire or TryAcquire that found the slot busy or the
//     lock taken, or one term of a Contender. Claims are served in order; a claim is
//     cancelled when its caller gives up, and a grant that arrives after
//     that is dropped (released).
//   - worker: the goroutine a slot starts to serve its waiting claims and
//     its clean-up (worker.go); it exits when there is nothing left.
//   - term: one leadership of a Contender, from the grant its claim got
//     to the return of OnReleased; the Contender then claims again
//     (contend.go).
//   - drain: a Contender that stops cancels its leader's context but
//     keeps the lease renewed (state leaseDraining) until the callbacks
//     return, and only then releases it, so two leaders never overlap.
//   - abandon: a Stop whose ctx ends before the callbacks return ends the
//     lease without releasing it; the grant is left to lapse on the store
//     and, like a lost grant, must never be used again.
//   - lost token (progress.lostToken): a grant of ours that no lease
//     stands for (lost, abandoned, refused as one already released, or
//     confirmed too late to use) and that the store may still hold. The
//     slot never hands it out: its clean-up releases it, or records it in
//     the refusals when it must be left to lapse or its release failed.
//   - dirty (progress.dirty): the store may hold something of ours that no
//     lease stands for: a lost token, a wait-queue entry, or an Acquire of
//     unknown outcome. A dirty slot keeps a worker to clean up.
//   - refusals (refusals.go): what must outlive a slot: per name, until
//     when an abandoned grant must be left alone (abandonedUntil), and the
//     lost token a slot could not give back (unreleased), which the next
//     slot of the name takes over as its own lost token.
//   - released (released.go): per name, the newest token this Manager
//     released, so that a store that forgot the release but not the grant
//     cannot hand it back; and whether that grant was contended.
//
// Where per-name state lives. While a name is held or awaited, all of it
// is in its slot: the claims, the lease, the progress between store calls.
// What must outlive the slot is in the two tables above, each kept apart
// for its bound: refusals are exact (forgetting one could hand out a
// grant twice) and expire after about ttl + transition; released is a
// small lossy table per registry shard (forgetting an entry falls back to
// the store's own protection). The slot reads both when it starts
// (refusalsFor) and before it uses a grant (wasReleased), and writes
// them when it ends a grant it could not release (keepRefusing, abandon,
// noteReleased).

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
	spare     *Lease        // made with the slot, for its first own attempt; guarded by mu
}

// newSlot returns a slot of name with a spare lease made in the same
// allocation: an uncontended Acquire, the common case, finds a fresh slot
// and makes its attempt, and its lease, itself (acquireNow).
func newSlot(m *Manager, name string) *slot {
	b := new(struct {
		s slot
		l Lease
	})
	b.s.m, b.s.name, b.s.spare = m, name, &b.l
	return &b.s
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
