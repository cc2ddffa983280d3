package zkstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/simba-go/simba/lease"
)

// Renew implements [lease.Store]: one conditional write to the holder's
// node, which moves its mtime (the server's clock) forward. A write that
// finds the node gone (deleted by a waiter after the grant lapsed, or by
// the server with an expired session) or the grant already lapsed fails
// with [lease.ErrNotHeld]; a late write deletes the node instead of
// reviving it.
func (s *Store) Renew(ctx context.Context, mutex, contender string, token uint64, ttl, transition time.Duration) (lease.Record, error) {
	if err := checkCall(mutex, contender, ttl, transition); err != nil {
		return lease.Record{}, err
	}
	k := nodeKey{mutex, contender}
	notHeld := func(why string) (lease.Record, error) {
		rec, _ := s.Get(ctx, mutex) // best effort: tell the caller who owns
		return rec, fmt.Errorf("%w: zkstore: renew %q token %d: %s", lease.ErrNotHeld, mutex, token, why)
	}
	g := grant{contender: contender, ttl: ttl, transition: transition, claimed: true}
	for range rounds {
		own := s.cached(k)
		if own == nil || uint64(own.czxid) != token || !own.g.claimed {
			var err error
			if own, err = s.find(ctx, k, token); err != nil {
				return lease.Record{}, fmt.Errorf("zkstore: renew %q: %w", mutex, err)
			}
			if own == nil {
				return notHeld("no such grant of this contender and session")
			}
		}
		st, err := s.write(ctx, own.path, g, own.version)
		if err != nil {
			if err := s.lost(ctx, k, own, err); err != nil {
				return lease.Record{}, fmt.Errorf("zkstore: renew %q: %w", mutex, err)
			}
			continue // gone: find says so; moved on: try the new version
		}
		return s.renewed(ctx, lease.RenewRequest{Mutex: mutex, Contender: contender, Token: token, TTL: ttl, Transition: transition}, own, g, st)
	}
	return lease.Record{}, fmt.Errorf("zkstore: renew %q: the node kept changing", mutex)
}

// find looks for contender's claimed node with czxid token in this
// session. It returns nil when there is none: a node of another session
// is not renewed, since this session's heartbeats do not keep it alive.
func (s *Store) find(ctx context.Context, k nodeKey, token uint64) (*ownNode, error) {
	q, err := s.list(ctx, s.dirOf(k.mutex))
	if err != nil {
		return nil, err
	}
	sid := s.conn.SessionID()
	for _, c := range q.mine(k.contender) {
		g, st, err := s.read(ctx, q.path(c))
		if gone(err) || errors.Is(err, ErrCorrupt) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if uint64(st.Czxid) == token && g.claimed && st.EphemeralOwner == sid {
			n := &ownNode{path: q.path(c), session: sid, czxid: st.Czxid, version: st.Version, mtime: st.Mtime, g: g}
			s.remember(k, n)
			return n, nil
		}
	}
	return nil, nil
}

// Release implements [lease.Store]: it deletes contender's node when it
// holds the grant with token, and any waiting node of contender in every
// case. The deletion stamps the mutex's znode, so the next in line gets a
// full window to claim the mutex; its watch wakes it at once.
func (s *Store) Release(ctx context.Context, mutex, contender string, token uint64) error {
	if err := checkCall(mutex, contender, time.Millisecond, 0); err != nil {
		return err
	}
	k := nodeKey{mutex, contender}
	dir := s.dirOf(mutex)
	if own := s.cached(k); own != nil && own.g.claimed && uint64(own.czxid) == token && token != 0 {
		// The common case, one round trip: our own grant.
		err := s.remove(ctx, dir, own.path, -1)
		if err == nil {
			s.forget(k)
			return nil
		}
		if !gone(err) {
			return fmt.Errorf("zkstore: release %q: %w", mutex, err)
		}
	}
	s.forget(k)
	q, err := s.list(ctx, dir)
	if err != nil {
		return fmt.Errorf("zkstore: release %q: %w", mutex, err)
	}
	low, _ := q.lowest()
	released := false
	for _, c := range q.mine(contender) {
		g, st, err := s.read(ctx, q.path(c))
		if gone(err) {
			continue
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			return fmt.Errorf("zkstore: release %q: %w", mutex, err)
		}
		holds := err == nil && g.claimed && c.name == low.name
		if holds && (token == 0 || uint64(st.Czxid) != token) {
			continue // the current grant, not the one named: leave it alone
		}
		if err := s.remove(ctx, dir, q.path(c), st.Version); err != nil && !gone(err) {
			return fmt.Errorf("zkstore: release %q: %w", mutex, err)
		} else if err == nil && holds {
			released = true
		}
	}
	// A doubt stays: a create whose reply was lost may still land, and the
	// next Acquire must look for its node before making another.
	if !released {
		return fmt.Errorf("%w: zkstore: release %q token %d", lease.ErrNotHeld, mutex, token)
	}
	return nil
}

// Get implements [lease.Store]: it syncs the server it is connected to
// with the leader, lists the queue and reads its lowest node. The time
// left is estimated from the server's clock as this Store last saw it (a
// full window before its first write). A lowest node that was not claimed
// yet is reported as held back for it: an empty Owner with a positive
// Transition.
func (s *Store) Get(ctx context.Context, mutex string) (lease.Record, error) {
	if err := lease.ValidateName(mutex); err != nil {
		return lease.Record{}, err
	}
	if err := s.sync(ctx, s.dirOf(mutex)); err != nil {
		return lease.Record{}, fmt.Errorf("zkstore: get %q: %w", mutex, err)
	}
	for range rounds {
		q, err := s.list(ctx, s.dirOf(mutex))
		if err != nil {
			return lease.Record{}, fmt.Errorf("zkstore: get %q: %w", mutex, err)
		}
		low, ok := q.lowest()
		if !ok {
			return lease.Record{}, nil
		}
		g, st, err := s.read(ctx, q.path(low))
		if gone(err) {
			continue
		}
		if err != nil {
			return lease.Record{}, fmt.Errorf("zkstore: get %q: %w", mutex, err)
		}
		start := st.Mtime
		if !g.claimed {
			start = max(start, q.dirMtime)
		}
		left := g.ttl + g.transition
		if now, ok := s.clock.now(); ok {
			left = max(0, time.Duration(start+ms(left)-now)*time.Millisecond)
			left = min(left, g.ttl+g.transition)
		}
		if !g.claimed {
			return lease.Record{Transition: left}, nil
		}
		return lease.Record{Owner: g.contender, Token: uint64(st.Czxid), TTL: max(0, left-g.transition), Transition: left}, nil
	}
	return lease.Record{}, fmt.Errorf("zkstore: get %q: the queue kept changing", mutex)
}
