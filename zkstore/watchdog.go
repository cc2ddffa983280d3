package zkstore

import (
	"context"
	"time"
)

// The watchdog keeps the promise behind renewals without writes: a node
// whose Manager stops calling (a hung holder, a waiter gone astray) is
// deleted once the time it was given has passed, so the mutex is never
// held up for longer than a grant's ttl + transition while the session
// lives on. The holder's own deadline passed before that: the Manager
// computes it from the same calls, less its safety margin.

// dogState is the watchdog goroutine's bookkeeping, guarded by Store.mu.
type dogState struct {
	running bool
	poke    chan struct{} // buffered: wake up and look again
	next    time.Time     // when the goroutine wakes next
}

// retiree is a node the watchdog deletes.
type retiree struct {
	k nodeKey
	n node
}

// watchdogAt makes sure the watchdog looks at the nodes by t; it starts
// the goroutine, which ends when the Store has no node left.
func (s *Store) watchdogAt(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dog.poke == nil {
		s.dog.poke = make(chan struct{}, 1)
	}
	if !s.dog.running {
		s.dog.running = true
		go s.watchdog()
		return
	}
	if t.Before(s.dog.next) {
		select {
		case s.dog.poke <- struct{}{}:
		default:
		}
	}
}

func (s *Store) watchdog() {
	for {
		changed := s.sess.tap.state().changed // a new session (or none) ends every node
		next, expired, idle := s.sweep(time.Now())
		for _, r := range expired {
			s.retireLater(r.k, r.n)
		}
		if idle {
			return
		}
		if next.IsZero() {
			continue
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-t.C:
		case <-s.dog.poke:
		case <-changed:
		}
		t.Stop()
	}
}

// sweep marks the nodes whose time ran out as dead and returns them, with
// the next time a node runs out; idle means the goroutine ends.
func (s *Store) sweep(now time.Time) (next time.Time, expired []retiree, idle bool) {
	st := s.sess.tap.state()
	s.mu.Lock()
	defer s.mu.Unlock()
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
	if next.IsZero() && len(expired) == 0 {
		s.dog.running, s.dog.next = false, time.Time{}
		return next, nil, true
	}
	s.dog.next = next
	return next, expired, false
}

// retireLater deletes k's dead node n in the background, retrying until
// the node or its session is gone.
func (s *Store) retireLater(k nodeKey, n node) {
	go func() {
		backoff := 50 * time.Millisecond
		for {
			st := s.sess.tap.state()
			if st.sid != n.session {
				break // the server deleted it with the session
			}
			ctx, cancel := context.WithTimeout(context.Background(), max(st.timeout, time.Second))
			err := s.remove(ctx, n.path, -1)
			cancel()
			if err == nil || gone(err) {
				break
			}
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-st.changed:
			}
			t.Stop()
			backoff = min(2*backoff, time.Second)
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
	s.pokeLocked()
}
