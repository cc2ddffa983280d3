package zkstore

import (
	"context"
	"time"
)

// Timings of the Store's own bookkeeping.
const (
	// waitGrace is added to the time a waiter was told to come back
	// (plus its own ttl + transition) before the watchdog takes its node
	// for abandoned: Managers come back within a second of that time.
	waitGrace = 2 * time.Second
)

// stateLocked returns k's keyState, creating it; call with mu held.
func (s *Store) stateLocked(k nodeKey) *keyState {
	ks := s.keys[k]
	if ks == nil {
		ks = &keyState{}
		s.keys[k] = ks
	}
	return ks
}

// tidyLocked drops k's keyState when it holds nothing; call with mu held.
func (s *Store) tidyLocked(k nodeKey) {
	if ks := s.keys[k]; ks != nil && ks.n == nil && !ks.doubt && ks.subs == 0 && ks.creating == 0 {
		delete(s.keys, k)
	}
}

// kickLocked wakes k's subscriptions; call with mu held. Only they wait
// on the channel (see snapshot), which is made when one asks: a lock taken
// and released without a subscription makes none.
func (ks *keyState) kickLocked() {
	if ks.kick != nil {
		close(ks.kick)
		ks.kick = nil
	}
}

// current returns a copy of k's node when it is a node of the current
// session that is not being deleted, and the session's state. A node of
// an ended session is forgotten: the server deleted it.
func (s *Store) current(k nodeKey) (*node, sessionState) {
	c, st, ok := s.lookup(k)
	if !ok {
		return nil, st
	}
	p := new(node) // not &c: c would be on the heap even when there is none
	*p = c
	return p, st
}

// lookup is current, returning the copy by value (ok: there is one), for
// callers that keep it no longer than they run: it allocates nothing.
func (s *Store) lookup(k nodeKey) (node, sessionState, bool) {
	st := s.sess.tap.state()
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[k]
	if ks == nil || ks.n == nil {
		return node{}, st, false
	}
	if ks.n.session != st.sid || st.sid == 0 {
		ks.n = nil
		ks.kickLocked()
		s.tidyLocked(k)
		s.idleLocked()
		return node{}, st, false
	}
	if ks.n.dead {
		return node{}, st, false
	}
	return *ks.n, st, true
}

// dying returns k's node if this Store is deleting it.
func (s *Store) dying(k nodeKey) *node {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ks := s.keys[k]; ks != nil && ks.n != nil && ks.n.dead {
		c := *ks.n
		return &c
	}
	return nil
}

// update applies f to k's node if it still is the live node at path, and
// reports whether it was. f runs with mu held.
func (s *Store) update(k nodeKey, path string, f func(n *node)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[k]
	if ks == nil || ks.n == nil || ks.n.path != path || ks.n.dead {
		return false
	}
	f(ks.n)
	return true
}

// adoptNode makes n k's node (replacing any other) and wakes k's
// subscriptions. The doubt of a lost create is settled: the node is known.
func (s *Store) adoptNode(k nodeKey, n *node) { s.adopt1(k, n, false) }

// adoptCreated is adoptNode for the node a create's reply names, which
// may come after its caller gave up and a later Acquire found the node in
// a listing (and granted it, or this Store began deleting it): the record
// of that node stays as it is. Replaced by a fresh one, a granted node
// would be no grant to its holder's next Renew, and the next Acquire
// would grant it again under the same token (I1).
func (s *Store) adoptCreated(k nodeKey, n *node) { s.adopt1(k, n, true) }

func (s *Store) adopt1(k nodeKey, n *node, keepSame bool) {
	s.mu.Lock()
	ks := s.stateLocked(k)
	if keepSame && ks.n != nil && ks.n.path == n.path {
		s.mu.Unlock()
		return
	}
	c := *n
	ks.n, ks.doubt = &c, false
	ks.kickLocked()
	due := c.due
	s.mu.Unlock()
	s.watchdogAt(due)
}

// forget drops k's node if it is the node at path ("" for any).
func (s *Store) forget(k nodeKey, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[k]
	if ks == nil || ks.n == nil || (path != "" && ks.n.path != path) {
		return
	}
	ks.n = nil
	ks.kickLocked()
	s.tidyLocked(k)
	s.idleLocked()
}

// kill marks k's node at path as being deleted by this Store: from now on
// it is no grant, whatever the server says. It reports whether the node
// was live.
func (s *Store) kill(k nodeKey, path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[k]
	if ks == nil || ks.n == nil || ks.n.path != path || ks.n.dead {
		return false
	}
	ks.n.dead = true
	ks.kickLocked()
	return true
}

func (s *Store) setDoubt(k nodeKey, v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.stateLocked(k)
	ks.doubt = v
	s.tidyLocked(k)
}

func (s *Store) inDoubt(k nodeKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[k]
	return ks != nil && (ks.doubt || ks.creating > 0)
}

// beginCreate counts a create of k's node from before its request may go
// out; the returned func ends it, once its reply was handled or once it is
// sure the request never goes out (see doThen). Until then, a listing may
// not show the node the create makes: see settle.
func (s *Store) beginCreate(k nodeKey) (end func()) {
	s.mu.Lock()
	s.stateLocked(k).creating++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		ks := s.keys[k] // kept while creating > 0
		ks.creating--
		if ks.creating == 0 && ks.settled != nil {
			close(ks.settled)
			ks.settled = nil
		}
		s.tidyLocked(k)
	}
}

// settle waits until no create of k's node is under way: one whose caller
// gave up may still be sent or answered, and a listing made before then
// would not show its node. Without the wait, the next Acquire would take
// the node for missing and create another (a duplicate, listed behind the
// grant and owning the lock after its release), and a Release would
// withdraw nothing. go-zookeeper answers or fails every request within
// about the session timeout; ctx bounds the wait.
func (s *Store) settle(ctx context.Context, k nodeKey) error {
	for {
		s.mu.Lock()
		ks := s.keys[k]
		if ks == nil || ks.creating == 0 {
			s.mu.Unlock()
			return nil
		}
		if ks.settled == nil {
			ks.settled = make(chan struct{})
		}
		ch := ks.settled
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// subscribe counts a Watch subscription of k.
func (s *Store) subscribe(k nodeKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stateLocked(k).subs++
}

func (s *Store) unsubscribe(k nodeKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ks := s.keys[k]; ks != nil {
		ks.subs--
		s.tidyLocked(k)
	}
}

// snapshot returns a copy of k's node (nil: none, or being deleted) and
// the channel closed at its next change.
func (s *Store) snapshot(k nodeKey) (*node, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.stateLocked(k)
	if ks.kick == nil {
		ks.kick = make(chan struct{})
	}
	if ks.n == nil || ks.n.dead {
		return nil, ks.kick
	}
	c := *ks.n
	return &c, ks.kick
}

// watched reports whether a subscription of k keeps an unfired watch on
// the node ahead of k's node: then a release ahead reaches k's Manager by
// an event, and a waiter's Acquire may answer from what was last seen.
func (s *Store) watched(k nodeKey, path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[k]
	return ks != nil && ks.subs > 0 && ks.n != nil && ks.n.path == path && ks.n.watch != nil && !ks.n.fired
}
