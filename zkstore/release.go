package zkstore

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/simba-go/simba/lease"
)

// Release implements [lease.Store]: it deletes contender's node when it
// holds the grant with token (one request when this Store made that
// grant; otherwise a sync, a listing, and a read and a delete per node of
// contender), and any waiting node of contender in every case. The next in
// line is woken by its watch.
func (s *Store) Release(ctx context.Context, name, contender string, token uint64) error {
	if err := checkCall(name, contender, time.Millisecond, 0); err != nil {
		return err
	}
	k := nodeKey{name, contender}
	if n, _, ok := s.lookup(k); ok && n.held && uint64(n.czxid) == token && token != 0 {
		// The common case: our own grant. It is no grant from now on.
		s.kill(k, n.path)
		err := s.remove(ctx, n.path)
		switch {
		case err == nil:
			s.forget(k, n.path)
			s.endedHold(path.Dir(n.path), n.renewed)
			return nil
		case !gone(err):
			s.retireLater(k, n)
			return fmt.Errorf("zkstore: release %q: %w", name, err)
		}
		s.forget(k, n.path) // gone already: its session ended
	} else if ok && !n.held && token == 0 && !s.inDoubt(k) {
		// A waiter withdraws its own node: one request.
		s.kill(k, n.path)
		if err := s.remove(ctx, n.path); err != nil && !gone(err) {
			s.retireLater(k, n)
			return fmt.Errorf("zkstore: release %q: %w", name, err)
		}
		s.forget(k, n.path)
		return fmt.Errorf("%w: zkstore: release %q token 0", lease.ErrNotHeld, name)
	}
	if err := s.settle(ctx, k); err != nil {
		return fmt.Errorf("zkstore: release %q: %w", name, err)
	}
	// The grant named may be another session's (a process ending a grant
	// behind its holder's back), created through another server: this
	// Store's server, a follower, may not have applied it yet, and a
	// listing there would not find it. The sync makes it catch up with
	// the leader first, as Get does.
	dir := s.dirOf(name)
	if err := s.sync(ctx, dir); err != nil {
		return fmt.Errorf("zkstore: release %q: %w", name, err)
	}
	q, err := s.list(ctx, dir)
	if err != nil {
		return fmt.Errorf("zkstore: release %q: %w", name, err)
	}
	mine := q.mine(contender)
	if len(mine) == 0 {
		s.setDoubt(k, false) // no create of ours is pending: it would be listed
	}
	low, _ := q.lowest()
	sid := s.sess.tap.state().sid
	cur, _ := s.current(k)
	released := false
	for _, c := range mine {
		p := q.path(c)
		_, st, err := s.read(ctx, p)
		if gone(err) {
			continue
		}
		if err != nil && !errors.Is(err, ErrCorrupt) {
			return fmt.Errorf("zkstore: release %q: %w", name, err)
		}
		named := token != 0 && uint64(st.Czxid) == token
		if c.name == low.name && !named {
			// First in line, not the grant named: another session's
			// current grant, or ours under another token, is left alone;
			// a node of ours that no Acquire granted is withdrawn.
			ours := st.EphemeralOwner == sid && sid != 0
			if !ours || (cur != nil && cur.path == p && cur.held) {
				continue
			}
		}
		// Our current node is no grant from now on, even if the delete's
		// outcome stays unknown (its context ended: the request may still
		// go out); then it is deleted in the background, and no Acquire
		// takes it back meanwhile.
		mineNow := cur != nil && cur.path == p && s.kill(k, p)
		if err := s.remove(ctx, p); err != nil && !gone(err) {
			if mineNow {
				s.retireLater(k, *cur)
			}
			return fmt.Errorf("zkstore: release %q: %w", name, err)
		} else if err == nil && named {
			released = true
		}
		s.forget(k, p)
	}
	if !released {
		return fmt.Errorf("%w: zkstore: release %q token %d", lease.ErrNotHeld, name, token)
	}
	return nil
}
