package zkstore

import (
	"context"
	"time"

	"github.com/simba-go/simba/internal/backoff"
)

// The watchdog keeps the promise behind renewals without writes: a node
// whose Manager stops calling (a hung holder, a waiter gone astray) is
// deleted once the time it was given has passed, so the lock is never
// held up for longer than a grant's ttl + transition while the session
// lives on. The holder's own deadline passed before that: the Manager
// computes it from the same calls, less its safety margin.
//
// The goroutine sleeps on a timer set to the earliest time a node may run
// out; callers move the timer earlier without waking it. It ends when it
// finds no node left, or the session changed: lazily, unless the Store
// was closed.

// dogState is the watchdog's bookkeeping, guarded by Store.mu.
type dogState struct {
	running bool
	timer   *time.Timer // the goroutine waits on it
	next    time.Time   // when timer fires
	closed  bool        // Close was called: end as soon as no node is left
	held    bool        // a test holds it off (hooks.go)
}

// retiree is a node the watchdog deletes.
type retiree struct {
	k nodeKey
	n node
}

// watchdogAt makes sure the watchdog looks at the nodes by t, starting it
// if need be.
func (s *Store) watchdogAt(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !s.dog.running:
		s.dog.running, s.dog.next = true, t
		s.dog.timer = time.NewTimer(time.Until(t))
		go s.watchdog(s.dog.timer)
	case t.Before(s.dog.next):
		s.dog.next = t
		s.dog.timer.Reset(time.Until(t))
	}
}

// wakeLocked makes the watchdog look now; call with mu held.
func (s *Store) wakeLocked() {
	if s.dog.running {
		s.dog.next = time.Now()
		s.dog.timer.Reset(0)
	}
}

// idleLocked lets a closed Store's watchdog end as soon as it may; call
// with mu held after a node was forgotten.
func (s *Store) idleLocked() {
	if s.dog.closed {
		s.wakeLocked()
	}
}

func (s *Store) watchdog(t *time.Timer) {
	for {
		changed := s.sess.tap.state().changed // a new session (or none) ends every node
		select {
		case <-t.C:
		case <-changed:
		}
		expired, idle := s.sweep(time.Now())
		for _, r := range expired {
			s.retireLater(r.k, r.n)
		}
		if idle {
			return
		}
	}
}

// sweep marks the nodes whose time ran out as dead and returns them, and
// sets the timer to the next time a node runs out; idle means no node is
// left, and the goroutine ends.
func (s *Store) sweep(now time.Time) (expired []retiree, idle bool) {
	st := s.sess.tap.state()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dog.held {
		return nil, false // released, it looks at once
	}
	var next time.Time
	for k, ks := range s.keys {
		n := ks.n
		switch {
		case n == nil || n.dead:
		case n.session != st.sid || st.sid == 0:
			ks.n = nil // the server deleted it with its session
			ks.kickLocked()
			s.tidyLocked(k)
		case !now.Before(n.due):
			n.dead = true
			ks.kickLocked()
			expired = append(expired, retiree{k, *n})
		case next.IsZero() || n.due.Before(next):
			next = n.due
		}
	}
	switch {
	case next.IsZero() && len(expired) == 0:
		s.dog.running = false
		s.dog.timer.Stop()
		return nil, true
	case next.IsZero():
		next = now // look again once the expired ones are marked
	}
	s.dog.next = next
	s.dog.timer.Reset(time.Until(next))
	return expired, false
}

// Close lets the Store's background goroutines end once no node of the
// Store is left: call it after the Managers on the Store are closed. (A
// node still held is kept from a hung Manager as before.) The Store stays
// usable; the Session is not closed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dog.closed = true
	s.wakeLocked()
	return nil
}

// retireLater deletes k's dead node n in the background, retrying until
// the node or its session is gone.
func (s *Store) retireLater(k nodeKey, n node) {
	s.mu.Lock()
	gate := s.retireGate
	if s.retiring == nil {
		s.retiring = map[string]struct{}{}
	}
	s.retiring[n.path] = struct{}{}
	s.mu.Unlock()
	go func() {
		defer func() {
			s.mu.Lock()
			delete(s.retiring, n.path)
			s.mu.Unlock()
		}()
		if gate != nil {
			<-gate
		}
		for fails := 0; ; fails++ {
			st := s.sess.tap.state()
			if st.sid != n.session {
				break // the server deleted it with the session
			}
			ctx, cancel := context.WithTimeout(context.Background(), max(st.timeout, time.Second))
			err := s.remove(ctx, n.path)
			cancel()
			if err == nil || gone(err) {
				break
			}
			t := time.NewTimer(backoff.Exp(50*time.Millisecond, time.Second, fails))
			select {
			case <-t.C:
			case <-st.changed:
			}
			t.Stop()
		}
		s.buried(k, n.path)
	}()
}

// buried forgets k's dead node at path once it is deleted.
func (s *Store) buried(k nodeKey, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ks := s.keys[k]
	if ks == nil || ks.n == nil || ks.n.path != path || !ks.n.dead {
		return
	}
	ks.n = nil
	ks.kickLocked()
	s.tidyLocked(k)
	s.idleLocked()
}
